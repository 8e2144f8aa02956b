// SPDX-License-Identifier: GPL-2.0

//! A handle on a QP for work requests whose completion entries are embedded in their
//! poster's own objects ([`super::Cqe`]) rather than in the layer's heap records (see
//! `qp.rs`): the data path of a transport, whose slots live as long as their connection,
//! and its `rdma_rw` contexts ([`super::rw::RwCtx`]). Sends and receives are prepared once
//! ([`SendWr`], [`RecvWr`], made by the [`super::CmId`] that owns the QP) and posted again
//! for each message.
//!
//! A handle may outlive its QP: the id that owns the QP closes posting before it drains
//! it, and retires the QP before it destroys it ([`QpGate`]). Posting through a handle
//! after the drain fails with `ENOTCONN`, and nothing reaches a destroyed QP. The prepared
//! requests themselves, and what they are bound to, are in `qp_handle/requests.rs`.

use super::{bindings, cqe::Received};
use core::{
    mem::MaybeUninit,
    ptr,
    sync::atomic::{AtomicU32, Ordering::SeqCst},
};

mod requests;

use kernel::{
    prelude::*,
    sync::{Arc, UniqueArc},
};
pub(crate) use requests::{BoundRequest, Range, RecvWr, SendWr};
pub(super) use requests::{Entry, PostTarget};

/// The gate is open: requests may be posted.
const OPEN: u32 = 0;
/// The QP is drained or being drained: nothing is posted any more, but the QP exists
/// (contexts mapped on it may still be destroyed).
const CLOSED: u32 = 1;
/// The QP is being destroyed, or is gone.
const GONE: u32 = 2;

/// What a QP's owner and its handles share: the QP, and the gate every use of it
/// through a handle passes.
///
/// # Invariants
///
/// `qp` is a live QP of port `port` while `state` is below [`GONE`]. A use enters by
/// counting itself in `users` (fully ordered) and then checking `state`; the owner moves
/// `state` on (fully ordered) and then waits for `users` to reach 0, so that once it saw
/// 0, every later use sees the new state: after [`QpGate::close`] nothing is posted, and
/// after [`QpGate::retire`] nothing reaches the QP.
pub(super) struct QpGate {
    qp: *mut bindings::ib_qp,
    port: u32,
    // (`core` atomics: every post of the data path passes the gate, and the kernel crate's
    // `Atomic` calls out-of-line C helpers on this kernel, about 50 instructions per pass;
    // these compile to one locked instruction and a load.)
    state: AtomicU32,
    users: AtomicU32,
}

// SAFETY: a QP may be posted to and its `rdma_rw` contexts used from any CPU (the drivers
// lock their queues); the gate's state is atomic.
unsafe impl Send for QpGate {}
// SAFETY: as above.
unsafe impl Sync for QpGate {}

impl QpGate {
    /// The gate of `qp` of port `port`, open, in `place` (allocated before the QP, so
    /// that making the gate cannot fail once the QP exists).
    ///
    /// # Safety
    ///
    /// `qp` is live, and stays live until [`QpGate::retire`] returned.
    pub(super) unsafe fn new(
        place: UniqueArc<MaybeUninit<Self>>,
        qp: *mut bindings::ib_qp,
        port: u32,
    ) -> Arc<Self> {
        // INVARIANT: open; the QP is live until `retire` (the caller's promise).
        place
            .write(Self {
                qp,
                port,
                state: AtomicU32::new(OPEN),
                users: AtomicU32::new(0),
            })
            .into()
    }

    /// Runs `f` on the QP if the gate's state is at most `upto`; `ENOTCONN` otherwise.
    fn with_qp<R>(
        &self,
        upto: u32,
        f: impl FnOnce(*mut bindings::ib_qp) -> Result<R>,
    ) -> Result<R> {
        // Sequentially consistent on both sides (here and in `move_to`): either this sees
        // the new state, or `move_to` sees this use and waits for it.
        self.users.fetch_add(1, SeqCst);
        let result = if self.state.load(SeqCst) <= upto {
            f(self.qp)
        } else {
            Err(super::code::enotconn())
        };
        self.users.fetch_sub(1, SeqCst);
        result
    }

    /// Moves the state on to `state` (if it is not there yet) and waits for the uses
    /// under way.
    fn move_to(&self, state: u32) {
        if self.state.load(SeqCst) < state {
            self.state.swap(state, SeqCst);
        }
        while self.users.load(SeqCst) != 0 {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
        }
    }

    /// Posts the chain of send work requests that starts at `first`, unless posting is
    /// closed (`ENOTCONN`). On failure, whether nothing was posted: refused here, or the
    /// provider refused the chain's first request. A provider may also fail after it
    /// queued part of the chain, or all of it (siw, when it cannot start sending), and
    /// those requests complete later, if only when the QP is drained.
    ///
    /// # Safety
    ///
    /// `first` and the requests it links to are valid for the call; the completion entry
    /// each carries, and the memory it points to, stay alive and in place until its
    /// completion ran or the QP was drained; a [`super::cqe::SlotCqe`] lives where the QP's completions find it (the handler of
    /// the id that owns the QP, whose type is the entry's handler's `Connection`); a
    /// `SlotCqe` is carried only by requests posted from its object's slot
    /// ([`super::slot_post::Owner::post`]), last in their chain.
    pub(super) unsafe fn post_send(
        &self,
        first: *const bindings::ib_send_wr,
    ) -> Result<(), (Error, bool)> {
        let mut bad: *const bindings::ib_send_wr = ptr::null();
        let mut at_gate = true;
        let posted = self.with_qp(OPEN, |qp| {
            at_gate = false;
            // SAFETY: the QP is live while the gate lets the call through (type
            // invariant); the provider copies the requests before it returns (the
            // function's safety section), and may point `bad` at one of them.
            super::to_result(unsafe { bindings::rdma_rs_ib_post_send(qp, first, &mut bad) })
        });
        posted.map_err(|e| (e, at_gate || ptr::eq(bad, first)))
    }

    /// Posts the receive `wr`, unless posting is closed (`ENOTCONN`). On failure, whether
    /// nothing was posted (as for [`QpGate::post_send`]).
    ///
    /// # Safety
    ///
    /// As for [`QpGate::post_send`], for `wr`.
    pub(super) unsafe fn post_recv(
        &self,
        wr: *const bindings::ib_recv_wr,
    ) -> Result<(), (Error, bool)> {
        let mut bad: *const bindings::ib_recv_wr = ptr::null();
        let mut at_gate = true;
        let posted = self.with_qp(OPEN, |qp| {
            at_gate = false;
            // SAFETY: as in `post_send`.
            super::to_result(unsafe { bindings::rdma_rs_ib_post_recv(qp, wr, &mut bad) })
        });
        posted.map_err(|e| (e, at_gate || ptr::eq(bad, wr)))
    }

    /// Closes posting and waits for the posts under way: from now on, a post through a
    /// handle fails with `ENOTCONN`, so the drain that follows completes every request
    /// there is. Process context.
    pub(super) fn close(&self) {
        self.move_to(CLOSED);
    }

    /// Retires the QP before its owner destroys it: waits for the uses under way; from
    /// now on, nothing reaches the QP through a handle. Process context.
    pub(super) fn retire(&self) {
        self.move_to(GONE);
    }
}

/// A QP on which the owner posts work requests with embedded completion entries, and maps
/// `rdma_rw` contexts; made by [`super::CmId::qp_handle`]. Cloning shares it.
///
/// # Invariants
///
/// `gate` is the gate of the QP of a [`super::CmId`], which closes it before draining the
/// QP and retires it before destroying it.
#[derive(Clone)]
pub(crate) struct QpHandle {
    gate: Arc<QpGate>,
}

impl QpHandle {
    /// A handle through `gate`, which the QP's owner closes before its drain and retires
    /// before destroying the QP.
    pub(super) fn new(gate: Arc<QpGate>) -> Self {
        // INVARIANT: the caller's promise.
        Self { gate }
    }

    /// The QP's address, only compared (with completions and drains).
    pub(super) fn address(&self) -> usize {
        self.gate.qp as usize
    }

    /// Whether `other` is a handle on the same QP.
    pub(super) fn same_qp(&self, other: &QpHandle) -> bool {
        Arc::ptr_eq(&self.gate, &other.gate)
    }

    /// The port the QP uses.
    pub(crate) fn port_num(&self) -> u32 {
        self.gate.port
    }

    /// Runs `f` on the QP while posting is open (before the drain began): for mapping an
    /// `rdma_rw` context on it, which a destroy must undo before the QP goes;
    /// `ENOTCONN` from the drain on.
    pub(super) fn with_open_qp<R>(
        &self,
        f: impl FnOnce(*mut bindings::ib_qp) -> Result<R>,
    ) -> Result<R> {
        self.gate.with_qp(OPEN, f)
    }

    /// Runs `f` on the QP, which exists while it runs (before its owner retired it):
    /// for the `rdma_rw` calls of contexts mapped on it; `ENOTCONN` once the QP is gone.
    pub(super) fn with_qp<R>(
        &self,
        f: impl FnOnce(*mut bindings::ib_qp) -> Result<R>,
    ) -> Result<R> {
        self.gate.with_qp(CLOSED, f)
    }

    /// The gate the handle passes, for posting prepared chains
    /// ([`super::slot_post::Owner::post`]).
    pub(super) fn gate(&self) -> &QpGate {
        &self.gate
    }

    /// Posts the receive `wr`, lending its buffers to the device: `received` gives them
    /// back, the token of the receive's last completion (or of its making, for its first
    /// post), and only the completion of this post gives them back again. `EINVAL` if `wr`
    /// was not made for this QP or `received` is not its token; `ENOTCONN` once the QP's
    /// drain began. On failure, the error, and the token if nothing was posted.
    pub(crate) fn post_recv(
        &self,
        wr: &RecvWr,
        received: Received,
    ) -> Result<(), (Error, Option<Received>)> {
        match &wr.target {
            PostTarget::Qp(qp) if qp.same_qp(self) => (),
            _ => return Err((EINVAL, Some(received))),
        }
        // (the token while it is the caller's: back on any failure that posted nothing)
        let mut token = Some(received);
        let posted = self.gate.with_qp(OPEN, |qp| {
            let received = token.take().ok_or(EINVAL)?;
            // SAFETY: the QP takes requests (its drain did not begin), so the receive's
            // entry, made for it, lives (`RecvWr`'s invariant).
            let state = unsafe { wr.state() };
            let id = state.to_device(received).map_err(|received| {
                token = Some(received);
                EINVAL
            })?;
            let mut bad: *const bindings::ib_recv_wr = ptr::null();
            // SAFETY: the QP is live while the gate lets the call through; the request is
            // valid and made for this QP, its completion entry and buffers outlive it
            // (`RecvWr`'s invariant); the provider copies it before it returns, and may
            // point `bad` at it.
            let ret = unsafe { bindings::rdma_rs_ib_post_recv(qp, wr.as_ptr(), &mut bad) };
            if ret != 0 && ptr::eq(bad, wr.as_ptr()) {
                // SAFETY: `id` is what `to_device` gave, and the provider refused the post.
                token = Some(unsafe { state.refused(id) });
            }
            super::to_result(ret)
        });
        posted.map_err(|e| (e, token))
    }
}
