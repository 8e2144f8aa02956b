// SPDX-License-Identifier: GPL-2.0

//! A handle on a QP for work requests whose completion entries are embedded in their
//! poster's own objects ([`super::Cqe`]) rather than in the layer's heap records (see
//! `qp.rs`): the data path of a transport, whose slots live as long as their queue, and
//! its `rdma_rw` contexts ([`super::rw::RwCtx`]). Sends and receives are prepared once
//! ([`SendWr`], [`RecvWr`]) and posted again for each message.

use super::{bindings, cqe::Cqe, slot::Prepared, DmaBuf};
use core::ptr::{self, NonNull};
use kernel::prelude::*;

/// A QP on which the owner posts work requests with embedded completion entries; made by
/// [`super::CmId::qp_handle`].
///
/// # Invariants
///
/// `qp` is a live QP of port `port`, and stays live while the handle or a clone of it is
/// used (including by an `rdma_rw` context mapped through it, until the context is
/// destroyed). (The promise of the caller of [`super::CmId::qp_handle`].)
#[derive(Clone)]
pub(crate) struct QpHandle {
    qp: NonNull<bindings::ib_qp>,
    port: u32,
}

// SAFETY: a QP may be posted to from any CPU (the drivers lock their queues); the handle
// holds nothing else.
unsafe impl Send for QpHandle {}
// SAFETY: as above.
unsafe impl Sync for QpHandle {}

impl QpHandle {
    /// Wraps `qp` of port `port`.
    ///
    /// # Safety
    ///
    /// As the type's invariants say.
    pub(super) unsafe fn new(qp: NonNull<bindings::ib_qp>, port: u32) -> Self {
        // INVARIANT: the caller's promise.
        Self { qp, port }
    }

    /// The QP, for the layer's calls into the RDMA core.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.qp.as_ptr()
    }

    /// The port the QP uses.
    pub(crate) fn port_num(&self) -> u32 {
        self.port
    }

    /// Posts the chain of send work requests that starts at `first`. On failure, whether
    /// the provider refused the chain's first request (nothing was posted): a provider may
    /// also fail after it queued part of the chain, or all of it (siw, when it cannot start
    /// sending), and those requests complete later, if only when the QP is drained.
    ///
    /// # Safety
    ///
    /// `first` and the requests it links to are valid for the call; the completion entry
    /// each carries, and the memory it points to, stay alive and in place until its
    /// completion ran or the QP was drained.
    pub(super) unsafe fn post_send_raw(
        &self,
        first: *const bindings::ib_send_wr,
    ) -> Result<(), (Error, bool)> {
        let mut bad: *const bindings::ib_send_wr = ptr::null();
        // SAFETY: the QP is live (type invariant); the provider copies the requests before
        // it returns (the function's safety section), and may point `bad` at one of them.
        let ret = unsafe { bindings::rdma_rs_ib_post_send(self.as_raw(), first, &mut bad) };
        kernel::error::to_result(ret).map_err(|e| (e, ptr::eq(bad, first)))
    }

    /// Posts the receive `wr`.
    pub(crate) fn post_recv(&self, wr: &RecvWr) -> Result {
        // SAFETY: the QP is live (type invariant); the provider copies `wr` before it
        // returns; its completion entry and buffers outlive it (`RecvWr`'s invariant).
        let ret =
            unsafe { bindings::rdma_rs_ib_post_recv(self.as_raw(), wr.as_ptr(), ptr::null_mut()) };
        kernel::error::to_result(ret)
    }
}

/// A signaled SEND of one local buffer whose completion runs a [`Cqe`]'s handler; made once
/// and posted again for each message.
///
/// # Invariants
///
/// The completion entry and the buffer the request names stay alive and in place while it
/// is posted, until its completion ran or its QP was drained (the promise of
/// [`SendWr::new`]'s caller).
pub(crate) struct SendWr {
    wr: bindings::ib_send_wr,
    sge: bindings::ib_sge,
    /// The address of the request's completion entry (its `wr_cqe`), only compared.
    cqe: usize,
}

// SAFETY: the pointers in the request are read only when it is posted, from whichever CPU
// the owner posts it on.
unsafe impl Send for SendWr {}

impl SendWr {
    /// A SEND of `len` bytes at `offset` of `buf` (registered with `lkey`), whose
    /// completion runs `T`'s handler `ID`. `inline`: the provider copies the bytes when the
    /// SEND is posted (`IB_SEND_INLINE`; only for as many bytes as the QP takes inline).
    /// `EINVAL` past the end of `buf`.
    ///
    /// # Safety
    ///
    /// The object that embeds `cqe`, and `buf`'s memory, stay alive and in place while the
    /// request is posted, until its completion ran or its QP was drained: for every post
    /// of the request, on whichever QP, for as long as it exists (posting is safe); an
    /// entry made with [`Cqe::on_qp`] is posted only on QPs of its connection type.
    pub(crate) unsafe fn new<T, const ID: u64>(
        cqe: &Cqe<T, ID>,
        buf: &DmaBuf,
        offset: usize,
        len: u32,
        lkey: u32,
        inline: bool,
    ) -> Result<Self> {
        let mut flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        let sge = if inline {
            flags |= bindings::ib_send_flags_IB_SEND_INLINE;
            buf.inline_sge(offset, len)?
        } else {
            if offset.checked_add(len as usize).ok_or(EINVAL)? > buf.len() {
                return Err(EINVAL);
            }
            bindings::ib_sge {
                addr: buf.dma_addr(offset),
                length: len,
                lkey,
            }
        };
        let mut wr = bindings::ib_send_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe.as_raw();
        wr.num_sge = 1;
        wr.opcode = bindings::ib_wr_opcode_IB_WR_SEND;
        wr.send_flags = flags;
        // INVARIANT: the caller's promise.
        Ok(Self {
            wr,
            sge,
            cqe: cqe.as_raw() as usize,
        })
    }

    /// The address of the request's completion entry, which its completion names.
    pub(super) fn completion_key(&self) -> usize {
        self.cqe
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

    /// The SEND alone, ready to post on `qp` ([`super::slot::Owner::post`]).
    pub(crate) fn prepare(&mut self, qp: &QpHandle) -> Prepared<'_> {
        let first = self.as_ptr();
        // SAFETY: the request is valid and lives in what `self` borrows.
        unsafe { Prepared::new(first, qp.clone()) }
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
    /// The scatter/gather entry of the range, registered with `lkey`; `EINVAL` past the
    /// end of the buffer.
    fn sge(&self, lkey: u32) -> Result<bindings::ib_sge> {
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

/// The request and entries of a [`RecvWr`], boxed so that the request's pointer to its
/// entries stays valid wherever the `RecvWr` moves.
struct RecvWrInner {
    wr: bindings::ib_recv_wr,
    sge: [bindings::ib_sge; 2],
}

/// A receive into one or two local buffer ranges whose completion runs a [`Cqe`]'s
/// handler; made once and posted again for each message, on a QP ([`QpHandle::post_recv`])
/// or an SRQ ([`super::Srq::post`]).
///
/// # Invariants
///
/// The boxed request's `sg_list` points at the box's own entries; the request is not
/// changed after creation. The completion entry and the memory of the ranges stay alive and
/// in place while the request is posted, until its completion ran or its QP or SRQ was
/// drained or destroyed (the promise of [`RecvWr::new`]'s caller).
pub(crate) struct RecvWr(KBox<RecvWrInner>);

// SAFETY: the request is read-only after creation and only read when posted, from any CPU.
unsafe impl Send for RecvWr {}
// SAFETY: as above.
unsafe impl Sync for RecvWr {}

impl RecvWr {
    /// A receive into `first` and, if given, `second` (both registered with `lkey`), whose
    /// completion runs `T`'s handler `ID`. `EINVAL` for a range past the end of its buffer.
    ///
    /// # Safety
    ///
    /// The object that embeds `cqe`, and the ranges' memory, stay alive and in place while
    /// the request is posted, until its completion ran or its QP or SRQ was drained or
    /// destroyed: for every post of the request, on whichever QP or SRQ, for as long as it
    /// exists (posting is safe); an entry made with [`Cqe::on_qp`] is posted only on QPs
    /// of its connection type, or on an SRQ only they take from.
    pub(crate) unsafe fn new<T, const ID: u64>(
        cqe: &Cqe<T, ID>,
        lkey: u32,
        first: Range<'_>,
        second: Option<Range<'_>>,
    ) -> Result<Self> {
        let mut sge = [bindings::ib_sge::default(); 2];
        sge[0] = first.sge(lkey)?;
        let mut num_sge = 1;
        if let Some(second) = second {
            sge[1] = second.sge(lkey)?;
            num_sge = 2;
        }
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_cqe = cqe.as_raw();
        wr.num_sge = num_sge;
        let mut inner = KBox::new(RecvWrInner { wr, sge }, GFP_KERNEL)?;
        inner.wr.sg_list = inner.sge.as_mut_ptr();
        // INVARIANT: `sg_list` points into the box; the rest is the caller's promise.
        Ok(Self(inner))
    }

    /// The request, for posting.
    pub(super) fn as_ptr(&self) -> *const bindings::ib_recv_wr {
        &self.0.wr
    }
}
