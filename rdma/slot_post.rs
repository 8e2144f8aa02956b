// SPDX-License-Identifier: GPL-2.0

//! Handing a [`Slot`] to the device: [`Owner::post`] posts the send work requests prepared
//! from the slot's state and hands the slot to the completion of the signaled one, which
//! [`Resumes`] names; [`Prepared`] is what a `SendWr` or an `rdma_rw` context prepares.
//!
//! The state machine itself, which knows nothing of RDMA, is `kernel_gaps/slot.rs`.

use super::{
    bindings,
    kernel_gaps::slot::{Owner, Tag, MAX_COMPLETION_TAG},
    qp_handle::{OpenQp, QpGate, QpHandle, QpSerial},
};
use core::{marker::PhantomData, ptr};
use kernel::prelude::*;

impl<T> Owner<'_, T> {
    /// Posts the send work requests `prepare` takes from the state on `qp`, and hands the
    /// slot off to the completion of the one that is signaled: the requests name the slot
    /// they resume and with which tag ([`Resumes`], made by the layer when it bound them
    /// to the slot's object), and that completion's trampoline is the only one that
    /// resumes it. On failure, the error, and the owner if nothing was posted (the
    /// requests could not be prepared, are not this slot's or not `qp`'s (`EINVAL`), or
    /// the provider refused the first one). Without the owner, the provider failed after it queued some or all of the
    /// chain: the slot stays handed off, and the completion of what was queued resumes it,
    /// if only when the QP is drained.
    pub(crate) fn post(
        self,
        qp: &QpHandle,
        prepare: impl for<'b> FnOnce(&'b mut T) -> Result<Prepared<'b>>,
    ) -> Result<(), (Error, Option<Self>)> {
        self.post_through(
            qp.serial(),
            qp.address(),
            PostThrough::Gate(qp.gate()),
            prepare,
        )
    }

    /// As [`Owner::post`], through `open`, a pass of the QP the step holds already: requests
    /// prepared under no pass of their own are posted through it, without passing the
    /// gate again.
    pub(crate) fn post_under(
        self,
        open: &OpenQp<'_>,
        prepare: impl for<'b> FnOnce(&'b mut T) -> Result<Prepared<'b>>,
    ) -> Result<(), (Error, Option<Self>)> {
        self.post_through(
            open.serial(),
            open.raw().addr(),
            PostThrough::Pass(open),
            prepare,
        )
    }

    /// [`Owner::post`] on the QP `serial` names, at `address`, through `through`, one of
    /// its gate or a pass of it.
    fn post_through(
        self,
        serial: QpSerial,
        address: usize,
        through: PostThrough<'_, '_>,
        prepare: impl for<'b> FnOnce(&'b mut T) -> Result<Prepared<'b>>,
    ) -> Result<(), (Error, Option<Self>)> {
        let slot = self.slot();
        // SAFETY: `self` is the slot's only owner, and lends the state to `prepare` alone;
        // what `prepare` returns borrows it until the post below has returned.
        let prepared = match prepare(unsafe { &mut *slot.state_ptr() }) {
            Ok(prepared) => prepared,
            Err(e) => return Err((e, Some(self))),
        };
        let mut prepared = prepared;
        // (taken: `Prepared`'s drop no longer clears it)
        let posted_flag = prepared.posted.take();
        let open = prepared.open.take();
        let (first, made_for, resumes) = (prepared.first, prepared.qp, prepared.resumes);
        drop(prepared);
        let tag = match resumes {
            Some(resumes) if resumes.slot == ptr::from_ref(slot).addr() && made_for == serial => {
                resumes.tag
            }
            _ => {
                // Requests whose completion would not resume this slot (another slot's,
                // or no slot's), or made for another QP: not posted.
                if let Some(flag) = posted_flag {
                    *flag = false;
                }
                return Err((EINVAL, Some(self)));
            }
        };
        // (the QP's completions resume it: a drain of the QP shows them over)
        // SAFETY: `tag` is the tag of the entry whose completion resumes this slot
        // (`Resumes`: below `LOCAL_TAGS`, made by the layer), and that QP delivers it; the
        // post is ended below, and only posts what `prepare` took from the state.
        let slot = unsafe { self.start_posting(tag, address) };
        // SAFETY: `first` heads requests prepared from the state (`Prepared`), which stays
        // in place with the slot and unchanged until the post returned: a completion of
        // what it posts waits for that before it resumes the slot. They were made for
        // the QP `serial` names (its identity is theirs, checked above), so their
        // completion entries and buffers outlive their posts there (`BoundRequest`'s and
        // `RwBinding`'s invariants), and the posts pass its gate (or hold a pass of it).
        let posted = unsafe {
            match (&open, through) {
                // (the pass the requests were prepared under, of the same QP: `Prepared`)
                (Some(open), _) => open.post_send(first),
                // (a pass of the QP `serial` names: `post_under`)
                (None, PostThrough::Pass(open)) => open.post_send(first),
                (None, PostThrough::Gate(gate)) => gate.post_send(first),
            }
        };
        drop(open);
        match posted {
            Ok(()) => {
                // SAFETY: started above with `tag`, ended here only.
                unsafe { slot.posted(tag) };
                Ok(())
            }
            Err((e, true)) => {
                // Nothing was posted: a context whose requests were refused may be
                // destroyed as never posted.
                if let Some(flag) = posted_flag {
                    *flag = false;
                }
                // SAFETY: started above, ended here only; nothing was queued.
                Err((e, Some(unsafe { slot.post_refused() })))
            }
            Err((e, false)) => {
                // SAFETY: started above with `tag`, ended here only: what was queued
                // completes.
                unsafe { slot.posted(tag) };
                Err((e, None))
            }
        }
    }
}

/// How [`Owner::post_through`] reaches the QP: through its gate, or a pass of it.
enum PostThrough<'p, 'q> {
    Gate(&'p QpGate),
    Pass(&'p OpenQp<'q>),
}

/// Send work requests ready to post, taken from a slot's state
/// ([`crate::rdma::qp_handle::SendWr::prepare`], [`crate::rdma::rw::RwCtx::prepare`]): posted by
/// [`Owner::post`] or [`Owner::post_under`], which hand the slot off first.
///
/// # Invariants
///
/// `first` heads a chain of valid send work requests for the QP `qp` names, which live
/// in (or are owned by) what `'a` borrows. `open`, if set, is a pass of that QP. `resumes`, if set, is what the completion of the chain's
/// signaled request (its last) resumes.
pub(crate) struct Prepared<'a> {
    first: *const bindings::ib_send_wr,
    qp: QpSerial,
    resumes: Option<Resumes>,
    /// The flag of the `rdma_rw` context whose requests head the chain, which says they
    /// were posted: cleared again if the provider refuses the chain's first request.
    posted: Option<&'a mut bool>,
    /// The pass through `qp`'s posting gate the requests were prepared under, which their
    /// post uses too (else the post passes the gate, or uses the pass its poster lends:
    /// [`Owner::post_under`]). (A `Prepared` is dropped or posted at once; one leaked keeps
    /// the QP's drain waiting for its pass.)
    open: Option<OpenQp<'a>>,
    _state: PhantomData<&'a mut ()>,
}

impl<'a> Prepared<'a> {
    /// Requests headed by `first`, for the QP `qp` names.
    ///
    /// # Safety
    ///
    /// As the type's invariants say; `resumes` is the [`Resumes`] of the chain's last
    /// request's completion entry.
    pub(super) unsafe fn new(
        first: *const bindings::ib_send_wr,
        qp: QpSerial,
        resumes: Option<Resumes>,
    ) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            first,
            qp,
            resumes,
            posted: None,
            open: None,
            _state: PhantomData,
        }
    }

    /// Requests that an `rdma_rw` context marked posted through `posted`: a refused post,
    /// or a drop without a post, marks them not posted again.
    pub(super) fn with_posted_flag(mut self, posted: &'a mut bool) -> Self {
        self.posted = Some(posted);
        self
    }
}

impl<'a> Prepared<'a> {
    /// Requests prepared under `open`, a pass through their QP's posting gate, if they
    /// took one of their own: their post uses it (a pass of another QP is dropped: the
    /// post passes the gate, or refuses them under another QP's lent pass). Without one,
    /// they were prepared under a pass their poster holds ([`Owner::post_under`]).
    pub(super) fn with_own_pass(mut self, open: Option<OpenQp<'a>>) -> Self {
        if let Some(open) = open.filter(|open| open.serial() == self.qp) {
            // INVARIANT: a pass of the requests' QP.
            self.open = Some(open);
        }
        self
    }
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        // Dropped without [`Owner::post`] (which takes the flag first): nothing was posted.
        if let Some(flag) = self.posted.take() {
            *flag = false;
        }
    }
}

/// What the completion of a work request resumes: the slot of the object whose completion
/// entry the request carries, with that entry's tag. Made only by the layer, when it binds
/// a request to an object that embeds both ([`crate::rdma::cqe::HasSlot`]), so a request can
/// resume no other slot, and only through its own entry's trampoline.
///
/// # Invariants
///
/// `slot` is the address of the [`Slot`] at `S::SLOT_OFFSET` from an object `S: HasSlot`
/// (its [`crate::rdma::cqe::HasSlot::slot`], checked there: [`crate::rdma::cqe::placed_slot`]) whose
/// [`crate::rdma::cqe::SlotCqe<S, ID>`] entry the request carries, and `tag` is `ID`.
#[derive(Clone, Copy)]
pub(crate) struct Resumes {
    slot: usize,
    tag: Tag,
}

impl Resumes {
    /// What the completion of a request carrying `owner`'s entry `ID` resumes: `EINVAL` if
    /// `owner`'s slot is not where its type says (see [`crate::rdma::cqe::placed_slot`]).
    pub(super) fn of<S: crate::rdma::cqe::HasSlotCqe<ID>, const ID: u64>(
        owner: &S,
    ) -> Result<Self> {
        const { assert!(ID <= MAX_COMPLETION_TAG) };
        let slot = crate::rdma::cqe::placed_slot(owner).ok_or(EINVAL)?;
        // INVARIANT: `owner`'s slot, at `SLOT_OFFSET` from it, and its entry `ID`'s tag.
        Ok(Self {
            slot: ptr::from_ref(slot).addr(),
            tag: ID as Tag,
        })
    }
}
