// SPDX-License-Identifier: GPL-2.0

//! Work requests a queue posted that its device has not completed yet, by kind (RDMA
//! READ, RDMA WRITE, SEND), now and at their peak, counted where the requests are posted
//! and where they complete. (SPDK's `pending_rdma_*` count requests waiting for credits,
//! which here is the wait for send queue space: `sq_full_waits`, `sq_wait_peak`.) A
//! command's READs or WRITEs are its `rdma_rw` context's work requests, the memory
//! registrations and invalidations it chains before its transfers (siw, T10-PI) included.
//!
//! A response's WRITEs and SEND are posted wherever the nvmet core completes its request
//! (any CPU), so the count is one atomic word of the queue's, which a post adds to and
//! the completion takes from: one locked instruction each, for all three kinds at once.
//! Each command keeps what it has pending ([`Wrs`] in its response slot's state), so
//! what its completion (or a post that failed) takes back is exactly what it added.

#![forbid(unsafe_code)]

use super::{stats::raise_peak, Io};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Work requests by kind, packed in one word: [`Wrs::BITS`] bits a kind, in
/// [`Wrs::NAMES`]'s order from the lowest.
///
/// # Invariants
///
/// Each kind's count is below `2^BITS`: a posted request holds a send queue entry until
/// it completes (reserved by `Io::execute`), and a queue's send queue has far fewer
/// (its response slots times their transfers' requests, a few thousand at most), so
/// adding and subtracting kinds in one word never carries from one into the next.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Wrs(u64);

impl Wrs {
    /// Bits per kind.
    const BITS: u32 = 21;
    const MASK: u64 = (1 << Self::BITS) - 1;

    /// The kinds' names (JSON keys), from the lowest bits.
    pub(crate) const NAMES: [&'static str; 3] = ["rdma_read", "rdma_write", "send"];

    /// One response SEND.
    pub(crate) const SEND: Self = Self(1 << (2 * Self::BITS));

    /// `n` RDMA READs.
    pub(crate) fn reads(n: u32) -> Self {
        Self(u64::from(n) & Self::MASK)
    }

    /// `n` RDMA WRITEs.
    pub(crate) fn writes(n: u32) -> Self {
        Self((u64::from(n) & Self::MASK) << Self::BITS)
    }

    /// These and `more`.
    pub(crate) fn and(self, more: Self) -> Self {
        // INVARIANT: the sum is of one command's requests, each of which takes a send
        // queue entry.
        Self(self.0 + more.0)
    }

    /// The counts, in [`Wrs::NAMES`]'s order.
    pub(crate) fn counts(self) -> [u32; 3] {
        [0, 1, 2].map(|kind| ((self.0 >> (kind * Self::BITS)) & Self::MASK) as u32)
    }
}

/// A queue's posted and not completed work requests, by kind, and the most there were.
#[derive(Default)]
pub(crate) struct PendingWrs {
    /// Every command's pending [`Wrs`], added up.
    now: AtomicU64,
    /// The most of each kind seen pending after a post of that kind.
    peaks: [AtomicU32; 3],
}

impl PendingWrs {
    /// Counts `wrs` about to be posted by the command whose pending requests are `out`.
    #[inline]
    pub(super) fn posted(&self, out: &mut Wrs, wrs: Wrs) {
        *out = out.and(wrs);
        // INVARIANT: the word holds the sum of the commands' `out`s, each kind below the
        // send queue's entries.
        let now = self.now.fetch_add(wrs.0, Relaxed).wrapping_add(wrs.0);
        // (only the kinds posted: a constant at each call site, once inlined)
        for (kind, peak) in self.peaks.iter().enumerate() {
            let shift = kind as u32 * Wrs::BITS;
            if (wrs.0 >> shift) & Wrs::MASK != 0 {
                raise_peak(peak, ((now >> shift) & Wrs::MASK) as u32);
            }
        }
    }

    /// The command whose pending requests were `out` has none any more: they completed
    /// (a send queue completes in order, so a command's signalled completion ends all it
    /// posted before), or their post failed with nothing taken.
    #[inline]
    pub(super) fn settled(&self, out: &mut Wrs) {
        if *out != Wrs::default() {
            // INVARIANT: `out` was added by `posted` before the post, which hands the slot
            // to the device with a release store (`Slot`'s hand-off); the completion that
            // settles resumes it with an acquire exchange reading from that store. So
            // the add comes first in the word's order, and each kind stays at or above
            // zero.
            self.now.fetch_sub(out.0, Relaxed);
            *out = Wrs::default();
        }
    }

    /// Pending now, by kind.
    pub(crate) fn now(&self) -> [u32; 3] {
        Wrs(self.now.load(Relaxed)).counts()
    }

    /// The peaks, by kind.
    pub(crate) fn peaks(&self) -> [u32; 3] {
        self.peaks.each_ref().map(|peak| peak.load(Relaxed))
    }
}

/// The pending work requests of a queue's `io` (none before its set-up), by kind: now,
/// and at their peaks.
pub(crate) fn pending_of(io: Option<&Io>) -> ([u32; 3], [u32; 3]) {
    io.map_or(([0; 3], [0; 3]), |io| {
        (io.pending.now(), io.pending.peaks())
    })
}
