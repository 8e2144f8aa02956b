// SPDX-License-Identifier: GPL-2.0

//! debugfs `bench`: option strings such as `mode=wlat,size=4096,count=1000` and the
//! results (latency percentiles, MB/s, ops/s) read back from the same file.

#![forbid(unsafe_code)]

use crate::options::{as_text, number};
use crate::protocol::{MAX_PING, MAX_TEXT};
use core::num::NonZeroU64;
use kernel::{fmt, prelude::*};

/// What a benchmark measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// RDMA WRITE latency: one signalled WRITE at a time, post to completion.
    Wlat,
    /// RDMA READ latency: one READ at a time, post to completion.
    Rlat,
    /// SEND latency: a SEND of `size` bytes and the server's DONE, post to receive.
    Slat,
    /// RDMA WRITE bandwidth: `depth` WRITEs kept in flight.
    Bw,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Wlat => "wlat",
            Mode::Rlat => "rlat",
            Mode::Slat => "slat",
            Mode::Bw => "bw",
        }
    }
}

/// The most work requests `bw` keeps in flight.
pub(crate) const MAX_DEPTH: u32 = 64;

/// The WRITEs `bw` keeps in flight when `depth` is not given (at most the connection's
/// `txdepth`).
const DEFAULT_DEPTH: u32 = 16;

/// The most operations one run may time (each keeps an 8-byte sample).
const MAX_COUNT: u32 = 100_000;

/// The options of one `bench` run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BenchOptions {
    /// What is measured.
    pub(crate) mode: Mode,
    /// Bytes per operation.
    pub(crate) size: u32,
    /// Operations.
    pub(crate) count: u32,
    /// Operations in flight (`bw` only; 1 otherwise).
    pub(crate) depth: u32,
    /// Whether `depth` is the default, which a smaller `txdepth` lowers.
    depth_is_default: bool,
    /// krping's `duplex` (`bw` only): the server WRITEs into the client at the same time,
    /// as many WRITEs of `size` bytes, at most
    /// [`MAX_DUPLEX_DEPTH`](crate::protocol::MAX_DUPLEX_DEPTH) in flight.
    pub(crate) duplex: bool,
}

impl BenchOptions {
    /// Parses an option string; `EINVAL` with one log line naming the bad option.
    pub(crate) fn parse(text: &[u8]) -> Result<Self> {
        let text = as_text("bench", text)?;
        let mut mode = None;
        let (mut size, mut count, mut depth, mut duplex) = (64, 1000, None, false);
        for option in text.split(',').filter(|o| !o.is_empty()) {
            if option == "duplex" {
                duplex = true;
                continue;
            }
            match option.split_once('=') {
                Some(("mode", "wlat")) => mode = Some(Mode::Wlat),
                Some(("mode", "rlat")) => mode = Some(Mode::Rlat),
                Some(("mode", "slat")) => mode = Some(Mode::Slat),
                Some(("mode", "bw")) => mode = Some(Mode::Bw),
                Some(("size", v)) => size = number("bench", "size", v, 1, MAX_PING)?,
                Some(("count", v)) => count = number("bench", "count", v, 1, MAX_COUNT)?,
                // krping's name for it: its `bw` keeps `txdepth` WRITEs in flight.
                Some((name @ ("depth" | "txdepth"), v)) => {
                    if depth.is_some() {
                        pr_err!("bench: depth and txdepth are one option: give it once\n");
                        return Err(EINVAL);
                    }
                    depth = Some(number("bench", name, v, 1, MAX_DEPTH)?)
                }
                _ => {
                    pr_err!("bench: bad option '{}'\n", option);
                    return Err(EINVAL);
                }
            }
        }
        let Some(mode) = mode else {
            pr_err!("bench: mode=wlat|rlat|slat|bw is required\n");
            return Err(EINVAL);
        };
        let depth_is_default = depth.is_none();
        let depth = match (mode, depth) {
            (Mode::Bw, depth) => depth.unwrap_or(DEFAULT_DEPTH),
            (_, None | Some(1)) => 1,
            (_, Some(_)) => {
                pr_err!("bench: depth applies to mode=bw only\n");
                return Err(EINVAL);
            }
        };
        if duplex && mode != Mode::Bw {
            pr_err!("bench: duplex applies to mode=bw only\n");
            return Err(EINVAL);
        }
        if mode == Mode::Slat && size as usize > MAX_TEXT {
            pr_err!("bench: mode=slat sends at most {} bytes\n", MAX_TEXT);
            return Err(EINVAL);
        }
        Ok(Self {
            mode,
            size,
            count,
            depth,
            depth_is_default,
            duplex,
        })
    }

    /// The options for a connection whose send queue has room for `txdepth` READs or
    /// WRITEs: the default depth lowered to it; a larger depth asked for is refused.
    pub(crate) fn fit(mut self, txdepth: u32) -> Result<Self> {
        if self.depth > txdepth {
            if !self.depth_is_default {
                pr_err!(
                    "bench: depth={} is more than the connection's send queue holds (txdepth={} at load)\n",
                    self.depth,
                    txdepth
                );
                return Err(EINVAL);
            }
            self.depth = txdepth;
        }
        Ok(self)
    }
}

/// What one run measured. Latencies are in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BenchResult {
    /// The run's options.
    pub(crate) options: BenchOptions,
    /// Fastest, median, 99th percentile and slowest operation.
    pub(crate) latency: [u64; 4],
    /// From the first post to the last completion (never zero: rates divide by it).
    pub(crate) elapsed_ns: NonZeroU64,
}

impl BenchResult {
    /// Summarises per-operation latencies `samples` (reordered here) of a run that took
    /// `elapsed_ns`.
    pub(crate) fn new(options: BenchOptions, samples: &mut [u64], elapsed_ns: u64) -> Self {
        let n = samples.len();
        let min = samples.iter().copied().min().unwrap_or(0);
        let max = samples.iter().copied().max().unwrap_or(0);
        // Two selections instead of a sort: the p99 rank, then the median below it.
        let p99_rank = (n * 99).div_ceil(100).saturating_sub(1);
        let median_rank = n.saturating_sub(1) / 2;
        let p99 = Self::select(samples, p99_rank);
        let median = Self::select(
            samples.get_mut(..p99_rank + 1).unwrap_or(&mut []),
            median_rank,
        );
        Self {
            options,
            latency: [min, median, p99, max],
            elapsed_ns: NonZeroU64::new(elapsed_ns).unwrap_or(NonZeroU64::MIN),
        }
    }

    /// The `rank`-th smallest of `samples` (0 when there is none).
    fn select(samples: &mut [u64], rank: usize) -> u64 {
        if rank < samples.len() {
            *samples.select_nth_unstable(rank).1
        } else {
            0
        }
    }

    /// Operations per second over the whole run.
    pub(crate) fn ops_per_second(&self) -> u64 {
        u64::from(self.options.count) * 1_000_000_000 / self.elapsed_ns
    }
}

/// Writes `nanos` as microseconds with three decimals.
fn micros(f: &mut fmt::Formatter<'_>, name: &str, nanos: u64) -> fmt::Result {
    writeln!(f, "{} {}.{:03}", name, nanos / 1000, nanos % 1000)
}

impl core::fmt::Display for BenchResult {
    /// One `key value` line each, for people and scripts alike.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        writeln!(
            f,
            "mode {} size {} count {} depth {} duplex {}",
            o.mode.name(),
            o.size,
            o.count,
            o.depth,
            u8::from(o.duplex)
        )?;
        for (name, nanos) in ["lat_min_us", "lat_median_us", "lat_p99_us", "lat_max_us"]
            .iter()
            .zip(self.latency)
        {
            micros(f, name, nanos)?;
        }
        // Duplex: the server's WRITEs as well, each way `size` times `count`.
        let bytes = u64::from(o.size) * u64::from(o.count) * (1 + u64::from(o.duplex));
        // MB/s (10^6 bytes) with two decimals: bytes * 10^9 / ns / 10^6 * 100.
        let centi_mb_s = bytes * 100_000 / self.elapsed_ns;
        writeln!(f, "mb_s {}.{:02}", centi_mb_s / 100, centi_mb_s % 100)?;
        writeln!(f, "ops_s {}", self.ops_per_second())?;
        micros(f, "elapsed_us", self.elapsed_ns.get())
    }
}
