// SPDX-License-Identifier: GPL-2.0

//! `protection.rs` against what the C transport's `nvmet_rdma_set_sig_attrs` and
//! `nvmet_rdma_check_pi_status` produce for the same command.

use crate::protection::*;

/// A write (0x01) or read (0x02) command with the given control field, reference tag,
/// application tag and application tag mask.
fn rw_command(opcode: u8, control: u16, reftag: u32, lbat: u16, lbatm: u16) -> [u8; 64] {
    let mut c = [0u8; 64];
    c[0] = opcode;
    c[50..52].copy_from_slice(&control.to_le_bytes());
    c[56..60].copy_from_slice(&reftag.to_le_bytes());
    c[60..62].copy_from_slice(&lbat.to_le_bytes());
    c[62..64].copy_from_slice(&lbatm.to_le_bytes());
    c
}

const ALL_CHECKS: u16 = control::PRCHK_REF | control::PRCHK_APP | control::PRCHK_GUARD;

#[test]
fn pass_through_has_the_same_domain_on_the_wire_and_in_memory() {
    // What the Linux host sends for a type 1 namespace: all checks, reftag = LBA.
    let command = rw_command(0x01, ALL_CHECKS, 0x1234_5678, 0xbeef, 0xffff);
    let sig = signature(&command, 1, 9).unwrap();
    let domain = DifDomain {
        pi_interval: 512,
        ref_tag: 0x1234_5678,
        ref_remap: true,
        app_tag: 0xbeef,
        apptag_check_mask: 0xffff,
        app_escape: true,
        ref_escape: false,
    };
    assert_eq!(sig.wire, Some(domain));
    assert_eq!(sig.memory, domain);
    assert_eq!(sig.check_mask, 0xff);
    assert_eq!(sig.control, ALL_CHECKS);
    assert!(!sig.hca_generates_pi);
}

#[test]
fn pract_leaves_the_wire_without_pi_and_clears_the_bit_for_the_backend() {
    for opcode in [0x01, 0x02] {
        let command = rw_command(opcode, control::PRACT | control::PRCHK_GUARD, 7, 0, 0);
        let sig = signature(&command, 1, 12).unwrap();
        assert_eq!(sig.wire, None);
        assert_eq!(sig.memory.pi_interval, 4096);
        assert_eq!(sig.memory.ref_tag, 7);
        // Without PRCHK_REF the reference tag is neither remapped nor checked.
        assert!(!sig.memory.ref_remap);
        assert_eq!(sig.check_mask, check::GUARD);
        assert_eq!(sig.control, control::PRCHK_GUARD);
        assert!(sig.hca_generates_pi);
    }
}

#[test]
fn each_prchk_bit_checks_its_own_field() {
    for (bit, mask) in [
        (control::PRCHK_REF, check::REFTAG),
        (control::PRCHK_APP, check::APPTAG),
        (control::PRCHK_GUARD, check::GUARD),
        (0, 0),
    ] {
        let sig = signature(&rw_command(0x02, bit, 0, 0, 0), 1, 9).unwrap();
        assert_eq!(sig.check_mask, mask, "control {bit:#x}");
        assert_eq!(sig.memory.ref_remap, bit == control::PRCHK_REF);
    }
}

#[test]
fn type_3_escapes_an_all_ones_reference_tag_and_other_types_do_not() {
    let command = rw_command(0x01, ALL_CHECKS, u32::MAX, 0, 0);
    for pi_type in [1, 2] {
        let sig = signature(&command, pi_type, 9).unwrap();
        assert!(!sig.memory.ref_escape && !sig.wire.unwrap().ref_escape);
    }
    let sig = signature(&command, PI_TYPE3, 9).unwrap();
    assert!(sig.memory.ref_escape && sig.wire.unwrap().ref_escape);
}

#[test]
fn other_control_bits_pass_unchanged() {
    // FUA (bit 14) and limited retry (bit 15) are the backend's business.
    let control = 0xc000 | control::PRACT;
    let sig = signature(&rw_command(0x01, control, 0, 0, 0), 1, 9).unwrap();
    assert_eq!(sig.control, 0xc000);
    assert_eq!(sig.check_mask, 0);
}

#[test]
fn intervals_no_signature_domain_can_describe_are_refused() {
    let command = rw_command(0x01, ALL_CHECKS, 0, 0, 0);
    // 0: the namespace's device has no integrity profile.
    for exp in [0, 1, 8, 16, 255] {
        assert_eq!(signature(&command, 1, exp), None, "interval_exp {exp}");
    }
    assert_eq!(
        signature(&command, 1, 15).unwrap().memory.pi_interval,
        32768
    );
}

#[test]
fn signature_errors_become_end_to_end_check_statuses() {
    // enum ib_sig_err_type: IB_SIG_BAD_GUARD, IB_SIG_BAD_REFTAG, IB_SIG_BAD_APPTAG.
    assert_eq!(error_status(0), status::GUARD_CHECK);
    assert_eq!(error_status(1), status::REFTAG_CHECK);
    assert_eq!(error_status(2), status::APPTAG_CHECK);
    // The C transport answers success for a type it does not know; we do not.
    assert_eq!(error_status(3), status::INVALID_PI);
    assert_eq!(
        (
            status::GUARD_CHECK,
            status::APPTAG_CHECK,
            status::REFTAG_CHECK
        ),
        (0x282, 0x283, 0x284)
    );
}

#[test]
fn a_keyed_length_must_hold_data_beyond_the_pi_the_host_sends() {
    let pass = signature(&rw_command(0x01, ALL_CHECKS, 0, 0, 0), 1, 9).unwrap();
    // 8 blocks of 512 B with 8 B of PI each.
    assert_eq!(pass.data_len(8 * 520, 64), Some(4096));
    for short in [0, 1, 63, 64] {
        assert_eq!(pass.data_len(short, 64), None, "length {short}");
    }
    // With PRACT the host sends data only: the HCA adds the PI.
    let pract = signature(&rw_command(0x01, control::PRACT, 0, 0, 0), 1, 9).unwrap();
    assert_eq!(pract.data_len(4096, 64), Some(4096));
    assert_eq!(pract.data_len(0, 64), None);
}
