// SPDX-License-Identifier: GPL-2.0

//! What the client's callbacks report to the operation that waits (the session's inbox):
//! CM events, send queue completions by tag, a received message, the benchmark's
//! completions; a work completion's report is copied out ([`Outcome`]), since the layer
//! only lends a completion for its handler's call.

#![forbid(unsafe_code)]

use super::RECV_SLOTS;
use crate::protocol::HEADER_SIZE;
use crate::rdma::{CmEventKind, Mr, WorkCompletion};
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

/// Which send queue operation a completion belongs to.
#[derive(Clone, Copy)]
pub(super) enum Tag {
    RegisterSource = 0,
    RegisterSink = 1,
    Send = 2,
    InvalidateSource = 3,
    InvalidateSink = 4,
}
pub(super) const TAGS: usize = 5;

/// What a work completion reported, copied out in its handler: the layer only lends a
/// [`WorkCompletion`] for the handler's call.
#[derive(Clone, Copy)]
pub(super) struct Outcome {
    /// Whether the request succeeded.
    pub(super) ok: bool,
    /// `IB_WC_*` status, and its name.
    pub(super) status: u32,
    pub(super) status_name: &'static CStr,
    /// Bytes received (receives only).
    pub(super) byte_len: u32,
    /// The local rkey the peer invalidated with SEND_WITH_INV, if it did.
    pub(super) invalidated_rkey: Option<u32>,
    /// Whether that was the key of the MR the session watched ([`Inbox::invalidatable`]),
    /// which is invalid now.
    pub(super) watched_invalidated: bool,
}

impl From<&WorkCompletion> for Outcome {
    fn from(wc: &WorkCompletion) -> Self {
        Self {
            ok: wc.is_ok(),
            status: wc.status,
            status_name: wc.status_name(),
            byte_len: wc.byte_len,
            invalidated_rkey: wc.invalidated_rkey,
            watched_invalidated: false,
        }
    }
}

/// What callbacks report to the waiting operation.
pub(super) struct Inbox {
    /// The last connection-establishment event and its status.
    pub(super) cm: Option<(CmEventKind, i32)>,
    /// Set when the connection went away.
    pub(super) disconnected: bool,
    /// Set when RDMA CM reported the end of the connection: the server's answer to our
    /// disconnect, its own disconnect, or the device going away.
    pub(super) cm_closed: bool,
    /// Send queue completions, by tag.
    pub(super) done: [Option<Outcome>; TAGS],
    /// The received messages not yet taken, by receive slot ([`Inbox::take_received`]).
    pub(super) received: [Option<Received>; RECV_SLOTS],
    /// Receives completed on this connection: orders [`Inbox::received`].
    pub(super) arrivals: u64,
    /// The MR the server may invalidate with its next message (SEND_WITH_INV): the
    /// receive's handler notes it invalid if its completion says so (only a completion can).
    pub(super) invalidatable: Option<Mr>,
    /// The running benchmark's completions.
    pub(super) bench: BenchProgress,
}

/// A received message: its completion, header, when it arrived, and its place in the
/// order of arrival.
pub(super) struct Received {
    pub(super) outcome: Outcome,
    pub(super) header: [u8; HEADER_SIZE],
    pub(super) arrived: Instant<Monotonic>,
    pub(super) order: u64,
}

impl Inbox {
    /// Notes the message received in `slot`.
    pub(super) fn receive(&mut self, slot: usize, outcome: Outcome, header: [u8; HEADER_SIZE]) {
        self.arrivals += 1;
        if let Some(entry) = self.received.get_mut(slot) {
            *entry = Some(Received {
                outcome,
                header,
                arrived: Instant::now(),
                order: self.arrivals,
            });
        }
    }

    /// Takes the earliest received message not taken yet, and its slot. (A server answers a
    /// duplex BENCH twice: both answers may have arrived before the first is taken.)
    pub(super) fn take_received(&mut self) -> Option<(usize, Received)> {
        let slot = (0..RECV_SLOTS)
            .filter(|&slot| self.received[slot].is_some())
            .min_by_key(|&slot| self.received[slot].as_ref().map_or(0, |r| r.order))?;
        Some((slot, self.received[slot].take()?))
    }
}

/// Completions of the benchmark run numbered `run`; late ones of an interrupted earlier
/// run are ignored.
pub(super) struct BenchProgress {
    pub(super) run: u32,
    pub(super) completed: u32,
    pub(super) failed: Option<Outcome>,
    /// Post-to-completion time of each operation, in nanoseconds; its capacity is reserved
    /// before the run, so completions never allocate.
    pub(super) samples: KVVec<u64>,
}
