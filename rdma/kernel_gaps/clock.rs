// SPDX-License-Identifier: GPL-2.0

//! Time stamps cheap enough to take several times per I/O: [`Stamp`], the CPU's cycle
//! counter (`get_cycles`: `rdtsc` on x86, `cntvct` on arm64), and [`Clock`], which turns
//! cycles into nanoseconds when a reader asks.
//!
//! `ktime_get` (the kernel crate's `Instant::now`) reads the clocksource through a
//! seqcount and an indirect call, 50 to 100 instructions; a data path that stamps each
//! phase of a command would pay that four or five times per I/O. A cycle count is a
//! few instructions; the conversion is left to the reader, who calibrates it against
//! the monotonic clock over the time since the module loaded.

#[cfg(not(target_arch = "x86_64"))]
use super::bindings;
use kernel::time::{Instant, Monotonic};

/// A moment, in cycles of the CPU's counter.
///
/// Counters of different CPUs may disagree a little (a command's steps may run on
/// different CPUs): [`Stamp::cycles_since`] saturates at zero rather than wrap.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp(u64);

impl Stamp {
    /// No moment: what a step that was not timed leaves.
    pub(crate) const NONE: Self = Self(0);

    /// Now.
    #[inline]
    pub(crate) fn now() -> Self {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `rdtsc` reads the time stamp counter, which every x86-64 CPU has and the
        // kernel may always read (CR4.TSD restricts user mode only). What `get_cycles`
        // does, without its call (it is an out-of-line helper from Rust).
        return Self(unsafe { core::arch::x86_64::_rdtsc() });
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: `rdma_rs_get_cycles` wraps `get_cycles`, which reads a counter and may be
        // called in any context.
        return Self(unsafe { bindings::rdma_rs_get_cycles() });
    }

    /// Whether this is a moment (not [`Stamp::NONE`]).
    #[inline]
    pub(crate) fn is_set(self) -> bool {
        self.0 != 0
    }

    /// Cycles from `earlier` to this moment (0 if `earlier` is later, or either is
    /// [`Stamp::NONE`]).
    #[inline]
    pub(crate) fn cycles_since(self, earlier: Stamp) -> u64 {
        if earlier.0 == 0 {
            return 0;
        }
        self.0.saturating_sub(earlier.0)
    }
}

/// The cycle counter's rate, measured against the monotonic clock from the moment the
/// clock was made (module load) to the moment of the question.
pub(crate) struct Clock {
    cycles: u64,
    at: Instant<Monotonic>,
}

impl Clock {
    /// Starts the measurement.
    pub(crate) fn new() -> Self {
        Self {
            cycles: Stamp::now().0,
            at: Instant::now(),
        }
    }

    /// Picoseconds per thousand cycles (333,333 at 3 GHz), as measured from
    /// [`Clock::new`] to now; 0 if the counter does not count (an architecture without
    /// one) or no time has passed.
    pub(crate) fn ps_per_kcycle(&self) -> u64 {
        const PS_PER_NS_PER_KCYCLE: u64 = 1_000_000;
        let ns = self.at.elapsed().as_nanos().max(0) as u64;
        let cycles = Stamp::now().0.saturating_sub(self.cycles);
        match ns.checked_mul(PS_PER_NS_PER_KCYCLE) {
            // (ns * 10^6 fits for the first five hours)
            Some(scaled) if cycles != 0 => scaled / cycles,
            // (later, a million cycles is a small enough unit)
            _ => match cycles / PS_PER_NS_PER_KCYCLE {
                0 => 0,
                mega => ns / mega,
            },
        }
    }
}
