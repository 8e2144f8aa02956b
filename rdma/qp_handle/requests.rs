// SPDX-License-Identifier: GPL-2.0

//! Prepared work requests for a [`super::QpHandle`]: a SEND ([`SendWr`]) and a receive
//! ([`RecvWr`]) made once from a [`BoundRequest`] (a completion entry, [`Entry`], and the
//! buffer ranges, [`Range`], bound to where they are posted, [`PostTarget`]) and posted
//! again for each message.

use super::super::{
    bindings,
    cqe::{HasRecvCqe, HasSlotCqe, Received, RecvCqe, RecvState, SlotCqe},
    slot_post::{Prepared, Resumes},
    DmaBuf,
};
use super::QpSerial;
use core::ptr::{self, NonNull};
use kernel::prelude::*;

/// A signaled SEND of one local buffer whose completion runs a [`super::super::Cqe`]'s handler; made
/// once by the CM id that owns the QP ([`super::super::CmId::send_wr`]) and posted again, on
/// that QP, for each message.
///
/// # Invariants
///
/// Made from a [`BoundRequest`] for the QP `qp` names: its completion entry, and the
/// memory it names (by DMA or CPU address), outlive its posts there (the QP's drain ends
/// them: a post through a handle of that QP passes its gate first).
pub(crate) struct SendWr {
    wr: bindings::ib_send_wr,
    sge: bindings::ib_sge,
    /// The address of the request's completion entry (its `wr_cqe`), only compared.
    cqe: usize,
    /// What its completion resumes.
    resumes: Option<Resumes>,
    qp: QpSerial,
}

// SAFETY: the pointers in the request are read only when it is posted, from whichever CPU
// the owner posts it on (through a handle of its QP, which may be on any CPU).
unsafe impl Send for SendWr {}

impl SendWr {
    /// A SEND of the one range of `bound`, on the QP it is bound to and completing on its
    /// entry. `EINVAL` for a request bound to an SRQ or to a receive's entry, or without
    /// exactly one range.
    pub(in crate::rdma) fn new(bound: BoundRequest) -> Result<Self> {
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
    pub(in crate::rdma) fn completion_key(&self) -> usize {
        self.cqe
    }

    /// The QP the request is posted on.
    pub(in crate::rdma) fn qp(&self) -> QpSerial {
        self.qp
    }

    /// What the request's completion resumes.
    pub(in crate::rdma) fn resumes(&self) -> Option<Resumes> {
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
    pub(in crate::rdma) fn as_ptr(&mut self) -> *mut bindings::ib_send_wr {
        self.wr.sg_list = &mut self.sge;
        self.wr.next = ptr::null_mut();
        &mut self.wr
    }

    /// The SEND alone, ready to post on its QP ([`super::super::slot_post::Owner::post`]).
    pub(crate) fn prepare(&mut self) -> Prepared<'_> {
        let first = self.as_ptr();
        // SAFETY: the request is valid, lives in what `self` borrows, and is for the QP
        // `qp` names (its entry and memory outlive its posts there: type invariant); its
        // completion resumes what it was bound with.
        unsafe { Prepared::new(first, self.qp, self.resumes) }
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
pub(in crate::rdma) enum PostTarget {
    /// On the QP with this identity, through a handle of it.
    Qp(QpSerial),
    /// On the SRQ with this identity (unique for the module's life: the SRQ owns its
    /// requests).
    Srq(u64),
}

/// What a prepared work request is made of, bound to where it is posted: its completion
/// entry and the local memory it names, which outlive its completions there. Made by the
/// owner of that QP or SRQ ([`super::super::CmId::send_wr`] and the like, [`super::super::Srq::recv_wr`])
/// from an entry and buffers it holds.
///
/// # Invariants
///
/// The entry at `cqe` is at its type's offset from an object ([`super::super::Cqe::placed`],
/// [`super::super::cqe::SlotCqe::placed`]). The object, with its entry, and the memory `sges`
/// name (mapped for the device of `on`), stay alive and in place as long as requests
/// posted on `on` can complete (until the QP was drained, or the SRQ destroyed); an entry
/// (a [`super::super::cqe::SlotCqe`] or a [`super::super::cqe::RecvCqe`]) lives where the
/// completions on `on` find it: in the handler of the CM id that owns the QP, or in an SRQ that only QPs of such ids use. `inline`: the first entry
/// is a CPU address, for a send posted with `IB_SEND_INLINE`. `recv` is set exactly when
/// the entry is a [`super::super::cqe::RecvCqe`]'s, and is then that entry's receive state.
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
/// [`super::super::cqe::SlotCqe`] with `resumes` set to what it resumes
/// ([`Resumes::of`]) and no `recv`, or a [`super::super::cqe::RecvCqe`] with its `recv` state and no
/// `resumes`.
pub(in crate::rdma) struct Entry {
    cqe: *mut bindings::ib_cqe,
    resumes: Option<Resumes>,
    recv: Option<NonNull<RecvState>>,
}

impl Entry {
    /// The resuming entry of `owner` for handler `ID`, with the slot it resumes: `EINVAL` if
    /// the entry or the slot is not where `S` says ([`SlotCqe::placed`],
    /// [`super::super::cqe::placed_slot`]).
    pub(in crate::rdma) fn of_slot<S: HasSlotCqe<ID>, const ID: u64>(owner: &S) -> Result<Self> {
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
    pub(in crate::rdma) fn of_receive<S: HasRecvCqe<ID>, const ID: u64>(owner: &S) -> Result<Self> {
        let entry = RecvCqe::placed(owner)?;
        // INVARIANT: `owner`'s `RecvCqe` `ID`, at its offset, with its state.
        Ok(Self {
            cqe: entry.as_raw(),
            resumes: None,
            recv: Some(NonNull::from(entry.state())),
        })
    }

    /// The entry's address, for a work request.
    pub(in crate::rdma) fn cqe(&self) -> *mut bindings::ib_cqe {
        self.cqe
    }

    /// What the completion of a request carrying the entry resumes.
    pub(in crate::rdma) fn resumes(&self) -> Option<Resumes> {
        self.resumes
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
    pub(in crate::rdma) unsafe fn new(
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
}

/// The request and entries of a [`RecvWr`], boxed so that the request's pointer to its
/// entries stays valid wherever the `RecvWr` moves.
struct RecvWrInner {
    wr: bindings::ib_recv_wr,
    sge: [bindings::ib_sge; 2],
}

/// A receive into one or two local buffer ranges whose completion runs a
/// [`super::super::cqe::RecvCqe`]'s handler; made once for one QP ([`super::super::CmId::recv_wr`]) or
/// SRQ ([`super::super::Srq::recv_wr`]) and posted again there ([`QpHandle::post_recv`],
/// [`super::super::Srq::post`]) for each message, each post with the token ([`Received`]) that
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
    pub(in crate::rdma) target: PostTarget,
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
    pub(in crate::rdma) unsafe fn new(bound: BoundRequest) -> Result<(Self, Received)> {
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
    pub(in crate::rdma) fn as_ptr(&self) -> *const bindings::ib_recv_wr {
        &self.inner.wr
    }

    /// Posts the receive with `post` (the provider's post on the request's target, given
    /// the request and where the provider points at a request it refused), with
    /// `received`, its token (`EINVAL`, and the token back, if it is not). On failure, the
    /// error, and the token if nothing was posted.
    ///
    /// # Safety
    ///
    /// The request's entry lives: it may be posted on its target now (its QP's drain did
    /// not begin, its SRQ is borrowed); `post` posts it there, and only there.
    pub(in crate::rdma) unsafe fn post_with(
        &self,
        received: Received,
        post: impl FnOnce(*const bindings::ib_recv_wr, &mut *const bindings::ib_recv_wr) -> i32,
    ) -> Result<(), (Error, Option<Received>)> {
        // SAFETY: the caller's promise.
        let state = unsafe { self.state() };
        let id = state
            .to_device(received)
            .map_err(|received| (EINVAL, Some(received)))?;
        let mut bad: *const bindings::ib_recv_wr = ptr::null();
        let ret = post(self.as_ptr(), &mut bad);
        super::super::to_result(ret).map_err(|e| {
            let token = ptr::eq(bad, self.as_ptr()).then(|| {
                // SAFETY: `id` is what `to_device` gave, and the provider refused the post.
                unsafe { state.refused(id) }
            });
            (e, token)
        })
    }

    /// The receive's state.
    ///
    /// # Safety
    ///
    /// The request's entry lives: it may be posted on its target now (its QP's drain did
    /// not begin, its SRQ is borrowed).
    pub(in crate::rdma) unsafe fn state(&self) -> &RecvState {
        // SAFETY: the state lives as the entry does (type invariant), which lives now (the
        // function's safety section).
        unsafe { self.state.as_ref() }
    }
}
