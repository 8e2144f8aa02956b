// SPDX-License-Identifier: GPL-2.0

//! A slot's state, passed between the steps of the work it holds: one [`Owner`] at a time,
//! handed off to the device or to a kernel core while they hold the work, and resumed by
//! the event that gives it back.
//!
//! A transport's command slot is used by one step at a time: the step that took it from
//! the free slots, then the completion of the work request it posted, then the core that
//! executed its request, and so on. Which step runs next is decided by the hardware and
//! by the kernel's cores, not by a lock. [`Slot`] makes that order a value: the state is
//! reached only through the slot's one [`Owner`]; a step that hands the slot to an
//! event gives its owner up, and only that event gets it back:
//!
//! - [`Owner::post`] hands it to the completion of the work requests it posts: the
//!   layer's completion trampoline ([`super::cqe::SlotCqe`]) resumes it and passes
//!   the owner to the handler. Which completion that is, is the requests' own (their
//!   [`Resumes`], made by the layer when it bound them to the slot's object), not the
//!   caller's choice.
//! - The nvmet binding hands it to the nvmet core, and its `queue_response` trampoline
//!   resumes it ([`Slot::resume`] is `unsafe`: only such trampolines call it).
//! - [`Owner::hand_off`] parks it on a list of the slot's user (waiting for send queue
//!   space), which [`Slot::resume_local`] takes it back from: a parked slot lends nothing
//!   to a device or a core, so any code may resume it.
//!
//! A second completion of one work request, or an event the slot does not wait for,
//! finds no owner to resume. While an owner exists, nothing the slot posted is in flight:
//! the owner is proof that the state is the CPU's alone.
//!
//! ```ignore
//! let mut owner = slot.claim().ok_or(EBUSY)?; // a free slot
//! owner.len = 16;
//! // The SEND's completion resumes it; on failure the owner comes back.
//! owner.post(&qp, |state| Ok(state.send.prepare())).map_err(|(e, _)| e)?;
//! // ... the slot's `QpSlotHandler::<SEND>::done` gets `Some(owner)`; a duplicate
//! // completion gets `None`.
//! ```

// `core` atomics, not the kernel crate's: on this kernel those are out-of-line C helpers
// (`rust_helper_atomic_*`, and `AtomicRepr::as_ptr`), 76 instructions per 4 KiB I/O in
// vmlinux, with the calls to them, on the slots' changes alone (Documentation/bench.md);
// these compile inline. Acquire/release and relaxed orderings are used, and sequentially
// consistent ones for a free scan's store-buffering pair (`is_free_seqcst`,
// `free_seqcst`: a full barrier each side, as `smp_mb()` would give); no relaxed load here
// relies on dependency ordering (which the kernel's memory model gives a relaxed load and
// Rust's does not), so they mean the same in both.
use core::{
    cell::UnsafeCell,
    marker::PhantomData,
    ops::{Deref, DerefMut},
    sync::atomic::{
        AtomicU32, AtomicUsize,
        Ordering::{Acquire, Relaxed, Release, SeqCst},
    },
};

/// Nobody owns the slot: [`Slot::claim`] takes it.
const FREE: u32 = 0;
/// An [`Owner`] exists.
const OWNED: u32 = 1;

/// What a handed-off slot waits for: a kind of completion, a core's answer, a list.
///
/// The layers' events (the completions of an object's entries, [`super::cqe::Cqe`]'s
/// `ID`; the nvmet core) use tags below [`LOCAL_TAGS`]; a slot's user parks it on its own
/// lists with tags of its choice, which [`Owner::hand_off`] and [`Slot::resume_local`]
/// move to the range from [`LOCAL_TAGS`] up, so that the two never meet.
pub(crate) type Tag = u8;

/// The first tag of the slot users' own lists: tags below are the layers' events.
pub(crate) const LOCAL_TAGS: Tag = 0x80;

/// The largest completion entry `ID` whose completions resume a slot ([`Resumes`]).
pub(crate) const MAX_COMPLETION_TAG: u64 = 0x3f;

/// The nvmet core's tag: a slot whose request the core has.
pub(crate) const CORE_TAG: Tag = 0x40;

/// The smallest handed-off state: `awaiting(0)`.
const AWAITING_MIN: u32 = 2;

/// [`Slot::take_after`] holds the slot while it checks what a hand-off named: no owner
/// exists, and the events it was handed off to wait, as they do for a post.
const TAKING: u32 = u32::MAX;

/// The tag a user's list tag `tag` is handed off with: in the local range.
const fn local(tag: Tag) -> Tag {
    tag | LOCAL_TAGS
}

/// Handed off to event `tag`.
const fn awaiting(tag: Tag) -> u32 {
    AWAITING_MIN + 2 * tag as u32
}

/// Handed off to event `tag` by [`Owner::post`], whose post has not returned yet: the
/// provider may still read the requests, which a resumed owner could change.
const fn posting(tag: Tag) -> u32 {
    awaiting(tag) + 1
}

/// Where a [`Slot`] is, as [`Slot::phase`] saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotPhase {
    /// Nobody uses it.
    Free,
    /// An owner runs a step of its user (or [`Slot::take_after`] checks it).
    Owned,
    /// Handed off to event `tag`: a completion of its requests, or the nvmet core
    /// ([`CORE_TAG`]).
    Awaits(Tag),
    /// Parked on its user's list `tag` ([`Owner::hand_off`]).
    Parked(Tag),
}

/// A state `T` that one [`Owner`] at a time uses.
///
/// # Invariants
///
/// `state` is `OWNED` exactly while one `Owner` of this slot exists, or `posting(tag)`
/// while [`Owner::post`] (which holds what was the owner) runs its post; only they reach
/// `value` (or `&mut self`). It is `TAKING` while [`Slot::take_after`] checks a hand-off,
/// and `FREE` or `awaiting(tag)` otherwise. Every change away
/// from an owner is a release, and every change to `OWNED` an acquire, so that each owner
/// sees what the previous one wrote. While the slot is handed off, `resumer` is what
/// resumes it, as [`Ended`] names it (0: an event that no [`Ended`] covers), written by
/// the owner before it hands the slot off.
#[repr(C)]
pub(crate) struct Slot<T> {
    value: UnsafeCell<T>,
    state: AtomicU32,
    resumer: AtomicUsize,
}

/// Shows that something that resumes slots (a QP whose completions do, as an address;
/// the nvmet core for an sq) will not resume any more: for [`Slot::take_after`].
///
/// # Invariants
///
/// `resumer` is nonzero, and nothing it names resumes a slot any more, for as long as
/// the value is borrowed.
pub(crate) struct Ended<'a> {
    resumer: usize,
    _end: PhantomData<&'a ()>,
}

impl Ended<'_> {
    /// The end of `resumer` (nonzero: `None` for 0).
    ///
    /// # Safety
    ///
    /// Nothing `resumer` names, as slots were handed off to it ([`Owner::post`] names the
    /// QP, [`Owner::hand_off_to`] what its caller gives), resumes a slot any more, as long
    /// as the value lives.
    pub(crate) unsafe fn new(resumer: usize) -> Option<Self> {
        // INVARIANT: the caller's promise.
        (resumer != 0).then_some(Self {
            resumer,
            _end: PhantomData,
        })
    }
}

// SAFETY: the value moves with the slot.
unsafe impl<T: Send> Send for Slot<T> {}
// SAFETY: the value is reached through the one `Owner` only, which the state hands from
// one CPU to the next with release/acquire ordering (type invariant), as a lock would: a
// `T` that may move between CPUs may be shared this way.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T> Slot<T> {
    /// A free slot holding `value`.
    pub(crate) fn new(value: T) -> Self {
        // INVARIANT: nobody owns it.
        Self {
            value: UnsafeCell::new(value),
            state: AtomicU32::new(FREE),
            resumer: AtomicUsize::new(0),
        }
    }

    /// The offset of the value in the slot, for the owners of a C object embedded in it
    /// (`impl_has_request!`).
    pub(crate) const fn value_offset() -> usize {
        core::mem::offset_of!(Self, value)
    }

    /// Takes a free slot; `None` if it is owned or handed off.
    pub(crate) fn claim(&self) -> Option<Owner<'_, T>> {
        self.take(FREE)
    }

    /// Whether the slot is free now (a snapshot: [`Slot::claim`] decides), as a
    /// sequentially consistent load: a scan for a free slot that announced itself first
    /// (a waiter count, raised with a sequentially consistent read-modify-write) either
    /// sees a slot that [`Owner::free_seqcst`] freed, or that free's next load sees the
    /// announcement. (A plain load on x86.)
    #[inline]
    pub(crate) fn is_free_seqcst(&self) -> bool {
        self.state.load(SeqCst) == FREE
    }

    /// Takes the slot back from event `tag`, which gives it back: `None` unless the slot
    /// was handed off to that event (a second completion, or an event it does not wait
    /// for). A completion that comes while the post that handed the slot off to it has not
    /// returned waits for that post (a few instructions: the provider is done with the
    /// requests it completes, but may still walk the chain they are on).
    ///
    /// # Safety
    ///
    /// The caller is event `tag` of this slot: the completion trampoline of the entry whose
    /// requests [`Owner::post`] handed the slot to (`tag` is their [`Resumes`]'s), or, for
    /// [`CORE_TAG`], the nvmet core's answer for the request the slot holds. Until it gives
    /// the slot back, that event holds what the state lent it (buffers, a request) and
    /// nothing else may use the state.
    pub(crate) unsafe fn resume(&self, tag: Tag) -> Option<Owner<'_, T>> {
        self.resume_from(tag)
    }

    /// Takes the slot back from the user's list `tag` ([`Owner::hand_off`]): `None` unless
    /// it was parked there. Safe: a parked slot lends nothing to a device or a core.
    pub(crate) fn resume_local(&self, tag: Tag) -> Option<Owner<'_, T>> {
        self.resume_from(local(tag))
    }

    fn resume_from(&self, tag: Tag) -> Option<Owner<'_, T>> {
        loop {
            match self
                .state
                .compare_exchange(awaiting(tag), OWNED, Acquire, Relaxed)
            {
                // INVARIANT: `OWNED` from `awaiting(tag)`, with acquire: the only owner.
                Ok(_) => {
                    return Some(Owner {
                        slot: self,
                        _not_send: PhantomData,
                    })
                }
                Err(state) if state == posting(tag) || state == TAKING => {
                    kernel::processor::cpu_relax()
                }
                Err(_) => return None,
            }
        }
    }

    fn take(&self, from: u32) -> Option<Owner<'_, T>> {
        // INVARIANT: becomes `OWNED` (with acquire) only from `from`, when no owner
        // exists; the owner made here is the only one.
        self.state
            .compare_exchange(from, OWNED, Acquire, Relaxed)
            .ok()?;
        Some(Owner {
            slot: self,
            _not_send: PhantomData,
        })
    }

    /// Takes the slot back from what `ended` shows over, if the slot was handed off to it
    /// (`None` otherwise: it has an owner, is free, or waits for something else): for the
    /// end of its user, when what the slot waits for will never come (a completion the
    /// provider lost).
    pub(crate) fn take_after(&self, ended: &Ended<'_>) -> Option<Owner<'_, T>> {
        loop {
            let state = self.state.load(Relaxed);
            if state == TAKING || (state >= AWAITING_MIN && (state - AWAITING_MIN) % 2 == 1) {
                // A post that hands the slot off is returning, or another `take_after`
                // checks it: wait for them.
                kernel::processor::cpu_relax();
                continue;
            }
            if state < AWAITING_MIN {
                return None;
            }
            // Held while the hand-off's resumer is checked, so that no other hand-off can
            // replace it meanwhile (with acquire: the resumer written before it).
            if self
                .state
                .compare_exchange(state, TAKING, Acquire, Relaxed)
                .is_err()
            {
                continue;
            }
            if self.resumer.load(Relaxed) != ended.resumer {
                // Not what `ended` shows over: handed off as it was (resumes waited).
                self.state.store(state, Release);
                return None;
            }
            // INVARIANT: `OWNED` from a hand-off to what `ended` shows over, which will not
            // resume the slot nor use its state any more: this owner is the only one, and
            // the only user.
            self.state.store(OWNED, Relaxed);
            return Some(Owner {
                slot: self,
                _not_send: PhantomData,
            });
        }
    }

    /// The state, for [`Owner::post`] to prepare requests from (`rdma/slot_post.rs`):
    /// reached only through the slot's owner (type invariant), which the caller holds.
    pub(in crate::rdma) fn state_ptr(&self) -> *mut T {
        self.value.get()
    }

    /// Ends a post that [`Owner::start_posting`] started, with something queued: the slot
    /// now waits for event `tag`.
    ///
    /// # Safety
    ///
    /// The caller started the post, with `tag`, and has not ended it.
    pub(in crate::rdma) unsafe fn posted(&self, tag: Tag) {
        // INVARIANT: handed off to `tag`, with release.
        self.state.store(awaiting(tag), Release);
    }

    /// Ends a post that [`Owner::start_posting`] started, with nothing queued: the owner
    /// comes back.
    ///
    /// # Safety
    ///
    /// The caller started the post and has not ended it, and nothing was queued, so no
    /// event will resume the slot.
    pub(in crate::rdma) unsafe fn post_refused(&self) -> Owner<'_, T> {
        // INVARIANT: nothing was posted and nobody took the slot while it was posting: the
        // owner comes back.
        self.state.store(OWNED, Relaxed);
        Owner {
            slot: self,
            _not_send: PhantomData,
        }
    }

    /// Whether the slot is parked on the user's list `tag` (a snapshot, for diagnostics).
    pub(crate) fn is_parked(&self, tag: Tag) -> bool {
        self.state.load(Relaxed) == awaiting(local(tag))
    }

    /// Where the slot is now (a snapshot, for statistics: it may have moved on by the
    /// time it is looked at). Only a load: nothing on the slot's path pays for it.
    pub(crate) fn phase(&self) -> SlotPhase {
        match self.state.load(Relaxed) {
            FREE => SlotPhase::Free,
            state if state >= AWAITING_MIN && state != TAKING => {
                // (`posting(tag)` counts as waiting for `tag`: the post is returning)
                let tag = ((state - AWAITING_MIN) / 2) as Tag;
                if tag & LOCAL_TAGS != 0 {
                    SlotPhase::Parked(tag & !LOCAL_TAGS)
                } else {
                    SlotPhase::Awaits(tag)
                }
            }
            _ => SlotPhase::Owned,
        }
    }

    /// The value, through the slot's only reference.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The one user of a [`Slot`]'s state: dropping it frees the slot, handing it off passes
/// the slot to an event.
///
/// # Invariants
///
/// `slot`'s state is `OWNED`, and this is its only owner.
pub(crate) struct Owner<'a, T> {
    slot: &'a Slot<T>,
    // (an owner stays with the step that holds it; the slot passes between CPUs through
    // its state)
    _not_send: PhantomData<*mut ()>,
}

impl<'a, T> Owner<'a, T> {
    /// The slot this owner uses.
    pub(crate) fn slot(&self) -> &'a Slot<T> {
        self.slot
    }

    /// Parks the slot on the user's list `tag` (its low seven bits): from now on only
    /// [`Slot::resume_local`] with that tag reaches the state. No [`Ended`] takes it back.
    pub(crate) fn hand_off(self, tag: Tag) {
        // (0 names nothing an `Ended` shows over)
        self.hand_off_with(local(tag), 0);
    }

    /// Hands the slot off to the layers' event `tag`, which resumes it with
    /// [`Slot::resume`].
    ///
    /// # Safety
    ///
    /// `tag` is below [`LOCAL_TAGS`], and the event it names will resume the slot (or
    /// nothing will: the slot then stays taken).
    pub(crate) unsafe fn hand_off_to_event(self, tag: Tag) {
        self.hand_off_with(tag, 0);
    }

    /// As [`Owner::hand_off`], to event `tag` of `resumer` (as an [`Ended`] names it): a
    /// slot it never resumes is taken back once it is over ([`Slot::take_after`]). (For
    /// the KUnit suites; the layer's own hand-offs name their resumer in [`Owner::post`].)
    ///
    /// # Safety
    ///
    /// Until the slot is resumed, only `resumer` uses what the state lends it (a request
    /// the state holds, memory it points to): once an [`Ended`] shows `resumer` over,
    /// nothing does.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) unsafe fn hand_off_to(self, tag: Tag, resumer: usize) {
        self.hand_off_with(local(tag), resumer);
    }

    /// Starts handing the slot off to event `tag` of `resumer` with a post that has not
    /// returned yet: the event's resume waits until [`Slot::posted`] or
    /// [`Slot::post_refused`] ends the post (the layer's [`Owner::post`], in
    /// `rdma/slot_post.rs`). Returns the slot, whose state the post may still read.
    ///
    /// # Safety
    ///
    /// `tag` is below [`LOCAL_TAGS`] and names the event that will resume the slot;
    /// `resumer` is what delivers that event, as an [`Ended`] names it. The caller ends the
    /// post with one of the two calls above, and reaches the state meanwhile only to post
    /// what it prepared from it before this call.
    pub(in crate::rdma) unsafe fn start_posting(self, tag: Tag, resumer: usize) -> &'a Slot<T> {
        let slot = self.slot;
        core::mem::forget(self);
        slot.resumer.store(resumer, Relaxed);
        // INVARIANT: the owner is gone, with release; the completion of `tag` waits until
        // the post returned (`resume`), nothing else takes the slot.
        slot.state.store(posting(tag), Release);
        slot
    }

    /// Hands the slot off to event `tag`, naming `resumer` as what resumes it (0: what no
    /// `Ended` covers; otherwise the promise of [`Owner::hand_off_to`]'s caller).
    fn hand_off_with(self, tag: Tag, resumer: usize) {
        let slot = self.slot;
        core::mem::forget(self);
        slot.resumer.store(resumer, Relaxed);
        // INVARIANT: the owner is gone (not dropped: the slot stays taken), with release;
        // `resumer` is written before.
        slot.state.store(awaiting(tag), Release);
    }
}

impl<T> Owner<'_, T> {
    /// Frees the slot, as dropping the owner does, but with a sequentially consistent
    /// exchange: a load the caller makes after it (of a waiter count) is ordered after the
    /// free, against a scan that raised that count before its loads
    /// ([`Slot::is_free_seqcst`]). (One `xchg` on x86, where the drop is a plain store.)
    #[inline]
    pub(crate) fn free_seqcst(self) {
        let slot = self.slot;
        core::mem::forget(self);
        // INVARIANT: the owner is gone, with release (and more). (Nothing else changes an
        // owned slot's state.)
        let was = slot.state.swap(FREE, SeqCst);
        debug_assert_eq!(was, OWNED);
    }
}

impl<T> Deref for Owner<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this is the slot's only owner (type invariant).
        unsafe { &*self.slot.value.get() }
    }
}

impl<T> DerefMut for Owner<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this is the slot's only owner (type invariant).
        unsafe { &mut *self.slot.value.get() }
    }
}

impl<T> Drop for Owner<'_, T> {
    fn drop(&mut self) {
        // INVARIANT: the owner is gone, with release.
        self.slot.state.store(FREE, Release);
    }
}
