// SPDX-License-Identifier: GPL-2.0

//! A handle on a QP for work requests whose completion entries are embedded in their
//! poster's own objects ([`super::Cqe`]) rather than in the layer's heap records (see
//! `qp.rs`): the data path of a transport, whose slots live as long as their queue, and
//! its `rdma_rw` contexts ([`super::rw::RwCtx`]). Sends are prepared once ([`SendWr`]) and
//! posted again for each message.

use super::{
    bindings,
    cqe::{Cqe, CqeHandler, HasCqe},
    DmaBuf,
};
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

    /// Posts the chain of send work requests that starts at `first`.
    ///
    /// # Safety
    ///
    /// `first` and the requests it links to are valid for the call; the completion entry
    /// each carries, and the memory it points to, stay alive and in place until its
    /// completion ran or the QP was drained.
    pub(super) unsafe fn post_send_raw(&self, first: *const bindings::ib_send_wr) -> Result {
        // SAFETY: the QP is live (type invariant); the provider copies the requests before
        // it returns (the function's safety section).
        let ret = unsafe { bindings::rdma_rs_ib_post_send(self.as_raw(), first, ptr::null_mut()) };
        kernel::error::to_result(ret)
    }

    /// Posts the receive work request `wr`.
    ///
    /// # Safety
    ///
    /// `wr` is valid for the call; its completion entry and the memory its entries point
    /// to stay alive and in place until its completion ran or the QP was drained.
    pub(crate) unsafe fn post_recv_raw(&self, wr: *const bindings::ib_recv_wr) -> Result {
        // SAFETY: the QP is live (type invariant); the provider copies `wr` before it
        // returns; the rest is the caller's promise.
        let ret = unsafe { bindings::rdma_rs_ib_post_recv(self.as_raw(), wr, ptr::null_mut()) };
        kernel::error::to_result(ret)
    }

    /// Posts `send` on its own.
    pub(crate) fn post(&self, send: &mut SendWr) -> Result {
        // SAFETY: `send` is valid for the call (`as_ptr` points it at its own entry); its
        // completion entry and buffer outlive it (`SendWr`'s invariant).
        unsafe { self.post_send_raw(send.as_ptr()) }
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
    /// request is posted, until its completion ran or its QP was drained.
    pub(crate) unsafe fn new<T: HasCqe<ID> + CqeHandler<ID>, const ID: u64>(
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
        Ok(Self { wr, sge })
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
}
