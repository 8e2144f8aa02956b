// SPDX-License-Identifier: GPL-2.0

//! T10-PI on the data path: the `struct ib_sig_attrs` of a command's [`Signature`], and
//! the NVMe status of what the signature MR's checks found.

#![forbid(unsafe_code)]

use crate::protection::{self, DifDomain, Signature};
use crate::rdma::{bindings, signature::SigError};
use kernel::prelude::*;

/// A T10-DIF domain with a CRC guard (`nvmet_rdma_set_sig_domain`).
fn dif_domain(dif: &DifDomain) -> bindings::ib_sig_domain {
    let mut domain = bindings::ib_sig_domain {
        sig_type: bindings::ib_signature_type_IB_SIG_TYPE_T10_DIF,
        ..Default::default()
    };
    domain.sig.dif = bindings::ib_t10_dif_domain {
        bg_type: bindings::ib_t10_dif_bg_type_IB_T10DIF_CRC,
        pi_interval: dif.pi_interval,
        bg: 0,
        app_tag: dif.app_tag,
        ref_tag: dif.ref_tag,
        ref_remap: dif.ref_remap,
        app_escape: dif.app_escape,
        ref_escape: dif.ref_escape,
        apptag_check_mask: dif.apptag_check_mask,
    };
    domain
}

/// The signature attributes `rdma_rw_ctx_signature_init` takes for `signature`.
pub(crate) fn sig_attrs(signature: &Signature) -> bindings::ib_sig_attrs {
    let none = bindings::ib_sig_domain {
        sig_type: bindings::ib_signature_type_IB_SIG_TYPE_NONE,
        ..Default::default()
    };
    bindings::ib_sig_attrs {
        check_mask: signature.check_mask,
        mem: dif_domain(&signature.memory),
        wire: signature.wire.as_ref().map_or(none, dif_domain),
        meta_length: 0,
    }
}

/// The NVMe status of a command whose signature MR reported `result` (0: PI intact), with
/// one log line for an error.
pub(crate) fn status(result: Result<Option<SigError>>) -> u16 {
    match result {
        Ok(None) => 0,
        Ok(Some(err)) => {
            pr_err!(
                "PI error found: type {} expected {:#x} vs actual {:#x} at byte {}\n",
                err.err_type,
                err.expected,
                err.actual,
                err.offset
            );
            protection::error_status(err.err_type)
        }
        Err(e) => {
            pr_err!("cannot read a signature MR's status ({:?})\n", e);
            protection::status::INVALID_PI
        }
    }
}
