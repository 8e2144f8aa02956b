// SPDX-License-Identifier: GPL-2.0

//! A module-owned workqueue, for connection teardown and listener repair.
//!
//! Work that runs module code must be finished before the module's text goes away. The
//! kernel's system queues cannot be flushed by modules, so each module owns its queue:
//! dropping an [`OwnedQueue`] drains and destroys it, so no work item of the module
//! runs, or will run, after that.

use super::bindings;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::Arc,
    workqueue::{HasDelayedWork, Queue, Work, WorkItem},
};

/// An owned, ordered-as-needed workqueue (`alloc_workqueue`), destroyed on drop.
///
/// # Invariants
///
/// `queue` came from `alloc_workqueue` and is destroyed only in `Drop`.
pub(crate) struct OwnedQueue {
    queue: NonNull<bindings::workqueue_struct>,
}

// SAFETY: a workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: queueing work is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates a queue called `name` (shown in `ps` and lockdep reports).
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a static NUL-terminated string without format directives.
        let queue = unsafe { bindings::rdma_rs_alloc_workqueue(name.as_char_ptr()) };
        Ok(Self {
            queue: NonNull::new(queue).ok_or(ENOMEM)?,
        })
    }

    /// The queue, to enqueue work items on.
    pub(crate) fn queue(&self) -> &Queue {
        // SAFETY: the queue is live until `self` is dropped, which the borrow prevents;
        // both bindings describe the same C type.
        unsafe { Queue::from_raw(self.queue.as_ptr().cast()) }
    }
}

impl OwnedQueue {
    /// Waits until the queue is empty, including work queued by running work.
    pub(crate) fn drain(&self) {
        // SAFETY: the queue is live (type invariant).
        unsafe { bindings::drain_workqueue(self.queue.as_ptr()) };
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: live by the type invariant; `destroy_workqueue` drains pending work first.
        unsafe { bindings::destroy_workqueue(self.queue.as_ptr()) };
    }
}

/// Disables delayed work item `ID` of `this` for good: cancels a queued run (giving back
/// the reference on `this` it held) or waits for a running one; the item cannot be queued
/// again afterwards (`disable_delayed_work_sync`).
pub(crate) fn disable_delayed_work<T, const ID: u64>(this: &Arc<T>)
where
    T: HasDelayedWork<T, ID> + WorkItem<ID, Pointer = Arc<T>>,
{
    // SAFETY: `this` is live; a `HasDelayedWork` item's `Work` is the `work` of the
    // `delayed_work` of its `DelayedWork`.
    let cancelled = unsafe {
        let work = Work::raw_get(T::raw_get_work(Arc::as_ptr(this).cast_mut()));
        kernel::bindings::disable_delayed_work_sync(kernel::container_of!(
            work,
            kernel::bindings::delayed_work,
            work
        ))
    };
    if cancelled {
        // SAFETY: the cancelled run owned the reference the queueing gave the workqueue
        // (`Arc::into_raw`, as `enqueue_delayed` does for an `Arc`); nothing else will
        // take it back.
        drop(unsafe { Arc::from_raw(Arc::as_ptr(this)) });
    }
}
