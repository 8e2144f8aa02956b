// SPDX-License-Identifier: GPL-2.0

//! T10-PI offload through signature MRs: what the HCA's checks found
//! (`ib_check_mr_status`) on the signature MR of an `rdma_rw` context that
//! `rdma_rw_ctx_signature_init` registered with the data and its protection information.
//!
//! C header: [`include/rdma/signature.h`].
//!
//! [`include/rdma/signature.h`]: srctree/include/rdma/signature.h

use super::bindings;
use kernel::prelude::*;

/// What a signature MR's PI check found wrong (`struct ib_sig_err`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SigError {
    /// `enum ib_sig_err_type`: guard, reference tag or application tag.
    pub(crate) err_type: u32,
    /// The value the check expected.
    pub(crate) expected: u32,
    /// The value the PI held.
    pub(crate) actual: u32,
    /// Where in the transfer the error is.
    pub(crate) offset: u64,
}

/// The result of the PI checks the signature MR of an `rdma_rw` context did: `None` if
/// they passed.
///
/// # Safety
///
/// `ctx` was initialised by `rdma_rw_ctx_signature_init` and is not destroyed yet, and its
/// transfer completed.
pub(crate) unsafe fn rw_ctx_sig_error(ctx: *mut bindings::rdma_rw_ctx) -> Result<Option<SigError>> {
    let mut status = bindings::ib_mr_status::default();
    // SAFETY: a signature context always registers through one `reg` entry whose `mr` is
    // the signature MR (see the function's safety section); `status` is valid for the
    // call.
    let ret = unsafe {
        let mr = (*(*ctx).__bindgen_anon_1.reg).mr;
        bindings::ib_check_mr_status(
            mr,
            bindings::ib_mr_status_check_IB_MR_CHECK_SIG_STATUS,
            &mut status,
        )
    };
    kernel::error::to_result(ret)?;
    if status.fail_status & bindings::ib_mr_status_check_IB_MR_CHECK_SIG_STATUS == 0 {
        return Ok(None);
    }
    let err = status.sig_err;
    Ok(Some(SigError {
        err_type: err.err_type,
        expected: err.expected,
        actual: err.actual,
        offset: err.sig_err_offset,
    }))
}
