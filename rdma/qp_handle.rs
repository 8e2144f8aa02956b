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
//! after the drain fails with `ENOTCONN`, and nothing reaches a destroyed QP.

use super::{
    bindings,
    cqe::{HasRecvCqe, HasSlotCqe, Received, RecvCqe, RecvState, SlotCqe},
    slot::{Prepared, Resumes},
    DmaBuf,
};
use core::{
    mem::MaybeUninit,
    ptr::{self, NonNull},
    sync::atomic::{AtomicU32, Ordering::SeqCst},
};
use kernel::{
    prelude::*,
    sync::{Arc, UniqueArc},
};

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
    /// completion ran or the QP was drained; an entry made with [`super::Cqe::on_qp`], or a
    /// [`super::cqe::SlotCqe`], lives where the QP's completions find it (the handler of
    /// the id that owns the QP, whose type is the entry's handler's `Connection`); a
    /// `SlotCqe` is carried only by requests posted from its object's slot
    /// ([`super::slot::Owner::post`]), last in their chain.
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
    /// ([`super::slot::Owner::post`]).
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

/// A signaled SEND of one local buffer whose completion runs a [`super::Cqe`]'s handler; made
/// once by the CM id that owns the QP ([`super::CmId::send_wr`]) and posted again, on
/// that QP, for each message.
///
/// # Invariants
///
/// Made from a [`BoundRequest`] for `qp`: its completion entry, and the memory it names
/// (by DMA or CPU address), outlive its posts there.
pub(crate) struct SendWr {
    wr: bindings::ib_send_wr,
    sge: bindings::ib_sge,
    /// The address of the request's completion entry (its `wr_cqe`), only compared.
    cqe: usize,
    /// What its completion resumes.
    resumes: Option<Resumes>,
    qp: QpHandle,
}

// SAFETY: the pointers in the request are read only when it is posted, from whichever CPU
// the owner posts it on; the handle may move between CPUs.
unsafe impl Send for SendWr {}

impl SendWr {
    /// A SEND of the one range of `bound`, on the QP it is bound to and completing on its
    /// entry. `EINVAL` for a request bound to an SRQ or to a receive's entry, or without
    /// exactly one range.
    pub(super) fn new(bound: BoundRequest) -> Result<Self> {
        let BoundRequest {
            on,
            cqe,
            sges,
            num_sge,
            inline,
            resumes,
            recv,
        } = bound;
        let PostTarget::Qp(qp) = on else {
            return Err(EINVAL);
        };
        if recv.is_some() {
            // (a receive's entry: its completion would give the receive's buffers back)
            return Err(EINVAL);
        }
        if num_sge != 1 {
            return Err(EINVAL);
        }
        let mut flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        if inline {
            flags |= bindings::ib_send_flags_IB_SEND_INLINE;
        }
        let mut wr = bindings::ib_send_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe;
        wr.num_sge = 1;
        wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND;
        wr.send_flags = flags;
        // INVARIANT: from a request bound to `qp`.
        Ok(Self {
            wr,
            sge: sges[0],
            cqe: cqe as usize,
            resumes,
            qp,
        })
    }

    /// The address of the request's completion entry, which its completion names.
    pub(super) fn completion_key(&self) -> usize {
        self.cqe
    }

    /// The QP the request is posted on.
    pub(super) fn qp(&self) -> &QpHandle {
        &self.qp
    }

    /// What the request's completion resumes.
    pub(super) fn resumes(&self) -> Option<Resumes> {
        self.resumes
    }

    /// Sends with invalidate of the peer's `rkey` (`IB_WR_SEND_WITH_INV`), or a plain SEND.
    pub(crate) fn set_invalidate(&mut self, rkey: Option<u32>) {
        match rkey {
            Some(rkey) => {
                self.wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV;
                self.wr.ex.invalidate_rkey = rkey;
            }
            None => self.wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND,
        }
    }

    /// The request, pointed at its entry where it is now, for posting at once.
    pub(super) fn as_ptr(&mut self) -> *mut bindings::ib_send_wr {
        self.wr.sg_list = &mut self.sge;
        self.wr.next = ptr::null_mut();
        &mut self.wr
    }

    /// The SEND alone, ready to post on its QP ([`super::slot::Owner::post`]).
    pub(crate) fn prepare(&mut self) -> Prepared<'_> {
        let first = self.as_ptr();
        // SAFETY: the request is valid, lives in what `self` borrows, and is for `qp`
        // (its entry and memory outlive its posts there: type invariant); its completion
        // resumes what it was bound with.
        unsafe { Prepared::new(first, &self.qp, self.resumes) }
    }
}

/// A local buffer range for a prepared work request: `len` bytes at `offset` of `buf`.
pub(crate) struct Range<'a> {
    /// The buffer.
    pub(crate) buf: &'a DmaBuf,
    /// Where the range starts in it.
    pub(crate) offset: usize,
    /// Its length in bytes.
    pub(crate) len: u32,
}

impl Range<'_> {
    /// The scatter/gather entry of the range: by DMA address, registered with `lkey`, or
    /// `inline` by CPU address (the provider copies the bytes at post time). `EINVAL` past
    /// the end of the buffer, or if the buffer is not mapped for device `device` (an
    /// address, only compared).
    fn sge(&self, device: usize, lkey: u32, inline: bool) -> Result<bindings::ib_sge> {
        if self.buf.device().as_raw() as usize != device {
            return Err(EINVAL);
        }
        if inline {
            return self.buf.inline_sge(self.offset, self.len);
        }
        if self.offset.checked_add(self.len as usize).ok_or(EINVAL)? > self.buf.len() {
            return Err(EINVAL);
        }
        Ok(bindings::ib_sge {
            addr: self.buf.dma_addr(self.offset),
            length: self.len,
            lkey,
        })
    }
}

/// Where work requests are posted.
pub(super) enum PostTarget {
    /// On a QP, through its handle.
    Qp(QpHandle),
    /// On the SRQ with this identity (unique for the module's life: the SRQ owns its
    /// requests).
    Srq(u64),
}

/// What a prepared work request is made of, bound to where it is posted: its completion
/// entry and the local memory it names, which outlive its completions there. Made by the
/// owner of that QP or SRQ ([`super::CmId::send_wr`] and the like, [`super::Srq::recv_wr`])
/// from an entry and buffers it holds.
///
/// # Invariants
///
/// The entry at `cqe` is at its type's offset from an object ([`super::Cqe::placed`],
/// [`super::cqe::SlotCqe::placed`]). The object, with its entry, and the memory `sges`
/// name (mapped for the device of `on`), stay alive and in place as long as requests
/// posted on `on` can complete (until the QP was drained, or the SRQ destroyed); an entry
/// made with
/// [`super::Cqe::on_qp`] lives where the completions on `on` find it: in the handler of the CM id
/// that owns the QP, or in an SRQ that only QPs of such ids use. `inline`: the first entry
/// is a CPU address, for a send posted with `IB_SEND_INLINE`. `recv` is set exactly when
/// the entry is a [`super::cqe::RecvCqe`]'s, and is then that entry's receive state.
pub(crate) struct BoundRequest {
    on: PostTarget,
    cqe: *mut bindings::ib_cqe,
    sges: [bindings::ib_sge; 2],
    num_sge: u32,
    inline: bool,
    /// What the completion of a request carrying the entry resumes: the slot of the
    /// entry's object, made with [`Resumes::of`] for it (`None`: no slot).
    resumes: Option<Resumes>,
    /// The receive's state, for a receive's entry.
    recv: Option<NonNull<RecvState>>,
}

/// The completion entry a request is bound with: its address, what its completion
/// resumes, and a receive entry's state.
///
/// # Invariants
///
/// `cqe` is the entry of an object `S`, at its type's offset from it: a
/// [`super::cqe::SlotCqe`] with `resumes` set to what it resumes
/// ([`Resumes::of`]) and no `recv`, or a [`super::cqe::RecvCqe`] with its `recv` state and no
/// `resumes`.
pub(super) struct Entry {
    cqe: *mut bindings::ib_cqe,
    resumes: Option<Resumes>,
    recv: Option<NonNull<RecvState>>,
}

impl Entry {
    /// The resuming entry of `owner` for handler `ID`, with the slot it resumes: `EINVAL` if
    /// the entry or the slot is not where `S` says ([`SlotCqe::placed`],
    /// [`super::cqe::placed_slot`]).
    pub(super) fn of_slot<S: HasSlotCqe<ID>, const ID: u64>(owner: &S) -> Result<Self> {
        let entry = SlotCqe::placed(owner)?;
        // INVARIANT: `owner`'s `SlotCqe` `ID`, at its offset, and what it resumes.
        Ok(Self {
            cqe: entry.as_raw(),
            resumes: Some(Resumes::of::<S, ID>(owner)?),
            recv: None,
        })
    }

    /// The receive entry of `owner` for handler `ID`, with its state: `EINVAL` if it is not
    /// where `S` says ([`RecvCqe::placed`]).
    pub(super) fn of_receive<S: HasRecvCqe<ID>, const ID: u64>(owner: &S) -> Result<Self> {
        let entry = RecvCqe::placed(owner)?;
        // INVARIANT: `owner`'s `RecvCqe` `ID`, at its offset, with its state.
        Ok(Self {
            cqe: entry.as_raw(),
            resumes: None,
            recv: Some(NonNull::from(entry.state())),
        })
    }
}

impl BoundRequest {
    /// Binds `entry`, and `ranges` (the first ones given; registered with `lkey`, or
    /// `inline` by CPU address), to `on`, whose device is `device` (an address, only
    /// compared). `EINVAL` for a range past the end of its buffer or mapped for another
    /// device, or one given after a missing one.
    ///
    /// # Safety
    ///
    /// As the type's invariants say, for the object `entry` was taken from
    /// ([`Entry::of_slot`], [`Entry::of_receive`]) and the ranges' buffers.
    pub(super) unsafe fn new(
        on: PostTarget,
        entry: Entry,
        ranges: &[Option<Range<'_>>; 2],
        device: usize,
        lkey: u32,
        inline: bool,
    ) -> Result<Self> {
        let mut sges = [bindings::ib_sge::default(); 2];
        let mut num_sge = 0;
        for (sge, range) in sges.iter_mut().zip(ranges) {
            let Some(range) = range else {
                break;
            };
            *sge = range.sge(device, lkey, inline)?;
            num_sge += 1;
        }
        if ranges.iter().skip(num_sge as usize).any(Option::is_some) {
            return Err(EINVAL);
        }
        // INVARIANT: the caller's promise; the entries were checked against their buffers
        // and device; `recv` is the state beside a receive entry (`Entry::of_receive`).
        Ok(Self {
            on,
            cqe: entry.cqe,
            sges,
            num_sge,
            inline,
            resumes: entry.resumes,
            recv: entry.recv,
        })
    }

    /// Whether the entry is a receive's ([`super::cqe::RecvCqe`]), which only a
    /// [`RecvWr`] carries.
    pub(super) fn is_receive(&self) -> bool {
        self.recv.is_some()
    }

    /// The QP the request is bound to; `None` for an SRQ.
    pub(super) fn qp(&self) -> Option<&QpHandle> {
        match &self.on {
            PostTarget::Qp(qp) => Some(qp),
            PostTarget::Srq(_) => None,
        }
    }

    /// The entry, for a work request.
    pub(super) fn cqe(&self) -> *mut bindings::ib_cqe {
        self.cqe
    }

    /// What the completion of a request carrying the entry resumes.
    pub(super) fn resumes(&self) -> Option<Resumes> {
        self.resumes
    }
}

/// The request and entries of a [`RecvWr`], boxed so that the request's pointer to its
/// entries stays valid wherever the `RecvWr` moves.
struct RecvWrInner {
    wr: bindings::ib_recv_wr,
    sge: [bindings::ib_sge; 2],
}

/// A receive into one or two local buffer ranges whose completion runs a
/// [`super::cqe::RecvCqe`]'s handler; made once for one QP ([`super::CmId::recv_wr`]) or
/// SRQ ([`super::Srq::recv_wr`]) and posted again there ([`QpHandle::post_recv`],
/// [`super::Srq::post`]) for each message, each post with the token ([`Received`]) that
/// the completion of the last one gave back.
///
/// # Invariants
///
/// The boxed request's `sg_list` points at the box's own entries; the request is not
/// changed after creation. It is posted only on `target`, and was made from a
/// [`BoundRequest`] for it: its completion entry and memory outlive its posts there.
/// `state` is the state beside that entry (a `RecvCqe`'s), bound to this request (the
/// only one the entry is bound to): it lives as the entry does.
pub(crate) struct RecvWr {
    inner: KBox<RecvWrInner>,
    state: NonNull<RecvState>,
    pub(super) target: PostTarget,
}

// SAFETY: the request is read-only after creation and only read when posted, from any CPU;
// the receive's state is atomic.
unsafe impl Send for RecvWr {}
// SAFETY: as above.
unsafe impl Sync for RecvWr {}

impl RecvWr {
    /// A receive into the ranges of `bound`, on the QP or SRQ it is bound to and completing
    /// on its receive entry, with the receive's first token (for its first post). `EINVAL`
    /// for an inline or empty one, or one bound to an entry that is not a receive's;
    /// `EBUSY` if the entry is bound to another receive already.
    ///
    /// # Safety
    ///
    /// The object whose entry `bound` carries is alive for the call (its owner is
    /// borrowed: the call is made while what `bound` was made from is).
    pub(super) unsafe fn new(bound: BoundRequest) -> Result<(Self, Received)> {
        let BoundRequest {
            on: target,
            cqe,
            sges,
            num_sge,
            inline,
            recv,
            ..
        } = bound;
        let Some(state) = recv else {
            return Err(EINVAL);
        };
        if inline || num_sge == 0 {
            return Err(EINVAL);
        }
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe;
        wr.num_sge = num_sge as i32;
        let mut inner = KBox::new(RecvWrInner { wr, sge: sges }, GFP_KERNEL)?;
        inner.wr.sg_list = inner.sge.as_mut_ptr();
        // SAFETY: the state beside the entry (`BoundRequest`'s invariant), alive for the
        // call (the function's safety section).
        let received = unsafe { state.as_ref() }.bind()?;
        // INVARIANT: `sg_list` points into the box; made from a request bound to `target`;
        // the entry's state, bound to this request (`bind` binds it once).
        Ok((
            Self {
                inner,
                state,
                target,
            },
            received,
        ))
    }

    /// The request, for posting.
    pub(super) fn as_ptr(&self) -> *const bindings::ib_recv_wr {
        &self.inner.wr
    }

    /// The receive's state.
    ///
    /// # Safety
    ///
    /// The request's entry lives: it may be posted on its target now (its QP's drain did
    /// not begin, its SRQ is borrowed).
    pub(super) unsafe fn state(&self) -> &RecvState {
        // SAFETY: the state lives as the entry does (type invariant), which lives now (the
        // function's safety section).
        unsafe { self.state.as_ref() }
    }
}
