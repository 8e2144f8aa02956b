// SPDX-License-Identifier: GPL-2.0

//! The counters the data path keeps per queue.

#![forbid(unsafe_code)]

use crate::rdma::WorkCompletion;
use core::sync::atomic::{
    AtomicU32, AtomicU64, AtomicU8,
    Ordering::{self, Relaxed},
};

/// A counter that one context at a time adds to: the queue's completion context, where
/// every count of the data path is taken (the completion handlers of a queue run one at a
/// time; an SRQ's drain, which polls beside them, is the one exception, at teardown).
/// An add is a load and a store, not a locked read-modify-write: it costs what a per-CPU
/// counter does, and an add that races with another may be lost (a statistic, never a
/// decision). Readers may read it from anywhere.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// The count (the ordering is the load's).
    pub(crate) fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
}

/// Raises `peak` to `count` if it is lower. A load first: a peak rarely moves, and a
/// `fetch_max` is a locked loop.
#[inline]
pub(crate) fn raise_peak(peak: &AtomicU32, count: u32) {
    if count > peak.load(Relaxed) {
        peak.fetch_max(count, Relaxed);
    }
}

/// A transport error that ends a queue, by what failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransportError {
    /// A receive completed with an error.
    Recv = 0,
    /// An RDMA READ of a command's data completed with an error (a bad key, a host gone).
    RdmaRead,
    /// An RDMA WRITE of a command's data with protection information did.
    RdmaWrite,
    /// A response SEND did (with its WRITEs, when it follows them).
    Send,
    /// A capsule shorter than a command arrived.
    ShortCapsule,
    /// The host sent more commands than its queue depth allows.
    OverDepth,
    /// The provider refused a post.
    Post,
}

/// How many kinds of [`TransportError`] there are.
pub(crate) const TRANSPORT_ERRORS: usize = 7;

/// The kinds' names (JSON keys), in [`TransportError`]'s order.
pub(crate) const TRANSPORT_ERROR_NAMES: [&str; TRANSPORT_ERRORS] = [
    "recv",
    "rdma_read",
    "rdma_write",
    "send",
    "short_capsule",
    "over_depth",
    "post",
];

impl QueueStats {
    /// Counts a work completion of the queue's, and the CQ poll it came in if it starts
    /// one (in the completion context: see [`Counter`]).
    #[inline]
    pub(crate) fn count_completion(&self, wc: &WorkCompletion) {
        self.completions.add(1);
        if let Some(position) = wc.poll_position() {
            // A poll runs its batch's callbacks in order: a position not after the last
            // one's (a headroom not below its) is a later poll's.
            let headroom = u8::MAX - position;
            if headroom >= self.last_poll_headroom.load(Relaxed) {
                self.polls.add(1);
            }
            self.last_poll_headroom.store(headroom, Relaxed);
        }
    }

    /// Counts a transport error of kind `kind`.
    pub(crate) fn count_error(&self, kind: TransportError) {
        self.errors.fetch_add(1, Relaxed);
        self.errors_by_kind[kind as usize].fetch_add(1, Relaxed);
    }
}

/// What an operator wants to know about a queue (debugfs `queues`).
#[derive(Default)]
pub(crate) struct QueueStats {
    /// Commands received and handed to the nvmet core.
    pub(crate) commands: Counter,
    /// Bytes the target RDMA READ from the host (host-to-controller data).
    pub(crate) read_bytes: Counter,
    /// Bytes the target RDMA WROTE to the host (controller-to-host data), counted when
    /// the response that follows them completes.
    pub(crate) write_bytes: Counter,
    /// Commands whose data came in the capsule.
    pub(crate) in_capsule: Counter,
    /// Bytes of data that came in capsules.
    pub(crate) in_capsule_bytes: Counter,
    /// Commands whose data moved by RDMA READ or WRITE (a keyed SGL).
    pub(crate) keyed: Counter,
    /// Times a command waited for send queue space.
    pub(crate) sq_full_waits: Counter,
    /// The most response slots in use at once (of `Io::response_slots`): how close the
    /// host came to the bound a well-behaved host stays within.
    pub(crate) rsp_peak: AtomicU32,
    /// Commands that found every response slot busy and waited for one.
    pub(crate) rsp_waits: Counter,
    /// The most commands waiting for a response slot at once (counted under the list's
    /// lock, off the common path).
    pub(crate) slot_wait_peak: AtomicU32,
    /// The most commands waiting for send queue space at once (the same).
    pub(crate) sq_wait_peak: AtomicU32,
    /// Work completions of the queue's requests, every kind.
    pub(crate) completions: Counter,
    /// Polls of the CQ that returned them (each poll a batch of at most 16), as the queue
    /// sees them: a completion standing first in its poll's batch, or not after the
    /// queue's previous one, starts one. (A queue that shares its CQ misses a poll whose
    /// first completion of its own stands after the previous poll's last one: a lower
    /// bound then; exact on a CQ of its own.) `completions / polls` is the batching.
    /// Readers load it before `completions`, which is added to first.
    pub(crate) polls: Counter,
    /// How far the queue's last completion stood from the end of any batch, `u8::MAX`
    /// less its poll position (0 before the first completion, so that it starts a poll).
    last_poll_headroom: AtomicU8,
    /// Transport errors that ended the queue, of every [`TransportError`] (any context:
    /// atomic).
    pub(crate) errors: AtomicU64,
    /// ... by kind.
    pub(crate) errors_by_kind: [AtomicU64; TRANSPORT_ERRORS],
    /// Commands answered with an error status (the core's, or the transport's for a
    /// command it could not start: a bad data pointer, a failed READ), counted when the
    /// response's SEND completes.
    pub(crate) error_status: Counter,
    /// Send work requests posted for commands (their RDMA READs or WRITEs and their
    /// response), counted when the response's SEND completes.
    pub(crate) send_wrs: Counter,
    /// Posts of them: doorbells rung (a post hands the device a chain of requests).
    pub(crate) send_posts: Counter,
    /// Receives posted again for commands answered (one request and one doorbell
    /// each), counted the same way.
    pub(crate) recv_posts: Counter,
    /// Completions a response slot did not wait for (siw's second completion of one RDMA
    /// READ, on a flush), ignored.
    pub(crate) duplicate_completions: Counter,
}
