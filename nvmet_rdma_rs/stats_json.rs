// SPDX-License-Identifier: GPL-2.0

//! debugfs `stats.json`: every counter and histogram of the target, its ports, its RDMA
//! devices and its queues, as one JSON document for tools (`tools/nvmet-rdma-top`, the
//! bench report, the tests). The fields are in `Documentation/nvmet-rdma-rs.md`.
//!
//! As `report`, it reads what the data path counted and the response slots' states;
//! nothing here is on the data path.

#![forbid(unsafe_code)]

use crate::command::{
    latency::{self, LatencySnapshot, CLASS_NAMES, PHASE_NAMES},
    pending_of, InFlight, Wrs, TRANSPORT_ERROR_NAMES,
};
use crate::histogram::{to_ns, upper_bound, Snapshot, BUCKETS};
use crate::port::TEARDOWN_NAMES;
use crate::report::{latency_since_reset, port_latency, PERCENTILES, REJECT_NAMES};
use crate::target::{QueueReport, Target};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::{fmt, prelude::*, sync::Arc};

/// The separators of a JSON list or object's members: none before the first.
struct Members(bool);

impl Members {
    fn new() -> Self {
        Self(false)
    }

    /// The separator before the next member.
    fn next(&mut self) -> &'static str {
        if core::mem::replace(&mut self.0, true) {
            ","
        } else {
            ""
        }
    }
}

/// Named counts as a JSON object.
fn json_counts(
    f: &mut fmt::Formatter<'_>,
    names: &[&str],
    counts: impl IntoIterator<Item = u64>,
) -> fmt::Result {
    let mut members = Members::new();
    write!(f, "{{")?;
    for (name, count) in names.iter().zip(counts) {
        write!(f, "{}\"{}\":{}", members.next(), name, count)?;
    }
    write!(f, "}}")
}

/// Loads of atomic counters, for [`json_counts`].
fn loaded(counts: &[AtomicU64]) -> impl Iterator<Item = u64> + '_ {
    counts.iter().map(|count| count.load(Relaxed))
}

/// What a queue's commands wait for, as a JSON object.
fn json_in_flight(f: &mut fmt::Formatter<'_>, now: &InFlight) -> fmt::Result {
    json_counts(f, &InFlight::NAMES, now.counts().map(u64::from))
}

/// Work requests by kind, as a JSON object.
fn json_wrs(f: &mut fmt::Formatter<'_>, counts: [u32; 3]) -> fmt::Result {
    json_counts(f, &Wrs::NAMES, counts.map(u64::from))
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
    let mut members = Members::new();
    for (b, &count) in hist.counts.iter().enumerate().take(BUCKETS) {
        if count != 0 {
            write!(
                f,
                "{}[{},{},{}]",
                members.next(),
                b,
                to_ns(upper_bound(b), ps),
                count
            )?;
        }
    }
    write!(f, "]}}")
}

/// A set of histograms as JSON: `{"read":{"total":{..},..},..}`.
fn json_latency(f: &mut fmt::Formatter<'_>, latency: &LatencySnapshot, ps: u64) -> fmt::Result {
    let mut classes = Members::new();
    write!(f, "{{")?;
    for (name, phases) in CLASS_NAMES.iter().zip(&latency.hist) {
        write!(f, "{}\"{}\":{{", classes.next(), name)?;
        let mut members = Members::new();
        for (name, hist) in PHASE_NAMES.iter().zip(phases) {
            write!(f, "{}\"{}\":", members.next(), name)?;
            json_hist(f, hist, ps)?;
        }
        write!(f, "}}")?;
    }
    write!(f, "}}")
}

/// The counters a device's (or any group's) queues add up to.
#[derive(Default)]
struct Totals {
    queues: u64,
    commands: u64,
    read_bytes: u64,
    write_bytes: u64,
    send_wrs: u64,
    send_posts: u64,
    recv_posts: u64,
    completions: u64,
    errors: u64,
    in_flight: InFlight,
    pending: [u32; 3],
}

impl Totals {
    fn add(&mut self, (q, in_flight): &(QueueReport<'_>, InFlight)) {
        let s = q.stats;
        self.queues += 1;
        self.commands += s.commands.load(Relaxed);
        self.read_bytes += s.read_bytes.load(Relaxed);
        self.write_bytes += s.write_bytes.load(Relaxed);
        self.send_wrs += s.send_wrs.load(Relaxed);
        self.send_posts += s.send_posts.load(Relaxed);
        self.recv_posts += s.recv_posts.load(Relaxed);
        self.completions += s.completions.load(Relaxed);
        self.errors += s.errors.load(Relaxed);
        self.in_flight.add(in_flight);
        if let Some(io) = q.io {
            for (sum, now) in self.pending.iter_mut().zip(io.pending.now()) {
                *sum += now;
            }
        }
    }

    /// As JSON members.
    fn json(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"queues\":{},\"commands\":{},\"read_bytes\":{},\"write_bytes\":{},\
             \"send_wrs\":{},\"send_posts\":{},\"recv_posts\":{},\"completions\":{},\
             \"errors\":{},\"in_flight\":",
            self.queues,
            self.commands,
            self.read_bytes,
            self.write_bytes,
            self.send_wrs,
            self.send_posts,
            self.recv_posts,
            self.completions,
            self.errors,
        )?;
        json_in_flight(f, &self.in_flight)?;
        write!(f, ",\"pending\":")?;
        json_wrs(f, self.pending)
    }
}

/// One queue's counters as JSON members.
fn json_queue(
    f: &mut fmt::Formatter<'_>,
    q: &QueueReport<'_>,
    in_flight: &InFlight,
) -> fmt::Result {
    let s = q.stats;
    // (polls first: see `QueueStats::polls`)
    let polls = s.polls.load(Relaxed);
    write!(
        f,
        "\"queue\":{},\"port\":{},\"qid\":{},\"host\":\"{}\",\"state\":\"{}\",\
         \"device\":\"{}\",\"recv_queue_size\":{},\"send_queue_size\":{},\"srq\":{},\
         \"commands\":{},\"read_bytes\":{},\"write_bytes\":{},\"in_capsule\":{},\
         \"in_capsule_bytes\":{},\"keyed\":{},\
         \"send_wrs\":{},\"send_posts\":{},\"recv_posts\":{},\
         \"sq_full_waits\":{},\"rsp_slots\":{},\"rsp_peak\":{},\"rsp_waits\":{},\
         \"slot_wait_peak\":{},\"sq_wait_peak\":{},\"completions\":{},\"polls\":{},\
         \"error_status\":{},\"errors\":{},\"duplicate_completions\":{}",
        q.number,
        q.port.id(),
        q.qid,
        q.peer,
        q.state,
        q.device,
        q.depth.0,
        q.depth.1,
        q.srq,
        s.commands.load(Relaxed),
        s.read_bytes.load(Relaxed),
        s.write_bytes.load(Relaxed),
        s.in_capsule.load(Relaxed),
        s.in_capsule_bytes.load(Relaxed),
        s.keyed.load(Relaxed),
        s.send_wrs.load(Relaxed),
        s.send_posts.load(Relaxed),
        s.recv_posts.load(Relaxed),
        s.sq_full_waits.load(Relaxed),
        q.rsp_slots,
        s.rsp_peak.load(Relaxed),
        s.rsp_waits.load(Relaxed),
        s.slot_wait_peak.load(Relaxed),
        s.sq_wait_peak.load(Relaxed),
        s.completions.load(Relaxed),
        polls,
        s.error_status.load(Relaxed),
        s.errors.load(Relaxed),
        s.duplicate_completions.load(Relaxed),
    )?;
    write!(f, ",\"errors_by_kind\":")?;
    json_counts(f, &TRANSPORT_ERROR_NAMES, loaded(&s.errors_by_kind))?;
    write!(f, ",\"in_flight\":")?;
    json_in_flight(f, in_flight)?;
    let (pending, peaks) = pending_of(q.io);
    write!(f, ",\"pending\":")?;
    json_wrs(f, pending)?;
    write!(f, ",\"pending_peak\":")?;
    json_wrs(f, peaks)
}

/// The live queues on each RDMA device, added up: one object per device, in the order
/// of the devices' first queues (`reports`: every live queue's, with what its commands
/// wait for).
fn json_devices(
    f: &mut fmt::Formatter<'_>,
    reports: &[(QueueReport<'_>, InFlight)],
) -> fmt::Result {
    let mut members = Members::new();
    for (i, (first, _)) in reports.iter().enumerate() {
        let on_its_device = |(q, _): &&(QueueReport<'_>, InFlight)| q.device == first.device;
        if reports[..i].iter().any(|q| on_its_device(&q)) {
            continue;
        }
        let mut totals = Totals::default();
        for q in reports[i..].iter().filter(on_its_device) {
            totals.add(q);
        }
        write!(f, "{}{{\"device\":\"{}\",", members.next(), first.device)?;
        totals.json(f)?;
        write!(f, "}}")?;
    }
    Ok(())
}

/// debugfs `stats.json`: one JSON document with every queue's, port's and device's
/// counters and histograms (the histograms since the last reset; the counters since the
/// queue or port began).
pub(crate) fn show_json(target: &Arc<Target>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ps = target.clock().ps_per_kcycle();
    let Ok(mut snapshot) = LatencySnapshot::new_zero() else {
        return Err(fmt::Error);
    };
    let ports = target.ports();
    write!(
        f,
        "{{\"version\":2,\"ps_per_kcycle\":{},\"timing\":{},\"torn_down\":",
        ps,
        latency::timing()
    )?;
    json_counts(f, &TEARDOWN_NAMES, loaded(target.teardowns()))?;
    write!(f, ",\"queues\":[")?;
    target.with_queues(|queues| {
        // (what each queue's commands wait for, once: it reads the queue's response slots)
        let mut reports = KVec::with_capacity(queues.len(), GFP_KERNEL).map_err(|_| fmt::Error)?;
        for queue in queues {
            let report = queue.report();
            let in_flight = report.in_flight();
            reports
                .push((report, in_flight), GFP_KERNEL)
                .map_err(|_| fmt::Error)?;
        }
        let mut members = Members::new();
        for (report, in_flight) in &reports {
            write!(f, "{}{{", members.next())?;
            json_queue(f, report, in_flight)?;
            latency_since_reset(report, &mut snapshot);
            write!(f, ",\"latency\":")?;
            json_latency(f, &snapshot, ps)?;
            write!(f, "}}")?;
        }
        write!(f, "],\"devices\":[")?;
        json_devices(f, &reports)?;
        write!(f, "],\"ports\":[")?;
        let mut members = Members::new();
        for port in ports.iter().flatten() {
            let stats = &port.stats;
            write!(
                f,
                "{}{{\"port\":{},\"address\":\"{}\",\"connects\":{},\"rejects\":{},",
                members.next(),
                port.id(),
                port.address(),
                stats.connects.load(Relaxed),
                stats.rejects.load(Relaxed),
            )?;
            write!(f, "\"rejects_by_reason\":")?;
            json_counts(f, &REJECT_NAMES, loaded(&stats.rejects_by_reason))?;
            write!(f, ",\"torn_down\":")?;
            json_counts(f, &TEARDOWN_NAMES, loaded(&stats.torn_down))?;
            write!(f, ",\"errors_by_kind\":")?;
            json_counts(f, &TRANSPORT_ERROR_NAMES, loaded(&stats.errors_by_kind))?;
            let mut live = InFlight::default();
            for (_, in_flight) in reports
                .iter()
                .filter(|(q, _)| core::ptr::eq(&**q.port, &**port))
            {
                live.add(in_flight);
            }
            write!(f, ",\"in_flight\":")?;
            json_in_flight(f, &live)?;
            write!(f, ",\"latency\":")?;
            port_latency(port, queues, &mut snapshot);
            json_latency(f, &snapshot, ps)?;
            write!(f, "}}")?;
        }
        Ok(())
    })?;
    writeln!(f, "]}}")
}
