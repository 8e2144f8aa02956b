// SPDX-License-Identifier: GPL-2.0

//! A handle on a QP for work requests whose completion entries are embedded in their
//! poster's own objects ([`super::Cqe`]) rather than in the layer's heap records (see
//! `qp.rs`): the data path of a transport, whose slots live as long as their connection,
//! and its `rdma_rw` contexts ([`super::rw::RwCtx`]). Sends and receives are prepared once
//! ([`SendWr`], [`RecvWr`], made by the [`super::CmId`] that owns the QP) and posted again
//! for each message, through the owner's handle: a prepared request names its QP by
//! identity ([`QpSerial`]) and holds no handle of its own, and a post checks that the
//! handle is of that QP.
//!
//! A handle may outlive its QP: the id that owns the QP closes posting before it drains
//! it, and retires the QP before it destroys it ([`QpGate`]). Posting through a handle
//! after the drain fails with `ENOTCONN`, and nothing reaches a destroyed QP. The prepared
//! requests themselves, and what they are bound to, are in `qp_handle/requests.rs`.

use super::kernel_gaps::percpu_gate::{Pass, PercpuGate};
use super::{bindings, cqe::Received, rw::TransferEnd};
use core::{
    pin::Pin,
    ptr,
    sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
};

mod requests;

use kernel::{
    prelude::*,
    sync::{Arc, UniqueArc},
};
pub(crate) use requests::{BoundRequest, Range, RecvWr, SendWr};
pub(super) use requests::{Entry, PostTarget};

/// The identity of a QP: unique for the module's life (a QP's address is not: another QP
/// may be created where a destroyed one was). Prepared work requests name the QP they
/// were made for by it ([`SendWr`], [`RecvWr`], `Prepared`), and are posted only through
/// a handle of the QP it names, which keeps that QP's gate: they hold no handle of their
/// own (a connection prepares a request per slot, and a handle held is a reference count
/// taken and given back, two locked instructions, per request).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpSerial(u64);

/// The next QP's identity.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// What a QP's owner and its handles share: the QP, its identity, and the gates every use
/// of it through a handle passes.
///
/// # Invariants
///
/// `serial` is this gate's alone (taken from `NEXT_SERIAL` when it was made, which never
/// wraps: 2^64 gates are not made in a module's life). `qp` is a live QP of port `port`
/// until `using` is closed. A post passes `posting`, any
/// other use `using`; the owner closes `posting` before it drains the QP (nothing is
/// posted after the drain's markers) and then `using` before it destroys the QP (nothing
/// reaches it after); `using` is closed only once `posting` is. `retired` is set before
/// the QP is destroyed ([`QpGate::retire`]), so a load that happens after the destroy reads
/// it true; a load that reads it false, made while something shows a QP at `qp`'s address
/// alive (something ordered after that QP's making: [`QpHandle::shown_live`]), shows that
/// QP to be this gate's. `retire` does not wait for such uses: what shows the QP alive
/// orders them before the destroy.
#[pin_data]
pub(super) struct QpGate {
    qp: *mut bindings::ib_qp,
    port: u32,
    serial: QpSerial,
    // (`core`'s: the kernel crate's atomics are out-of-line helpers, and this is loaded on
    // every I/O's destroy)
    retired: AtomicBool,
    // (`percpu_ref`s: every post of the data path passes a gate, and a counter shared by
    // the CPUs would cost two locked instructions per pass)
    #[pin]
    posting: PercpuGate,
    #[pin]
    using: PercpuGate,
}

// SAFETY: a QP may be posted to and its `rdma_rw` contexts used from any CPU (the drivers
// lock their queues); the gates are `Sync`.
unsafe impl Send for QpGate {}
// SAFETY: as above.
unsafe impl Sync for QpGate {}

/// A [`QpGate`] whose QP does not exist yet: allocated, with its per-CPU counters, before
/// the QP is created, so that nothing can fail once it exists.
pub(super) struct UnopenedGate(Pin<UniqueArc<QpGate>>);

impl UnopenedGate {
    /// Allocates a gate.
    pub(super) fn new() -> Result<Self> {
        let gate = UniqueArc::pin_init(
            // INVARIANT: a new identity.
            try_pin_init!(QpGate {
                qp: ptr::null_mut(),
                port: 0,
                serial: QpSerial(NEXT_SERIAL.fetch_add(1, Relaxed)),
                retired: AtomicBool::new(false),
                posting <- PercpuGate::new(),
                using <- PercpuGate::new(),
            }? Error),
            GFP_KERNEL,
        )?;
        Ok(Self(gate))
    }

    /// The gate of `qp` of port `port`, open.
    ///
    /// # Safety
    ///
    /// `qp` is live, and stays live until [`QpGate::retire`] returned.
    pub(super) unsafe fn open(self, qp: *mut bindings::ib_qp, port: u32) -> Arc<QpGate> {
        let mut gate = self.0;
        let fields = gate.as_mut().project();
        // INVARIANT: the QP is live until `retire` (the caller's promise); both gates are
        // open (new), and nobody else holds the gate yet.
        *fields.qp = qp;
        *fields.port = port;
        gate.into()
    }
}

impl QpGate {
    /// The QP's identity.
    pub(super) fn serial(&self) -> QpSerial {
        self.serial
    }

    /// Runs `f` on the QP if `gate` (one of the two) lets it through; `ENOTCONN` otherwise.
    #[inline]
    fn with_qp<R>(
        &self,
        gate: &PercpuGate,
        f: impl FnOnce(*mut bindings::ib_qp) -> Result<R>,
    ) -> Result<R> {
        // (the pass keeps the gate's close waiting until `f` returned)
        let Some(_pass) = gate.enter() else {
            return Err(super::code::enotconn());
        };
        f(self.qp)
    }

    /// A pass through the posting gate: `None` once posting is closed.
    #[inline]
    pub(super) fn open(&self) -> Option<OpenQp<'_>> {
        // INVARIANT: the pass holds the posting gate open.
        Some(OpenQp {
            gate: self,
            _pass: self.posting.enter()?,
        })
    }

    /// Posts the chain of send work requests that starts at `first`, unless posting is
    /// closed (`ENOTCONN`); see [`OpenQp::post_send`].
    ///
    /// # Safety
    ///
    /// As for [`OpenQp::post_send`].
    pub(super) unsafe fn post_send(
        &self,
        first: *const bindings::ib_send_wr,
    ) -> Result<(), (Error, bool)> {
        let Some(open) = self.open() else {
            return Err((super::code::enotconn(), true));
        };
        // SAFETY: the caller's promise.
        unsafe { open.post_send(first) }
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
        let posted = self.with_qp(&self.posting, |qp| {
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
        self.posting.close();
    }

    /// Retires the QP before its owner destroys it: closes posting if it is not, and waits
    /// for the uses under way; from now on, nothing reaches the QP through a handle.
    /// Process context.
    pub(super) fn retire(&self) {
        // INVARIANT: `using` closes after `posting`; `retired` is set before the owner
        // destroys the QP (this returns first).
        self.retired.store(true, Relaxed);
        self.posting.close();
        self.using.close();
    }
}

/// A pass through a QP's posting gate, for one step of its user: while it is held the QP
/// takes requests (its drain did not begin, and its owner's close waits for the pass).
/// Taken once for what a step prepares and posts (an `rdma_rw` context's work requests
/// and their post; a receive's repost and a response), so that they pass the gate once.
///
/// # Invariants
///
/// `_pass` holds `gate`'s posting gate open.
pub(crate) struct OpenQp<'a> {
    gate: &'a QpGate,
    _pass: Pass<'a>,
}

impl OpenQp<'_> {
    /// The QP, live and taking requests while the pass is held.
    pub(super) fn raw(&self) -> *mut bindings::ib_qp {
        self.gate.qp
    }

    /// The port the QP uses.
    pub(super) fn port_num(&self) -> u32 {
        self.gate.port
    }

    /// The QP's identity.
    pub(super) fn serial(&self) -> QpSerial {
        self.gate.serial
    }

    /// Posts the chain of send work requests that starts at `first`. On failure, whether
    /// nothing was posted: the provider refused the chain's first request. A provider may
    /// also fail after it queued part of the chain, or all of it (siw, when it cannot
    /// start sending), and those requests complete later, if only when the QP is drained.
    ///
    /// # Safety
    ///
    /// `first` and the requests it links to are valid for the call; the completion entry
    /// each carries, and the memory it points to, stay alive and in place until its
    /// completion ran or the QP was drained; a [`super::cqe::SlotCqe`] lives where the
    /// QP's completions find it (the handler of the id that owns the QP, whose type is the
    /// entry's handler's `Connection`); a `SlotCqe` is carried only by requests posted from
    /// its object's slot ([`super::slot_post::Owner::post`]), last in their chain.
    pub(super) unsafe fn post_send(
        &self,
        first: *const bindings::ib_send_wr,
    ) -> Result<(), (Error, bool)> {
        let mut bad: *const bindings::ib_send_wr = ptr::null();
        // SAFETY: the QP is live and takes requests while the pass is held (type
        // invariant); the provider copies the requests before it returns (the function's
        // safety section), and may point `bad` at one of them.
        let ret = unsafe { bindings::rdma_rs_ib_post_send(self.raw(), first, &mut bad) };
        super::to_result(ret).map_err(|e| (e, ptr::eq(bad, first)))
    }

    /// Posts the receive `wr`, lending its buffers to the device: `received` gives them
    /// back, the token of the receive's last completion (or of its making, for its first
    /// post), and only the completion of this post gives them back again. `EINVAL` if `wr`
    /// was not made for this QP or `received` is not its token. On failure, the error,
    /// and the token if nothing was posted.
    pub(crate) fn post_recv(
        &self,
        wr: &RecvWr,
        received: Received,
    ) -> Result<(), (Error, Option<Received>)> {
        match &wr.target {
            PostTarget::Qp(serial) if *serial == self.serial() => (),
            _ => return Err((EINVAL, Some(received))),
        }
        let post = |wr, bad: &mut _| {
            // SAFETY: the QP is live and takes requests while the pass is held; the request
            // is valid and made for this QP, its completion entry and buffers outlive it
            // (`RecvWr`'s invariant); the provider copies it before it returns, and may
            // point `bad` at it.
            unsafe { bindings::rdma_rs_ib_post_recv(self.raw(), wr, bad) }
        };
        // SAFETY: the QP takes requests while the pass is held (type invariant), so the
        // receive's entry, made for it, lives (`RecvWr`'s invariant); `post` posts it on
        // this QP, its target (checked above).
        unsafe { wr.post_with(received, post) }
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

    /// The QP, if `end` shows it alive while `end` is borrowed: `end` is the completion
    /// of a request on it, whose handler runs (the CM id destroys its QP only after the
    /// drain, whose marker completes after every earlier completion, on the CQ's one
    /// poller: what [`super::CmId::handler_of_qp`] relies on too), or its drain (which
    /// borrows the id). The caller may then use the QP while it borrows `end`, without
    /// passing a gate.
    ///
    /// (If this handle's QP had been destroyed, the QP `end` shows alive at the same
    /// address was made after that destroy, which follows the `retired` store, and `end`
    /// follows its making: the load reads true. Coherence, not the load's ordering, gives
    /// this.)
    #[inline]
    pub(super) fn shown_live(&self, end: &TransferEnd<'_>) -> Option<*mut bindings::ib_qp> {
        let live = match end {
            TransferEnd::NotPosted => return None,
            TransferEnd::Completed(wc) => wc.qp_address(),
            TransferEnd::Drained(drained) => drained.qp_address(),
        };
        (live != 0 && self.gate.qp as usize == live && !self.gate.retired.load(Relaxed))
            .then_some(self.gate.qp)
    }

    /// The QP's identity, which the requests made for it name.
    pub(super) fn serial(&self) -> QpSerial {
        self.gate.serial
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
        self.gate.with_qp(&self.gate.posting, f)
    }

    /// A pass through the QP's posting gate, for what a step prepares and posts: `None`
    /// from the drain on. A step that posts several times (a receive, then a response)
    /// passes once and posts through the pass ([`OpenQp::post_recv`],
    /// [`super::slot_post::Owner::post_under`]).
    pub(crate) fn open(&self) -> Option<OpenQp<'_>> {
        self.gate.open()
    }

    /// Runs `f` on the QP, which exists while it runs (before its owner retired it):
    /// for the `rdma_rw` calls of contexts mapped on it; `ENOTCONN` once the QP is gone.
    pub(super) fn with_qp<R>(
        &self,
        f: impl FnOnce(*mut bindings::ib_qp) -> Result<R>,
    ) -> Result<R> {
        self.gate.with_qp(&self.gate.using, f)
    }

    /// The gate the handle passes, for posting prepared chains
    /// ([`super::slot_post::Owner::post`]).
    pub(super) fn gate(&self) -> &QpGate {
        &self.gate
    }

    /// Posts the receive `wr` (see [`OpenQp::post_recv`]), unless posting is closed:
    /// `ENOTCONN` once the QP's drain began.
    pub(crate) fn post_recv(
        &self,
        wr: &RecvWr,
        received: Received,
    ) -> Result<(), (Error, Option<Received>)> {
        match self.open() {
            Some(open) => open.post_recv(wr, received),
            None => Err((super::code::enotconn(), Some(received))),
        }
    }
}
