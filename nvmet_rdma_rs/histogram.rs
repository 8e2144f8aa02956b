// SPDX-License-Identifier: GPL-2.0

//! Latency histograms: durations in cycles of the CPU's counter, in log2 buckets, and the
//! percentiles read from them.
//!
//! Bucket 0 holds durations below 2^8 cycles (under 100 ns at 3 GHz); bucket `b` above
//! it holds [2^(b+7), 2^(b+8)); the last, [`BUCKETS`] - 1, holds everything from 2^38
//! cycles (about 90 s) up. Only `core` is used, so that the host tests compile this file
//! as it is (`tests/host/wire`).

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets of a histogram.
pub(crate) const BUCKETS: usize = 32;

/// Bits of the longest duration bucket 0 holds.
const FIRST_BITS: u32 = 8;

/// The bucket of a duration of `cycles`.
#[inline]
pub(crate) fn bucket(cycles: u64) -> usize {
    let bits = u64::BITS - cycles.leading_zeros();
    (bits.saturating_sub(FIRST_BITS) as usize).min(BUCKETS - 1)
}

/// The shortest duration bucket `b` holds, in cycles.
pub(crate) fn lower_bound(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1 << (b as u32 + FIRST_BITS - 1)
    }
}

/// The duration bucket `b` holds everything below, in cycles (the last bucket's is
/// twice its lower bound, for percentiles that fall in it).
pub(crate) fn upper_bound(b: usize) -> u64 {
    1 << (b as u32 + FIRST_BITS)
}

/// A histogram one context at a time records into: the completion context of the queue
/// whose commands it times. A record is loads and stores, not locked read-modify-writes:
/// it costs what a per-CPU counter does, and a record racing another may be lost (a
/// statistic, never a decision). Readers read a [`Snapshot`] from anywhere.
pub(crate) struct Histogram {
    counts: [AtomicU64; BUCKETS],
    /// Sum of the durations recorded, in cycles (for the mean).
    sum: AtomicU64,
}

impl Histogram {
    /// An empty histogram.
    pub(crate) const fn new() -> Self {
        Self {
            counts: [const { AtomicU64::new(0) }; BUCKETS],
            sum: AtomicU64::new(0),
        }
    }

    /// Records a duration of `cycles` (by the histogram's one writer: see the type).
    #[inline]
    pub(crate) fn record(&self, cycles: u64) {
        let count = &self.counts[bucket(cycles)];
        count.store(count.load(Relaxed).wrapping_add(1), Relaxed);
        self.sum
            .store(self.sum.load(Relaxed).wrapping_add(cycles), Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::ZERO;
        for (to, from) in snapshot.counts.iter_mut().zip(&self.counts) {
            *to = from.load(Relaxed);
        }
        snapshot.sum = self.sum.load(Relaxed);
        snapshot
    }
}

/// A histogram's counts at one moment, or sums or differences of them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Snapshot {
    /// Durations per bucket.
    pub(crate) counts: [u64; BUCKETS],
    /// Their sum, in cycles.
    pub(crate) sum: u64,
}

impl Snapshot {
    /// Nothing recorded.
    pub(crate) const ZERO: Self = Self {
        counts: [0; BUCKETS],
        sum: 0,
    };

    /// Durations recorded.
    pub(crate) fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other`'s durations.
    pub(crate) fn add(&mut self, other: &Snapshot) {
        for (to, from) in self.counts.iter_mut().zip(&other.counts) {
            *to = to.wrapping_add(*from);
        }
        self.sum = self.sum.wrapping_add(other.sum);
    }

    /// The durations recorded since `base`, an earlier snapshot of the same counts.
    pub(crate) fn since(&self, base: &Snapshot) -> Snapshot {
        let mut since = *self;
        for (to, from) in since.counts.iter_mut().zip(&base.counts) {
            *to = to.wrapping_sub(*from);
        }
        since.sum = since.sum.wrapping_sub(base.sum);
        since
    }

    /// The mean duration, in cycles (0 if none).
    pub(crate) fn mean(&self) -> u64 {
        match self.count() {
            0 => 0,
            n => self.sum / n,
        }
    }

    /// The duration `parts` ten-thousandths of the durations are at or below (5000 for
    /// the median, 9990 for p99.9), in cycles: the bucket that holds it, linearly
    /// interpolated inside it. 0 if nothing was recorded.
    pub(crate) fn percentile(&self, parts: u64) -> u64 {
        let count = self.count();
        if count == 0 {
            return 0;
        }
        // The rank of the duration asked for, from 1 (ceiling).
        let rank = (count.saturating_mul(parts.min(10_000)))
            .div_ceil(10_000)
            .max(1);
        let mut below = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            if n != 0 && below + n >= rank {
                let (low, high) = (lower_bound(b), upper_bound(b));
                let into = match (high - low).checked_mul(rank - below) {
                    Some(product) => product / n,
                    None => (high - low) / n * (rank - below),
                };
                return low + into;
            }
            below += n;
        }
        upper_bound(BUCKETS - 1)
    }
}

/// Cycles to nanoseconds, at `ps_per_kcycle` picoseconds per thousand cycles (without
/// overflow for any `u64` of cycles at any rate up to 1 ns per cycle).
pub(crate) fn to_ns(cycles: u64, ps_per_kcycle: u64) -> u64 {
    const MEGA: u64 = 1_000_000;
    (cycles / MEGA)
        .saturating_mul(ps_per_kcycle)
        .saturating_add((cycles % MEGA) * ps_per_kcycle / MEGA)
}
