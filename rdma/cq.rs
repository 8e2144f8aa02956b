// SPDX-License-Identifier: GPL-2.0

//! Completion queues from `ib_alloc_cq` or the device's shared CQ pool, with
//! per-work-request `ib_cqe` callbacks.

use super::{bindings, Device};
use core::ptr::NonNull;
use kernel::prelude::*;

/// Where completion callbacks run. The layer offers the one context its users need:
/// softirq polling would not suit [`super::Qp`]'s record list, whose lock is not
/// softirq-safe, and nothing here busy-polls (`IB_POLL_DIRECT`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollContext {
    /// On the RDMA core's completion workqueue, in process context.
    Workqueue,
}

/// A completion queue, or room on one of the device's shared CQs; released on drop.
///
/// # Invariants
///
/// `cq` came from `__ib_alloc_cq` (`pooled` is `None`) or from `ib_cq_pool_get` for
/// `pooled` entries, and is released only in `Drop`.
pub(crate) struct Cq {
    cq: NonNull<bindings::ib_cq>,
    pooled: Option<u32>,
}

// SAFETY: the handle is a pointer that `Drop` gives back through `ib_free_cq` or
// `ib_cq_pool_put`, which may run on any thread. (The core does not serialise the CQ's
// polling: a direct poll, as `__ib_drain_srq`'s, may run beside its worker. The layer
// makes none (`Verbs::drain`); see Documentation/nvmet-rdma-rs.md, "Completions after a
// drain, and who polls a CQ".)
unsafe impl Send for Cq {}
// SAFETY: shared use only passes the pointer to the core, which locks internally.
unsafe impl Sync for Cq {}

impl PollContext {
    fn raw(self) -> bindings::ib_poll_context {
        match self {
            PollContext::Workqueue => bindings::ib_poll_context_IB_POLL_WORKQUEUE,
        }
    }
}

impl Cq {
    /// Allocates a CQ with room for `entries` completions on completion vector `vector`.
    pub(crate) fn new(
        device: &Device,
        entries: u32,
        vector: u32,
        context: PollContext,
    ) -> Result<Self> {
        let poll = context.raw();
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
            pooled: None,
        })
    }

    /// Takes room for `entries` completions on one of the device's shared CQs, near
    /// completion vector `vector` (`ib_cq_pool_get`, as the kernel's storage targets do):
    /// the QPs on one CQ are served by one polling pass.
    pub(crate) fn from_pool(
        device: &Device,
        entries: u32,
        vector: u32,
        context: PollContext,
    ) -> Result<Self> {
        let vector = i32::try_from(vector).map_err(|_| EINVAL)?;
        // SAFETY: `device` is registered; the pool keeps the CQ until it is put back.
        let cq =
            unsafe { bindings::ib_cq_pool_get(device.as_raw(), entries, vector, context.raw()) };
        Ok(Self {
            cq: super::from_err_ptr(cq)?,
            pooled: Some(entries),
        })
    }

    /// The raw pointer, for QP creation.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_cq {
        self.cq.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: live by the type invariant; QPs using it are destroyed first (their
        // owners declare the QP before the CQ); a pooled CQ gets back what was taken.
        unsafe {
            match self.pooled {
                Some(entries) => bindings::ib_cq_pool_put(self.as_raw(), entries),
                None => bindings::ib_free_cq(self.as_raw()),
            }
        }
    }
}
