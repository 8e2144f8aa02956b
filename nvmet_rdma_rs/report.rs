// SPDX-License-Identifier: GPL-2.0

//! What the target shows of itself in debugfs beyond one line per queue: `latency` (the
//! latency histograms of each queue and port, as tables with percentiles; a write of
//! `reset`, `on` or `off`); `stats.json`, the same for tools, is `stats_json`.
//!
//! Everything is read here, from the counters the data path keeps; nothing here is on
//! the data path. A port's figures are those of the queues it released (folded into it
//! when each was released) plus those of its live queues, read under the queue list's
//! lock, so that a queue is counted once.

#![forbid(unsafe_code)]

use crate::command::latency::{self, LatencySnapshot, CLASS_NAMES, PHASE_NAMES};
use crate::histogram::to_ns;
use crate::port::{Port, REJECT_REASONS};
use crate::target::{ListedQueue, QueueReport, Target};
use kernel::{fmt, prelude::*, sync::Arc, uaccess::UserSliceReader};

/// The queue's histograms since the last reset, into `into`.
pub(crate) fn latency_since_reset(queue: &QueueReport<'_>, into: &mut LatencySnapshot) {
    into.clear();
    queue.latency.add_to(into);
    if let Some(base) = queue.latency_base.lock().as_ref() {
        into.subtract(base);
    }
}

/// The figures of `port` since its last reset, into `into`: its released queues' and its
/// live ones' (`queues`, the locked list).
pub(crate) fn port_latency(
    port: &Port,
    queues: &[Arc<dyn ListedQueue>],
    into: &mut LatencySnapshot,
) {
    into.clear();
    for queue in queues {
        let report = queue.report();
        if core::ptr::eq(&**report.port, port) {
            report.latency.add_to(into);
        }
    }
    port.latency_totals(into);
}

/// The NVMe/RDMA CM reject statuses by number (`stats.json`; 0 and 3 are not sent).
pub(crate) const REJECT_NAMES: [&str; REJECT_REASONS] = [
    "none",
    "invalid_length",
    "invalid_recfmt",
    "invalid_qid",
    "invalid_hsqsize",
    "invalid_hrqsize",
    "no_resources",
];

/// Nanoseconds as microseconds with one decimal, right-aligned in 10 columns.
struct Micros(u64);

impl core::fmt::Display for Micros {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:>8}.{}", self.0 / 1000, self.0 % 1000 / 100)
    }
}

/// The percentiles the reports give, in ten-thousandths, with their names.
pub(crate) const PERCENTILES: [(u64, &str); 3] = [(5000, "p50"), (9900, "p99"), (9990, "p999")];

/// A histogram table: one line per class and phase that recorded something.
fn show_table(f: &mut fmt::Formatter<'_>, latency: &LatencySnapshot, ps: u64) -> fmt::Result {
    writeln!(
        f,
        "  {:<6} {:<9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "class", "phase", "count", "mean_us", "p50_us", "p99_us", "p99.9_us"
    )?;
    for (class, phases) in latency.hist.iter().enumerate() {
        for (phase, hist) in phases.iter().enumerate() {
            let count = hist.count();
            if count == 0 {
                continue;
            }
            let ns = |cycles| Micros(to_ns(cycles, ps));
            writeln!(
                f,
                "  {:<6} {:<9} {:>10} {} {} {} {}",
                CLASS_NAMES[class],
                PHASE_NAMES[phase],
                count,
                ns(hist.mean()),
                ns(hist.percentile(PERCENTILES[0].0)),
                ns(hist.percentile(PERCENTILES[1].0)),
                ns(hist.percentile(PERCENTILES[2].0)),
            )?;
        }
    }
    Ok(())
}

/// The clock line that heads both reports.
fn show_clock(f: &mut fmt::Formatter<'_>, ps: u64) -> fmt::Result {
    writeln!(
        f,
        "clock: cycle counter, {} ps per 1000 cycles; timing {}",
        ps,
        if latency::timing() { "on" } else { "off" }
    )
}

/// debugfs `latency`: the histograms of every queue and port since the last reset.
pub(crate) fn show_latency(target: &Arc<Target>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ps = target.clock().ps_per_kcycle();
    show_clock(f, ps)?;
    let Ok(mut snapshot) = LatencySnapshot::new_zero() else {
        return writeln!(f, "(out of memory)");
    };
    let ports = target.ports();
    target.with_queues(|queues| {
        for queue in queues {
            let report = queue.report();
            writeln!(
                f,
                "queue {} port {} qid {} host {} {}",
                report.number,
                report.port.id(),
                report.qid,
                report.peer,
                report.state
            )?;
            latency_since_reset(&report, &mut snapshot);
            show_table(f, &snapshot, ps)?;
        }
        for port in ports.iter().flatten() {
            writeln!(f, "port {} (its queues, live and released)", port.id())?;
            port_latency(port, queues, &mut snapshot);
            show_table(f, &snapshot, ps)?;
        }
        Ok(())
    })
}

/// Takes a reset's baseline of every queue and port: what reports show starts from the
/// counts now. The data path is not touched: its counters keep counting.
fn reset(target: &Target) -> Result {
    let ports = target.ports()?;
    target.with_queues(|queues| -> Result {
        // Every baseline first: if one cannot be allocated, nothing is reset.
        let n = queues.len() + ports.len();
        let mut bases = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            bases.push(LatencySnapshot::new_zero()?, GFP_KERNEL)?;
        }
        let mut next_base = || bases.pop().ok_or(ENOMEM);
        for queue in queues {
            let report = queue.report();
            let mut base = next_base()?;
            report.latency.add_to(&mut base);
            *report.latency_base.lock() = Some(base);
        }
        for port in &ports {
            let mut base = next_base()?;
            for queue in queues {
                let report = queue.report();
                if core::ptr::eq(&**report.port, &**port) {
                    report.latency.add_to(&mut base);
                }
            }
            port.reset_latency(base);
        }
        Ok(())
    })
}

/// debugfs `latency`, written: `reset` (reports start again from zero), `on` or `off`
/// (time the commands that arrive from now on, or stop). Anything else is refused.
pub(crate) fn write_latency(target: &Arc<Target>, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 16];
    let len = reader.len();
    if len > buf.len() {
        pr_err!("latency: write `reset`, `on` or `off`\n");
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..len])?;
    match core::str::from_utf8(&buf[..len]).map(str::trim) {
        Ok("reset") => reset(target),
        Ok("on") => {
            latency::set_timing(true);
            Ok(())
        }
        Ok("off") => {
            latency::set_timing(false);
            Ok(())
        }
        _ => {
            pr_err!("latency: write `reset`, `on` or `off`\n");
            Err(EINVAL)
        }
    }
}
