// SPDX-License-Identifier: GPL-2.0

//! A slot's state, passed between the steps of the work it holds: one [`Owner`] at a time,
//! handed off to the device or to a kernel core while they hold the work, and resumed by
//! the event that gives it back.
//!
//! A transport's command slot is used by one step at a time: the step that took it from
//! the free list, then the completion of the work request it posted, then the core that
//! executed its request, and so on. Which step runs next is decided by the hardware and
//! by the kernel's cores, not by a lock. [`Slot`] makes that order a value: the state is
//! reached only through the slot's one [`Owner`]; a step that hands the slot to an
//! event ([`Owner::hand_off`], [`Owner::post`]) gives its owner up, and the event's
//! handler gets it back with [`Slot::resume`] for that event alone. A second completion of
//! one work request, or an event the slot does not wait for, finds no owner to resume.
//!
//! ```ignore
//! let owner = slot.claim().ok_or(EBUSY)?;       // off the free list
//! owner.post(SEND, |state| state.send.prepare())?; // the SEND's completion resumes it
//! // ... in the SEND's completion handler:
//! let Some(owner) = slot.resume(SEND) else { return }; // a second completion: ignored
//! drop(owner);                                   // free again
//! ```

use super::{bindings, qp_handle::QpHandle};
use core::{
    cell::UnsafeCell,
    marker::PhantomData,
    ops::{Deref, DerefMut},
};
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
};

/// Nobody owns the slot: [`Slot::claim`] takes it.
const FREE: u32 = 0;
/// An [`Owner`] exists.
const OWNED: u32 = 1;
/// Handed off to event `tag`: `AWAITING + tag`.
const AWAITING: u32 = 2;

/// What a handed-off slot waits for: a kind of completion, a core's answer, a list. Each
/// user of [`Slot`] names its own.
pub(crate) type Tag = u8;

const fn awaiting(tag: Tag) -> u32 {
    AWAITING + tag as u32
}

/// A state `T` that one [`Owner`] at a time uses.
///
/// # Invariants
///
/// `state` is `OWNED` exactly while one `Owner` of this slot exists, and only an `Owner`
/// reaches `value` (or `&mut self`); `FREE` or `AWAITING + tag` otherwise. Every change
/// from `OWNED` is a release, and every change to `OWNED` an acquire, so that each owner
/// sees what the previous one wrote.
#[repr(C)]
pub(crate) struct Slot<T> {
    value: UnsafeCell<T>,
    state: Atomic<u32>,
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
            state: Atomic::new(FREE),
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

    /// Takes the slot back from event `tag`, which gives it back: `None` unless the slot
    /// was handed off to that event (a second completion, or an event it does not wait
    /// for).
    pub(crate) fn resume(&self, tag: Tag) -> Option<Owner<'_, T>> {
        self.take(awaiting(tag))
    }

    fn take(&self, from: u32) -> Option<Owner<'_, T>> {
        // INVARIANT: becomes `OWNED` (with acquire) only from `from`, when no owner
        // exists; the owner made here is the only one.
        self.state.cmpxchg(from, OWNED, Acquire).ok()?;
        Some(Owner {
            slot: self,
            _not_send: PhantomData,
        })
    }

    /// Whether the slot is handed off to event `tag` (a snapshot, for diagnostics).
    pub(crate) fn is_awaiting(&self, tag: Tag) -> bool {
        self.state.load(Relaxed) == awaiting(tag)
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

    /// Hands the slot off to event `tag` (a core the step handed its work to, a list it
    /// waits on): from now on only [`Slot::resume`] with that tag reaches the state.
    pub(crate) fn hand_off(self, tag: Tag) {
        let slot = self.slot;
        core::mem::forget(self);
        // INVARIANT: the owner is gone (not dropped: the slot stays taken), with release.
        slot.state.store(awaiting(tag), Release);
    }

    /// Posts the send work requests `prepare` takes from the state, and hands the slot off
    /// to `tag`, the completion of the one that is signaled. On failure (the requests could
    /// not be prepared or posted), the owner comes back with the error: nothing was
    /// posted, or a failed chain left part of it posted, which only its QP's drain
    /// completes.
    pub(crate) fn post(
        self,
        tag: Tag,
        prepare: impl for<'b> FnOnce(&'b mut T) -> Result<Prepared<'b>>,
    ) -> Result<(), (Error, Self)> {
        let slot = self.slot;
        // SAFETY: this is the slot's only owner (type invariant).
        let prepared = match prepare(unsafe { &mut *slot.value.get() }) {
            Ok(prepared) => prepared,
            Err(e) => return Err((e, self)),
        };
        let (first, qp) = (prepared.first, prepared.qp);
        core::mem::forget(self);
        // INVARIANT: the owner is gone, with release; only the completion of `tag` takes
        // the slot back, and not before the device completed what is posted now.
        slot.state.store(awaiting(tag), Release);
        // SAFETY: `first` heads requests prepared from the state (`Prepared`), which stays
        // in place with the slot: the provider reads them before it returns, and only a
        // completion of what it posts can resume the slot and change them. Their
        // completion entries and buffers outlive them (`SendWr::new`'s and
        // `RwCtx::set_completions`' promises).
        match unsafe { qp.post_send_raw(first) } {
            Ok(()) => Ok(()),
            Err(e) => match slot.resume(tag) {
                // (the first request was refused: none of the chain is posted)
                Some(owner) => Err((e, owner)),
                // A completion of what was posted took the slot first (a chain refused
                // past its first request): it handles the slot now.
                None => Ok(()),
            },
        }
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

/// Send work requests ready to post, taken from a slot's state
/// ([`super::qp_handle::SendWr::prepare`], [`super::rw::RwCtx::prepare`]): posted by
/// [`Owner::post`], which hands the slot off first.
///
/// # Invariants
///
/// `first` heads a chain of valid send work requests for `qp`, which live in (or are
/// owned by) what `'a` borrows.
pub(crate) struct Prepared<'a> {
    first: *const bindings::ib_send_wr,
    qp: QpHandle,
    _state: PhantomData<&'a mut ()>,
}

impl Prepared<'_> {
    /// Requests headed by `first`, for `qp`.
    ///
    /// # Safety
    ///
    /// As the type's invariants say.
    pub(super) unsafe fn new(first: *const bindings::ib_send_wr, qp: QpHandle) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            first,
            qp,
            _state: PhantomData,
        }
    }
}
