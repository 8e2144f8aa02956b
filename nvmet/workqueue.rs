// SPDX-License-Identifier: GPL-2.0

//! The nvmet core's workqueues.

use super::bindings;

/// The nvmet core's workqueue (`nvmet_wq`): a transport's queue releases run there, as in
/// the C transports, so that the core's flush of it (before it frees a removed port) waits
/// for them.
pub(crate) fn nvmet_workqueue() -> &'static kernel::workqueue::Queue {
    // SAFETY: `nvmet_wq` is created when the nvmet core loads, which a transport module
    // depends on, and destroyed only when the core unloads, after the transport.
    unsafe { kernel::workqueue::Queue::from_raw(bindings::nvmet_wq.cast_const().cast()) }
}

/// Waits for every work item on the nvmet core's workqueue.
pub(crate) fn flush_nvmet_workqueue() {
    // SAFETY: as in `nvmet_workqueue`.
    unsafe { bindings::__flush_workqueue(bindings::nvmet_wq) };
}

/// Waits for the nvmet core's asynchronous event work (`nvmet_aen_wq`).
pub(crate) fn flush_nvmet_aen_workqueue() {
    // SAFETY: `nvmet_aen_wq` lives as `nvmet_wq` does (see `nvmet_workqueue`).
    unsafe { bindings::__flush_workqueue(bindings::nvmet_aen_wq) };
}
