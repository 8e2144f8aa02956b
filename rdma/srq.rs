// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`): one pool of posted receives that several QPs
//! of a protection domain consume from.

use super::{
    bindings,
    cqe::Cqe,
    qp_handle::{Range, RecvTarget, RecvWr},
    Pd,
};
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// An owned basic SRQ; destroyed on drop.
///
/// # Invariants
///
/// `srq` came from `ib_create_srq` on `pd`'s PD and is destroyed only in `Drop`. QPs that
/// use it hold an `Arc<Srq>` (see [`super::CmId::create_qp_on_srq`]), so it outlives them.
pub(crate) struct Srq {
    srq: NonNull<bindings::ib_srq>,
    max_wr: u32,
    pd: Arc<Pd>,
}

// SAFETY: an SRQ is a handle the RDMA core lets any thread use; posting is serialised by
// the driver.
unsafe impl Send for Srq {}
// SAFETY: as above; the fields are read-only after creation.
unsafe impl Sync for Srq {}

impl Srq {
    /// Creates an SRQ on `pd` holding up to `max_wr` receives of `max_sge` entries each.
    /// Returns the SRQ; [`Srq::max_wr`] is what the device granted.
    pub(crate) fn new(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Self> {
        let mut attr: bindings::ib_srq_init_attr = pin_init::zeroed();
        attr.attr.max_wr = max_wr;
        attr.attr.max_sge = max_sge;
        attr.srq_type = bindings::ib_srq_type_IB_SRQT_BASIC;
        // SAFETY: the PD is live (it is kept in the result); `attr` is valid for the call.
        let srq = unsafe { bindings::rdma_rs_ib_create_srq(pd.as_raw(), &mut attr) };
        let srq = super::from_err_ptr(srq)?;
        Ok(Self {
            srq,
            max_wr: attr.attr.max_wr,
            pd: pd.clone(),
        })
    }

    /// The raw pointer, for QP creation in this layer.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_srq {
        self.srq.as_ptr()
    }

    /// The PD the SRQ (and every QP on it) belongs to.
    pub(crate) fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// Receives the SRQ holds at most.
    pub(crate) fn max_wr(&self) -> u32 {
        self.max_wr
    }

    /// A receive on the SRQ into `first` and, if given, `second` (registered with `lkey`),
    /// whose completion runs `T`'s handler `ID`; posted with [`Srq::post`].
    ///
    /// # Safety
    ///
    /// The object that embeds `cqe` stays alive and in place until the SRQ is destroyed;
    /// for an entry made with [`Cqe::on_qp`], only QPs of `CmId<T::Connection>`s take
    /// from the SRQ.
    pub(crate) unsafe fn recv_wr_unchecked<T, const ID: u64>(
        &self,
        cqe: &Cqe<T, ID>,
        lkey: u32,
        first: Range<'_>,
        second: Option<Range<'_>>,
    ) -> Result<RecvWr> {
        let target = RecvTarget::Srq(self.as_raw() as usize);
        // SAFETY: the caller's promise.
        unsafe { RecvWr::new(target, cqe, lkey, first, second) }
    }

    /// Posts the receive `wr`, which must have been made for this SRQ (`EINVAL`
    /// otherwise).
    pub(crate) fn post(&self, wr: &RecvWr) -> Result {
        match wr.target {
            RecvTarget::Srq(srq) if srq == self.as_raw() as usize => (),
            _ => return Err(EINVAL),
        }
        // SAFETY: the SRQ is live (invariant); the provider copies `wr` before it returns;
        // its completion entry and buffers outlive it (`RecvWr`'s invariant).
        let ret = unsafe {
            bindings::rdma_rs_ib_post_srq_recv(self.as_raw(), wr.as_ptr(), core::ptr::null_mut())
        };
        kernel::error::to_result(ret)
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: live by the invariant; every QP on it held an `Arc` and is destroyed.
        // Receives still posted are discarded with it.
        unsafe { bindings::rdma_rs_ib_destroy_srq(self.as_raw()) };
    }
}
