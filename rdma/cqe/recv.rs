// SPDX-License-Identifier: GPL-2.0

//! Receive entries: the completion entry of a receive, with the receive's state, whose
//! completions give the receive's buffers back as a token ([`Received`]).
//!
//! A posted receive lends its buffers to the device, which writes into them at any time
//! until the receive completes. What the completion delivered (a command capsule, its
//! in-capsule data) is then read by the CPU, by a kernel core the transport hands it to,
//! or by a bio, until the transport is done with it and posts the receive again. The
//! receive's [`RecvWr`](super::super::qp_handle::RecvWr) makes that a value: posting it
//! ([`QpHandle::post_recv`](super::super::qp_handle::QpHandle::post_recv),
//! [`Srq::post`](super::super::Srq::post)) takes the receive's [`Received`] by value, and
//! only the receive's completion gives one back: the layer's trampoline of its entry
//! ([`RecvCqe`]) mints it and passes it to the object's [`QpRecvHandler`]. The first one
//! comes with the `RecvWr` itself, for its first post. So while some code holds the token
//! (or its user still reads what the receive delivered, and keeps the token until it is
//! done), the receive is not posted, and its buffers are not the device's.
//!
//! ```ignore
//! let (wr, received) = id.recv_wr(|queue| ...)?; // the first token
//! qp.post_recv(&wr, received).map_err(|(e, _)| e)?;
//! // ... the entry's `QpRecvHandler::done` gets `Some(received)`, which the user keeps
//! // until it is done with the buffers, then posts again: `qp.post_recv(&wr, received)`.
//! ```
//!
//! A receive's state is an atomic word beside its entry: `UNBOUND` until its one
//! `RecvWr` is made (an entry is bound to one receive only: a second `recv_wr` for it is
//! `EBUSY`), then the receive's identity, unique for the module's life, and whether the
//! receive is posted. A post checks the token's identity against it and marks it posted
//! (a load and a store: only the token's holder posts); a completion clears the mark and mints the token (one exchange): a
//! provider's second completion of one receive finds it not posted and mints nothing.
//! (Like a slot's state, it cannot tell a second completion of one post that comes after
//! the next post from that post's own completion: providers complete twice only when a
//! QP is flushed, and the flush completes every receive once more at most.)

use super::Cqe;
use crate::rdma::{bindings, CmHandler, CmId, WorkCompletion};
use core::{
    marker::PhantomData,
    num::NonZeroU64,
    sync::atomic::{
        AtomicU64,
        Ordering::{AcqRel, Relaxed, Release},
    },
};
use kernel::{prelude::*, sync::ArcBorrow, types::Opaque};

/// The state of a receive whose `RecvWr` is not made yet.
const UNBOUND: u64 = 0;
/// The bit set in a bound receive's state while it is posted.
const POSTED: u64 = 1;

/// The identity of the next receive bound (`core` atomic: see `rdma/kernel_gaps/slot.rs`).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The buffers of a receive, given back by its completion: the receive is not posted
/// while this token exists. Posting the receive again takes it by value.
///
/// Neither `Clone` nor `Copy`, its field private: only the layer mints one, when a
/// receive's `RecvWr` is made (for its first post) and in the trampoline of the receive's
/// completion. Dropping it leaves the receive unposted for good.
///
/// # Invariants
///
/// At most one `Received` of identity `id` exists, and while it does, the state of the
/// receive of that identity is `id << 1` (bound, not posted).
pub(crate) struct Received {
    id: NonZeroU64,
}

impl Received {
    /// The receive's state word for this token: bound, not posted.
    fn unposted(&self) -> u64 {
        self.id.get() << 1
    }
}

/// The state of one receive, beside its completion entry.
///
/// (Its safe methods are the crate's, for the KUnit suite: the state of a receive's entry
/// is reached only in this layer, [`RecvCqe::state`], and what code elsewhere can do with a
/// state of its own gives no receive's buffers back. Minting a token outside a
/// completion is `unsafe`.)
///
/// # Invariants
///
/// `state` is [`UNBOUND`] until [`RecvState::bind`] gave it an identity `id` (nonzero,
/// below `1 << 63`, and no other receive's); from then on it is `id << 1` (the receive's
/// buffers are the CPU's: its [`Received`] exists, or was dropped) or `id << 1 | POSTED`
/// (lent to the device: no `Received` of `id` exists).
pub(crate) struct RecvState {
    state: AtomicU64,
}

impl RecvState {
    /// The state of a receive not bound to a request yet.
    pub(crate) const fn new() -> Self {
        // INVARIANT: unbound.
        Self {
            state: AtomicU64::new(UNBOUND),
        }
    }

    /// Gives the receive its identity, once: its first token, for its first post.
    /// `EBUSY` if it has one already (the entry is bound to another `RecvWr`).
    pub(crate) fn bind(&self) -> Result<Received> {
        let id = NEXT_ID.fetch_add(1, Relaxed);
        // (2^63 receives are not made in a module's life; refused rather than wrapped)
        let id = NonZeroU64::new(id)
            .filter(|id| id.get() < 1 << 63)
            .ok_or(EBUSY)?;
        let received = Received { id };
        // INVARIANT: bound to a new identity, not posted; its one token is made here.
        self.state
            .compare_exchange(UNBOUND, received.unposted(), Relaxed, Relaxed)
            .map_err(|_| EBUSY)?;
        Ok(received)
    }

    /// Lends the receive's buffers to the device for a post of its request: `received`
    /// must be this receive's token (given back otherwise, with one log line). The
    /// receive is marked posted before the post, so that a completion that comes before the
    /// post returned finds it so. The receive's identity, for [`RecvState::refused`].
    pub(crate) fn to_device(&self, received: Received) -> Result<NonZeroU64, Received> {
        let unposted = received.unposted();
        // A load and a store, not an exchange: while this receive's token exists the
        // receive is not posted and only the token's holder posts it; the one other writer,
        // a completion, changes only a posted receive's state (a second completion of an
        // unposted one writes back what it read).
        if self.state.load(Relaxed) != unposted {
            pr_warn!("a receive is posted with another receive's token; refused\n");
            return Err(received);
        }
        // INVARIANT: the token is consumed as the receive is marked posted (with release:
        // the CPU's reads of the buffers come before).
        self.state.store(unposted | POSTED, Release);
        Ok(received.id)
    }

    /// The post that [`RecvState::to_device`] (which gave `id`) prepared posted nothing:
    /// the buffers are the CPU's again, and their token comes back.
    ///
    /// # Safety
    ///
    /// `id` is what `to_device` returned for this receive, and the provider refused the
    /// receive's post (nothing of it was queued, so no completion of it comes).
    pub(crate) unsafe fn refused(&self, id: NonZeroU64) -> Received {
        let received = Received { id };
        // INVARIANT: not posted again, with its one token.
        self.state.store(received.unposted(), Release);
        received
    }

    /// The receive completed: its token, or `None` if it was not posted (a provider's
    /// second completion of one receive).
    ///
    /// # Safety
    ///
    /// The caller is the completion of a receive posted with this state (the trampoline of
    /// its entry): from now on the device writes nothing into its buffers.
    pub(crate) unsafe fn completed(&self) -> Option<Received> {
        // INVARIANT: not posted from now on; a token is made only if it was posted, so it
        // is the only one.
        let was = self.state.fetch_and(!POSTED, AcqRel);
        if was & POSTED == 0 {
            return None;
        }
        Some(Received {
            id: NonZeroU64::new(was >> 1)?,
        })
    }
}

/// The handler of the completions of the receives whose [`RecvWr`] carries an object's
/// [`RecvCqe<Self, ID>`]: receives posted on the QPs of `CmId<Self::Connection>`s, or on
/// an SRQ only such QPs take from.
///
/// [`RecvWr`]: super::super::qp_handle::RecvWr
pub(crate) trait QpRecvHandler<const ID: u64 = 0>: HasRecvCqe<ID> {
    /// The CM handler of the ids on whose QPs the receives complete.
    type Connection: CmHandler;

    /// A receive that carried the object's `RecvCqe<Self, ID>` completed with `wc` on a
    /// QP of `connection`: `received` gives its buffers back (post the receive again with
    /// it, once done with what it delivered), or is `None` if the receive was not posted
    /// (a provider's second completion of it). Runs in the CQ's poll context.
    fn done(
        &self,
        connection: ArcBorrow<'_, Self::Connection>,
        received: Option<Received>,
        wc: &WorkCompletion,
    );
}

/// An object that embeds a [`RecvCqe<Self, ID>`]; implemented with
/// [`impl_has_recv_cqe!`].
///
/// (A safe trait, as [`super::HasCqe`]: a receive carries only an entry that
/// [`RecvCqe::placed`] found at `OFFSET` from its object, which is where the trampoline
/// takes the object from.)
pub(crate) trait HasRecvCqe<const ID: u64 = 0> {
    /// Where [`HasRecvCqe::recv_entry`] is, from the start of the object: the offset of
    /// the field.
    const OFFSET: usize;

    /// The object's receive entry for handler `ID`.
    fn recv_entry(&self) -> &RecvCqe<Self, ID>
    where
        Self: Sized;
}

/// The completion entry of a receive, embedded in a `T`, with the receive's state: its
/// completions mint the receive's [`Received`] and run `T`'s [`QpRecvHandler<ID>`].
///
/// Only a [`RecvWr`] carries it (made by [`CmId::recv_wr`] or [`super::super::Srq::recv_wr`],
/// which bind it: one `RecvWr` per entry), posted only on a QP of a `CmId<T::Connection>`
/// (or on an SRQ that only such QPs take from), where its completion finds the connection.
///
/// # Invariants
///
/// `entry`'s `done` is [`RecvCqe::run`] for this `T` and `ID` (and the entry of no other
/// `Cqe`); `entry` is the first field, so the entry's address is the `RecvCqe`'s.
///
/// [`RecvWr`]: super::super::qp_handle::RecvWr
#[repr(C)]
pub(crate) struct RecvCqe<T, const ID: u64 = 0> {
    entry: Cqe<T, ID>,
    state: RecvState,
}

impl<T: QpRecvHandler<ID>, const ID: u64> RecvCqe<T, ID> {
    /// An entry whose receive completions mint the receive's token and run `T`'s handler
    /// `ID`, with the connection of the QP the receive completed on.
    pub(crate) fn new() -> Self {
        // INVARIANT: `done` is `run` for `T` and `ID`, in this entry only.
        Self {
            entry: Cqe {
                cqe: Opaque::new(bindings::ib_cqe {
                    done: Some(Self::run),
                }),
                _owner: PhantomData,
            },
            state: RecvState::new(),
        }
    }

    /// The completion callback the RDMA core calls.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with the CQ it polled (or null) and a valid completion, both
    /// valid for the call, whose `wr_cqe` is the entry of a
    /// `RecvCqe<T, ID>` (its `done` is this function: type invariant) at `T`'s offset from a
    /// live `T` ([`RecvCqe::placed`]), of a receive posted on a QP of a `CmId<T::Connection>` (or on an SRQ only such
    /// QPs take from), which drains it (running this completion first) before it lets its
    /// handler go.
    unsafe extern "C" fn run(cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
        // SAFETY: the core passes a valid completion for the duration of the call; its
        // entry is the first field of a `RecvCqe<T, ID>` at `T`'s declared offset from a
        // live `T` (the function's safety section; `RecvCqe::placed`). (Wrapping: only the
        // address is computed, which is the `T`'s.)
        let (entry, owner, wc) = unsafe {
            let cqe = (*wc).__bindgen_anon_1.wr_cqe;
            let entry = &*cqe.cast::<Self>();
            let owner = &*cqe
                .wrapping_byte_sub(<T as HasRecvCqe<ID>>::OFFSET)
                .cast::<T>();
            (entry, owner, &*wc)
        };
        if wc.qp.is_null() {
            // (rxe and siw name the QP on every completion, flushes included)
            pr_warn!("a work completion names no QP; its handler does not run\n");
            return;
        }
        // SAFETY: the QP is a `CmId<T::Connection>`'s, alive with its handler while its
        // completions run (the function's safety section).
        let connection = unsafe { CmId::<T::Connection>::handler_of_qp(wc.qp) };
        // SAFETY: this is the completion of a receive that carried this entry, posted with
        // its state (only the entry's `RecvWr` carries it).
        let received = unsafe { entry.state.completed() };
        // SAFETY: the CQ is null or valid for the call (the function's safety section).
        let wc = unsafe { WorkCompletion::from_polled(cq, wc) };
        owner.done(connection, received, &wc);
    }
}

impl<T: HasRecvCqe<ID>, const ID: u64> RecvCqe<T, ID> {
    /// `owner`'s receive entry `ID`, for the receive bound to it: the one
    /// [`HasRecvCqe::recv_entry`] returns, if it is at `T::OFFSET` from `owner`, where the
    /// trampoline takes the owner from (`EINVAL` otherwise, with one log line).
    pub(crate) fn placed(owner: &T) -> Result<&Self> {
        let entry = owner.recv_entry();
        if !super::is_at(owner, <T as HasRecvCqe<ID>>::OFFSET, entry) {
            pr_warn!("an object's receive entry is not where its type says; refused\n");
            return Err(EINVAL);
        }
        Ok(entry)
    }
}

impl<T, const ID: u64> RecvCqe<T, ID> {
    /// The entry, for the receive's work request.
    pub(in crate::rdma) fn as_raw(&self) -> *mut bindings::ib_cqe {
        self.entry.as_raw()
    }

    /// The receive's state.
    pub(in crate::rdma) fn state(&self) -> &RecvState {
        &self.state
    }
}

/// Declares that an object embeds a [`RecvCqe`] in the named field, for handler `ID` (0 if
/// left out).
///
/// ```ignore
/// impl_has_recv_cqe!(CmdSlot, cqe);
/// ```
// (Not every module embeds receive entries.)
#[allow(unused_macros)]
macro_rules! impl_has_recv_cqe {
    ($owner:ty, $field:ident) => {
        $crate::rdma::cqe::impl_has_recv_cqe!($owner, $field, 0);
    };
    ($owner:ty, $field:ident, $id:literal) => {
        impl $crate::rdma::cqe::HasRecvCqe<$id> for $owner {
            const OFFSET: usize = {
                // (raw pointers: a reference would also accept a field that derefs to one)
                let _: fn(&$owner) -> *const $crate::rdma::cqe::RecvCqe<$owner, $id> =
                    |owner| &raw const owner.$field;
                ::core::mem::offset_of!($owner, $field)
            };

            fn recv_entry(&self) -> &$crate::rdma::cqe::RecvCqe<$owner, $id> {
                &self.$field
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_has_recv_cqe;
