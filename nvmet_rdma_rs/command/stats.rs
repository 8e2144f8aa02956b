// SPDX-License-Identifier: GPL-2.0

//! The counters the data path keeps per queue.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64};

/// What an operator wants to know about a queue (debugfs `queues`).
#[derive(Default)]
pub(crate) struct QueueStats {
    /// Commands received and handed to the nvmet core.
    pub(crate) commands: AtomicU64,
    /// Bytes the target RDMA READ from the host (host-to-controller data).
    pub(crate) read_bytes: AtomicU64,
    /// Bytes the target RDMA WROTE to the host (controller-to-host data).
    pub(crate) write_bytes: AtomicU64,
    /// Commands whose data came in the capsule.
    pub(crate) in_capsule: AtomicU64,
    /// Commands whose data moved by RDMA READ or WRITE (a keyed SGL).
    pub(crate) keyed: AtomicU64,
    /// Times a command waited for send queue space.
    pub(crate) sq_full_waits: AtomicU64,
    /// The most response slots in use at once (of `Io::response_slots`): how close the
    /// host came to the bound a well-behaved host stays within.
    pub(crate) rsp_peak: AtomicU32,
    /// Commands that found every response slot busy and waited for one.
    pub(crate) rsp_waits: AtomicU64,
    /// Failed work completions and malformed capsules.
    pub(crate) errors: AtomicU64,
    /// Completions a response slot did not wait for (siw's second completion of one RDMA
    /// READ, on a flush), ignored.
    pub(crate) duplicate_completions: AtomicU64,
}
