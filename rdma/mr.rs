// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions (`ib_alloc_mr`, `ib_map_mr_sg`, `IB_WR_REG_MR`).
//!
//! An [`Mr`] tracks its registration state ([`MrState`]), so the usual mistakes are errors
//! rather than remote access faults: only a mapped MR is registered, its key can only be
//! advertised ([`Mr::remote`]) once a registration completed successfully, a valid MR must
//! be invalidated (locally, or by the peer as a completion reports:
//! [`Mr::note_remote_invalidate`]) before it is mapped again, and every registration is
//! signalled.
//!
//! An MR keeps (a clone of) the buffer it maps until it maps another one or is
//! deregistered, so no order of drops frees memory a registration may still reach.

use super::{bindings, qp::RemoteBuf, DmaBuf, Pd, WorkCompletion};
use core::{
    cell::UnsafeCell,
    ptr::NonNull,
    sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
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

/// Not registered, and nothing mapped since: may be mapped.
const INVALID: u8 = 0;
/// A `map` runs (it alone uses the MR's mapping, its keys and the buffer it keeps).
const MAPPING: u8 = 1;
/// Mapped, not registered: may be registered, or mapped again.
const MAPPED: u8 = 2;
/// A registration is posted.
const REGISTERING: u8 = 3;
/// Registered: the key works.
const VALID: u8 = 4;
/// An invalidation is posted.
const INVALIDATING: u8 = 5;
/// An invalidation failed: the device may still honour the key, so the MR is never mapped
/// again, and keeps its buffer until it is deregistered.
const FAILED: u8 = 6;

/// The registration state of an MR and the number of its mapping, in one word
/// (`mapping << 8 | state`). Each transition is one atomic read-modify-write of the word,
/// so two callers never both take the same one (two `map`s, or a `map` and a
/// registration), and every `map` counts a new mapping, so a state seen once (`VALID` of
/// mapping `n`) does not come back unnoticed.
///
/// Pure logic: an `MrState` on its own changes nothing but itself.
pub(crate) struct MrState(AtomicU64);

impl MrState {
    /// Nothing mapped.
    pub(crate) const fn new() -> Self {
        Self(AtomicU64::new(INVALID as u64))
    }

    /// Moves from a state that `next` accepts to the one it returns, as a new mapping if
    /// `new_mapping`. The word moved from, or (`Err`) the one found.
    fn step(&self, new_mapping: bool, next: impl Fn(u8) -> Option<u8>) -> Result<u64, u64> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                let to = next(word as u8)?;
                let mapping = (word >> 8).wrapping_add(u64::from(new_mapping));
                Some(mapping << 8 | u64::from(to))
            })
    }

    /// Takes the MR for a `map`, as a new mapping: from not registered (`INVALID` or
    /// `MAPPED`) to `MAPPING`. `EBUSY` otherwise: another `map` runs, a registration or
    /// invalidation is posted, the key works, or an invalidation failed.
    pub(crate) fn start_map(&self) -> Result {
        self.step(true, |s| matches!(s, INVALID | MAPPED).then_some(MAPPING))
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// The `map` that [`MrState::start_map`] let run is over: `MAPPED` if it mapped, else
    /// `INVALID`.
    pub(crate) fn end_map(&self, mapped: bool) {
        let to = if mapped { MAPPED } else { INVALID };
        let _ = self.step(false, |s| (s == MAPPING).then_some(to));
    }

    /// A registration is about to be posted: from `MAPPED` to `REGISTERING`; `EBUSY`
    /// otherwise (not mapped since the last registration, or busy).
    pub(crate) fn begin_registration(&self) -> Result {
        self.step(false, |s| (s == MAPPED).then_some(REGISTERING))
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// The posted registration completed (`ok`: `VALID`) or failed, or was not posted
    /// (`INVALID`: it did not register, a new map comes first).
    pub(crate) fn registered(&self, ok: bool) {
        let to = if ok { VALID } else { INVALID };
        let _ = self.step(false, |s| (s == REGISTERING).then_some(to));
    }

    /// An invalidation is about to be posted: from `VALID` to `INVALIDATING`; `EBUSY`
    /// otherwise.
    pub(crate) fn begin_invalidation(&self) -> Result {
        self.step(false, |s| (s == VALID).then_some(INVALIDATING))
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// The posted invalidation completed (`ok`: `INVALID`) or failed (`FAILED`: the key
    /// may still work).
    pub(crate) fn invalidated(&self, ok: bool) {
        let to = if ok { INVALID } else { FAILED };
        let _ = self.step(false, |s| (s == INVALIDATING).then_some(to));
    }

    /// The invalidation [`MrState::begin_invalidation`] let post was not posted (the
    /// provider refused it, or its record could not be made): back to `VALID`, the key
    /// certainly still working.
    pub(crate) fn invalidation_not_posted(&self) {
        let _ = self.step(false, |s| (s == INVALIDATING).then_some(VALID));
    }

    /// The peer invalidated the registration in place, if `of_this` says the report is of
    /// it: from `VALID` to `INVALID`, provided the state did not change while `of_this`
    /// looked (it reads what is fixed while one registration is in place). `EINVAL`
    /// otherwise, and the state stays as it was.
    pub(crate) fn invalidated_remotely(&self, of_this: impl FnOnce() -> bool) -> Result {
        let seen = self.0.load(Ordering::Acquire);
        if seen as u8 != VALID || !of_this() {
            return Err(EINVAL);
        }
        let to = seen & !0xff | u64::from(INVALID);
        self.0
            .compare_exchange(seen, to, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EINVAL)
    }

    /// The word if the MR is registered (`VALID`), for [`MrState::unchanged`].
    fn valid(&self) -> Option<u64> {
        let word = self.0.load(Ordering::Acquire);
        (word as u8 == VALID).then_some(word)
    }

    /// Whether the word is still `seen`.
    fn unchanged(&self, seen: u64) -> bool {
        self.0.load(Ordering::Acquire) == seen
    }

    /// Whether the MR is registered.
    pub(crate) fn is_valid(&self) -> bool {
        self.valid().is_some()
    }
}

/// A fast-registration MR. Clones share it; posted work requests hold a clone.
#[derive(Clone)]
pub(crate) struct Mr(Arc<Region>);

/// # Invariants
///
/// `mr` came from `ib_alloc_mr` on `pd` and is deregistered only in `Drop`, before `pd`
/// is released and `buf` unmapped (fields drop after `drop`).
///
/// The `ib_mr`'s keys, iova and page list change only under the `MAPPING` state, which
/// one `map` at a time holds (taken from `INVALID` or `MAPPED`: no registration is posted
/// or in place), and so do `buf`, which holds the buffer that the page list describes
/// (set before the page list is written), and the copies `lkey`, `rkey`, `iova` and
/// `mapped_len`, which are what the rest of the layer reads. Nothing else but `Drop`
/// touches `buf`.
///
/// `registered_on` is the QP whose completion made the MR `VALID` last (its address),
/// written before that transition.
struct Region {
    mr: NonNull<bindings::ib_mr>,
    pd: Arc<Pd>,
    max_pages: u32,
    state: MrState,
    lkey: AtomicU32,
    rkey: AtomicU32,
    iova: AtomicU64,
    mapped_len: AtomicU32,
    registered_on: AtomicUsize,
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
        // SAFETY: just allocated and not shared yet: nothing changes its keys meanwhile.
        let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
        // INVARIANT: nothing mapped; the keys copied.
        let region = Region {
            mr,
            pd: pd.clone(),
            max_pages,
            state: MrState::new(),
            lkey: AtomicU32::new(lkey),
            rkey: AtomicU32::new(rkey),
            iova: AtomicU64::new(0),
            mapped_len: AtomicU32::new(0),
            registered_on: AtomicUsize::new(0),
            buf: UnsafeCell::new(None),
        };
        Ok(Self(Arc::new(region, GFP_KERNEL)?))
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_mr {
        self.0.mr.as_ptr()
    }

    /// The PD the MR is on.
    pub(super) fn pd(&self) -> &Pd {
        &self.0.pd
    }

    /// The MR's current lkey.
    pub(crate) fn lkey(&self) -> u32 {
        self.0.lkey.load(Ordering::Acquire)
    }

    /// The MR's current rkey.
    pub(crate) fn rkey(&self) -> u32 {
        self.0.rkey.load(Ordering::Acquire)
    }

    /// Maps `len` bytes of `buf` at `offset` into the MR and rotates its key, so a peer
    /// holding the previous key cannot use the new registration. The MR keeps a clone of
    /// `buf` until it maps another buffer or is deregistered (the one it kept before goes
    /// now: no registration can reach it any more). `EBUSY` unless the MR is unregistered
    /// (a registration or invalidation posted, its key working, another `map` running);
    /// `EINVAL` if `buf` is mapped for another device than the MR's.
    pub(crate) fn map(&self, buf: &DmaBuf, offset: usize, len: u32) -> Result {
        let end = offset.checked_add(len as usize).ok_or(EINVAL)?;
        if len == 0 || end > buf.len() {
            return Err(EINVAL);
        }
        if buf.pages(offset, len as usize) > self.0.max_pages {
            return Err(E2BIG);
        }
        if buf.device().as_raw() as usize != self.0.pd.device_address() {
            pr_warn!(
                "rdma: refused to map a buffer mapped for {} into an MR of another device\n",
                buf.device().name().to_str().unwrap_or("?")
            );
            return Err(EINVAL);
        }
        self.0.state.start_map()?;
        // SAFETY: this call holds `MAPPING` (just taken); `len` bytes at `offset` lie in
        // `buf` (checked above).
        let result = unsafe { self.map_claimed(buf, offset, len) };
        self.0.state.end_map(result.is_ok());
        result
    }

    /// [`Mr::map`], once claimed.
    ///
    /// # Safety
    ///
    /// The caller holds the MR in the `MAPPING` state ([`MrState::start_map`]); `len` bytes
    /// at `offset` lie in `buf`.
    unsafe fn map_claimed(&self, buf: &DmaBuf, offset: usize, len: u32) -> Result {
        // SAFETY: the caller holds `MAPPING`, so nothing else uses `buf` (type invariant).
        // INVARIANT: the buffer is kept before the page list points into it; the one kept
        // before is not registered (the MR was `INVALID` or `MAPPED`), so it may go.
        unsafe { *self.0.buf.get() = Some(buf.clone()) };
        let page = kernel::page::PAGE_SIZE as u32;
        let mut sg: bindings::scatterlist = pin_init::zeroed();
        // SAFETY: `sg` is a single local entry; the helper marks it the end of the table
        // and sets its DMA address and length to a range of `buf`'s mapping.
        unsafe { bindings::rdma_rs_sg_set_dma(&mut sg, buf.dma_addr(offset), len) };
        let key = (self.rkey().wrapping_add(1) & 0xff) as u8;
        // SAFETY: the MR is live (type invariant) and the caller holds `MAPPING`, taken
        // while no registration or invalidation of it was posted or in place and no other
        // `map` ran: its key and page list may change, and nothing else reads or writes
        // them meanwhile; `sg` lives for the call, and the buffer it points into is kept
        // (above).
        let (mapped, lkey, rkey, iova) = unsafe {
            bindings::rdma_rs_ib_update_fast_reg_key(self.as_raw(), key);
            let mapped =
                bindings::ib_map_mr_sg(self.as_raw(), &mut sg, 1, core::ptr::null_mut(), page);
            let mr = &*self.as_raw();
            (mapped, mr.lkey, mr.rkey, mr.iova)
        };
        // INVARIANT: the copies, under `MAPPING`.
        self.0.lkey.store(lkey, Ordering::Release);
        self.0.rkey.store(rkey, Ordering::Release);
        self.0.iova.store(iova, Ordering::Release);
        self.0.mapped_len.store(len, Ordering::Release);
        if mapped != 1 {
            return Err(if mapped < 0 {
                Error::from_errno(mapped)
            } else {
                EINVAL
            });
        }
        Ok(())
    }

    /// The address, length and rkey to advertise: only once registered (`ENOKEY` before).
    pub(crate) fn remote(&self) -> Result<RemoteBuf> {
        let no_key = || super::errno(bindings::ENOKEY);
        let seen = self.0.state.valid().ok_or_else(no_key)?;
        let remote = RemoteBuf {
            addr: self.0.iova.load(Ordering::Acquire),
            rkey: self.rkey(),
            len: self.0.mapped_len.load(Ordering::Acquire),
        };
        // (A registration that ended while this read would have changed the word: the
        // values are all of the one registration seen.)
        if !self.0.state.unchanged(seen) {
            return Err(no_key());
        }
        Ok(remote)
    }

    /// Whether the MR is registered.
    pub(crate) fn is_valid(&self) -> bool {
        self.0.state.is_valid()
    }

    /// The peer invalidated the MR's registration with SEND_WITH_INV, as `wc` reports
    /// (`IB_WC_WITH_INVALIDATE` with the MR's rkey, a completion of the QP that registered
    /// it last): the MR is invalid now, and may be mapped again. `EINVAL` for a
    /// completion that reports no such thing, and the MR stays as it was.
    ///
    /// The completion is only lent to its handler, so it is one that the RDMA core reports
    /// now; the QP's send and receive queues complete into one CQ, whose completions run
    /// one at a time and in order, so a registration of the same key that the device made
    /// after the invalidation has not completed yet: the registration in place is the one
    /// the peer invalidated.
    pub(crate) fn note_remote_invalidate(&self, wc: &WorkCompletion) -> Result {
        self.0.state.invalidated_remotely(|| {
            wc.invalidated_rkey == Some(self.rkey())
                && wc.qp_address() == self.0.registered_on.load(Ordering::Acquire)
        })
    }

    /// A registration (`effect` Registered) or invalidation is about to be posted; `EBUSY`
    /// if the MR is not in a state for it (not mapped since its last registration, not
    /// registered, or busy).
    pub(super) fn begin(&self, effect: super::qp::MrEffectKind) -> Result {
        match effect {
            super::qp::MrEffectKind::Registered => self.0.state.begin_registration(),
            super::qp::MrEffectKind::Invalidated => self.0.state.begin_invalidation(),
        }
    }

    /// The registration or invalidation that [`Mr::begin`] let post completed with `done`,
    /// or was not posted (`None`).
    pub(super) fn complete(&self, effect: super::qp::MrEffectKind, done: Option<&WorkCompletion>) {
        let ok = done.is_some_and(WorkCompletion::is_ok);
        match effect {
            super::qp::MrEffectKind::Registered => {
                if let Some(wc) = done.filter(|_| ok) {
                    // INVARIANT: written before the MR becomes `VALID` (below).
                    self.0
                        .registered_on
                        .store(wc.qp_address(), Ordering::Release);
                }
                // A failed registration did not register: a new map (and key) comes first.
                self.0.state.registered(ok);
            }
            // Not posted: still registered, as before.
            super::qp::MrEffectKind::Invalidated if done.is_none() => {
                self.0.state.invalidation_not_posted()
            }
            // A failed invalidation may have left the key working: the MR is never mapped
            // again, and keeps its buffer until it is deregistered.
            super::qp::MrEffectKind::Invalidated => self.0.state.invalidated(ok),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: live by the type invariant; no work request holds it (they hold clones).
        unsafe { bindings::rdma_rs_ib_dereg_mr(self.mr.as_ptr()) };
        // `buf`, a field, is released after this body: once no key reaches it.
    }
}
