// SPDX-License-Identifier: GPL-2.0

//! T10 protection information (PI) of a read or write command, in plain Rust: what the
//! HCA's signature MR must do with it, and the NVMe status a PI error becomes.
//!
//! Like `wire`, nothing here touches the kernel: the module turns a [`Signature`] into a
//! `struct ib_sig_attrs`, and the host unit tests check every field against what the C
//! transport (`nvmet_rdma_set_sig_attrs` in `drivers/nvme/target/rdma.c`) sets.

#![forbid(unsafe_code)]

use crate::wire::COMMAND_SIZE;

/// Protection bits of a read/write command's control field (`NVME_RW_PRINFO_*`).
pub(crate) mod control {
    /// Check the reference tag.
    pub(crate) const PRCHK_REF: u16 = 1 << 10;
    /// Check the application tag.
    pub(crate) const PRCHK_APP: u16 = 1 << 11;
    /// Check the guard (CRC).
    pub(crate) const PRCHK_GUARD: u16 = 1 << 12;
    /// Protection information action: the controller inserts (write) or strips (read)
    /// the PI; none crosses the wire.
    pub(crate) const PRACT: u16 = 1 << 13;
}

/// Bits of a signature check mask (`IB_SIG_CHECK_*`).
pub(crate) mod check {
    /// The guard's two bytes.
    pub(crate) const GUARD: u8 = 0xc0;
    /// The application tag's two bytes.
    pub(crate) const APPTAG: u8 = 0x30;
    /// The reference tag's four bytes.
    pub(crate) const REFTAG: u8 = 0x0f;
}

/// NVMe status codes of PI errors (`include/linux/nvme.h`).
pub(crate) mod status {
    /// Invalid protection information.
    pub(crate) const INVALID_PI: u16 = 0x181;
    /// End-to-end guard check error.
    pub(crate) const GUARD_CHECK: u16 = 0x282;
    /// End-to-end application tag check error.
    pub(crate) const APPTAG_CHECK: u16 = 0x283;
    /// End-to-end reference tag check error.
    pub(crate) const REFTAG_CHECK: u16 = 0x284;
}

/// Namespace protection type 3 (`NVME_NS_DPS_PI_TYPE3`): the reference tag is not
/// checked, and an all-ones one escapes the check.
pub(crate) const PI_TYPE3: u8 = 3;

/// Protection intervals a signature domain can describe: 512 B to 32 KiB (its
/// `pi_interval` is 16 bits).
const INTERVAL_EXP: core::ops::RangeInclusive<u8> = 9..=15;

/// One T10-DIF domain with a CRC guard (`struct ib_t10_dif_domain`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DifDomain {
    /// Bytes of data per PI tuple.
    pub(crate) pi_interval: u16,
    /// The first block's reference tag.
    pub(crate) ref_tag: u32,
    /// The reference tag grows by one per interval.
    pub(crate) ref_remap: bool,
    /// The expected application tag.
    pub(crate) app_tag: u16,
    /// Which application tag bits are checked.
    pub(crate) apptag_check_mask: u16,
    /// An application tag of all ones disables the check of its tuple.
    pub(crate) app_escape: bool,
    /// A reference tag of all ones disables the check of its tuple (type 3).
    pub(crate) ref_escape: bool,
}

/// What the HCA does with one command's PI (`struct ib_sig_attrs`), and what changes for
/// the command because of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signature {
    /// PI on the wire; `None` when the HCA inserts or strips it (PRACT).
    pub(crate) wire: Option<DifDomain>,
    /// PI in memory, which the backend reads or writes.
    pub(crate) memory: DifDomain,
    /// Which PI fields the HCA checks ([`check`] bits).
    pub(crate) check_mask: u8,
    /// The command's control field as the backend must see it: PRACT is cleared, since
    /// the HCA does what it asks.
    pub(crate) control: u16,
    /// The HCA generates the PI (PRACT): the transfer in memory is the host's length plus
    /// the metadata.
    pub(crate) hca_generates_pi: bool,
}

impl Signature {
    /// The bytes of data (PI excluded) a keyed transfer of `sgl_len` bytes moves for a
    /// command with `metadata_len` bytes of PI; `None` if it holds no data at all (the
    /// host's length must cover the PI it sends, and more).
    pub(crate) fn data_len(&self, sgl_len: usize, metadata_len: usize) -> Option<usize> {
        if self.hca_generates_pi {
            Some(sgl_len).filter(|&len| len > 0)
        } else {
            sgl_len.checked_sub(metadata_len).filter(|&len| len > 0)
        }
    }
}

fn le16(command: &[u8; COMMAND_SIZE], at: usize) -> u16 {
    u16::from_le_bytes([command[at], command[at + 1]])
}

fn le32(command: &[u8; COMMAND_SIZE], at: usize) -> u32 {
    u32::from_le_bytes([
        command[at],
        command[at + 1],
        command[at + 2],
        command[at + 3],
    ])
}

/// The signature a read or write command (`struct nvme_rw_command`) needs on a namespace
/// of protection type `pi_type` whose device has one PI tuple per `1 << interval_exp`
/// bytes. `None` if no signature domain can describe that interval.
pub(crate) fn signature(
    command: &[u8; COMMAND_SIZE],
    pi_type: u8,
    interval_exp: u8,
) -> Option<Signature> {
    if !INTERVAL_EXP.contains(&interval_exp) {
        return None;
    }
    // control at byte 50, reftag at 56, lbat at 60, lbatm at 62.
    let control = le16(command, 50);
    let domain = DifDomain {
        pi_interval: 1 << interval_exp,
        ref_tag: le32(command, 56),
        ref_remap: control & control::PRCHK_REF != 0,
        app_tag: le16(command, 60),
        apptag_check_mask: le16(command, 62),
        app_escape: true,
        ref_escape: pi_type == PI_TYPE3,
    };
    let hca_generates_pi = control & control::PRACT != 0;
    let mut check_mask = 0;
    for (bit, mask) in [
        (control::PRCHK_REF, check::REFTAG),
        (control::PRCHK_GUARD, check::GUARD),
        (control::PRCHK_APP, check::APPTAG),
    ] {
        if control & bit != 0 {
            check_mask |= mask;
        }
    }
    Some(Signature {
        wire: (!hca_generates_pi).then_some(domain),
        memory: domain,
        check_mask,
        control: control & !control::PRACT,
        hca_generates_pi,
    })
}

/// The NVMe status of a signature error of type `err_type` (`enum ib_sig_err_type`:
/// guard, reference tag, application tag). An unknown type is still an error.
pub(crate) fn error_status(err_type: u32) -> u16 {
    match err_type {
        0 => status::GUARD_CHECK,
        1 => status::REFTAG_CHECK,
        2 => status::APPTAG_CHECK,
        _ => status::INVALID_PI,
    }
}
