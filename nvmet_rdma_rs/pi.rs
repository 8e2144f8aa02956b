// SPDX-License-Identifier: GPL-2.0

//! T10-PI on the data path: the signature attributes of a command's [`Signature`], and
//! the NVMe status of what the signature MR's checks found.

#![forbid(unsafe_code)]

use crate::protection::{self, DifDomain, Signature};
use crate::rdma::signature::{SigAttrs, SigError, T10Dif};
use kernel::prelude::*;

/// The signature domain of `dif` (`nvmet_rdma_set_sig_domain`).
fn t10_dif(dif: &DifDomain) -> T10Dif {
    T10Dif {
        pi_interval: dif.pi_interval,
        ref_tag: dif.ref_tag,
        ref_remap: dif.ref_remap,
        app_tag: dif.app_tag,
        apptag_check_mask: dif.apptag_check_mask,
        app_escape: dif.app_escape,
        ref_escape: dif.ref_escape,
    }
}

/// The signature attributes `rdma_rw_ctx_signature_init` takes for `signature`.
pub(crate) fn sig_attrs(signature: &Signature) -> SigAttrs {
    let wire = signature.wire.as_ref().map(t10_dif);
    SigAttrs::new(
        signature.check_mask,
        &t10_dif(&signature.memory),
        wire.as_ref(),
    )
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
