// SPDX-License-Identifier: GPL-2.0

//! T10-PI offload through signature MRs: the signature attributes an `rdma_rw` context is
//! registered with ([`SigAttrs`], for `rdma_rw_ctx_signature_init`), and what the HCA's
//! checks found on its signature MR (`ib_check_mr_status`, read by
//! [`super::rw::RwCtx::sig_error`]).
//!
//! C header: [`include/rdma/signature.h`].
//!
//! [`include/rdma/signature.h`]: srctree/include/rdma/signature.h

use super::bindings;

/// Bits of [`SigAttrs::new`]'s check mask (`IB_SIG_CHECK_*`), a byte.
pub(crate) mod check {
    use super::bindings;

    // (`check_mask` is a `u8` in C too; `nvmet_rdma_rs` checks these values against its
    // own at build time.)

    /// Check the guard (the CRC of the block).
    pub(crate) const GUARD: u8 = bindings::IB_SIG_CHECK_GUARD as u8;
    /// Check the application tag.
    pub(crate) const APPTAG: u8 = bindings::IB_SIG_CHECK_APPTAG as u8;
    /// Check the reference tag.
    pub(crate) const REFTAG: u8 = bindings::IB_SIG_CHECK_REFTAG as u8;
}

/// The kinds of PI error a signature MR reports ([`SigError::err_type`],
/// `enum ib_sig_err_type`).
pub(crate) mod error_type {
    use super::bindings;

    /// The guard did not match.
    pub(crate) const BAD_GUARD: u32 = bindings::ib_sig_err_type_IB_SIG_BAD_GUARD;
    /// The reference tag did not match.
    pub(crate) const BAD_REFTAG: u32 = bindings::ib_sig_err_type_IB_SIG_BAD_REFTAG;
    /// The application tag did not match.
    pub(crate) const BAD_APPTAG: u32 = bindings::ib_sig_err_type_IB_SIG_BAD_APPTAG;
}

/// A T10-DIF protection domain with a CRC guard (`struct ib_t10_dif_domain`): how the PI of
/// one side of a transfer (memory or wire) looks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct T10Dif {
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
    /// A reference tag of all ones disables the check of its tuple.
    pub(crate) ref_escape: bool,
}

impl T10Dif {
    fn domain(&self) -> bindings::ib_sig_domain {
        let mut domain = bindings::ib_sig_domain {
            sig_type: bindings::ib_signature_type_IB_SIG_TYPE_T10_DIF,
            ..Default::default()
        };
        domain.sig.dif = bindings::ib_t10_dif_domain {
            bg_type: bindings::ib_t10_dif_bg_type_IB_T10DIF_CRC,
            pi_interval: self.pi_interval,
            bg: 0,
            app_tag: self.app_tag,
            ref_tag: self.ref_tag,
            ref_remap: self.ref_remap,
            app_escape: self.app_escape,
            ref_escape: self.ref_escape,
            apptag_check_mask: self.apptag_check_mask,
        };
        domain
    }
}

/// The signature attributes of a transfer with T10-PI (`struct ib_sig_attrs`): the PI in
/// memory, on the wire (`None`: none, the HCA adds or strips it), and what the HCA checks.
pub(crate) struct SigAttrs(bindings::ib_sig_attrs);

impl SigAttrs {
    /// Attributes checking the [`check`] bits of `check_mask` between `memory` and `wire`.
    pub(crate) fn new(check_mask: u8, memory: &T10Dif, wire: Option<&T10Dif>) -> Self {
        let none = bindings::ib_sig_domain {
            sig_type: bindings::ib_signature_type_IB_SIG_TYPE_NONE,
            ..Default::default()
        };
        Self(bindings::ib_sig_attrs {
            check_mask,
            mem: memory.domain(),
            wire: wire.map_or(none, T10Dif::domain),
            meta_length: 0,
        })
    }

    /// The attributes, for `rdma_rw_ctx_signature_init`.
    pub(super) fn as_mut_ptr(&mut self) -> *mut bindings::ib_sig_attrs {
        &mut self.0
    }
}

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
