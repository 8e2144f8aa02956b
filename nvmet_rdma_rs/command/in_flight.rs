// SPDX-License-Identifier: GPL-2.0

//! What a queue's commands are doing now: its response slots counted by what each waits
//! for, read from the slots' own states when a report asks (the data path does nothing
//! for it). SPDK's `pending_rdma_read`, `pending_rdma_write` and `pending_rdma_send`, and
//! more: the core's share, and the waits.

#![forbid(unsafe_code)]

use super::{Io, SlotLists, AWAIT_SQ_SPACE, READ, SEND, WRITE};
use crate::rdma::kernel_gaps::slot::{SlotPhase, CORE_TAG};

/// A queue's commands by what they wait for, at one moment (each slot read once: a
/// command moving meanwhile is counted where it was seen).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// Waiting for the RDMA READ of their data from the host.
    pub(crate) rdma_read: u32,
    /// In the nvmet core or the backend.
    pub(crate) core: u32,
    /// Waiting for their response's SEND, after the RDMA WRITEs of their data, if any
    /// (the WRITEs go out on the same queue before it).
    pub(crate) send: u32,
    /// Waiting for RDMA WRITEs of data with protection information, before the SEND.
    pub(crate) rdma_write: u32,
    /// Waiting for send queue space.
    pub(crate) sq_wait: u32,
    /// Commands that found every response slot busy, waiting for one (their capsules
    /// stay in their receive buffers).
    pub(crate) slot_wait: u32,
    /// Being worked on by a completion handler at this moment.
    pub(crate) running: u32,
}

impl InFlight {
    /// Field names, in [`InFlight::counts`]'s order (JSON keys).
    pub(crate) const NAMES: [&'static str; 7] = [
        "rdma_read",
        "core",
        "send",
        "rdma_write",
        "sq_wait",
        "slot_wait",
        "running",
    ];

    /// The counts, in [`InFlight::NAMES`]'s order.
    pub(crate) fn counts(&self) -> [u32; 7] {
        [
            self.rdma_read,
            self.core,
            self.send,
            self.rdma_write,
            self.sq_wait,
            self.slot_wait,
            self.running,
        ]
    }

    /// Adds `other`'s counts (a port's or a device's queues).
    pub(crate) fn add(&mut self, other: &InFlight) {
        self.rdma_read += other.rdma_read;
        self.core += other.core;
        self.send += other.send;
        self.rdma_write += other.rdma_write;
        self.sq_wait += other.sq_wait;
        self.slot_wait += other.slot_wait;
        self.running += other.running;
    }
}

impl Io {
    /// The queue's commands by what they wait for now (`lists`: the queue's lists).
    pub(crate) fn in_flight(&self, lists: &SlotLists) -> InFlight {
        let mut now = InFlight {
            slot_wait: lists.parked_for_slot(),
            ..InFlight::default()
        };
        for rsp in self.rsps.iter() {
            let count = match rsp.state.phase() {
                SlotPhase::Free => continue,
                SlotPhase::Owned => &mut now.running,
                SlotPhase::Awaits(CORE_TAG) => &mut now.core,
                SlotPhase::Awaits(tag) if u64::from(tag) == READ => &mut now.rdma_read,
                SlotPhase::Awaits(tag) if u64::from(tag) == WRITE => &mut now.rdma_write,
                SlotPhase::Awaits(tag) if u64::from(tag) == SEND => &mut now.send,
                SlotPhase::Parked(AWAIT_SQ_SPACE) => &mut now.sq_wait,
                // (no other event or list holds a response slot)
                SlotPhase::Awaits(_) | SlotPhase::Parked(_) => &mut now.running,
            };
            *count += 1;
        }
        now
    }
}
