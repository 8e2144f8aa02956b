// SPDX-License-Identifier: GPL-2.0

//! The nvmet core's workqueues.

use super::bindings;
use kernel::workqueue::Queue;

/// The nvmet core's workqueue (`nvmet_wq`): a transport's queue releases run there, as in
/// the C transports, so that the core's flush of it (before it frees a removed port) waits
/// for them.
pub(crate) fn nvmet_workqueue() -> &'static Queue {
    // SAFETY: `nvmet_wq` is created when the nvmet core loads, which a transport module
    // depends on, and destroyed only when the core unloads, after the transport.
    unsafe { Queue::from_raw(bindings::nvmet_wq.cast_const().cast()) }
}

/// The nvmet core's asynchronous event workqueue (`nvmet_aen_wq`).
fn nvmet_aen_workqueue() -> &'static Queue {
    // SAFETY: `nvmet_aen_wq` lives as `nvmet_wq` does (see `nvmet_workqueue`).
    unsafe { Queue::from_raw(bindings::nvmet_aen_wq.cast_const().cast()) }
}

/// Waits for every work item queued on `queue` so far (`flush_workqueue`).
fn flush(queue: &Queue) {
    // SAFETY: `queue` is a live workqueue for as long as the borrow lasts; both bindings
    // describe the same C type.
    unsafe { bindings::__flush_workqueue(core::ptr::from_ref(queue).cast_mut().cast()) };
}

/// Waits for every work item on the nvmet core's workqueue.
pub(crate) fn flush_nvmet_workqueue() {
    flush(nvmet_workqueue());
}

/// Waits for the nvmet core's asynchronous event work (`nvmet_aen_wq`).
pub(crate) fn flush_nvmet_aen_workqueue() {
    flush(nvmet_aen_workqueue());
}
