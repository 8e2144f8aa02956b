// SPDX-License-Identifier: GPL-2.0

//! What the target shows of itself in debugfs beyond one line per queue: `latency` (the
//! latency histograms of each queue and port, as tables with percentiles; a write of
//! `reset`, `on` or `off`) and `stats.json` (every counter and histogram, for tools:
//! `tools/nvmet-rdma-top`).
//!
//! Everything is read here, from the counters the data path keeps; nothing here is on
//! the data path. A port's figures are those of the queues it released (folded into it
//! when each was released) plus those of its live queues, read under the queue list's
//! lock, so that a queue is counted once.

#![forbid(unsafe_code)]

use crate::command::latency::{self, LatencySnapshot, CLASS_NAMES, PHASE_NAMES};
use crate::histogram::{to_ns, upper_bound, Snapshot, BUCKETS};
use crate::port::{Port, REJECT_REASONS, TEARDOWN_NAMES};
use crate::target::{ListedQueue, QueueReport, Target};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::{fmt, prelude::*, sync::Arc, uaccess::UserSliceReader};

/// The queue's histograms since the last reset, into `into`.
fn latency_since_reset(queue: &QueueReport<'_>, into: &mut LatencySnapshot) {
    into.clear();
    queue.latency.add_to(into);
    if let Some(base) = queue.latency_base.lock().as_ref() {
        into.subtract(base);
    }
}

/// The figures of `port` since its last reset, into `into`: its released queues' and its
/// live ones' (`queues`, the locked list).
fn port_latency(port: &Port, queues: &[Arc<dyn ListedQueue>], into: &mut LatencySnapshot) {
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
const REJECT_NAMES: [&str; REJECT_REASONS] = [
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
const PERCENTILES: [(u64, &str); 3] = [(5000, "p50"), (9900, "p99"), (9990, "p999")];

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

/// One histogram as JSON: its count, sum and percentiles in ns, and its buckets that
/// hold something, as [bucket, upper bound in ns, count].
fn json_hist(f: &mut fmt::Formatter<'_>, hist: &Snapshot, ps: u64) -> fmt::Result {
    write!(
        f,
        "{{\"count\":{},\"sum_ns\":{},\"sum_cycles\":{}",
        hist.count(),
        to_ns(hist.sum, ps),
        hist.sum
    )?;
    for (parts, name) in PERCENTILES {
        write!(f, ",\"{}_ns\":{}", name, to_ns(hist.percentile(parts), ps))?;
    }
    write!(f, ",\"buckets\":[")?;
    let mut first = true;
    for b in 0..BUCKETS {
        if hist.counts[b] != 0 {
            let comma = if first { "" } else { "," };
            first = false;
            write!(
                f,
                "{}[{},{},{}]",
                comma,
                b,
                to_ns(upper_bound(b), ps),
                hist.counts[b]
            )?;
        }
    }
    write!(f, "]}}")
}

/// A set of histograms as JSON: `{"read":{"total":{..},..},..}`.
fn json_latency(f: &mut fmt::Formatter<'_>, latency: &LatencySnapshot, ps: u64) -> fmt::Result {
    write!(f, "{{")?;
    for (class, (name, phases)) in CLASS_NAMES.iter().zip(&latency.hist).enumerate() {
        let comma = if class == 0 { "" } else { "," };
        write!(f, "{}\"{}\":{{", comma, name)?;
        for (phase, (name, hist)) in PHASE_NAMES.iter().zip(phases).enumerate() {
            let comma = if phase == 0 { "" } else { "," };
            write!(f, "{}\"{}\":", comma, name)?;
            json_hist(f, hist, ps)?;
        }
        write!(f, "}}")?;
    }
    write!(f, "}}")
}

/// Named counters as a JSON object.
fn json_counts(f: &mut fmt::Formatter<'_>, names: &[&str], counts: &[AtomicU64]) -> fmt::Result {
    write!(f, "{{")?;
    for (i, (name, count)) in names.iter().zip(counts).enumerate() {
        let comma = if i == 0 { "" } else { "," };
        write!(f, "{}\"{}\":{}", comma, name, count.load(Relaxed))?;
    }
    write!(f, "}}")
}

/// One queue's counters as JSON members.
fn json_queue(f: &mut fmt::Formatter<'_>, q: &QueueReport<'_>) -> fmt::Result {
    let s = q.stats;
    write!(
        f,
        "\"queue\":{},\"port\":{},\"qid\":{},\"host\":\"{}\",\"state\":\"{}\",\
         \"recv_queue_size\":{},\"send_queue_size\":{},\"srq\":{},\"commands\":{},\
         \"read_bytes\":{},\"write_bytes\":{},\"in_capsule\":{},\"in_capsule_bytes\":{},\
         \"keyed\":{},\
         \"sq_full_waits\":{},\"rsp_slots\":{},\"rsp_peak\":{},\"rsp_waits\":{},\
         \"errors\":{},\"duplicate_completions\":{}",
        q.number,
        q.port.id(),
        q.qid,
        q.peer,
        q.state,
        q.depth.0,
        q.depth.1,
        q.srq,
        s.commands.load(Relaxed),
        s.read_bytes.load(Relaxed),
        s.write_bytes.load(Relaxed),
        s.in_capsule.load(Relaxed),
        s.in_capsule_bytes.load(Relaxed),
        s.keyed.load(Relaxed),
        s.sq_full_waits.load(Relaxed),
        q.rsp_slots,
        s.rsp_peak.load(Relaxed),
        s.rsp_waits.load(Relaxed),
        s.errors.load(Relaxed),
        s.duplicate_completions.load(Relaxed),
    )
}

/// debugfs `stats.json`: one JSON document with every port's and queue's counters and
/// histograms (since the last reset; the counters since the queue or port began).
pub(crate) fn show_json(target: &Arc<Target>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ps = target.clock().ps_per_kcycle();
    let Ok(mut snapshot) = LatencySnapshot::new_zero() else {
        return Err(fmt::Error);
    };
    let ports = target.ports();
    write!(
        f,
        "{{\"version\":1,\"ps_per_kcycle\":{},\"timing\":{},\"torn_down\":",
        ps,
        latency::timing()
    )?;
    json_counts(f, &TEARDOWN_NAMES, target.teardowns())?;
    write!(f, ",\"queues\":[")?;
    target.with_queues(|queues| {
        for (i, queue) in queues.iter().enumerate() {
            let report = queue.report();
            write!(f, "{}{{", if i == 0 { "" } else { "," })?;
            json_queue(f, &report)?;
            latency_since_reset(&report, &mut snapshot);
            write!(f, ",\"latency\":")?;
            json_latency(f, &snapshot, ps)?;
            write!(f, "}}")?;
        }
        write!(f, "],\"ports\":[")?;
        for (i, port) in ports.iter().flatten().enumerate() {
            let stats = &port.stats;
            write!(
                f,
                "{}{{\"port\":{},\"address\":\"{}\",\"connects\":{},\"rejects\":{},",
                if i == 0 { "" } else { "," },
                port.id(),
                port.address(),
                stats.connects.load(Relaxed),
                stats.rejects.load(Relaxed),
            )?;
            write!(f, "\"rejects_by_reason\":")?;
            json_counts(f, &REJECT_NAMES, &stats.rejects_by_reason)?;
            write!(f, ",\"torn_down\":")?;
            json_counts(f, &TEARDOWN_NAMES, &stats.torn_down)?;
            write!(f, ",\"latency\":")?;
            port_latency(port, queues, &mut snapshot);
            json_latency(f, &snapshot, ps)?;
            write!(f, "}}")?;
        }
        Ok(())
    })?;
    writeln!(f, "]}}")
}
