// SPDX-License-Identifier: GPL-2.0

//! Completion queues from `ib_alloc_cq`, with per-work-request `ib_cqe` callbacks.

use super::{bindings, Device};
use core::ptr::NonNull;
use kernel::prelude::*;

/// Where completion callbacks run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollContext {
    /// In softirq context: callbacks must not sleep.
    Softirq,
    /// On the RDMA core's completion workqueue, in process context.
    Workqueue,
    /// Only when the owner calls [`Cq::poll_direct`] (busy polling).
    Direct,
}

/// An owned completion queue; freed on drop.
///
/// # Invariants
///
/// `cq` came from `__ib_alloc_cq` and is freed only in `Drop`.
pub(crate) struct Cq {
    cq: NonNull<bindings::ib_cq>,
}

// SAFETY: the RDMA core serialises its use of a CQ; the handle may move between threads.
unsafe impl Send for Cq {}
// SAFETY: shared use only passes the pointer to the core, which locks internally.
unsafe impl Sync for Cq {}

impl Cq {
    /// Allocates a CQ with room for `entries` completions on completion vector `vector`.
    pub(crate) fn new(
        device: &Device,
        entries: u32,
        vector: u32,
        context: PollContext,
    ) -> Result<Self> {
        let poll = match context {
            PollContext::Softirq => bindings::ib_poll_context_IB_POLL_SOFTIRQ,
            PollContext::Workqueue => bindings::ib_poll_context_IB_POLL_WORKQUEUE,
            PollContext::Direct => bindings::ib_poll_context_IB_POLL_DIRECT,
        };
        let entries = i32::try_from(entries).map_err(|_| EINVAL)?;
        let vector = i32::try_from(vector).map_err(|_| EINVAL)?;
        // SAFETY: `device` is registered; a null private pointer is allowed.
        let cq = unsafe {
            bindings::__ib_alloc_cq(
                device.as_raw(),
                core::ptr::null_mut(),
                entries,
                vector,
                poll,
                crate::MODULE_NAME.as_char_ptr(),
            )
        };
        Ok(Self {
            cq: super::from_err_ptr(cq)?,
        })
    }

    /// The raw pointer, for QP creation.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_cq {
        self.cq.as_ptr()
    }

    /// Runs the callbacks of up to `budget` completions now; for [`PollContext::Direct`].
    pub(crate) fn poll_direct(&self, budget: i32) -> i32 {
        // SAFETY: the CQ is live (type invariant).
        unsafe { bindings::ib_process_cq_direct(self.as_raw(), budget) }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: live by the type invariant; QPs using it are destroyed first (`Endpoint`
        // declares its QP before its CQ).
        unsafe { bindings::ib_free_cq(self.as_raw()) };
    }
}
