// SPDX-License-Identifier: GPL-2.0

//! T10-PI offload through signature MRs: what the HCA's checks found
//! (`ib_check_mr_status`) on the signature MR of an `rdma_rw` context that
//! `rdma_rw_ctx_signature_init` registered with the data and its protection information
//! (read by [`super::rw::RwCtx::sig_error`]).
//!
//! C header: [`include/rdma/signature.h`].
//!
//! [`include/rdma/signature.h`]: srctree/include/rdma/signature.h

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
