// SPDX-License-Identifier: GPL-2.0

//! What a queue's commands are doing now: its response slots counted by what each waits
//! for, read from the slots' own states when a report asks (the data path does nothing
//! for it). SPDK's `pending_rdma_read`, `pending_rdma_write` and `pending_rdma_send`, and
//! more: the core's share, and the waits.

#![forbid(unsafe_code)]

use super::{Io, SlotLists, AWAIT_SQ_SPACE, READ, SEND, WRITE};
use crate::rdma::kernel_gaps::slot::{SlotPhase, CORE_TAG};

/// What a command in flight waits for (an index of [`InFlight`]'s counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waits {
    /// The RDMA READ of its data from the host.
    RdmaRead,
    /// The nvmet core or the backend.
    Core,
    /// Its response's SEND, after the RDMA WRITEs of its data, if any (the WRITEs go out
    /// on the same queue before it).
    Send,
    /// RDMA WRITEs of data with protection information, before the SEND.
    RdmaWrite,
    /// Send queue space.
    SqWait,
    /// A response slot: every one was busy (its capsule stays in its receive buffer).
    SlotWait,
    /// Nothing: a completion handler is working on it at this moment.
    Running,
}

/// How many [`Waits`] there are.
const WAITS: usize = Waits::Running as usize + 1;

/// A queue's commands by what they wait for, at one moment (each slot read once: a
/// command moving meanwhile is counted where it was seen).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct InFlight([u32; WAITS]);

impl InFlight {
    /// The names of [`Waits`], in its order (JSON keys).
    pub(crate) const NAMES: [&'static str; WAITS] = [
        "rdma_read",
        "core",
        "send",
        "rdma_write",
        "sq_wait",
        "slot_wait",
        "running",
    ];

    /// The counts, in [`Waits`]'s order.
    pub(crate) fn counts(&self) -> [u32; WAITS] {
        self.0
    }

    /// Adds `other`'s counts (a port's or a device's queues).
    pub(crate) fn add(&mut self, other: &InFlight) {
        for (count, more) in self.0.iter_mut().zip(other.0) {
            *count += more;
        }
    }
}

impl Io {
    /// The queue's commands by what they wait for now (`lists`: the queue's lists).
    pub(crate) fn in_flight(&self, lists: &SlotLists) -> InFlight {
        let mut now = InFlight::default();
        now.0[Waits::SlotWait as usize] = lists.parked_for_slot();
        for rsp in self.rsps.iter() {
            let waits = match rsp.state.phase() {
                SlotPhase::Free => continue,
                SlotPhase::Owned => Waits::Running,
                SlotPhase::Awaits(CORE_TAG) => Waits::Core,
                SlotPhase::Awaits(tag) if u64::from(tag) == READ => Waits::RdmaRead,
                SlotPhase::Awaits(tag) if u64::from(tag) == WRITE => Waits::RdmaWrite,
                SlotPhase::Awaits(tag) if u64::from(tag) == SEND => Waits::Send,
                SlotPhase::Parked(AWAIT_SQ_SPACE) => Waits::SqWait,
                // (no other event or list holds a response slot)
                SlotPhase::Awaits(_) | SlotPhase::Parked(_) => Waits::Running,
            };
            now.0[waits as usize] += 1;
        }
        now
    }
}
