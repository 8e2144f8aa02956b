// SPDX-License-Identifier: GPL-2.0

//! A module-owned workqueue, for connection teardown ([`OwnedQueue`]), and the flush of a
//! delayed work item ([`flush_delayed_work`]).
//!
//! Work that runs module code must be finished before the module's text goes away. The
//! kernel's system queues cannot be flushed by modules, so each module owns its queue:
//! dropping an [`OwnedQueue`] drains and destroys it, so no work item of the module
//! runs, or will run, after that.
//!
//! Kernel-crate gap: 7.2's `kernel::workqueue` has `Queue::from_raw` but no owned queue
//! (`alloc_workqueue`/`destroy_workqueue`) and no cancel or flush of a work item; an
//! owned queue type and `DelayedWork` flush/disable methods there would replace this file.

use super::bindings;
use core::ptr::NonNull;
use kernel::{
    prelude::*,
    sync::Arc,
    workqueue::{HasDelayedWork, Queue, RawWorkItem, Work, WorkItem},
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

    /// Queues `w` to run now (`queue_work`); fails if it is queued already.
    ///
    /// Delayed work is not offered: a run whose timer is still pending when the queue is
    /// destroyed would be queued on a freed queue (`destroy_workqueue` drains queued work
    /// but knows nothing of timers), so delayed items go to a queue that is never
    /// destroyed (`kernel::workqueue::system`) and are flushed by their owner
    /// ([`flush_delayed_work`]).
    pub(crate) fn enqueue<W, const ID: u64>(&self, w: W) -> W::EnqueueOutput
    where
        W: RawWorkItem<ID> + Send + 'static,
    {
        // SAFETY: the queue is live until `self` is dropped, which the borrow prevents, and
        // its destruction drains every item queued on it; both bindings describe the same
        // C type.
        let queue = unsafe { Queue::from_raw(self.queue.as_ptr().cast()) };
        queue.enqueue(w)
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

/// Runs a pending delayed work item `ID` of `this` now, if its timer is still pending,
/// and waits until the last queued run has finished (`flush_delayed_work`).
///
/// The run goes through the kernel crate's own work trampoline, which takes back the
/// reference that queueing gave the workqueue: this function never touches that
/// reference, so it depends on nothing about how the kernel crate enqueues. To make sure
/// no run follows, the caller stops queueing first (a flag its run checks and its queueing
/// respects, under one lock); a run queued after this returns only keeps `this` alive a
/// while longer, and the module's [`OwnedQueue`] waits for it before the module goes.
pub(crate) fn flush_delayed_work<T, const ID: u64>(this: &Arc<T>)
where
    T: HasDelayedWork<T, ID> + WorkItem<ID, Pointer = Arc<T>>,
{
    // SAFETY: `this` is live for the call; `HasDelayedWork` (an unsafe trait) promises that
    // the item's `Work` is the `work` of the `delayed_work` of its `DelayedWork`, so the
    // container is a live, initialised `delayed_work`.
    unsafe {
        let work = Work::raw_get(T::raw_get_work(Arc::as_ptr(this).cast_mut()));
        kernel::bindings::flush_delayed_work(kernel::container_of!(
            work,
            kernel::bindings::delayed_work,
            work
        ));
    }
}
