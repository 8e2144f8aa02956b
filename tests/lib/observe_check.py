#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks of nvmet_rdma_rs's statistics and latency histograms (debugfs stats.json)
against what fio did, for tests/lib/observe.sh. Each subcommand exits non-zero with
one line per failed check.

  observe_check.py agree BEFORE AFTER READS WRITES_KEYED WRITES_IN_CAPSULE
      (fio --output-format=json files of a random read job, a keyed write job and an
      in-capsule write job on one I/O queue, between two readings of stats.json)
  observe_check.py slow BEFORE AFTER DELAY_NS
      (reads of a namespace whose backend takes DELAY_NS per command)
  observe_check.py in_flight SAMPLES DEPTH
      (stats.json read again and again, one document per line, while fio kept DEPTH
      reads in flight on that namespace)
  observe_check.py untimed BEFORE AFTER READS
      (with timing off: the counters count, the histograms do not)
  observe_check.py peaks STATS
      (every queue's pending work requests, their peaks, its waits' peaks and its
      completions per poll hold together; after fio, with the I/O queues idle)
  observe_check.py top TOP_JSON
      (nvmet-rdma-top --json output during reads on the I/O queue)
  observe_check.py trace TRACE
      (tracefs output of the request events around one read and one keyed write)
  observe_check.py rejects TRACE STATS REASON...
      (tracefs output of nvmet_rdma_rs_reject: each REASON appears, as often as
      stats.json STATS counts it; and the hostile host's transport errors are counted
      by kind)
"""

import json
import re
import sys

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def load(path):
    with open(path) as f:
        return json.load(f)


def io_queue(stats):
    queues = [q for q in stats["queues"] if q["qid"] != 0 and q["state"] == "live"]
    if len(queues) != 1:
        sys.exit("expected one live I/O queue, found %d" % len(queues))
    return queues[0]


def same_queue(stats, number):
    for q in stats["queues"]:
        if q["queue"] == number:
            return q
    sys.exit("queue %d is gone" % number)


def fio_job(path):
    return load(path)["jobs"][0]


def hist(q, cls, phase):
    return q["latency"][cls][phase]


def count_delta(after, before, cls, phase):
    return hist(after, cls, phase)["count"] - hist(before, cls, phase)["count"]


def stat_delta(after, before, key):
    return after[key] - before[key]


def agree(before_path, after_path, reads_path, keyed_path, inline_path):
    after_all = load(after_path)
    after = io_queue(after_all)
    before = same_queue(load(before_path), after["queue"])
    reads, keyed, inline = fio_job(reads_path), fio_job(keyed_path), fio_job(inline_path)
    n_reads = reads["read"]["total_ios"]
    n_keyed, n_inline = keyed["write"]["total_ios"], inline["write"]["total_ios"]
    print("fio: %d reads, %d keyed writes, %d in-capsule writes" % (n_reads, n_keyed, n_inline))
    check(n_reads > 0 and n_keyed > 0 and n_inline > 0, "fio completed I/O in each job")
    # Histogram counts are the commands fio completed, class by class.
    check(count_delta(after, before, "read", "total") == n_reads,
          "read histogram counts %d = fio's reads %d"
          % (count_delta(after, before, "read", "total"), n_reads))
    check(count_delta(after, before, "write", "total") == n_keyed + n_inline,
          "write histogram counts %d = fio's writes %d"
          % (count_delta(after, before, "write", "total"), n_keyed + n_inline))
    for cls in ("read", "write"):
        total = count_delta(after, before, cls, "total")
        for phase in ("wait", "core", "out"):
            check(count_delta(after, before, cls, phase) == total,
                  "%s %s phase counted every command (%d)" % (cls, phase, total))
    check(count_delta(after, before, "write", "rdma_read") == n_keyed,
          "the RDMA READ phase counted the keyed writes only (%d = %d)"
          % (count_delta(after, before, "write", "rdma_read"), n_keyed))
    check(count_delta(after, before, "read", "rdma_read") == 0, "no read has an RDMA READ phase")
    # Every command of the queue is in a histogram.
    commands = stat_delta(after, before, "commands")
    classed = sum(count_delta(after, before, c, "total") for c in ("read", "write", "other"))
    check(commands == classed, "commands %d = histogram counts %d" % (commands, classed))
    # Bytes each way.
    check(stat_delta(after, before, "write_bytes") == reads["read"]["io_bytes"],
          "bytes RDMA WRITTEN %d = fio's bytes read %d"
          % (stat_delta(after, before, "write_bytes"), reads["read"]["io_bytes"]))
    check(stat_delta(after, before, "read_bytes") == keyed["write"]["io_bytes"],
          "bytes RDMA READ %d = fio's keyed bytes written %d"
          % (stat_delta(after, before, "read_bytes"), keyed["write"]["io_bytes"]))
    check(stat_delta(after, before, "in_capsule_bytes") == inline["write"]["io_bytes"],
          "in-capsule bytes %d = fio's in-capsule bytes written %d"
          % (stat_delta(after, before, "in_capsule_bytes"), inline["write"]["io_bytes"]))
    check(stat_delta(after, before, "in_capsule") == n_inline, "in-capsule commands = fio's")
    check(stat_delta(after, before, "keyed") == n_reads + n_keyed, "keyed commands = fio's")
    # Work requests and doorbells: a read's WRITEs and response go out in one post, a keyed
    # write's READ and its response in two, an in-capsule write's response in one.
    posts = stat_delta(after, before, "send_posts")
    check(posts == n_reads + 2 * n_keyed + n_inline,
          "send posts (doorbells) %d = reads + 2 x keyed writes + in-capsule writes (%d)"
          % (posts, n_reads + 2 * n_keyed + n_inline))
    wrs = stat_delta(after, before, "send_wrs")
    check(wrs >= 2 * (n_reads + n_keyed) + n_inline,
          "send work requests %d: a response each, and at least one RDMA WRITE or READ per "
          "keyed command (>= %d)" % (wrs, 2 * (n_reads + n_keyed) + n_inline))
    check(stat_delta(after, before, "recv_posts") == commands,
          "a receive posted again per command (%d = %d)"
          % (stat_delta(after, before, "recv_posts"), commands))
    check(stat_delta(after, before, "error_status") == 0 and after["errors"] == 0
          and sum(after["errors_by_kind"].values()) == 0,
          "no error status, no transport error: %s" % after["errors_by_kind"])
    # Completions: a receive and a SEND per command, and a keyed write's RDMA READ (a
    # read's WRITEs go unsignalled before its SEND); the polls that brought them.
    completions = stat_delta(after, before, "completions")
    expected = 2 * commands + n_keyed + stat_delta(after, before, "duplicate_completions")
    check(completions == expected,
          "completions %d = a receive and a SEND per command + a READ per keyed write (%d)"
          % (completions, expected))
    polls = stat_delta(after, before, "polls")
    check(0 < polls <= completions, "%d polls brought them: %.2f completions per poll"
          % (polls, completions / polls if polls else 0))
    # Each kind of work request was pending at some point, and none is now.
    peak = after["pending_peak"]
    check(all(peak[k] >= 1 for k in ("rdma_read", "rdma_write", "send")),
          "RDMA READs, WRITEs and SENDs were pending, at their peaks %s" % peak)
    # (a SEND's completion may come after the host has its response and sent its next
    # command: see in_flight)
    check(peak["send"] <= 16, "at most twice fio's deepest job (8) SENDs at once: %d"
          % peak["send"])
    check(sum(after["pending"].values()) == 0, "nothing pending once fio is done: %s"
          % after["pending"])
    # Settled: nothing in flight, on the queue, its port, its device.
    check(sum(after["in_flight"].values()) == 0, "nothing in flight once fio is done: %s"
          % after["in_flight"])
    devices = after_all["devices"]
    check(len(devices) == 1 and devices[0]["device"] == after["device"],
          "one device, the queue's (%s): %s" % (after["device"], [d["device"] for d in devices]))
    for d in devices:
        mine = [q for q in after_all["queues"] if q["device"] == d["device"]]
        for key in ("commands", "read_bytes", "write_bytes", "send_wrs", "send_posts",
                    "completions"):
            check(d[key] == sum(q[key] for q in mine),
                  "device %s %s %d = its queues'" % (d["device"], key, d[key]))
        check(d["queues"] == len(mine), "device %s has its %d queues" % (d["device"], len(mine)))
    # The phases add up to the total (their stamps chain).
    for cls in ("read", "write"):
        rate = after_all["ps_per_kcycle"]
        total = sum_ns_delta(after, before, cls, "total", rate)
        parts = sum(sum_ns_delta(after, before, cls, p, rate)
                    for p in ("wait", "rdma_read", "core", "out"))
        check(total > 0 and abs(parts - total) <= total / 100 + 1000,
              "%s phases sum to the total (%d ns of %d ns)" % (cls, parts, total))
        h = hist(after, cls, "total")
        check(0 < h["p50_ns"] <= h["p99_ns"] <= h["p999_ns"],
              "%s percentiles ordered: p50 %d <= p99 %d <= p99.9 %d ns"
              % (cls, h["p50_ns"], h["p99_ns"], h["p999_ns"]))
    # Earlier steps disconnected hosts: counted by cause, per port and for the target
    # (which keeps the counts of removed ports).
    torn = after_all["torn_down"]
    by_port = sum(p["torn_down"]["host_disconnect"] for p in after_all["ports"])
    check(torn["host_disconnect"] > 0 and by_port > 0,
          "teardowns by hosts leaving are counted (%d, %d on the ports listed)"
          % (torn["host_disconnect"], by_port))
    check(torn["error"] == 0 and torn["setup_failed"] == 0,
          "no teardown for an error or a failed set-up: %s" % torn)
    # A port's figures are its queues' (none was released since the reset).
    for port in after_all["ports"]:
        queues = [q for q in after_all["queues"] if q["port"] == port["port"]]
        for cls in ("read", "write", "other"):
            mine = hist(port, cls, "total")["count"]
            theirs = sum(hist(q, cls, "total")["count"] for q in queues)
            check(mine == theirs, "port %d %s count %d = its queues' %d"
                  % (port["port"], cls, mine, theirs))


def sum_ns_delta(after, before, cls, phase, rate):
    """The durations recorded between two readings, in ns at the later reading's rate."""
    return (hist(after, cls, phase)["sum_cycles"] - hist(before, cls, phase)["sum_cycles"]) \
        * rate / 1e6


def slow(before_path, after_path, delay_ns):
    rate = load(after_path)["ps_per_kcycle"]
    after = io_queue(load(after_path))
    before = same_queue(load(before_path), after["queue"])
    n = count_delta(after, before, "read", "total")
    check(n > 0, "reads on the slow namespace were timed (%d)" % n)
    if n == 0:
        return

    def mean(phase):
        return sum_ns_delta(after, before, "read", phase, rate) / n
    core, total, wait, out = mean("core"), mean("total"), mean("wait"), mean("out")
    print("slow namespace: mean total %.0f ns, wait %.0f ns, core %.0f ns, out %.0f ns"
          % (total, wait, core, out))
    # (2% for the cycle counter's calibration)
    check(core >= delay_ns * 0.98, "the core phase holds the backend's delay (%.0f >= %d ns)"
          % (core, delay_ns))
    check(core < delay_ns * 20, "the core phase is not far beyond the delay (%.0f ns)" % core)
    # (below the delay: a phase that held it would hold all of it; a KASAN guest beside
    # another VM took 30 ms for its RDMA WRITEs and SENDs, the out phase)
    check(wait < delay_ns and out < delay_ns,
          "the transport's phases do not hold the delay (wait %.0f, out %.0f < %d ns)"
          % (wait, out, delay_ns))
    check(total >= core, "the total holds the core phase")
    p50 = hist(after, "read", "core")["p50_ns"]
    check(p50 >= delay_ns / 2, "core p50 %d ns is in or above the delay's bucket" % p50)


def in_flight(samples_path, depth):
    with open(samples_path) as f:
        samples = [json.loads(line) for line in f if line.strip()]
    check(len(samples) >= 3, "%d readings of stats.json" % len(samples))
    seen = [io_queue(s)["in_flight"] for s in samples]
    core = [s["core"] for s in seen]
    print("in the core, reading by reading: %s" % core)
    # With DEPTH reads of 50 ms each in flight, a reading finds them in the core.
    check(max(core) >= 1, "a reading found reads in the core (at most %d)" % max(core))
    # (a slot is busy until its SEND's completion is handled, and the host, which has the
    # response by then, may have sent its next command in its place: each of the host's
    # DEPTH commands may have one such response beside it, seen as 6 of 4 on a busy host)
    check(all(sum(s.values()) <= 2 * depth for s in seen),
          "never more in flight than twice fio's depth %d (responses completing beside "
          "the host's next commands)" % depth)
    for s in samples:
        queue = io_queue(s)
        port = [p for p in s["ports"] if p["port"] == queue["port"]][0]
        device = [d for d in s["devices"] if d["device"] == queue["device"]][0]
        ok = all(port["in_flight"][k] >= queue["in_flight"][k]
                 and device["in_flight"][k] >= queue["in_flight"][k] for k in queue["in_flight"])
        if not ok:
            check(False, "the port's and device's in flight hold the queue's: %s %s %s"
                  % (queue["in_flight"], port["in_flight"], device["in_flight"]))
            return
    check(True, "the port's and device's in flight hold the queue's, every reading")


def untimed(before_path, after_path, reads_path):
    after = io_queue(load(after_path))
    before = same_queue(load(before_path), after["queue"])
    n_reads = fio_job(reads_path)["read"]["total_ios"]
    check(load(after_path)["timing"] is False, "stats.json says timing is off")
    check(count_delta(after, before, "read", "total") == 0, "no read was timed with timing off")
    check(stat_delta(after, before, "commands") >= n_reads,
          "the counters still counted the %d reads" % n_reads)


def peaks(stats_path):
    stats = load(stats_path)
    for q in stats["queues"]:
        name = "queue %d (qid %d)" % (q["queue"], q["qid"])
        pending, peak = q["pending"], q["pending_peak"]
        print("%s: pending %s, peaks %s, slot waits %d (peak %d), send queue waits %d "
              "(peak %d), %d completions in %d polls"
              % (name, pending, peak, q["rsp_waits"], q["slot_wait_peak"], q["sq_full_waits"],
                 q["sq_wait_peak"], q["completions"], q["polls"]))
        if q["qid"] != 0:
            check(all(pending[k] <= peak[k] for k in pending),
                  "%s: pending within the peaks" % name)
        # (a SEND is a command's response, and a command holds a response slot)
        check(peak["send"] <= q["rsp_slots"], "%s: SENDs at peak %d <= response slots %d"
              % (name, peak["send"], q["rsp_slots"]))
        check((q["rsp_waits"] > 0) == (q["slot_wait_peak"] > 0),
              "%s: a slot wait peak (%d) if and only if commands waited for a slot (%d)"
              % (name, q["slot_wait_peak"], q["rsp_waits"]))
        check((q["sq_full_waits"] > 0) == (q["sq_wait_peak"] > 0),
              "%s: a send queue wait peak (%d) if and only if commands waited for space (%d)"
              % (name, q["sq_wait_peak"], q["sq_full_waits"]))
        # (a parked command holds one of the host's receives)
        check(q["slot_wait_peak"] <= q["recv_queue_size"],
              "%s: parked at peak %d <= the host's %d receives"
              % (name, q["slot_wait_peak"], q["recv_queue_size"]))
        check(q["polls"] <= q["completions"] and (q["commands"] == 0 or q["polls"] > 0),
              "%s: %d polls for %d completions" % (name, q["polls"], q["completions"]))


def top(path):
    with open(path) as f:
        intervals = [json.loads(line) for line in f if line.strip()]
    check(len(intervals) >= 2, "nvmet-rdma-top printed %d intervals" % len(intervals))
    busy = [q for i in intervals for q in i["queues"] if q["qid"] != 0 and q["r_s"] > 0]
    check(bool(busy), "an interval shows reads per second on the I/O queue")
    for q in busy:
        r = q["read"]
        check(0 < r["p50_us"] <= r["p99_us"] <= r["p99.9_us"],
              "interval of queue %d: %.0f reads/s, p50 %.1f <= p99 %.1f <= p99.9 %.1f µs"
              % (q["queue"], q["r_s"], r["p50_us"], r["p99_us"], r["p99.9_us"]))
        check(q["r_mb_s"] > 0, "interval of queue %d: %.2f MB/s to the host"
              % (q["queue"], q["r_mb_s"]))
        # (an interval's edges may split a poll from its completions: about 1 or more)
        check(q["completions_per_poll"] > 0.5,
              "interval of queue %d: %.2f completions per poll"
              % (q["queue"], q["completions_per_poll"]))
        # (a 4 KiB read: one post of its RDMA WRITE and its response)
        # (and at most twice fio's depth 4 in flight: see in_flight)
        check(q["wr_per_post"] >= 2 and q["qd"] <= 8,
              "interval of queue %d: %.2f send WRs per doorbell, %d in flight (fio's depth 4)"
              % (q["queue"], q["wr_per_post"], q["qd"]))
    devices = [d for i in intervals for d in i["devices"] if d["commands_s"] > 0]
    check(bool(devices), "an interval shows the device's commands per second")


TRACE_LINE = re.compile(r"nvmet_rdma_rs_req_(\w+): queue=(\d+) qid=(\d+) cid=(\d+) slot=(\d+) "
                        r"opcode=0x([0-9a-f]+) status=0x([0-9a-f]+)")

# A command's steps, in order, by opcode: a read's data goes out by RDMA WRITE before
# its response; a keyed write's comes in by RDMA READ before the core executes it.
STEPS = {
    0x02: ["recv", "submit", "complete", "written", "sent", "free"],
    0x01: ["recv", "read", "submit", "complete", "sent", "free"],
}


def trace(path):
    commands = {}  # (queue, cid) -> [steps], for the command in flight
    done = []
    with open(path) as f:
        for line in f:
            m = TRACE_LINE.search(line)
            if not m:
                continue
            step, queue, _, cid, _, opcode, status = m.groups()
            key = (int(queue), int(cid))
            if step == "recv":
                commands[key] = (int(opcode, 16), [])
            if key not in commands:
                continue
            commands[key][1].append(step)
            if step == "free":
                done.append(commands.pop(key))
                check(int(status, 16) == 0, "command %s freed with status 0" % (key,))
    for opcode, name in ((0x02, "read"), (0x01, "write")):
        seen = [steps for op, steps in done if op == opcode]
        check(len(seen) >= 1, "a whole %s was traced (%d)" % (name, len(seen)))
        for steps in seen:
            check(steps == STEPS[opcode], "the %s's steps: %s" % (name, " ".join(steps)))


def rejects(path, stats_path, *reasons):
    with open(path) as f:
        text = f.read()
    ports = load(stats_path)["ports"]
    for reason in reasons:
        n = text.count("reason=" + reason)
        counted = sum(p["rejects_by_reason"][reason.lower()] for p in ports)
        check(n > 0, "nvmet_rdma_rs_reject traced reason=%s (%d times)" % (reason, n))
        check(counted == n, "stats.json counts %d rejects with %s, as traced" % (counted, reason))
    total = sum(p["rejects"] for p in ports)
    by_reason = sum(sum(p["rejects_by_reason"].values()) for p in ports)
    check(total == by_reason, "rejects %d = their sum by reason %d" % (total, by_reason))
    # The hostile host's truncated capsule, oversized capsule and bad keys ended queues
    # with transport errors, counted by kind on the port (the queues are gone).
    errors = {}
    for p in ports:
        for kind, n in p["errors_by_kind"].items():
            errors[kind] = errors.get(kind, 0) + n
    print("transport errors by kind: %s" % errors)
    for kind, case in (("short_capsule", "truncated"), ("recv", "oversized"),
                       ("rdma_read", "bad keys")):
        check(errors.get(kind, 0) >= 1, "the %s case counted a %s error" % (case, kind))


def main():
    commands = {"agree": (agree, 5), "slow": (slow, 3), "in_flight": (in_flight, 2),
                "peaks": (peaks, 1),
                "untimed": (untimed, 3), "top": (top, 1), "trace": (trace, 1)}
    if len(sys.argv) > 2 and sys.argv[1] == "rejects":
        rejects(*sys.argv[2:])
        if failures:
            sys.exit("%d check(s) failed" % len(failures))
        return
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    fn, nargs = commands[sys.argv[1]]
    args = sys.argv[2:]
    if len(args) != nargs:
        sys.exit(__doc__)
    if fn is slow:
        args[2] = int(args[2])
    if fn is in_flight:
        args[1] = int(args[1])
    fn(*args)
    if failures:
        sys.exit("%d check(s) failed" % len(failures))


if __name__ == "__main__":
    main()
