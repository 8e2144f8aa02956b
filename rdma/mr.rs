// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions (`ib_alloc_mr`, `ib_map_mr_sg`, `IB_WR_REG_MR`).
//!
//! An [`Mr`] tracks its registration state, so the usual mistakes are errors rather than
//! remote access faults: its key can only be advertised ([`Mr::remote`]) once a
//! registration completed successfully, a valid MR must be invalidated (locally or by the
//! peer) before it is mapped again, and every registration is signalled.
//!
//! An MR keeps (a clone of) the buffer it maps until it maps another one or is
//! deregistered, so no order of drops frees memory a registration may still reach.

use super::{bindings, qp::RemoteBuf, DmaBuf, Pd};
use core::{
    cell::UnsafeCell,
    ptr::NonNull,
    sync::atomic::{AtomicU8, Ordering},
};
use kernel::{prelude::*, sync::Arc};

/// `IB_ACCESS_*` rights for [`super::SendOp::Register`].
pub(crate) mod access {
    use super::bindings;

    /// The local side may write (RDMA READ targets, receives).
    pub(crate) const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    /// The peer may RDMA WRITE.
    pub(crate) const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    /// The peer may RDMA READ.
    pub(crate) const REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
}

/// Not registered: may be mapped.
const INVALID: u8 = 0;
/// A registration is posted.
const REGISTERING: u8 = 1;
/// Registered: the key works.
const VALID: u8 = 2;
/// An invalidation is posted.
const INVALIDATING: u8 = 3;
/// A `map` runs (it alone uses the MR's mapping and the buffer it keeps).
const MAPPING: u8 = 4;
/// An invalidation failed: the device may still honour the key, so the MR is never mapped
/// again, and keeps its buffer until it is deregistered.
const FAILED: u8 = 5;

/// A fast-registration MR. Clones share it; posted work requests hold a clone.
#[derive(Clone)]
pub(crate) struct Mr(Arc<Region>);

/// # Invariants
///
/// `mr` came from `ib_alloc_mr` on `pd` and is deregistered only in `Drop`, before `pd`
/// is released and `buf` unmapped (fields drop after `drop`).
///
/// `buf` holds the buffer that the MR's page list describes, if any: it is set before the
/// page list is (re)written, and only replaced under the `MAPPING` state, which one `map`
/// at a time holds (taken by a compare-exchange from `INVALID`, when no registration is
/// posted or live); nothing else but `Drop` touches it.
struct Region {
    mr: NonNull<bindings::ib_mr>,
    _pd: Arc<Pd>,
    max_pages: u32,
    state: AtomicU8,
    mapped_len: core::sync::atomic::AtomicU32,
    buf: UnsafeCell<Option<DmaBuf>>,
}

// SAFETY: an MR handle may be used from any thread; state changes are atomic, and `buf`
// (a `Send` buffer) is used by one `map` at a time (type invariant).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Mr {
    /// Allocates an MR on `pd` that can map up to `max_pages` pages. The MR keeps `pd`
    /// alive: a PD freed under a live MR is a leak the device warns about.
    pub(crate) fn new(pd: &Arc<Pd>, max_pages: u32) -> Result<Self> {
        // SAFETY: `pd` is live for the call.
        let mr = unsafe {
            bindings::ib_alloc_mr(
                pd.as_raw(),
                bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
                max_pages,
            )
        };
        let mr = super::from_err_ptr(mr)?;
        let region = Region {
            mr,
            _pd: pd.clone(),
            max_pages,
            state: AtomicU8::new(INVALID),
            mapped_len: core::sync::atomic::AtomicU32::new(0),
            buf: UnsafeCell::new(None),
        };
        Ok(Self(Arc::new(region, GFP_KERNEL)?))
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_mr {
        self.0.mr.as_ptr()
    }

    /// The MR's current lkey.
    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: the MR is live; keys change only in `map`, under the INVALID state.
        unsafe { (*self.as_raw()).lkey }
    }

    /// The MR's current rkey.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: as for `lkey`.
        unsafe { (*self.as_raw()).rkey }
    }

    /// Maps `len` bytes of `buf` at `offset` into the (invalid) MR and rotates its key, so a
    /// peer holding the previous key cannot use the new registration. The MR keeps a clone
    /// of `buf` until it maps another buffer or is deregistered (the one it kept before
    /// goes now: no registration can reach it any more). `EBUSY` unless the MR is invalid
    /// (a registration or invalidation posted, a key live, another `map` running).
    pub(crate) fn map(&self, buf: &DmaBuf, offset: usize, len: u32) -> Result {
        let end = offset.checked_add(len as usize).ok_or(EINVAL)?;
        if len == 0 || end > buf.len() {
            return Err(EINVAL);
        }
        if buf.pages(offset, len as usize) > self.0.max_pages {
            return Err(E2BIG);
        }
        // INVARIANT: this call alone holds `MAPPING`, taken from `INVALID`.
        self.0
            .state
            .compare_exchange(INVALID, MAPPING, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| EBUSY)?;
        // SAFETY: this call holds `MAPPING` (just taken); `len` bytes at `offset` lie in
        // `buf` (checked above).
        let result = unsafe { self.map_claimed(buf, offset, len) };
        self.0.state.store(INVALID, Ordering::Release);
        result
    }

    /// [`Mr::map`], once claimed.
    ///
    /// # Safety
    ///
    /// The caller holds the MR in the `MAPPING` state, taken from `INVALID`; `len` bytes at
    /// `offset` lie in `buf`.
    unsafe fn map_claimed(&self, buf: &DmaBuf, offset: usize, len: u32) -> Result {
        // SAFETY: the caller holds `MAPPING`, so nothing else uses `buf` (type invariant).
        // INVARIANT: the buffer is kept before the page list points into it; the one kept
        // before is not registered (the MR was `INVALID`), so it may go.
        unsafe { *self.0.buf.get() = Some(buf.clone()) };
        let page = kernel::page::PAGE_SIZE as u32;
        let mut sg: bindings::scatterlist = pin_init::zeroed();
        // SAFETY: `sg` is a single local entry; the helper marks it the end of the table
        // and sets its DMA address and length to a range of `buf`'s mapping.
        unsafe { bindings::rdma_rs_sg_set_dma(&mut sg, buf.dma_addr(offset), len) };
        let key = (self.rkey().wrapping_add(1) & 0xff) as u8;
        // SAFETY: the MR is live (type invariant) and the caller holds `MAPPING`, taken from
        // `INVALID`: no registration or invalidation of it is posted and its key is not live,
        // and no other `map` runs, so its key and page list may change; `sg` lives for the
        // call, and the buffer it points into is kept (above).
        let mapped = unsafe {
            bindings::rdma_rs_ib_update_fast_reg_key(self.as_raw(), key);
            bindings::ib_map_mr_sg(self.as_raw(), &mut sg, 1, core::ptr::null_mut(), page)
        };
        if mapped != 1 {
            return Err(if mapped < 0 {
                Error::from_errno(mapped)
            } else {
                EINVAL
            });
        }
        self.0.mapped_len.store(len, Ordering::Release);
        Ok(())
    }

    /// The address, length and rkey to advertise: only once registered.
    pub(crate) fn remote(&self) -> Result<RemoteBuf> {
        if self.0.state.load(Ordering::Acquire) != VALID {
            return Err(super::errno(bindings::ENOKEY));
        }
        // SAFETY: the MR is live and registered; `iova` is fixed until the next `map`.
        let addr = unsafe { (*self.as_raw()).iova };
        Ok(RemoteBuf {
            addr,
            rkey: self.rkey(),
            len: self.0.mapped_len.load(Ordering::Acquire),
        })
    }

    /// Whether the MR is registered.
    pub(crate) fn is_valid(&self) -> bool {
        self.0.state.load(Ordering::Acquire) == VALID
    }

    /// The peer invalidated `rkey` with SEND_WITH_INV: if it is this MR's key, the MR is
    /// invalid now. A different key is `EINVAL` (the MR stays as it was).
    pub(crate) fn note_remote_invalidate(&self, rkey: u32) -> Result {
        if rkey != self.rkey() {
            return Err(EINVAL);
        }
        self.0
            .state
            .compare_exchange(VALID, INVALID, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EINVAL)
    }

    /// A registration (`effect` Registered) or invalidation is about to be posted.
    pub(super) fn begin(&self, effect: super::qp::MrEffectKind) -> Result {
        let (from, to) = match effect {
            super::qp::MrEffectKind::Registered => (INVALID, REGISTERING),
            super::qp::MrEffectKind::Invalidated => (VALID, INVALIDATING),
        };
        self.0
            .state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// The posted registration or invalidation completed (`ok`) or failed.
    pub(super) fn complete(&self, effect: super::qp::MrEffectKind, ok: bool) {
        let state = match (effect, ok) {
            (super::qp::MrEffectKind::Registered, true) => VALID,
            (super::qp::MrEffectKind::Invalidated, true) => INVALID,
            // A failed registration did not register: a new map (and key) before it is
            // used again.
            (super::qp::MrEffectKind::Registered, false) => INVALID,
            // A failed invalidation may have left the key working: never mapped again, the
            // MR keeps its buffer until it is deregistered.
            (super::qp::MrEffectKind::Invalidated, false) => FAILED,
        };
        self.0.state.store(state, Ordering::Release);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: live by the type invariant; no work request holds it (they hold clones).
        unsafe { bindings::rdma_rs_ib_dereg_mr(self.mr.as_ptr()) };
        // `buf`, a field, is released after this body: once no key reaches it.
    }
}
