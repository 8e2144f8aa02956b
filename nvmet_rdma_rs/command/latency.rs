// SPDX-License-Identifier: GPL-2.0

//! The latency histograms a queue keeps of its commands: the time from a command's
//! receive completion to its response's send completion, and of each phase of it, for
//! reads, writes and other commands apart.
//!
//! A command is stamped ([`Stamps`]) where its phases end, by the step that owns its
//! response slot, and recorded once, when its response's SEND completed, in the queue's
//! completion context: each histogram has one writer, and records with loads and stores
//! (see [`Histogram`]). A queue's histograms share no cache line with another queue's.

#![forbid(unsafe_code)]

use crate::histogram::{Histogram, Snapshot};
use crate::rdma::Stamp;
use crate::wire::Class;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};
use kernel::prelude::*;
use pin_init::init_array_from_fn;

/// Whether commands arriving now are timed (debugfs `latency`: `on` or `off`).
static TIMING: AtomicBool = AtomicBool::new(true);

/// Times the commands that arrive from now on, or stops timing them (those in flight
/// finish as they started).
pub(crate) fn set_timing(on: bool) {
    TIMING.store(on, Relaxed);
}

/// Whether commands are timed.
pub(crate) fn timing() -> bool {
    TIMING.load(Relaxed)
}

/// The stamp of a command's arrival: now, if commands are timed.
#[inline]
pub(crate) fn arrival() -> Stamp {
    if timing() {
        Stamp::now()
    } else {
        Stamp::NONE
    }
}

/// Classes of commands with histograms of their own ([`Class`] as an index).
pub(crate) const CLASSES: usize = 3;

/// Names of the classes, by index.
pub(crate) const CLASS_NAMES: [&str; CLASSES] = ["read", "write", "other"];

/// The phases of a command, each with a histogram.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Receive completion to response SEND completion.
    Total = 0,
    /// Receive completion to the command's start (its RDMA READ, or the nvmet core):
    /// parsing and mapping, waits for a response slot and for send queue space.
    Wait = 1,
    /// The RDMA READ of the host's data (keyed writes only).
    Read = 2,
    /// The nvmet core and the backend: execution to `queue_response`.
    Core = 3,
    /// `queue_response` to the SEND's completion: the RDMA WRITEs of the data and the
    /// response.
    Out = 4,
}

/// Phases per class.
pub(crate) const PHASES: usize = 5;

/// Names of the phases, by index.
pub(crate) const PHASE_NAMES: [&str; PHASES] = ["total", "wait", "rdma_read", "core", "out"];

/// When a command's phases ended, in its response slot; [`Stamp::NONE`] where the command
/// is not timed or did not get there.
#[derive(Clone, Copy, Default)]
pub(crate) struct Stamps {
    /// Its receive completed (not timed if [`Stamp::NONE`]).
    pub(super) recv: Stamp,
    /// It started: its RDMA READ was posted, or the core took it.
    pub(super) ready: Stamp,
    /// The core took it (after its RDMA READ, for a keyed write; `ready` otherwise; also
    /// `ready` if its RDMA READ could not be posted). Unset: never executed.
    pub(super) submit: Stamp,
    /// The core completed it.
    pub(super) done: Stamp,
}

impl Stamps {
    /// Stamps of a command that arrived at `recv`.
    pub(super) fn arrived(recv: Stamp) -> Self {
        Self {
            recv,
            ..Self::default()
        }
    }

    /// Stamps `at` with now, if the command is timed.
    #[inline]
    pub(super) fn stamp(recv: Stamp, at: &mut Stamp) {
        if recv.is_set() {
            *at = Stamp::now();
        }
    }
}

/// A queue's histograms, by class and phase.
///
/// Aligned to a cache line: its writes share none with the queue's other fields, or
/// another queue's.
#[repr(C, align(64))]
pub(crate) struct QueueLatency {
    hist: [[Histogram; PHASES]; CLASSES],
}

impl QueueLatency {
    /// Empty histograms.
    pub(crate) fn new() -> impl Init<Self> {
        init!(Self {
            hist <- init_array_from_fn(|_| init_array_from_fn(|_| Histogram::new())),
        })
    }

    /// Records a command of `class` whose response's SEND completed at `sent` (in the
    /// queue's completion context: the histograms' one writer).
    #[inline]
    pub(super) fn record(&self, class: Class, stamps: &Stamps, sent: Stamp) {
        if !stamps.recv.is_set() {
            return;
        }
        let hist = &self.hist[class as usize];
        hist[Phase::Total as usize].record(sent.cycles_since(stamps.recv));
        if !stamps.submit.is_set() {
            // The core completed it without executing it (a bad command, a mapping that
            // failed): it waited until then.
            if stamps.done.is_set() {
                hist[Phase::Wait as usize].record(stamps.done.cycles_since(stamps.recv));
                hist[Phase::Out as usize].record(sent.cycles_since(stamps.done));
            }
            return;
        }
        // (`submit` is set only after `ready`)
        hist[Phase::Wait as usize].record(stamps.ready.cycles_since(stamps.recv));
        if stamps.submit != stamps.ready {
            hist[Phase::Read as usize].record(stamps.submit.cycles_since(stamps.ready));
        }
        if stamps.done.is_set() {
            hist[Phase::Core as usize].record(stamps.done.cycles_since(stamps.submit));
            hist[Phase::Out as usize].record(sent.cycles_since(stamps.done));
        }
    }

    /// Adds the counts now to `into`.
    pub(crate) fn add_to(&self, into: &mut LatencySnapshot) {
        for (to, from) in into
            .hist
            .iter_mut()
            .flatten()
            .zip(self.hist.iter().flatten())
        {
            to.add(&from.snapshot());
        }
    }
}

/// Counts of a set of [`QueueLatency`] histograms at one moment, or sums or differences
/// of them (about 4 KiB: allocated, never on the stack).
pub(crate) struct LatencySnapshot {
    /// By class and phase.
    pub(crate) hist: [[Snapshot; PHASES]; CLASSES],
}

impl LatencySnapshot {
    /// Nothing recorded, in a new allocation.
    pub(crate) fn new_zero() -> Result<KBox<Self>> {
        KBox::init(
            init!(Self {
                hist <- init_array_from_fn(|_| init_array_from_fn(|_| Snapshot::ZERO)),
            }),
            GFP_KERNEL,
        )
    }

    /// Adds `other`'s counts.
    pub(crate) fn add(&mut self, other: &LatencySnapshot) {
        for (to, from) in self
            .hist
            .iter_mut()
            .flatten()
            .zip(other.hist.iter().flatten())
        {
            to.add(from);
        }
    }

    /// Takes `base`'s counts off (what was recorded before a reset).
    pub(crate) fn subtract(&mut self, base: &LatencySnapshot) {
        for (to, from) in self
            .hist
            .iter_mut()
            .flatten()
            .zip(base.hist.iter().flatten())
        {
            *to = to.since(from);
        }
    }

    /// Forgets every count.
    pub(crate) fn clear(&mut self) {
        for hist in self.hist.iter_mut().flatten() {
            *hist = Snapshot::ZERO;
        }
    }
}
