// SPDX-License-Identifier: GPL-2.0

//! Completion queues from `ib_alloc_cq` or the device's shared CQ pool, with
//! per-work-request `ib_cqe` callbacks.

use super::{bindings, Device};
use core::ptr::NonNull;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Mutex, MutexGuard},
};

/// Where completion callbacks run. Softirq polling would not suit [`super::Qp`]'s record
/// list, whose lock is not softirq-safe; the layer offers none.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollContext {
    /// On the RDMA core's completion workqueue, in process context.
    Workqueue,
    /// Nowhere until the CQ's owner polls it (`IB_POLL_DIRECT`, krping's `poll`): the
    /// handlers run in the context of the task that calls
    /// [`CmId::poll`](super::CmId::poll), one poller at a time, or of the QP's drain.
    /// Only for a QP with a CQ of its own and its own receive queue (the core refuses
    /// direct polling of shared CQs; an SRQ's drain needs the worker). The owner polls
    /// as it posts: completions wait in the CQ until polled, and a provider drops those
    /// that find it full (rxe does), the drain's marker among them, after which the QP's
    /// drain waits for ever. (Memory stays safe: the records of lost completions are
    /// freed with the QP.)
    Direct,
}

/// The most completions one [`Cq::poll`] runs (the core's own workqueue budget).
pub(crate) const MAX_POLL_BUDGET: u32 = 65536;

/// A completion queue, or room on one of the device's shared CQs; released on drop.
///
/// # Invariants
///
/// `cq` came from `__ib_alloc_cq` (`pooled` is `None`) or from `ib_cq_pool_get` for
/// `pooled` entries, and is released only in `Drop`. `direct` is `Some` exactly when the
/// CQ was allocated with `IB_POLL_DIRECT`; nothing polls such a CQ without holding that
/// lock.
pub(crate) struct Cq {
    cq: NonNull<bindings::ib_cq>,
    pooled: Option<u32>,
    direct: Option<Pin<KBox<Mutex<()>>>>,
}

// SAFETY: the handle is a pointer that `Drop` gives back through `ib_free_cq` or
// `ib_cq_pool_put`, which may run on any thread. (The core does not serialise the CQ's
// polling: a direct poll, as `__ib_drain_srq`'s, may run beside its worker. The layer
// makes none on a CQ the worker polls (`Verbs::drain`), and those of a direct CQ hold its
// lock; see Documentation/nvmet-rdma-rs.md, "Completions after a drain, and who polls a
// CQ".)
unsafe impl Send for Cq {}
// SAFETY: shared use passes the pointer to the core, which locks internally, except for
// the direct polls of `poll`, which `direct`'s lock serialises (type invariant).
unsafe impl Sync for Cq {}

impl PollContext {
    fn raw(self) -> bindings::ib_poll_context {
        match self {
            PollContext::Workqueue => bindings::ib_poll_context_IB_POLL_WORKQUEUE,
            PollContext::Direct => bindings::ib_poll_context_IB_POLL_DIRECT,
        }
    }
}

impl Cq {
    /// Allocates a CQ with room for `entries` completions on completion vector `vector`.
    /// (Within the layer: a CQ is made for a QP, which the CQ's owner destroys first, and
    /// before the device goes: a CQ holds no reference to its device.)
    pub(in crate::rdma) fn new(
        device: &Device,
        entries: u32,
        vector: u32,
        context: PollContext,
    ) -> Result<Self> {
        let poll = context.raw();
        let entries = i32::try_from(entries).map_err(|_| EINVAL)?;
        // (taken before the CQ: nothing fails after it)
        let direct = match context {
            PollContext::Direct => Some(KBox::pin_init(new_mutex!(()), GFP_KERNEL)?),
            PollContext::Workqueue => None,
        };
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
        // INVARIANT: `direct` is `Some` exactly for `IB_POLL_DIRECT`.
        Ok(Self {
            cq: super::from_err_ptr(cq)?,
            pooled: None,
            direct,
        })
    }

    /// Takes room for `entries` completions on one of the device's shared CQs, near
    /// completion vector `vector` (`ib_cq_pool_get`, as the kernel's storage targets do):
    /// the QPs on one CQ are served by one polling pass. `EINVAL` for
    /// [`PollContext::Direct`]: the core polls shared CQs itself.
    pub(in crate::rdma) fn from_pool(
        device: &Device,
        entries: u32,
        vector: u32,
        context: PollContext,
    ) -> Result<Self> {
        if context == PollContext::Direct {
            return Err(EINVAL);
        }
        let vector = i32::try_from(vector).map_err(|_| EINVAL)?;
        // SAFETY: `device` is registered; the pool keeps the CQ until it is put back.
        let cq =
            unsafe { bindings::ib_cq_pool_get(device.as_raw(), entries, vector, context.raw()) };
        // INVARIANT: not `IB_POLL_DIRECT` (refused above).
        Ok(Self {
            cq: super::from_err_ptr(cq)?,
            pooled: Some(entries),
            direct: None,
        })
    }

    /// Runs the handlers of up to `budget` completions waiting on a
    /// [`PollContext::Direct`] CQ, in the caller's context (which may sleep), and returns
    /// how many ran. `EBUSY` while another poll or a drain ([`Cq::hold_polling`]) runs
    /// them, as for a handler that polls its own CQ; `EINVAL` for a CQ the core's worker
    /// polls, or a budget above [`MAX_POLL_BUDGET`].
    pub(in crate::rdma) fn poll(&self, budget: u32) -> Result<u32> {
        kernel::task::might_sleep();
        if budget > MAX_POLL_BUDGET {
            return Err(EINVAL);
        }
        let direct = self.direct.as_ref().ok_or(EINVAL)?;
        let _polling = direct.try_lock().ok_or(EBUSY)?;
        // SAFETY: the CQ is live (type invariant) and direct (`direct` is `Some`), and no
        // one else polls it: every poller holds `direct` (type invariant), held here. The
        // handlers it runs are those of the requests of the one QP on it, whose owner
        // (`Verbs`, in the `CmId` the caller borrows) keeps the QP, its records and its
        // id alive while it is borrowed, as the worker's runs need; the caller's context
        // may sleep, as the worker's does.
        let ran = unsafe { bindings::ib_process_cq_direct(self.as_raw(), budget as i32) };
        Ok(u32::try_from(ran).unwrap_or(0))
    }

    /// Keeps every [`Cq::poll`] out for as long as the guard lives, waiting for a running
    /// one to end: for the drain, which polls a direct CQ itself. `None` for a CQ the
    /// core's worker polls.
    pub(super) fn hold_polling(&self) -> Option<MutexGuard<'_, ()>> {
        self.direct.as_ref().map(|direct| direct.lock())
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
