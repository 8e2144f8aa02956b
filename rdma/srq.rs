// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`): one pool of posted receives that several QPs
//! of a protection domain consume from.
//!
//! An SRQ owns what its receives land in ([`Srq::contents`]: the slots with their
//! completion entries and buffers), so that they outlive every receive it holds: it is
//! destroyed (and its receives discarded) before they are freed. Its receives complete on
//! the QPs that take them, whose handler the completion finds (`RecvCqe`): only QPs
//! of the ids whose handler is the slots' connection type take from it
//! ([`super::CmId::create_qp_on_srq`]).

use super::{
    bindings,
    cqe::{QpRecvHandler, Received},
    qp_handle::{BoundRequest, Entry, PostTarget, Range, RecvWr},
    Pd,
};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, UniqueArc,
    },
};

/// An owned basic SRQ holding `X`, whose receives complete on `S`'s completion entries;
/// destroyed on drop, before `X`.
///
/// # Invariants
///
/// `srq` came from `ib_create_srq` on `pd`'s PD and is destroyed only in `Drop`. An SRQ
/// lives in an `Arc` (the only way to make one), so `contents` never moves. QPs that use
/// it hold an `Arc` (see [`super::CmId::create_qp_on_srq`]), so it outlives them.
pub(crate) struct Srq<X, S> {
    srq: NonNull<bindings::ib_srq>,
    /// The SRQ's identity, unique for the module's life: its requests name it.
    id: u64,
    /// (Dropped, after the SRQ, before the PD: field order.)
    contents: X,
    pd: Arc<Pd>,
    _slots: PhantomData<fn(&S)>,
}

/// The identity of the next SRQ.
static NEXT_ID: Atomic<u64> = Atomic::new(1);

// SAFETY: an SRQ is a handle the RDMA core lets any thread use; posting is serialised by
// the driver. The contents move with it.
unsafe impl<X: Send, S> Send for Srq<X, S> {}
// SAFETY: as above; the fields are read-only after creation, the contents shared.
unsafe impl<X: Sync, S> Sync for Srq<X, S> {}

impl<X, S> Srq<X, S> {
    /// Creates an SRQ on `pd` holding up to `max_wr` receives of `max_sge` entries each,
    /// with its contents.
    pub(crate) fn new(pd: &Arc<Pd>, max_wr: u32, max_sge: u32, contents: X) -> Result<Arc<Self>> {
        // (the memory first: nothing fails once the SRQ exists)
        let place = UniqueArc::new_uninit(GFP_KERNEL)?;
        let mut attr: bindings::ib_srq_init_attr = pin_init::zeroed();
        attr.attr.max_wr = max_wr;
        attr.attr.max_sge = max_sge;
        attr.srq_type = bindings::ib_srq_type_IB_SRQT_BASIC;
        // SAFETY: the PD is live (it is kept in the result); `attr` is valid for the call.
        let srq = unsafe { bindings::rdma_rs_ib_create_srq(pd.as_raw(), &mut attr) };
        let srq = super::from_err_ptr(srq)?;
        // INVARIANT: made in an `Arc`; destroyed only by `Drop` from here on.
        Ok(place
            .write(Self {
                srq,
                id: NEXT_ID.fetch_add(1, Relaxed),
                contents,
                pd: pd.clone(),
                _slots: PhantomData,
            })
            .into())
    }

    /// The raw pointer, for QP creation in this layer.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_srq {
        self.srq.as_ptr()
    }

    /// The PD the SRQ (and every QP on it) belongs to.
    pub(crate) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// What the SRQ's receives land in.
    pub(crate) fn contents(&self) -> &X {
        &self.contents
    }

    /// A receive on the SRQ into one or two ranges of buffers (registered with the PD's
    /// local DMA lkey), whose completion runs the handler of the object `place` finds in
    /// the SRQ's contents, with the ranges (`ENOENT` if it finds none), and its first
    /// token; posted with [`Srq::post`]. `EINVAL` for a range past the end of its buffer or
    /// mapped for another device than the PD's, `EBUSY` if the object's receive entry is
    /// bound to another receive already.
    pub(crate) fn recv_wr(
        &self,
        place: impl for<'a> FnOnce(&'a X) -> Option<(&'a S, Range<'a>, Option<Range<'a>>)>,
    ) -> Result<(RecvWr, Received)>
    where
        S: QpRecvHandler,
    {
        let (owner, first, second) = place(&self.contents).ok_or(ENOENT)?;
        let target = PostTarget::Srq(self.id);
        // SAFETY: the object and the buffers live, in place, in the SRQ's contents (`place`
        // borrows them from there for any lifetime), which go only after the SRQ is
        // destroyed and never move (type invariant); only QPs of `CmId<S::Connection>`s
        // take from the SRQ (`create_qp_on_srq`); the key and device are the SRQ's PD's.
        let bound = unsafe {
            BoundRequest::new(
                target,
                Entry::of_receive::<S, 0>(owner)?,
                &[Some(first), second],
                self.pd.device_address(),
                self.pd.local_dma_lkey(),
                false,
            )?
        };
        // SAFETY: the object lives in the contents, borrowed with `self`.
        unsafe { RecvWr::new(bound) }
    }

    /// Posts the receive `wr`, lending its buffers to the device: `received` gives them
    /// back, the token of the receive's last completion (or of its making, for its first
    /// post), and only the completion of this post gives them back again. `EINVAL` if `wr`
    /// was not made for this SRQ or `received` is not its token. On failure, the error,
    /// and the token if nothing was posted.
    pub(crate) fn post(
        &self,
        wr: &RecvWr,
        received: Received,
    ) -> Result<(), (Error, Option<Received>)> {
        match wr.target {
            PostTarget::Srq(id) if id == self.id => (),
            _ => return Err((EINVAL, Some(received))),
        }
        let post = |wr, bad: &mut _| {
            // SAFETY: the SRQ is live (invariant); the provider copies `wr` before it
            // returns, and may point `bad` at it; its completion entry and buffers outlive
            // it (`RecvWr`'s invariant).
            unsafe { bindings::rdma_rs_ib_post_srq_recv(self.as_raw(), wr, bad) }
        };
        // SAFETY: made for this SRQ (checked above), whose contents hold its entry while
        // `self` is borrowed (`recv_wr`); `post` posts it on this SRQ.
        unsafe { wr.post_with(received, post) }
    }
}

impl<X, S> Drop for Srq<X, S> {
    fn drop(&mut self) {
        // SAFETY: live by the invariant; every QP on it held an `Arc` and is destroyed.
        // Receives still posted are discarded with it, before the contents go.
        unsafe { bindings::rdma_rs_ib_destroy_srq(self.as_raw()) };
    }
}
