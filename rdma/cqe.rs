// SPDX-License-Identifier: GPL-2.0

//! Completion entries (`struct ib_cqe`) embedded in the object a work request belongs to,
//! whose completions run that object's safe handler.
//!
//! The step from the `ib_cqe` a completion names back to the object that embeds it
//! (`container_of`) is written once, here, the way `kernel::workqueue` does it for work
//! items: an object embeds a [`Cqe<Self, ID>`], declares the field with
//! [`impl_has_cqe!`], and implements [`CqeHandler<ID>`]; an object with several kinds of
//! work requests embeds one `Cqe` per kind, told apart by `ID`. The data path's entries get
//! the connection too (the handler of the [`super::CmId`] whose QP the request completed
//! on, found here as well: an object that does not hold its connection, like an SRQ's
//! receive slot, serves several). An object
//! whose state lives in a [`Slot`] handed to the device by [`super::slot_post::Owner::post`]
//! ([`HasSlot`]) embeds [`SlotCqe<Self, ID>`]s instead and implements
//! [`QpSlotHandler<ID>`]: the trampoline resumes the slot and passes its owner to the
//! handler, the only way back from the device. A receive's entry is a [`RecvCqe`], whose
//! trampoline gives the receive's buffers back as a token ([`Received`]) to the object's
//! [`QpRecvHandler`]: the token posts the receive again (see `recv`). The three kinds of
//! entries are types of their own, so that a receive, or a handler of another connection
//! type, can never be bound to an entry whose trampoline resumes a slot.

use super::{
    bindings,
    kernel_gaps::slot::{Owner, Slot},
    CmHandler, CmId, WorkCompletion,
};
use core::{marker::PhantomData, ptr};
use kernel::{prelude::*, sync::ArcBorrow, types::Opaque};

mod recv;

// (Not every module posts receives.)
#[allow(unused_imports)]
pub(crate) use recv::{impl_has_recv_cqe, HasRecvCqe, QpRecvHandler, Received, RecvCqe, RecvState};

/// The handler of the completions of the work requests that carry an object's
/// [`Cqe<Self, ID>`].
pub(crate) trait CqeHandler<const ID: u64 = 0> {
    /// A work request that carried the object's `Cqe<Self, ID>` completed with `wc`.
    /// Runs in the CQ's poll context.
    fn done(&self, wc: &WorkCompletion);
}

/// The handler of the completions of the work requests that carry an object's
/// [`SlotCqe<Self, ID>`]: requests posted from the object's slot
/// ([`super::slot_post::Owner::post`]) on the QPs of `CmId<Self::Connection>`s.
pub(crate) trait QpSlotHandler<const ID: u64 = 0>: HasSlot {
    /// The CM handler of the ids on whose QPs the requests are posted.
    type Connection: CmHandler;

    /// A work request that carried the object's `Cqe<Self, ID>` completed with `wc` on a
    /// QP of `connection`: `owner` is the object's slot, resumed from that completion, or
    /// `None` if the slot did not wait for it (a provider's second completion of one
    /// request). Runs in the CQ's poll context.
    fn done(
        &self,
        connection: ArcBorrow<'_, Self::Connection>,
        owner: Option<Owner<'_, Self::State>>,
        wc: &WorkCompletion,
    );
}

/// An object that embeds a [`Slot`]; implemented with [`impl_has_slot!`] (or
/// `impl_has_request!`).
///
/// (A safe trait: the layer resumes only a slot that [`placed_slot`] found at
/// `SLOT_OFFSET` from its object, and resumes it for that object's events only if it finds
/// it there again: an implementation that says otherwise has its slots refused.)
pub(crate) trait HasSlot {
    /// The slot's state.
    type State;
    /// Where [`HasSlot::slot`] is, from the start of the object: the offset of the field.
    const SLOT_OFFSET: usize;

    /// The object's slot.
    fn slot(&self) -> &Slot<Self::State>;
}

/// `object`'s slot, if [`HasSlot::slot`] returns one at `S::SLOT_OFFSET` from `object`;
/// `None` otherwise, with one log line. The slot is borrowed from the object, so the one
/// found at that address lives there, in place, as long as the object: the layer checks
/// where it binds the object's requests to the slot ([`super::slot_post::Resumes::of`]) and
/// again where their completion resumes it, and so resumes the slot it bound.
pub(crate) fn placed_slot<S: HasSlot>(object: &S) -> Option<&Slot<S::State>> {
    let slot = object.slot();
    if !is_at(object, S::SLOT_OFFSET, slot) {
        pr_warn!("an object's slot is not where its type says; refused\n");
        return None;
    }
    Some(slot)
}

/// Whether `field` is at `offset` from the start of `object`: the check that makes the
/// layer's `Has*` declaration traits safe (an implementation that says otherwise has its
/// fields refused where the layer would use the offset).
pub(super) fn is_at<O, F>(object: &O, offset: usize, field: &F) -> bool {
    ptr::from_ref(object).addr().checked_add(offset) == Some(ptr::from_ref(field).addr())
}

/// An object that embeds a [`Cqe<Self, ID>`]; implemented with [`impl_has_cqe!`].
///
/// (A safe trait: a work request carries only an entry that [`Cqe::placed`] found at
/// `OFFSET` from its object, which is where the completion's trampoline takes the object
/// from: an implementation that says otherwise has its entries refused.)
pub(crate) trait HasCqe<const ID: u64 = 0> {
    /// Where [`HasCqe::entry`] is, from the start of the object: the offset of the field.
    const OFFSET: usize;

    /// The object's entry for handler `ID`.
    fn entry(&self) -> &Cqe<Self, ID>
    where
        Self: Sized;
}

/// An `ib_cqe` embedded in a `T`: the completions of the work requests that carry it run
/// `T`'s [`CqeHandler<ID>`].
///
/// Whoever posts a work request with [`Cqe::as_raw`] as its `wr_cqe` uses an entry that
/// [`Cqe::placed`] returned for a `T` (at `T::OFFSET` from it), and keeps the `T` alive and
/// in place until the request's completion has run (or the QP is drained). (A receive's
/// entry, [`RecvCqe`], embeds one with a trampoline of its own.)
///
/// # Invariants
///
/// `cqe.done` is [`Cqe::run`] for this `T` and `ID`, or, for the entry of a
/// [`RecvCqe<T, ID>`] (made by [`RecvCqe::new`] only), that receive entry's trampoline.
#[repr(transparent)]
pub(crate) struct Cqe<T, const ID: u64 = 0> {
    cqe: Opaque<bindings::ib_cqe>,
    _owner: PhantomData<fn(&T)>,
}

// SAFETY: the entry holds only a function pointer, written once at creation; the RDMA
// core reads it from any CPU.
unsafe impl<T, const ID: u64> Send for Cqe<T, ID> {}
// SAFETY: as above.
unsafe impl<T, const ID: u64> Sync for Cqe<T, ID> {}

impl<T, const ID: u64> Cqe<T, ID> {
    /// The entry, for a work request's `wr_cqe` (see the type's documentation).
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_cqe {
        self.cqe.get()
    }

    /// The owner of the entry a completion names.
    ///
    /// # Safety
    ///
    /// `wc` is a valid completion of a request that carried a `Cqe<T, ID>` at `T::OFFSET`
    /// from a live `T` ([`Cqe::placed`]), which stays alive for `'a`.
    unsafe fn owner<'a>(wc: *mut bindings::ib_wc) -> &'a T
    where
        T: HasCqe<ID>,
    {
        // SAFETY: every work request that reaches a `Cqe`'s callback was posted with a
        // `wr_cqe`, this entry, at `T::OFFSET` from a live `T` (the function's safety
        // section); `Cqe` and `Opaque` are transparent. (Wrapping: only the address is
        // computed, which is the `T`'s.)
        unsafe {
            let cqe = (*wc).__bindgen_anon_1.wr_cqe;
            &*cqe.wrapping_byte_sub(T::OFFSET).cast::<T>()
        }
    }
}

impl<T: HasCqe<ID>, const ID: u64> Cqe<T, ID> {
    /// `owner`'s entry `ID`, for the work requests bound to it
    /// ([`super::qp_handle::BoundRequest`]): the one [`HasCqe::entry`] returns, if it is at
    /// `T::OFFSET` from `owner`, where the completion's trampoline takes the owner from
    /// (`EINVAL` otherwise, with one log line). It is borrowed from `owner`, so it lives, in
    /// place, as long as `owner` does.
    pub(crate) fn placed(owner: &T) -> Result<&Self> {
        let entry = owner.entry();
        if !is_at(owner, T::OFFSET, entry) {
            pr_warn!("an object's completion entry is not where its type says; refused\n");
            return Err(EINVAL);
        }
        Ok(entry)
    }
}

impl<T: HasCqe<ID> + CqeHandler<ID>, const ID: u64> Cqe<T, ID> {
    /// An entry whose completions run `T`'s handler `ID`.
    pub(crate) fn new() -> Self {
        // INVARIANT: `done` is `run` for `T` and `ID`.
        Self {
            cqe: Opaque::new(bindings::ib_cqe {
                done: Some(Self::run),
            }),
            _owner: PhantomData,
        }
    }

    /// The completion callback the RDMA core calls.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with the CQ it polled (or null) and a valid completion, both
    /// valid for the call, whose `wr_cqe` is the entry of a
    /// `Cqe<T, ID>` (its `done` is this function: type invariant), whose `T` is alive (the
    /// poster's promise, see the type's documentation).
    unsafe extern "C" fn run(cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
        // SAFETY: the core passes a valid completion for the duration of the call, of a
        // request that carried this entry, whose `T` is alive (the function's safety
        // section).
        let (owner, wc) = unsafe { (Self::owner(wc), &*wc) };
        // SAFETY: the CQ is null or valid for the call (the function's safety section).
        let wc = unsafe { WorkCompletion::from_polled(cq, wc) };
        owner.done(&wc);
    }
}

/// An object that embeds a [`SlotCqe<Self, ID>`]; implemented with
/// [`impl_has_slot_cqe!`].
///
/// (A safe trait, as [`HasCqe`]: a work request carries only an entry that
/// [`SlotCqe::placed`] found at `OFFSET` from its object.)
pub(crate) trait HasSlotCqe<const ID: u64 = 0>: HasSlot {
    /// Where [`HasSlotCqe::slot_entry`] is, from the start of the object: the offset of
    /// the field.
    const OFFSET: usize;

    /// The object's resuming entry for handler `ID`.
    fn slot_entry(&self) -> &SlotCqe<Self, ID>
    where
        Self: Sized;
}

/// An `ib_cqe` embedded in a `T` whose completions resume `T`'s [`Slot`] and run `T`'s
/// [`QpSlotHandler<ID>`] with the slot's owner: the entry of the send requests a slot
/// posts ([`super::slot_post::Owner::post`]).
///
/// A type of its own, not a [`Cqe`]: the layer binds it only to send requests posted from
/// the slot (`CmId::send_wr`, `CmId::rw_binding`, which take `S: HasSlotCqe<ID>`), never
/// to a receive, whose completion would resume the slot while its posted requests are in
/// flight; and its trampoline's connection is the one those bindings checked
/// (`QpSlotHandler::Connection`).
///
/// # Invariants
///
/// `cqe.done` is [`SlotCqe::run`] for this `T` and `ID`.
#[repr(transparent)]
pub(crate) struct SlotCqe<T, const ID: u64 = 0> {
    cqe: Opaque<bindings::ib_cqe>,
    _owner: PhantomData<fn(&T)>,
}

// SAFETY: the entry holds only a function pointer, written once at creation; the RDMA
// core reads it from any CPU.
unsafe impl<T, const ID: u64> Send for SlotCqe<T, ID> {}
// SAFETY: as above.
unsafe impl<T, const ID: u64> Sync for SlotCqe<T, ID> {}

impl<T, const ID: u64> SlotCqe<T, ID> {
    /// The entry, for a work request's `wr_cqe`.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_cqe {
        self.cqe.get()
    }
}

impl<T: HasSlotCqe<ID>, const ID: u64> SlotCqe<T, ID> {
    /// `owner`'s resuming entry `ID`, for the send requests bound to it: the one
    /// [`HasSlotCqe::slot_entry`] returns, if it is at `T::OFFSET` from `owner`, where the
    /// trampoline takes the owner from (`EINVAL` otherwise, with one log line).
    pub(crate) fn placed(owner: &T) -> Result<&Self> {
        let entry = owner.slot_entry();
        if !is_at(owner, <T as HasSlotCqe<ID>>::OFFSET, entry) {
            pr_warn!("an object's completion entry is not where its type says; refused\n");
            return Err(EINVAL);
        }
        Ok(entry)
    }
}

impl<T: HasSlotCqe<ID> + QpSlotHandler<ID>, const ID: u64> SlotCqe<T, ID> {
    /// An entry whose completions resume `T`'s slot and run `T`'s handler `ID`.
    pub(crate) fn new() -> Self {
        const { assert!(ID <= super::kernel_gaps::slot::MAX_COMPLETION_TAG) };
        // INVARIANT: `done` is `run` for `T` and `ID`.
        Self {
            cqe: Opaque::new(bindings::ib_cqe {
                done: Some(Self::run),
            }),
            _owner: PhantomData,
        }
    }

    /// The completion callback the RDMA core calls.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with the CQ it polled (or null) and a valid completion, both
    /// valid for the call, whose `wr_cqe` is the entry of a
    /// `SlotCqe<T, ID>` (its `done` is this function: type invariant) at `T::OFFSET` from a
    /// live `T` ([`SlotCqe::placed`]). The
    /// layer binds such entries only to send requests posted from `T`'s slot on the QP of a
    /// `CmId<T::Connection>` (`CmId::send_wr`, `CmId::rw_binding`), which keeps `T` alive
    /// and drains the QP (running this completion first) before it lets its handler go.
    unsafe extern "C" fn run(cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
        // SAFETY: the core passes a valid completion for the call; its entry is at
        // `OFFSET` from a live `T` (the function's safety section); `SlotCqe` and `Opaque`
        // are transparent. (Wrapping: only the address is computed, which is the `T`'s.)
        let (object, wc) = unsafe {
            let cqe = (*wc).__bindgen_anon_1.wr_cqe;
            (
                &*cqe
                    .wrapping_byte_sub(<T as HasSlotCqe<ID>>::OFFSET)
                    .cast::<T>(),
                &*wc,
            )
        };
        if wc.qp.is_null() {
            // (rxe and siw name the QP on every completion, flushes included)
            pr_warn!("a work completion names no QP; its handler does not run\n");
            return;
        }
        // SAFETY: the QP is a `CmId<T::Connection>`'s, alive with its handler while its
        // completions run (the function's safety section).
        let connection = unsafe { CmId::<T::Connection>::handler_of_qp(wc.qp) };
        // (`None`, with one log line, if the object's slot is not where its type says:
        // then no post handed it off to this completion.)
        let owner = placed_slot(object).and_then(|slot| {
            // SAFETY: this is the completion of a send request that carried the object's
            // entry `ID`, which only requests posted from its slot carry (the function's
            // safety section), with `Resumes::of::<T, ID>` (tag `ID`): the event the post
            // waits for, which names the slot at `SLOT_OFFSET` from the object, this one
            // (`placed_slot` found it there then and now; borrowed from the object, it is
            // the same slot). Its requests are done (a send queue completes in order, and
            // the entry is on the chain's last request).
            unsafe { slot.resume(ID as super::kernel_gaps::slot::Tag) }
        });
        // SAFETY: the CQ is null or valid for the call (the function's safety section).
        let wc = unsafe { WorkCompletion::from_polled(cq, wc) };
        object.done(connection, owner, &wc);
    }
}

/// Declares that an object embeds a [`SlotCqe`] in the named field, for handler `ID`.
///
/// ```ignore
/// impl_has_slot_cqe!(RspSlot, send_cqe, 0);
/// ```
// (Not every module embeds slots.)
#[allow(unused_macros)]
macro_rules! impl_has_slot_cqe {
    ($owner:ty, $field:ident, $id:literal) => {
        impl $crate::rdma::cqe::HasSlotCqe<$id> for $owner {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(&$owner) -> *const $crate::rdma::cqe::SlotCqe<$owner, $id> =
                    |owner| &raw const owner.$field;
                ::core::mem::offset_of!($owner, $field)
            };

            fn slot_entry(&self) -> &$crate::rdma::cqe::SlotCqe<$owner, $id> {
                &self.$field
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_has_slot_cqe;

/// Declares that an object embeds a [`Slot`] in the named field.
///
/// ```ignore
/// impl_has_slot!(RspSlot, state: RspState);
/// ```
// (Not every module embeds slots.)
#[allow(unused_macros)]
macro_rules! impl_has_slot {
    ($owner:ty, $field:ident: $state:ty) => {
        impl $crate::rdma::cqe::HasSlot for $owner {
            type State = $state;
            const SLOT_OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(&$owner) -> *const $crate::rdma::kernel_gaps::slot::Slot<$state> =
                    |owner| &raw const owner.$field;
                ::core::mem::offset_of!($owner, $field)
            };

            fn slot(&self) -> &$crate::rdma::kernel_gaps::slot::Slot<$state> {
                &self.$field
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_has_slot;

/// Declares that an object embeds a [`Cqe`] in the named field, for handler `ID` (0 if
/// left out).
///
/// ```ignore
/// impl_has_cqe!(CmdSlot, cqe);
/// impl_has_cqe!(RspSlot, read_cqe, 1);
/// ```
// (Not every module embeds completion entries.)
#[allow(unused_macros)]
macro_rules! impl_has_cqe {
    ($owner:ty, $field:ident) => {
        $crate::rdma::cqe::impl_has_cqe!($owner, $field, 0);
    };
    ($owner:ty, $field:ident, $id:literal) => {
        impl $crate::rdma::cqe::HasCqe<$id> for $owner {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(&$owner) -> *const $crate::rdma::cqe::Cqe<$owner, $id> =
                    |owner| &raw const owner.$field;
                ::core::mem::offset_of!($owner, $field)
            };

            fn entry(&self) -> &$crate::rdma::cqe::Cqe<$owner, $id> {
                &self.$field
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_has_cqe;
