// SPDX-License-Identifier: GPL-2.0

//! A CM id's QP and the verbs objects under it (CQ, PD, SRQ): creation with the sizes a
//! user asks for, handles for posting, and the drain before the QP goes.

use super::{to_result, CmHandler, CmId};
use crate::rdma::{
    bindings,
    cqe::{HasSlotCqe, QpRecvHandler, QpSlotHandler, Received},
    qp::{Local, Qp, QpRecords},
    qp_handle::{
        BoundRequest, Entry, PostTarget, QpGate, QpHandle, Range, RecvWr, SendWr, UnopenedGate,
    },
    rw::{Drained, RwBinding},
    Cq, DmaBuf, Pd, Srq,
};
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Release},
        Arc, ArcBorrow,
    },
};

/// Sizes of a QP.
#[derive(Clone, Copy)]
pub(crate) struct QpCaps {
    /// Send queue depth.
    pub(crate) send_wr: u32,
    /// Receive queue depth.
    pub(crate) recv_wr: u32,
    /// Scatter/gather entries per send and per receive work request.
    pub(crate) send_sge: u32,
    /// As `send_sge`, for receives.
    pub(crate) recv_sge: u32,
    /// `rdma_rw` contexts the QP must be able to run at once (0: the QP does not use
    /// `rdma_rw`); the RDMA core grows the send queue and MR pool for them.
    pub(crate) rdma_ctxs: u32,
    /// The completion vector of the QP's CQ.
    pub(crate) vector: u32,
    /// Share a CQ of the device's pool with other QPs ([`Cq::from_pool`]) instead of
    /// allocating one.
    pub(crate) shared_cq: bool,
    /// The QP offloads T10-PI (`IB_QP_CREATE_INTEGRITY_EN`): its `rdma_rw` contexts may
    /// use signature MRs. Only on a device that [supports it](crate::rdma::Device::supports_integrity).
    pub(crate) integrity: bool,
    /// Bytes a send should be able to carry inline (`IB_SEND_INLINE`, copied at post
    /// time); a device that offers fewer gets a QP without inline sends (see
    /// [`CmId::max_inline_data`]).
    pub(crate) inline_data: u32,
}

impl QpCaps {
    /// `send_wr` and `recv_wr` deep, one SGE each way, no `rdma_rw`, vector 0, a CQ of
    /// its own.
    pub(crate) const fn new(send_wr: u32, recv_wr: u32) -> Self {
        Self {
            send_wr,
            recv_wr,
            send_sge: 1,
            recv_sge: 1,
            rdma_ctxs: 0,
            vector: 0,
            shared_cq: false,
            integrity: false,
            inline_data: 0,
        }
    }
}

/// The verbs objects under a CM id's QP, freed after the QP (field order matters).
pub(super) struct Verbs {
    cq: Cq,
    /// The QP's PD: its own, or the one of the SRQ it shares with other QPs. MRs on it
    /// hold a reference too, so it outlives them even when the QP goes first.
    pd: Arc<Pd>,
    /// The SRQ the QP receives from, if any (kept alive until the QP is gone).
    srq: Option<Arc<dyn Send + Sync>>,
    /// How far the QP's drain is ([`NOT_DRAINED`], [`DRAINING`], [`DRAINED`]): once is
    /// enough, and on an SRQ a second drain would wait a minute for an
    /// `IB_EVENT_QP_LAST_WQE_REACHED` that came already.
    drained: Atomic<u32>,
    /// Bytes a send may carry inline, as the device granted.
    inline_data: u32,
    /// The QP's posting gate and records of failed requests, kept until the CQ is gone
    /// (declared after it); boxed so that it does not move while records point to it.
    pub(super) records: Pin<KBox<QpRecords>>,
    /// The gate the QP's handles ([`QpHandle`]) pass: closed with the records' before the
    /// drain, retired before the QP is destroyed.
    pub(super) gate: Arc<QpGate>,
}

/// The QP was not drained.
const NOT_DRAINED: u32 = 0;
/// A drain of the QP is under way.
const DRAINING: u32 = 1;
/// The QP was drained.
const DRAINED: u32 = 2;

impl Verbs {
    /// Drains the QP of `id` unless done before; returns once it is drained (by this call
    /// or another).
    ///
    /// # Safety
    ///
    /// `id` owns these verbs and its QP exists; the caller runs in process context, not in
    /// a completion callback of the QP's CQ.
    pub(super) unsafe fn drain(&self, id: *mut bindings::rdma_cm_id) {
        if self.drained.cmpxchg(NOT_DRAINED, DRAINING, Full).is_err() {
            while self.drained.load(Acquire) != DRAINED {
                kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
            }
            return;
        }
        // Nothing may be posted behind the drain's marker: it would never complete.
        self.records.close();
        self.gate.close();
        // A direct CQ is polled by the drain below, in this task, and by no one else
        // meanwhile; a poll under way ends first.
        let _polling = self.cq.hold_polling();
        // SAFETY: see the function's safety section; drained, the QP still exists. A QP
        // with an SRQ kept here was made on it, with a CQ the core's worker polls
        // (`create_qp_with` refuses a direct one). Every CQ of the layer is polled either
        // by the core's worker and by nothing else (the layer polls none of those
        // directly, and of the kernel's own users of the device's CQ pool only
        // the C `nvmet-rdma` does (its SRQ drain), which cannot be loaded beside this
        // module's transport (both register `NVMF_TRTYPE_RDMA`)), or directly by one
        // poller at a time, the holder of its lock (`Cq`'s invariant): here the drain, in
        // `ib_drain_qp` (it polls a direct CQ itself). Nothing posts once the
        // gate and the records are closed (above); the QP was made with room for one
        // marker; the providers the project runs on (rxe, siw) keep the receive ordering
        // `drain_on_srq` names.
        unsafe {
            let qp = (*id).qp;
            if self.srq.is_some() {
                drain_on_srq(qp);
            } else {
                bindings::ib_drain_qp(qp);
            }
            self.records.end_transfers();
        }
        self.drained.store(DRAINED, Release);
    }
}

/// Drains `qp`, a QP on an SRQ, without polling its CQ from here: once it returns, every
/// completion of the QP ran, its handler returned, and none will come.
///
/// Not `ib_drain_qp`: for a QP on an SRQ it ends in `__ib_drain_srq`, which polls the CQ
/// from the draining task (`ib_process_cq_direct`) beside the CQ's worker. Two pollers
/// run handlers at once (the core holds no lock across them), so a completion of any QP
/// on that CQ (a pooled CQ serves several) could still be running, or taken in the
/// worker's batch and not yet started, when the other poller runs the QP's drain marker:
/// the drain would return before it, and the QP and its handler could go under it.
/// Here the CQ's worker stays its only poller, and a CQ's completions run in order.
///
/// # Safety
///
/// `qp` is live and on an SRQ, its CQ is polled by the core's worker
/// (`IB_POLL_WORKQUEUE`) and by nothing else, and nothing else posts to its send queue;
/// the send queue and the CQ have room for one drain marker (the QP is made with one);
/// the caller runs in process context, not in a completion callback of that CQ. The
/// provider has the QP's receive completions on the CQ once it raised
/// `IB_EVENT_QP_LAST_WQE_REACHED` or, if it never does, once the QP entered the error
/// state: rxe does the first (its receive task posts them, then raises the event), siw
/// the second (entering the error state flushes the receive in progress under the QP's
/// state lock); the core's own SRQ drain assumes the same of a provider that stays
/// silent for its minute.
unsafe fn drain_on_srq(qp: *mut bindings::ib_qp) {
    // The send queue first: the QP moves to the error state, and the marker's completion
    // runs after every send request's.
    // SAFETY: see the function's safety section.
    unsafe { bindings::ib_drain_sq(qp) };
    // In the error state the QP takes no more receives from the SRQ; the core completes
    // `srq_completion` when the device says that the last one is done
    // (`IB_EVENT_QP_LAST_WQE_REACHED`). siw never says so, but flushes the receive in
    // progress when the QP enters the error state: wait a minute at most, as the core's
    // own drain does.
    // SAFETY: the QP is live (function's safety section); the completion is its field.
    unsafe {
        bindings::wait_for_completion_timeout(
            &raw mut (*qp).srq_completion,
            kernel::time::msecs_to_jiffies(60_000),
        )
    };
    // The QP's receive completions are on the CQ by now: a second marker's completion,
    // behind them on a CQ with one poller, runs after theirs. (The first marker's room
    // is free again: its completion ran.)
    // SAFETY: see the function's safety section; the QP is in the error state already,
    // which `ib_drain_sq` sets again.
    unsafe { bindings::ib_drain_sq(qp) };
}

impl<T: CmHandler> CmId<T> {
    /// Creates the QP (RC, every request signalled) with `caps` on a CQ and the given
    /// PD, and returns the send queue depth the device granted (with `rdma_ctxs`, more
    /// than asked). Fails with `EEXIST` if the id has a QP already, `ENODEV` if it is not
    /// bound to a device yet.
    pub(crate) fn create_qp(
        &mut self,
        pd: Arc<Pd>,
        caps: QpCaps,
        poll: crate::rdma::PollContext,
    ) -> Result<u32> {
        self.create_qp_with(pd, None, caps, poll)
    }

    /// As [`CmId::create_qp`], for a QP whose receives come from `srq` (and which shares
    /// its PD): `caps.recv_wr` then only sizes the CQ, for the receive completions the QP
    /// may take at once. The SRQ's receives complete on `S`'s entries, whose handlers
    /// find this id's handler: `S`'s connection type is `T`.
    pub(crate) fn create_qp_on_srq<X, S>(
        &mut self,
        srq: &Arc<Srq<X, S>>,
        caps: QpCaps,
        poll: crate::rdma::PollContext,
    ) -> Result<u32>
    where
        X: Send + Sync + 'static,
        S: QpRecvHandler<Connection = T> + 'static,
    {
        let raw = srq.as_raw();
        let kept: Arc<dyn Send + Sync> = srq.clone();
        self.create_qp_with(srq.pd().clone(), Some((raw, kept)), caps, poll)
    }

    fn create_qp_with(
        &mut self,
        pd: Arc<Pd>,
        srq: Option<(*mut bindings::ib_srq, Arc<dyn Send + Sync>)>,
        caps: QpCaps,
        poll: crate::rdma::PollContext,
    ) -> Result<u32> {
        if self.verbs.is_some() {
            return Err(EEXIST);
        }
        // (`Verbs::drain` needs the worker on a shared CQ or an SRQ's)
        if poll == crate::rdma::PollContext::Direct && (srq.is_some() || caps.shared_cq) {
            return Err(EINVAL);
        }
        let device = self.device().ok_or(ENODEV)?;
        let records = KBox::pin_init(QpRecords::new(), GFP_KERNEL)?;
        // (the gate's memory, taken before the QP exists: nothing fails after its creation)
        let gate = UnopenedGate::new()?;
        // Every work request the QP can hold: soft providers (rxe, siw) complete each
        // flushed one, signalled or not, so a teardown under load can have them all
        // pending at once. The RDMA core adds send queue entries for the `rdma_rw`
        // contexts (one transfer each, plus a registration and an invalidation where the
        // device reads through MRs or the QP offloads T10-PI), as `rdma_rw_max_send_wr`
        // tells. One extra entry each for the drain markers (`ib_drain_qp`'s two, or the
        // two `drain_on_srq` posts one after the other).
        let create_flags = if caps.integrity {
            u32::try_from(bindings::ib_qp_create_flags_IB_QP_CREATE_INTEGRITY_EN).unwrap_or(0)
        } else {
            0
        };
        // SAFETY: the device is registered (the id is bound to it); a pure computation.
        let rw_wrs = unsafe {
            bindings::rdma_rw_max_send_wr(
                device.as_raw(),
                self.port_num(),
                caps.rdma_ctxs,
                create_flags,
            )
        };
        let entries = caps
            .send_wr
            .saturating_add(rw_wrs)
            .saturating_add(caps.recv_wr)
            .saturating_add(2);
        let cq = if caps.shared_cq {
            Cq::from_pool(device, entries, caps.vector, poll)?
        } else {
            Cq::new(device, entries, caps.vector, poll)?
        };
        let mut attr: bindings::ib_qp_init_attr = pin_init::zeroed();
        attr.send_cq = cq.as_raw();
        attr.recv_cq = cq.as_raw();
        attr.cap.max_send_wr = caps.send_wr + 1;
        match &srq {
            Some((raw, _)) => attr.srq = *raw,
            None => attr.cap.max_recv_wr = caps.recv_wr + 1,
        }
        attr.cap.max_send_sge = caps.send_sge;
        attr.cap.max_recv_sge = caps.recv_sge;
        attr.cap.max_rdma_ctxs = caps.rdma_ctxs;
        attr.port_num = self.port_num();
        attr.sq_sig_type = bindings::ib_sig_type_IB_SIGNAL_REQ_WR;
        attr.qp_type = bindings::ib_qp_type_IB_QPT_RC;
        if caps.integrity {
            // (bindgen types the enum as `int` or `unsigned int` depending on the module's
            // other headers: `try_from` fits either.)
            attr.create_flags |=
                u32::try_from(bindings::ib_qp_create_flags_IB_QP_CREATE_INTEGRITY_EN).unwrap_or(0);
        }
        attr.event_handler = Some(qp_event);
        attr.qp_context = self.raw().cast();
        attr.cap.max_inline_data = caps.inline_data;
        let requested = attr;
        let create = |attr: &mut bindings::ib_qp_init_attr| {
            // SAFETY: the id is live and bound to the device PD and CQ belong to; `attr`
            // is valid for the call. The QP's context is the id, which outlives the QP
            // (`Drop` destroys the QP first).
            // (An SRQ belongs to the PD given here: `create_qp_on_srq` passes the SRQ's.)
            to_result(unsafe { bindings::rdma_create_qp(self.raw(), pd.as_raw(), attr) })
        };
        if let Err(error) = create(&mut attr) {
            if caps.inline_data == 0 || error != EINVAL {
                return Err(error);
            }
            // Inline sends are an optimisation: a device that refuses the size (`EINVAL`)
            // gets a QP without them.
            attr = requested;
            attr.cap.max_inline_data = 0;
            create(&mut attr)?;
        }
        // RDMA CM records the QPs it creates under its own name ("rdma_cm", for every
        // kernel user); name this one after the module that owns it, as its id, PD and CQ
        // are, so that `rdma res show qp` tells whose it is.
        // SAFETY: `rdma_create_qp` succeeded, so the id's QP is live and this id owns it;
        // the name is a `'static` C string of this module, which destroys its QPs before
        // it unloads (`rdma_restrack_del` waits for readers), as the id's own name
        // already requires. The QP is published to `rdma res` readers already, so the
        // store is a volatile one (the kernel's WRITE_ONCE): a reader sees the old
        // pointer or the new one, both valid strings.
        unsafe {
            core::ptr::write_volatile(
                &raw mut (*(*self.raw()).qp).res.kern_name,
                crate::MODULE_NAME.as_char_ptr(),
            )
        };
        // SAFETY: `rdma_create_qp` succeeded, so the id's QP is live; `Drop` retires the
        // gate before it destroys the QP.
        let gate = unsafe { gate.open((*self.raw()).qp, self.port_num()) };
        self.verbs = Some(Verbs {
            cq,
            pd,
            srq: srq.map(|(_, kept)| kept),
            drained: Atomic::new(NOT_DRAINED),
            inline_data: attr.cap.max_inline_data,
            records,
            gate,
        });
        Ok(attr.cap.max_send_wr)
    }

    /// Runs, in the caller's context, the handlers of up to `budget` completions waiting
    /// on the QP's CQ, made with [`PollContext::Direct`](crate::rdma::PollContext::Direct),
    /// and returns how many ran. `EBUSY` while another poll or the QP's drain runs them (a
    /// handler that polls its own CQ gets it too), `EINVAL` for a CQ the core's worker
    /// polls or a budget above [`MAX_POLL_BUDGET`](crate::rdma::cq::MAX_POLL_BUDGET),
    /// `ENOTCONN` before the QP exists. May sleep.
    pub(crate) fn poll(&self, budget: u32) -> Result<u32> {
        let verbs = self
            .verbs
            .as_ref()
            .ok_or_else(crate::rdma::code::enotconn)?;
        verbs.cq.poll(budget)
    }

    /// The handler of the id that owns `qp`: for completions that do not say which
    /// connection they belong to (receives taken from an SRQ; see `RecvCqe` and `SlotCqe`).
    ///
    /// # Safety
    ///
    /// `qp` was created by [`CmId::create_qp`] or [`CmId::create_qp_on_srq`] on a
    /// `CmId<T>` that stays alive (with its QP) for `'a`.
    pub(in crate::rdma) unsafe fn handler_of_qp<'a>(qp: *mut bindings::ib_qp) -> ArcBorrow<'a, T> {
        // SAFETY: the QP's context is its id (see `create_qp_with`), whose context is the
        // address of the boxed `Arc<T>` it owns; both live for `'a` by the caller's promise.
        let handler = unsafe {
            let id = (*qp).qp_context.cast::<bindings::rdma_cm_id>();
            &*(*id).context.cast::<Arc<T>>()
        };
        handler.as_arc_borrow()
    }

    /// A handle on the QP for work requests with embedded completion entries and for
    /// `rdma_rw` contexts; `None` before [`CmId::create_qp`]. It may outlive the QP:
    /// posting through it fails once the QP's drain began.
    pub(crate) fn qp_handle(&self) -> Option<QpHandle> {
        let verbs = self.verbs.as_ref()?;
        // (The id closes the gate before it drains the QP and retires it before it
        // destroys the QP: `Verbs::drain`, `Drop`.)
        Some(QpHandle::new(verbs.gate.clone()))
    }

    /// A SEND on the QP of `len` bytes at `offset` of a buffer, whose completion resumes
    /// the slot of the object `place` finds in this id's handler and runs its handler `ID`
    /// (`ENOENT` if it finds none): it is posted from that slot
    /// ([`super::super::slot_post::Owner::post`]), with the buffer. `inline`: the provider
    /// copies the bytes when the SEND is posted (only for as many bytes as the QP takes
    /// inline: [`CmId::max_inline_data`]). `ENOTCONN` before the QP exists, `EINVAL` past
    /// the end of the buffer or for one mapped for another device.
    ///
    /// The object and the buffer live in the handler, which this id keeps until its QP is
    /// drained and destroyed, so the request may be posted as long as the QP takes
    /// requests.
    pub(crate) fn send_wr<S, const ID: u64>(
        &self,
        place: impl for<'a> FnOnce(&'a T) -> Option<(&'a S, &'a DmaBuf)>,
        offset: usize,
        len: u32,
        inline: bool,
    ) -> Result<SendWr>
    where
        S: HasSlotCqe<ID> + QpSlotHandler<ID, Connection = T>,
    {
        // SAFETY: the entry is `S`'s `SlotCqe` `ID`, whose trampoline finds the handler
        // of a `CmId<S::Connection>`, which is `T`, and resumes what `Resumes::of` names.
        let bound = unsafe {
            self.bind_in_handler(
                |handler| {
                    let (owner, buf) = place(handler)?;
                    Some((owner, [Some(Range { buf, offset, len }), None]))
                },
                inline,
                |owner| Entry::of_slot::<S, ID>(owner),
            )
        }?;
        SendWr::new(bound)
    }

    /// A receive on the QP into one or two ranges of buffers, whose completion runs the
    /// receive handler `ID` of the object `place` finds in this id's handler, with the
    /// ranges (`ENOENT` if it finds none), and its first token; posted with
    /// [`QpHandle::post_recv`]. `ENOTCONN` before the QP exists, `EINVAL` for a range past
    /// the end of its buffer or mapped for another device, `EBUSY` if the object's receive
    /// entry is bound to another receive already.
    pub(crate) fn recv_wr<S, const ID: u64>(
        &self,
        place: impl for<'a> FnOnce(&'a T) -> Option<(&'a S, Range<'a>, Option<Range<'a>>)>,
    ) -> Result<(RecvWr, Received)>
    where
        S: QpRecvHandler<ID, Connection = T>,
    {
        // SAFETY: the entry is `S`'s `RecvCqe` `ID`, whose trampoline finds the handler of
        // a `CmId<S::Connection>`, which is `T`, and resumes nothing.
        let bound = unsafe {
            self.bind_in_handler::<S>(
                |handler| {
                    let (owner, first, second) = place(handler)?;
                    Some((owner, [Some(first), second]))
                },
                false,
                Entry::of_receive::<S, ID>,
            )
        }?;
        // SAFETY: the object lives in this id's handler, which the id keeps while `self` is
        // borrowed.
        unsafe { RecvWr::new(bound) }
    }

    /// Binds `rdma_rw` contexts to the QP ([`super::super::rw::RwCtx::bind`]): their
    /// transfers posted alone complete on the entries of the object `place` finds in this
    /// id's handler, READs on handler `R`, WRITEs on handler `W` (`ENOENT` if it finds
    /// none), and resume that object's slot, from which they are posted. `ENOTCONN`
    /// before the QP exists, `EINVAL` if an entry or the slot is not where `S` says.
    pub(crate) fn rw_binding<S, const R: u64, const W: u64>(
        &self,
        place: impl for<'a> Fn(&'a T) -> Option<&'a S>,
    ) -> Result<RwBinding>
    where
        S: HasSlotCqe<R>
            + QpSlotHandler<R, Connection = T>
            + HasSlotCqe<W>
            + QpSlotHandler<W, Connection = T>,
    {
        // (one handle, moved into the binding: a connection binds a context per slot, and
        // each clone of a handle is a locked instruction to take and one to give back)
        let qp = self.qp_handle().ok_or_else(crate::rdma::code::enotconn)?;
        let handler = self.handler();
        let owner = place(&handler).ok_or(ENOENT)?;
        let from_remote = Entry::of_slot::<S, R>(owner)?;
        let to_remote = Entry::of_slot::<S, W>(owner)?;
        // SAFETY: the entries are `owner`'s `SlotCqe`s `R` and `W` (`Entry::of_slot`), whose
        // trampolines find the handler of a `CmId<S::Connection>`, which is `T`; `owner`
        // lives, in place, in this id's handler (`place` borrows it from there for any
        // lifetime), which the id keeps until its QP was drained and destroyed (`Drop`),
        // and `qp` is that QP's handle.
        Ok(unsafe { RwBinding::new(qp, from_remote, to_remote) })
    }

    /// The entry `entry` takes from the object `place` finds in this id's handler, and the
    /// ranges it finds there, bound to the QP. `ENOENT` if it finds none, `ENOTCONN` before
    /// the QP exists, `EINVAL` for a range that is not in its buffer or is mapped for
    /// another device, or an entry or slot that is not where the object's type says
    /// (`entry` refuses it).
    ///
    /// # Safety
    ///
    /// The completions of the entry `entry` takes find this id's handler: a
    /// [`super::super::cqe::SlotCqe`] ([`Entry::of_slot`]) of an `S` whose
    /// `QpSlotHandler::Connection` is `T`, or a [`super::super::cqe::RecvCqe`]
    /// ([`Entry::of_receive`]) of an `S` whose `QpRecvHandler::Connection` is `T`.
    unsafe fn bind_in_handler<S>(
        &self,
        place: impl for<'a> FnOnce(&'a T) -> Option<(&'a S, [Option<Range<'a>>; 2])>,
        inline: bool,
        entry: impl FnOnce(&S) -> Result<Entry>,
    ) -> Result<BoundRequest> {
        // (the QP's identity: the requests are posted through the owner's handle of it)
        let qp = self
            .verbs
            .as_ref()
            .ok_or_else(crate::rdma::code::enotconn)?
            .gate
            .serial();
        let lkey = self
            .pd()
            .ok_or_else(crate::rdma::code::enotconn)?
            .local_dma_lkey();
        let device = self.device().ok_or(ENODEV)?.as_raw() as usize;
        let handler = self.handler();
        let (owner, ranges) = place(&handler).ok_or(ENOENT)?;
        let entry = entry(owner)?;
        // SAFETY: the object and the buffers live, in place, in this id's handler (`place`
        // borrows them from there for any lifetime, so they live as long as the handler),
        // which the id keeps until its QP was drained and destroyed (`Drop`); the entry is
        // at its type's offset from the object, its completions find that handler, and
        // what they resume is the entry's (the function's safety section; `Entry`); `lkey`
        // and `device` are the QP's.
        unsafe { BoundRequest::new(PostTarget::Qp(qp), entry, &ranges, device, lkey, inline) }
    }

    /// The QP, once created.
    pub(crate) fn qp(&self) -> Option<Qp<'_>> {
        let (verbs, qp) = self.raw_qp()?;
        // SAFETY: the QP lives as long as `self` is borrowed, and `Drop` drains it before
        // destroying it; its `records` go only after its CQ (field order of `Verbs`).
        Some(unsafe { Qp::from_raw(qp, self.port_num(), &verbs.records, &verbs.gate) })
    }

    /// The verbs resources and the raw QP (`id->qp`); `None` before [`CmId::create_qp`].
    fn raw_qp(&self) -> Option<(&Verbs, NonNull<bindings::ib_qp>)> {
        let verbs = self.verbs.as_ref()?;
        // SAFETY: the id is live and `verbs` says it has a QP (type invariant of `CmId`).
        let qp = NonNull::new(unsafe { (*self.raw()).qp })?;
        Some((verbs, qp))
    }

    /// `len` bytes of `buf` at `offset`, with the PD's local DMA lkey: the usual local side
    /// of a work request. `ENOTCONN` before the QP exists.
    pub(crate) fn dma_local<'a>(
        &'a self,
        buf: &'a DmaBuf,
        offset: usize,
        len: u32,
    ) -> Result<Local<'a>> {
        let pd = self.pd().ok_or_else(crate::rdma::code::enotconn)?;
        Ok(Local::dma(pd, buf, offset, len))
    }

    /// Bytes a send on the QP may carry inline (`IB_SEND_INLINE`); 0 before the QP exists
    /// or if the device offers no inline sends.
    pub(crate) fn max_inline_data(&self) -> u32 {
        self.verbs.as_ref().map_or(0, |verbs| verbs.inline_data)
    }

    /// The PD under the QP, once created.
    pub(crate) fn pd(&self) -> Option<&Arc<Pd>> {
        self.verbs.as_ref().map(|verbs| &verbs.pd)
    }

    /// Disconnects and drains the QP: when this returns, the peer can no longer reach local
    /// memory through the connection and every posted work request has completed. For an
    /// operation abandoned while the peer may still READ or WRITE its buffers. Must not be
    /// called from a completion callback of the QP's CQ. Returns what shows the drain
    /// (for [`super::super::rw::RwCtx::destroy`]).
    pub(crate) fn shut_down(&self) -> Drained<'_> {
        let _ = self.disconnect();
        let Some(verbs) = &self.verbs else {
            return Drained::no_qp();
        };
        let qp = self.qp().map_or(0, |qp| qp.address());
        // SAFETY: the QP exists while `verbs` is set (invariant); the caller runs in
        // process context outside the CQ's completion callbacks, as draining needs. Once
        // `drain` returned, the QP at `qp` is drained, and it lives while the id is
        // borrowed.
        unsafe {
            verbs.drain(self.raw());
            Drained::new(qp)
        }
    }
}

/// QP events: the first message on a connection whose CM handshake has not finished yet
/// (`IB_EVENT_COMM_EST`) tells RDMA CM it is established, as the CM documentation asks.
///
/// # Safety
///
/// Called by the RDMA core for a QP made by [`CmId::create_qp`], whose context is its id.
unsafe extern "C" fn qp_event(event: *mut bindings::ib_event, context: *mut core::ffi::c_void) {
    // SAFETY: the core passes a valid event for the call.
    let kind = unsafe { (*event).event };
    if kind == bindings::ib_event_type_IB_EVENT_COMM_EST {
        // SAFETY: the context is the live id that owns the QP (see `create_qp`).
        unsafe { bindings::rdma_notify(context.cast(), kind) };
    }
}
