// SPDX-License-Identifier: GPL-2.0

//! Work completions (`struct ib_wc`), copied into a safe value for the completion's
//! handler.
//!
//! C header: [`include/rdma/ib_verbs.h`].
//!
//! [`include/rdma/ib_verbs.h`]: srctree/include/rdma/ib_verbs.h

use super::bindings;
use kernel::prelude::*;

/// What a completed work request reports.
///
/// Neither `Clone` nor `Copy`, and only lent to a handler (`&WorkCompletion`, for the
/// handler's call): a completion names the request it completes, which the layer takes as
/// a proof (see `cqe`), so it must not outlive the call that reports it. What a handler
/// wants to keep it copies out (`status`, `byte_len`, ...).
#[derive(Debug)]
pub(crate) struct WorkCompletion {
    /// `IB_WC_*` status.
    pub(crate) status: u32,
    /// Bytes received (receives only).
    pub(crate) byte_len: u32,
    /// The local rkey the peer invalidated with SEND_WITH_INV, if it did.
    pub(crate) invalidated_rkey: Option<u32>,
    /// The completed request's completion entry and QP, as addresses (only compared).
    /// Private: only the RDMA core's completions make a `WorkCompletion`, so one that
    /// names a request shows that request is done ([`super::rw::RwCtx::destroy`]).
    cqe: usize,
    qp: usize,
    /// Where the completion stands in the batch of completions the RDMA core's poll of
    /// its CQ returned (0 for the first), when the core polled into the CQ's own batch
    /// array (the CQ pool's softirq and workqueue polls); `None` for a direct poll.
    poll_position: Option<u8>,
}

/// Completions the RDMA core takes from a CQ per poll into the CQ's batch array
/// (`IB_POLL_BATCH`, private to `drivers/infiniband/core/cq.c`): a completion whose
/// address lies further from the array's start is not in it.
const POLL_BATCH: usize = 16;

impl WorkCompletion {
    /// What the RDMA core's completion `wc`, polled from `cq`, reports.
    ///
    /// # Safety
    ///
    /// `cq` is null or valid for reads for the call. (The position means something only
    /// if it is the CQ the RDMA core polled `wc` from, as a completion callback gets it.)
    #[inline]
    pub(crate) unsafe fn from_polled(cq: *const bindings::ib_cq, wc: &bindings::ib_wc) -> Self {
        // (addresses only compared: a completion of a direct poll lies in its poller's
        // stack, not in the CQ's array)
        let batch = if cq.is_null() {
            0
        } else {
            // SAFETY: `cq` is not null, so valid for reads for the call (the function's
            // safety section); only the address of its batch array is read.
            (unsafe { (*cq).wc }) as usize
        };
        let offset = (core::ptr::from_ref(wc) as usize).wrapping_sub(batch);
        let size = core::mem::size_of::<bindings::ib_wc>();
        // (an address in the array is an entry's: the core passes its entries)
        let poll_position =
            (batch != 0 && offset < POLL_BATCH * size).then(|| (offset / size) as u8);
        Self {
            poll_position,
            ..Self::from_raw(wc)
        }
    }

    /// What the RDMA core's completion `wc` reports, without its place in a poll.
    #[inline]
    pub(super) fn from_raw(wc: &bindings::ib_wc) -> Self {
        let ok = wc.status == bindings::ib_wc_status_IB_WC_SUCCESS;
        let invalidated = wc.wc_flags & bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 != 0;
        let invalidated_rkey = if ok && invalidated {
            // SAFETY: `IB_WC_WITH_INVALIDATE` says `ex` holds the invalidated rkey.
            Some(unsafe { wc.ex.invalidate_rkey })
        } else {
            None
        };
        Self {
            status: wc.status,
            byte_len: if ok { wc.byte_len } else { 0 },
            invalidated_rkey,
            // SAFETY: every request posted through this layer names its completion entry
            // in `wr_cqe` (the union's other member, `wr_id`, is not used).
            cqe: unsafe { wc.__bindgen_anon_1.wr_cqe } as usize,
            qp: wc.qp as usize,
            poll_position: None,
        }
    }

    /// Where the completion stands in the batch the RDMA core's poll of the CQ returned
    /// (0 for the first), if the core polled into the CQ's batch array; `None` for a
    /// direct poll (`ib_process_cq_direct`). A poll's completions run their callbacks in
    /// batch order, so a completion whose position is not after the previous one's came
    /// from a later poll.
    pub(crate) fn poll_position(&self) -> Option<u8> {
        self.poll_position
    }

    /// Whether this completes the request whose completion entry is at `cqe`, on the QP
    /// at `qp` (addresses).
    pub(super) fn completes(&self, cqe: usize, qp: usize) -> bool {
        self.cqe == cqe && self.qp == qp
    }

    /// The address of the QP whose request this completes (only compared).
    pub(super) fn qp_address(&self) -> usize {
        self.qp
    }

    /// Whether the request succeeded.
    pub(crate) fn is_ok(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    /// Whether the request was flushed by a QP in the error state (teardown).
    pub(crate) fn is_flush(&self) -> bool {
        self.status == bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The status as the RDMA core names it, e.g. `remote access error`.
    pub(crate) fn status_name(&self) -> &'static CStr {
        // SAFETY: `ib_wc_status_msg` returns a static string for any value.
        unsafe { CStr::from_char_ptr(bindings::ib_wc_status_msg(self.status)) }
    }
}
