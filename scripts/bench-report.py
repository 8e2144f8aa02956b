#!/usr/bin/env python3
"""Turns the raw results of tests/bench/bench-guest.sh into the `make bench` report.

usage: bench-report.py RAW_DIR OUT_DIR [--kernel NAME]

Writes OUT_DIR/bench.md (the Markdown tables), OUT_DIR/bench.png (the chart, drawn
with gnuplot) and OUT_DIR/bench.dat (the chart's data), prints the Markdown, and
ends with the line `min ratio Rust/C: X.XX (±Y.YY)`: the smallest Rust/C ratio of
IOPS and MB/s over every fio workload (higher is better for Rust on both), each the
geometric mean of the rounds' paired ratios with its 95% interval (paired_ratio.py).
`make bench` then prints the counted figure's line after it (count-report.py).
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

from paired_ratio import paired_ratio

C, RUST = "nvmet-rdma", "nvmet_rdma_rs"
# The wire operation that bounds each bandwidth workload: a host READ is the target's
# RDMA WRITE, a host WRITE the target's RDMA READ.
WIRE_FOR = {"seqread-128k-qd16": "write_bw-128k", "seqwrite-128k-qd16": "read_bw-128k"}
WIRE_NAMES = {
    "write_bw-128k": ("RDMA WRITE bandwidth, 128 KiB", "MB/s", "bw-128k"),
    "read_bw-128k": ("RDMA READ bandwidth, 128 KiB", "MB/s", None),
    "write_lat-4k": ("RDMA WRITE latency, 4 KiB", "µs", "wlat-4k"),
    "read_lat-4k": ("RDMA READ latency, 4 KiB", "µs", "rlat-4k"),
    "send_lat-1k": ("SEND latency, 1 KiB", "µs", "slat-1k"),
}
# name, unit, higher is better
METRICS = [
    ("IOPS", "", True),
    ("MB/s", "", True),
    ("clat p50", "µs", False),
    ("clat p99", "µs", False),
    ("CPU per I/O", "µs", False),
]


def read_machine(raw):
    """machine.txt: `key value` lines written by the guest."""
    info = {}
    with open(os.path.join(raw, "machine.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(" ")
            info[key] = value
    return info


def fio_run(path):
    """IOPS, MB/s, clat p50/p99 (µs) and I/O count of one fio JSON output."""
    with open(path) as f:
        text = f.read()
    # fio may print notes before the JSON document.
    data = json.loads(text[text.index("{"):])
    iops = mb_s = ios = 0.0
    p50 = p99 = None
    for job in data["jobs"]:
        for direction in ("read", "write"):
            d = job[direction]
            if not d["total_ios"]:
                continue
            iops += d["iops"]
            mb_s += d["bw_bytes"] / 1e6
            ios += d["total_ios"]
            pct = d["clat_ns"].get("percentile", {})
            p50 = max(p50 or 0, pct.get("50.000000", 0) / 1000)
            p99 = max(p99 or 0, pct.get("99.000000", 0) / 1000)
    return {"IOPS": iops, "MB/s": mb_s, "clat p50": p50, "clat p99": p99, "ios": ios}


def collect_fio(raw, clk_tck):
    """{(transport, workload): [per-round metrics]} and the workloads in run order."""
    cpu = {}
    with open(os.path.join(raw, "cpu.txt")) as f:
        for line in f:
            transport, name, rnd, ticks = line.split()
            cpu[(transport, name, rnd)] = int(ticks)
    runs, order = {}, []
    for (transport, name, rnd), ticks in cpu.items():
        m = fio_run(os.path.join(raw, f"fio-{transport}-{name}-{rnd}.json"))
        m["CPU per I/O"] = ticks / clk_tck * 1e6 / m["ios"] if m["ios"] else None
        m["round"] = int(rnd)
        runs.setdefault((transport, name), []).append(m)
        if name not in order:
            order.append(name)
    return runs, order


def perftest_run(path):
    """The figure of one perftest client output: MB/s for *_bw, (typical, p99) µs for *_lat."""
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            header = line
            values = lines[i + 1].split()
            break
    else:
        raise ValueError(f"{path}: no result table")
    if "BW average[MB/sec]" in header:  # perftest's MB is 2^20 bytes
        return {"MB/s": float(values[3]) * 1.048576}
    if "t_typical" in header:  # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
        return {"p50": float(values[4]), "p99": float(values[7])}
    raise ValueError(f"{path}: unexpected result table: {header.strip()}")


def demo_run(path):
    """The `key value` lines of one demo bench run."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = float(parts[1])
    return {"MB/s": out.get("mb_s"), "p50": out.get("lat_median_us"), "p99": out.get("lat_p99_us")}


def collect(raw, prefix, parse):
    """{name: [per-round results]} of the files prefix-NAME-ROUND.txt."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, f"{prefix}-*-*.txt"))):
        name = re.match(rf"{prefix}-(.+)-(\d+)\.txt$", os.path.basename(path)).group(1)
        runs.setdefault(name, []).append(parse(path))
    return runs


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt(value):
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(s):
    if s is None:
        return "–"
    med, lo, hi = s
    return f"{fmt(med)} ({fmt(lo)}–{fmt(hi)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--kernel", default="?", help="the kernel build's name")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    machine = read_machine(args.raw)
    if not machine.get("perftest"):  # the guest's /var/lib is a tmpfs: ask the host
        machine["perftest"] = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "perftest"], capture_output=True, text=True
        ).stdout
    host_cpu = next(
        (l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"
    )
    runs, workloads = collect_fio(args.raw, int(machine["clk_tck"]))
    perftest = collect(args.raw, "perftest", perftest_run)
    demo = collect(args.raw, "demo", demo_run)

    md = []
    md.append("# make bench: C nvmet-rdma vs nvmet_rdma_rs over rxe\n")
    md.append(
        f"Machine: {machine.get('accel', '?').upper()} guest, {machine.get('cpus')} vCPUs, "
        f"{machine.get('mem_mib')} MiB (guest CPU model {machine.get('cpu_model')}) on a "
        f"{os.cpu_count()}-core {host_cpu} host; kernel "
        f"{machine.get('kernel')} ({args.kernel}; lockdep {machine.get('lockdep')}, kmemleak "
        f"{machine.get('kmemleak')}, KFENCE {machine.get('kfence')}); {machine.get('fio')}, "
        f"perftest {machine.get('perftest')}. Profile {machine.get('profile')}: "
        f"{machine.get('rounds')} round(s) of {machine.get('runtime_s')} s per fio point, "
        "the two transports alternating; each cell is the median (min–max) over the rounds, "
        "and Rust/C the geometric mean of the rounds' paired ratios with its 95% t-interval. "
        "Target: null_blk (no data, inline completion); host: kernel nvme-rdma, fio libaio, "
        "direct I/O. CPU per I/O: busy time of the whole guest (host and target side) per "
        "I/O. Rust/C below 1.00 is better on latency and CPU rows, above 1.00 on IOPS and "
        "MB/s. Wire: perftest's figure for the RDMA operation that carries the data.\n"
    )
    md.append("| workload | metric | C nvmet-rdma | nvmet_rdma_rs | Rust/C | 95% interval | wire (perftest) | Rust/wire |")
    md.append("|---|---|---:|---:|---:|---|---:|---:|")
    throughput_ratios = []
    chart = []
    for w in workloads:
        row_chart = {"w": w}
        for metric, unit, higher_better in METRICS:
            c = stats([r[metric] for r in runs.get((C, w), [])])
            rs = stats([r[metric] for r in runs.get((RUST, w), [])])
            by_round = {r["round"]: r[metric] for r in runs.get((C, w), [])}
            pairs = [(r[metric], by_round[r["round"]]) for r in runs.get((RUST, w), [])
                     if r["round"] in by_round and r[metric] is not None and by_round[r["round"]] is not None]
            ratio, lo, hi = paired_ratio(pairs)
            if higher_better and ratio is not None:
                throughput_ratios.append((ratio, 0.0 if lo is None else (hi - lo) / 2, w, metric))
            wire = wire_ratio = None
            if metric == "MB/s" and w in WIRE_FOR and WIRE_FOR[w] in perftest:
                ws = stats([r["MB/s"] for r in perftest[WIRE_FOR[w]]])
                wire = ws[0]
                wire_ratio = rs[0] / wire if rs and wire else None
            label = f"{metric} ({unit})" if unit else metric
            md.append(
                f"| {w} | {label} | {cell(c)} | {cell(rs)} | "
                f"{'–' if ratio is None else f'{ratio:.2f}'} | "
                f"{'–' if lo is None else f'{lo:.2f}–{hi:.2f}'} | {fmt(wire) if wire else ''} | "
                f"{'' if wire_ratio is None else f'{wire_ratio:.2f}'} |"
            )
            row_chart[metric] = (c[0] if c else 0, rs[0] if rs else 0, ratio, lo or ratio, hi or ratio)
        chart.append(row_chart)

    md.append("\n## The wire: perftest and the demo pair's bench on the same rxe device\n")
    md.append(
        "perftest (`-R`, rxe provider, busy-polling; `*_bw` at its default depth, `write_lat` "
        "and `send_lat` report half a round trip, `read_lat` a whole one) beside the demo "
        "pair's `bench` (post to completion callback through `IB_POLL_WORKQUEUE`; `bw` keeps 16 "
        "WRITEs in flight).\n"
    )
    md.append("| operation | metric | perftest | demo bench |")
    md.append("|---|---|---:|---:|")
    for name, (title, unit, demo_name) in WIRE_NAMES.items():
        if name not in perftest and (demo_name or "") not in demo:
            continue
        keys = ["MB/s"] if unit == "MB/s" else ["p50", "p99"]
        for key in keys:
            p = stats([r.get(key) for r in perftest.get(name, [])])
            d = stats([r.get(key) for r in demo.get(demo_name, [])]) if demo_name else None
            label = "MB/s" if key == "MB/s" else f"{'median' if key == 'p50' else 'p99'} (µs)"
            md.append(f"| {title} | {label} | {cell(p)} | {cell(d)} |")

    text = "\n".join(md) + "\n"
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(text)
    draw_chart(chart, args.out)
    latency_md = draw_latency(args.raw, args.out)
    if latency_md:
        text += latency_md
        with open(os.path.join(args.out, "bench.md"), "w") as f:
            f.write(text)
    print(text)
    print(f"table: {os.path.join(args.out, 'bench.md')}")
    print(f"chart: {os.path.join(args.out, 'bench.png')}")
    if not throughput_ratios:
        sys.exit("bench-report: no fio results for both transports")
    ratio, half, w, metric = min(throughput_ratios)
    print(f"(lowest: {w} {metric})")
    print(f"min ratio Rust/C: {ratio:.2f} (±{half:.2f})")


LATENCY_POINT = "randread-4k-qd32"
LATENCY_PHASES = ("total", "wait", "core", "out")


def draw_latency(raw, out):
    """latency.png: nvmet_rdma_rs's own latency histograms (debugfs stats.json, port 1,
    reads) of the first round of LATENCY_POINT, by phase; returns the Markdown that
    shows it, or None without the file."""
    path = os.path.join(raw, f"stats-{LATENCY_POINT}-1.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        stats = json.load(f)
    ports = [p for p in stats["ports"] if p["latency"]["read"]["total"]["count"]]
    if not ports:
        return None
    reads = ports[0]["latency"]["read"]
    dat = os.path.join(out, "latency.dat")
    with open(dat, "w") as f:
        f.write("# phase upper_us fraction\n")
        for phase in LATENCY_PHASES:
            hist = reads[phase]
            total = hist["count"] or 1
            for _, upper_ns, count in hist["buckets"]:
                f.write(f"{phase} {upper_ns / 1000:.3f} {count / total:.5f}\n")
            f.write("\n\n")
    plots = ", ".join(
        f"'{dat}' index {i} using 2:3 with linespoints title '{phase}'"
        for i, phase in enumerate(LATENCY_PHASES))
    script = f"""
set terminal pngcairo size 1000,500 font ',10'
set output '{os.path.join(out, 'latency.png')}'
set title 'nvmet\\_rdma\\_rs latency histograms, {LATENCY_POINT} reads (debugfs stats.json, log2 buckets)'
set logscale x 2
set xlabel 'bucket upper bound (µs)'
set ylabel 'fraction of commands'
set grid
set key top right
plot {plots}
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    md = [
        "",
        f"## nvmet_rdma_rs's own latency, {LATENCY_POINT} (round 1)",
        "",
        "From the transport's histograms (debugfs `stats.json`, reset before the point): "
        "each phase of a read, in µs. ![latency](latency.png)",
        "",
        "| phase | commands | mean | p50 | p99 | p99.9 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for phase in LATENCY_PHASES:
        h = reads[phase]
        n = h["count"]
        mean = h["sum_ns"] / n / 1000 if n else 0
        md.append(f"| {phase} | {n} | {mean:.1f} | {h['p50_ns'] / 1000:.1f} | "
                  f"{h['p99_ns'] / 1000:.1f} | {h['p999_ns'] / 1000:.1f} |")
    return "\n".join(md) + "\n"


def draw_chart(chart, out):
    """bench.png: IOPS of both transports per workload, and the Rust/C ratios."""
    dat = os.path.join(out, "bench.dat")
    with open(dat, "w") as f:
        f.write("# workload C_iops Rust_iops iops_ratio lo hi p99_ratio lo hi cpu_ratio lo hi\n")
        for row in chart:
            c, r = row["IOPS"][:2]
            cols = []
            for metric in ("IOPS", "clat p99", "CPU per I/O"):
                cols += [v or 0 for v in row[metric][2:]]
            f.write(f"{row['w']} {c} {r} " + " ".join(str(v) for v in cols) + "\n")
    script = f"""
set terminal pngcairo size 1200,900 font ',10'
set output '{os.path.join(out, 'bench.png')}'
set multiplot layout 2,1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set grid ytics
set key top left
set title 'IOPS (median): C nvmet-rdma vs nvmet\\_rdma\\_rs over rxe'
set logscale y
plot '{dat}' using 2:xtic(1) title 'C nvmet-rdma', '' using 3 title 'nvmet\\_rdma\\_rs'
unset logscale y
set title 'Rust/C with 95% intervals over the paired rounds (IOPS: higher is better; p99 latency and CPU per I/O: lower is better)'
set style histogram errorbars gap 1 lw 1
set yrange [0:*]
plot '{dat}' using 4:5:6:xtic(1) title 'IOPS', '' using 7:8:9 title 'clat p99', '' using 10:11:12 title 'CPU per I/O', 1 with lines lw 2 lc 'black' title '1.00'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


if __name__ == "__main__":
    main()
