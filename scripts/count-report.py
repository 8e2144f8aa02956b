#!/usr/bin/env python3
"""Turns a counted run (tests/bench/count-guest.sh under the insn-count plugin) into the
deterministic cost figures of `make bench`: the transport's own instructions and locked
instructions per I/O, inclusive of the kernel helpers it calls (transport_cost.py), and
the whole guest's instructions per I/O, for each transport and point, with ratios and
their 95% intervals over the rounds, and where the cost goes.

usage: count-report.py RUN_DIR OUT_DIR [--split POINT ...]

RUN_DIR is vm-run.sh's run directory (insn-count.txt and raw/). Writes OUT_DIR/count.md,
OUT_DIR/count.png (each point's ratio with its interval as an error bar), count.dat (the
chart's data) and count-split.md, prints count.md, and ends with
`transport cost Rust/C, worst row: X.XXX (±Y.YYY)`: the transport's inclusive
instructions per I/O, Rust's over C's, on the row where that is highest.

The cost of one I/O on a point is (W(N2) - W(N1)) / (N2 - N1), W(N) being every
instruction the guest executed (fio, the host's block and NVMe/RDMA stack, rxe, the
target transport, nvmet, null_blk, interrupts, timers) in a window around a fio run of N
I/Os: whatever both windows share (fio's start and exit, the markers) cancels out. The
whole guest's ratio is C's cost over Rust's, so above 1.00 Rust does the same I/O in fewer
instructions, as a speed ratio reads. Rounds pair the transports (the same boot,
adjacent runs, alternating order); the interval is Student's t over the rounds' log ratios.
"""

import argparse
import bisect
import json
import os
import re
import statistics
import subprocess
import sys

from paired_ratio import paired_ratio
import transport_cost

# The pair measured: the baseline and the candidate (machine.txt's `pair`; bench.sh
# --compare REV measures nvmet_rdma_rs-base, built from REV, against nvmet_rdma_rs).
C, RUST = "nvmet-rdma", "nvmet_rdma_rs"
TRANSPORT_MODULE = {"nvmet-rdma": "nvmet_rdma", "nvmet_rdma_rs": "nvmet_rdma_rs",
                    "nvmet_rdma_rs-base": "nvmet_rdma_rs"}
# Where a kernel module's instructions go in the split.
BUCKETS = {
    "nvmet_rdma": "transport",
    "nvmet_rdma_rs": "transport",
    "nvmet": "nvmet core",
    "rdma_rxe": "rxe",
    "ib_core": "RDMA core and CM",
    "rdma_cm": "RDMA core and CM",
    "ib_cm": "RDMA core and CM",
    "iw_cm": "RDMA core and CM",
    "ib_uverbs": "RDMA core and CM",
    "nvme_rdma": "NVMe host",
    "nvme_fabrics": "NVMe host",
    "nvme_core": "NVMe host",
    "nvme_keyring": "NVMe host",
    "nvme_auth": "NVMe host",
    "null_blk": "null_blk",
}
BUCKET_ORDER = [
    "transport", "nvmet core", "rxe", "RDMA core and CM", "NVMe host", "null_blk",
    "kernel (vmlinux)", "user space (fio)",
]
USER_TOP = 0xFFFF800000000000


def read_intervals(path, labels, chains_out=None, nodes_out=None):
    """{label: (total, {vaddr: insns})} for the detailed intervals, by the guest's labels.

    With chains_out and nodes_out (dicts), also the call chains the plugin followed:
    chains_out[label] = ([(node, insns, locked)], {vaddr: locked executed})
    and nodes_out[node] = (parent, func)."""
    out = {}
    seq = -1
    total = 0
    blocks = chains = locked = None
    with open(path) as f:
        for line in f:
            if line.startswith("c "):
                if chains_out is not None:
                    _, node, insns, lk = line.split()
                    chains.append((int(node), int(insns), int(lk)))
            elif line.startswith("b "):
                parts = line.split()
                v, insns, execs = int(parts[1], 16), int(parts[2]), int(parts[3])
                blocks[v] = blocks.get(v, 0) + insns * execs
                if len(parts) > 4:
                    locked[v] = locked.get(v, 0) + int(parts[4]) * execs
            elif line.startswith("n "):
                if nodes_out is not None:
                    _, node, parent, func = line.split()
                    nodes_out[int(node)] = (int(parent), int(func, 16))
            elif line.startswith("interval "):
                parts = line.split()
                seq, total, blocks, chains, locked = int(parts[1]), int(parts[3]), {}, [], {}
            elif line.startswith("end "):
                if seq < len(labels) and labels[seq][0] == "detail":
                    out[labels[seq][1]] = (total, blocks)
                    if chains_out is not None:
                        chains_out[labels[seq][1]] = (chains, locked)
    return out


def read_marks(path):
    """The guest's markers in order: (kind, label)."""
    with open(path) as f:
        return [tuple(line.rstrip("\n").split(" ", 1)) for line in f if line.strip()]


class Symbols:
    """Kernel text symbols (kallsyms) for mapping a block's address to function and module."""

    def __init__(self, paths):
        syms = []
        for path in paths:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) < 3 or parts[1] not in "tTwW":
                        continue
                    mod = parts[3].strip("[]") if len(parts) > 3 else "vmlinux"
                    syms.append((int(parts[0], 16), parts[2], mod))
        syms.sort()
        self.addrs = [s[0] for s in syms]
        self.syms = syms

    def lookup(self, vaddr):
        """(function, module) of a kernel address, or ('(user)', 'user') below the kernel."""
        if vaddr < USER_TOP:
            return "(user space)", "user"
        i = bisect.bisect_right(self.addrs, vaddr) - 1
        if i < 0:
            return "(unknown)", "vmlinux"
        return self.syms[i][1], self.syms[i][2]


def bucket_of(module):
    if module == "user":
        return "user space (fio)"
    return BUCKETS.get(module, "kernel (vmlinux)")


def demangle(names):
    """Rust v0 and C++ names through c++filt, without crate hashes."""
    try:
        res = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        out = res.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return dict(zip(names, names))
    return {n: re.sub(r"\[[0-9a-f]+\]", "", d) for n, d in zip(names, out)}


def window_pairs(windows):
    """{(transport, point, round): (label of the smaller window, label of the larger)}: the
    two windows of each point and round (N1 and N2 I/Os, or a point's own counts, such as
    connect cycles)."""
    by = {}
    for label in windows:
        transport, point, rnd, n = label.split()
        by.setdefault((transport, point, int(rnd)), []).append((int(n), label))
    return {k: (min(v)[1], max(v)[1]) for k, v in by.items() if len({n for n, _ in v}) > 1}


def read_run(run):
    """One counted run: machine.txt, the detailed windows by label, the measured pair, and
    cost[(transport, point)][round] = (W(N2) - W(N1)) / (N2 - N1), in the run's order."""
    raw = os.path.join(run, "raw")
    machine = {}
    with open(os.path.join(raw, "machine.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition(" ")
            machine[k] = v
    n1, n2 = int(machine["n1"]), int(machine["n2"])
    chains, nodes = {}, {}
    windows = read_intervals(os.path.join(run, "insn-count.txt"), read_marks(os.path.join(raw, "marks.txt")),
                             chains, nodes)
    cost = {}
    for (transport, point, rnd), (a, b) in window_pairs(windows).items():
        cost.setdefault((transport, point), {})[rnd] = (windows[b][0] - windows[a][0]) / (
            int(b.split()[3]) - int(a.split()[3]))
    pair = machine.get("pair", f"{C} {RUST}").split()
    return {"machine": machine, "windows": windows, "cost": cost, "pair": pair,
            "chains": chains, "nodes": nodes}


def inclusive_costs(run, raw):
    """The transport's inclusive cost per I/O (transport_cost.py) of every window pair:
    {(transport, point): {round: {'insns', 'locked', 'by_function', 'locked_by_function',
    'locked_by_module'}}}."""
    common = os.path.join(raw, "kallsyms.txt")
    symbols, per_window = {}, {}
    for label, (chains, locked) in run["chains"].items():
        t, point, rnd, n = label.split()
        own = os.path.join(raw, f"kallsyms-{t}-{rnd}.txt")
        if not chains or not os.path.exists(own):
            continue
        if (t, rnd) not in symbols:
            symbols[(t, rnd)] = Symbols([common, own])
        syms = symbols[(t, rnd)]
        r = transport_cost.inclusive(chains, run["nodes"], syms, TRANSPORT_MODULE[t])
        r["locked_by_module"] = transport_cost.locked_by_module(locked, syms)
        per_window[label] = r

    def per_io(a, b, d):
        return {k: (b.get(k, 0) - a.get(k, 0)) / d for k in set(a) | set(b)}

    out = {}
    for (t, point, rnd), (a, b) in window_pairs(per_window).items():
        r1, r2, d = per_window[a], per_window[b], int(b.split()[3]) - int(a.split()[3])
        out.setdefault((t, point), {})[rnd] = {
            "insns": (r2["insns"] - r1["insns"]) / d,
            "locked": (r2["locked"] - r1["locked"]) / d,
            "by_function": per_io(r1["by_function"], r2["by_function"], d),
            "locked_by_function": per_io(r1["locked_by_function"], r2["locked_by_function"], d),
            "locked_by_module": per_io(r1["locked_by_module"], r2["locked_by_module"], d),
        }
    return out


def med_spread(values):
    """(median, (max - min) / median) of the values, or (None, None)."""
    v = list(values)
    if not v:
        return None, None
    m = statistics.median(v)
    return m, ((max(v) - min(v)) / m if m else 0.0)


def inclusive_table(incl, points, key, title, what):
    """Markdown rows of the transport's inclusive `key` per I/O, Rust/C per point; and the
    worst row (ratio, half-width, point)."""
    md = [f"| point | {C} {title} | spread | {RUST} {title} | spread | {what} | 95% interval |",
          "|---|---:|---:|---:|---:|---:|---|"]
    worst = None
    for p in points:
        c = {k: v[key] for k, v in incl.get((C, p), {}).items()}
        r = {k: v[key] for k, v in incl.get((RUST, p), {}).items()}
        if not c or not r:
            continue
        g, lo, hi = paired_ratio([(r[k], c[k]) for k in sorted(c) if k in r])
        cm, cs = med_spread(c.values())
        rm, rs = med_spread(r.values())
        interval = "–" if lo is None else f"{lo:.3f}–{hi:.3f}"
        md.append(f"| {p} | {cm:,.1f} | {cs:.2%} | {rm:,.1f} | {rs:.2%} | "
                  f"{'–' if g is None else f'{g:.3f}'} | {interval} |")
        if g is not None and (worst is None or g > worst[0]):
            worst = (g, 0.0 if lo is None else (hi - lo) / 2, p)
    return md, worst


def inclusive_split(incl, split_points, rounds):
    """count-split.md's part: the transport's inclusive cost by its function (its own code
    and what it calls), and locked instructions per I/O by module."""
    out = []
    for point in split_points:
        for t in (C, RUST):
            by_round = incl.get((t, point), {})
            if not by_round:
                continue
            fns, fn_locked, mods = {}, {}, {}
            for r in by_round.values():
                for f, v in r["by_function"].items():
                    fns[f] = fns.get(f, 0) + v / len(by_round)
                for f, v in r.get("locked_by_function", {}).items():
                    fn_locked[f] = fn_locked.get(f, 0) + v / len(by_round)
                for m, v in r["locked_by_module"].items():
                    mods[m] = mods.get(m, 0) + v / len(by_round)
            top = sorted(((v, f) for f, v in fns.items() if f), reverse=True)[:15]
            names = demangle([f for _, f in top])
            out.append(f"\n## {point}: {t}, inclusive, by transport function\n")
            out.append("Each transport function's own code and the kernel helpers it calls "
                       "(not the provider, the nvmet core or the backend), per I/O:\n")
            out.append("| function | insns/I/O | locked/I/O |")
            out.append("|---|---:|---:|")
            for v, f in top:
                out.append(f"| `{names[f]}` | {v:,.1f} | {fn_locked.get(f, 0):,.1f} |")
            out.append(f"\nLocked instructions per I/O by module, {t}:\n")
            out.append("| module | locked/I/O |")
            out.append("|---|---:|")
            for m, v in sorted(mods.items(), key=lambda kv: -kv[1]):
                if abs(v) >= 0.05:
                    out.append(f"| {m} | {v:,.1f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--split", nargs="*", default=None,
                    help="points whose cost is split by module and function (default: every "
                    "point measured, so that each row's residual can be named per function)")
    args = ap.parse_args()
    raw = os.path.join(args.run, "raw")
    os.makedirs(args.out, exist_ok=True)

    run = read_run(args.run)
    machine, windows, cost = run["machine"], run["windows"], run["cost"]
    n1, n2 = int(machine["n1"]), int(machine["n2"])
    global C, RUST
    C, RUST = run["pair"]
    what = "Rust/C" if C == "nvmet-rdma" else "new/base"
    points, rounds = [], set()
    for (_, point), by_round in cost.items():
        rounds.update(by_round)
        if point not in points:
            points.append(point)
    if not cost:
        sys.exit("count-report: no complete window pair in the run")

    md = [f"# make bench, counted: instructions per I/O, {C} vs {RUST}\n"]
    incl = inclusive_costs(run, raw)
    tratio = f"{RUST}/{C}" if what != "Rust/C" else "Rust/C"
    md.append("## The transport's own cost, inclusive\n")
    md.append(
        "Instructions per I/O of the transport's code and of the kernel functions it calls "
        "(RDMA core helpers, `rdma_rw`, DMA mapping, slab, scatterlists), without the provider "
        "(rxe), the nvmet core, the backend or the host: each block attributed by the call "
        "chain the plugin followed (`scripts/transport_cost.py`). "
        f"{tratio} is {RUST}'s cost over {C}'s: at or below 1.000, {RUST} costs no more.\n")
    rows, tworst = inclusive_table(incl, points, "insns", "insns/I/O", tratio)
    md.extend(rows)
    md.append("\nLocked (atomic read-modify-write) instructions per I/O, same attribution:\n")
    rows, _ = inclusive_table(incl, points, "locked", "locked/I/O", tratio)
    md.extend(rows)
    md.append("\n## The whole guest\n")
    md.append(
        f"One vCPU under QEMU's instruction count (`-icount shift=0,sleep=off`, single-threaded "
        f"TCG) with the insn-count plugin; kernel {machine.get('kernel')}; {machine.get('fio')}; "
        f"{len(rounds)} round(s), transports alternating. Per point: a warm-up, then windows of "
        f"{n1} and {n2} I/Os; cost = (W({n2}) - W({n1})) / {n2 - n1}, every guest instruction "
        f"(fio, host stack, rxe, target) counted. {what} is {C}'s cost over {RUST}'s (above "
        f"1.00: {RUST} needs fewer instructions), geometric mean over the rounds with its 95% "
        "t-interval. "
        "Spread: (max - min) / median of each transport's per-round cost.\n"
    )
    md.append(f"| point | {C} insns/I/O | spread | {RUST} insns/I/O | spread | difference | {what} | 95% interval |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---|")
    worst = None
    dat = []
    for p in points:
        c, r = cost.get((C, p), {}), cost.get((RUST, p), {})
        pairs = [(c[k], r[k]) for k in sorted(c) if k in r]
        g, lo, hi = paired_ratio(pairs)

        cm, cs = med_spread(c.values())
        rm, rs = med_spread(r.values())
        interval = "–" if lo is None else f"{lo:.3f}–{hi:.3f}"
        md.append(
            f"| {p} | {cm:,.0f} | {cs:.2%} | {rm:,.0f} | {rs:.2%} | {rm - cm:+,.0f} | "
            f"{'–' if g is None else f'{g:.3f}'} | {interval} |"
        )
        if g is not None:
            half = 0.0 if lo is None else (hi - lo) / 2
            dat.append((p, g, lo or g, hi or g))
            if worst is None or g < worst[0]:
                worst = (g, half, p)
    per_round = ["\nPer round (instructions per I/O):\n", "| point | transport | " +
                 " | ".join(f"round {k}" for k in sorted(rounds)) + " |",
                 "|---|---|" + "---:|" * len(rounds)]
    for p in points:
        for t in (C, RUST):
            d = cost.get((t, p), {})
            per_round.append(f"| {p} | {t} | " + " | ".join(
                f"{d[k]:,.0f}" if k in d else "–" for k in sorted(rounds)) + " |")
    md.extend(per_round)
    md.extend(guest_time_table(raw, points, sorted(rounds), n2, what))

    draw_chart(dat, args.out, what)
    # (every point by default; a list naming none measured splits the first)
    split_points = points if args.split is None else [p for p in args.split if p in points] or points[:1]
    split = split_report(raw, windows, split_points, n1, n2, sorted(rounds))
    split += inclusive_split(incl, split_points, sorted(rounds))
    with open(os.path.join(args.out, "count-split.md"), "w") as f:
        f.write(split)
    text = "\n".join(md) + "\n"
    with open(os.path.join(args.out, "count.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"split by module and function: {os.path.join(args.out, 'count-split.md')}")
    g, half, p = worst
    print(f"whole guest, lowest {what} ({C} over {RUST}): {g:.2f} (±{half:.2f}) at {p}")
    if tworst is None:
        sys.exit("count-report: no call chains in the run (the plugin ran without syms=?)")
    g, half, p = tworst
    print(f"(worst row: {p})")
    print(f"transport cost {tratio}, worst row: {g:.3f} (±{half:.3f})")


def guest_time_table(raw, points, rounds, n2, what):
    """IOPS in guest time (fio's own figure under -icount) of the N2 windows: the same runs
    judged by the clock instead of the plugin, for comparison with the counted figure."""
    def iops(t, p, rnd):
        path = os.path.join(raw, f"fio-{t}-{p}-{rnd}-{n2}.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            text = f.read()
        data = json.loads(text[text.index("{"):])
        return sum(j[d]["iops"] for j in data["jobs"] for d in ("read", "write"))

    out = ["\nIOPS in guest time (fio's figure under `-icount`: one guest nanosecond per "
           "instruction, idle time skipped to the next timer), same windows:\n",
           f"| point | {C} IOPS | spread | {RUST} IOPS | spread | {what} | 95% interval |",
           "|---|---:|---:|---:|---:|---:|---|"]
    for p in points:
        c = {r: iops(C, p, r) for r in rounds}
        n = {r: iops(RUST, p, r) for r in rounds}
        cv, nv = [v for v in c.values() if v], [v for v in n.values() if v]
        if not cv or not nv:
            continue
        g, lo, hi = paired_ratio([(n[r], c[r]) for r in rounds if c[r] and n[r]])
        cm, nm = statistics.median(cv), statistics.median(nv)
        out.append(f"| {p} | {cm:,.0f} | {(max(cv) - min(cv)) / cm:.2%} | {nm:,.0f} | "
                   f"{(max(nv) - min(nv)) / nm:.2%} | {g:.3f} | "
                   f"{'–' if lo is None else f'{lo:.3f}–{hi:.3f}'} |")
    return out


def draw_chart(dat, out, what):
    """count.png: every point's ratio with its 95% interval as an error bar."""
    path = os.path.join(out, "count.dat")
    with open(path, "w") as f:
        f.write("# point ratio lo hi\n")
        for p, g, lo, hi in dat:
            f.write(f"{p} {g} {lo} {hi}\n")
    # (bars from 0.8 to 1.2 show a 2% difference; wider when an interval is)
    low = min([0.8] + [lo for _, _, lo, _ in dat])
    high = max([1.2] + [min(hi, 3.0) for _, _, _, hi in dat])

    def esc(name):
        return name.replace("_", "\\_")

    script = f"""
set terminal pngcairo size 1000,500 font ',10'
set output '{os.path.join(out, 'count.png')}'
set style data histograms
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set grid ytics
set key top left
set title 'Instructions per I/O, {what} (cost of {esc(C)} over cost of {esc(RUST)}; above 1.00 {esc(RUST)} needs fewer), 95% intervals'
set yrange [{low}:{high}]
plot '{path}' using 2:3:4:xtic(1) title '{what}', 1 with lines lw 2 lc 'black' title '1.00'
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def split_report(raw, windows, split_points, n1, n2, rounds):
    """count-split.md: each split point's cost per I/O by bucket and by function, C beside Rust."""
    common = os.path.join(raw, "kallsyms.txt")
    out = ["# Where the instructions of one I/O go (counted mode)\n"]
    for point in split_points:
        # {transport: {(function, module): insns per I/O, averaged over the rounds}}
        per = {}
        for t in (C, RUST):
            acc = {}
            used = 0
            for rnd in rounds:
                w2 = windows.get(f"{t} {point} {rnd} {n2}")
                w1 = windows.get(f"{t} {point} {rnd} {n1}")
                own = os.path.join(raw, f"kallsyms-{t}-{rnd}.txt")
                if not w1 or not w2 or not os.path.exists(own):
                    continue
                syms = Symbols([common, own])
                for sign, (_, blocks) in ((1, w2), (-1, w1)):
                    for vaddr, insns in blocks.items():
                        key = syms.lookup(vaddr)
                        acc[key] = acc.get(key, 0) + sign * insns
                used += 1
            if used:
                per[t] = {k: v / (n2 - n1) / used for k, v in acc.items()}
        if len(per) < 2:
            continue
        out.append(f"## {point}\n")
        out.append(f"| where | {C} insns/I/O | {RUST} insns/I/O | difference |")
        out.append("|---|---:|---:|---:|")
        for b in BUCKET_ORDER:
            cv = sum(v for (fn, m), v in per[C].items() if bucket_of(m) == b)
            rv = sum(v for (fn, m), v in per[RUST].items() if bucket_of(m) == b)
            out.append(f"| {b} | {cv:,.0f} | {rv:,.0f} | {rv - cv:+,.0f} |")
        ct, rt = sum(per[C].values()), sum(per[RUST].values())
        out.append(f"| **total** | {ct:,.0f} | {rt:,.0f} | {rt - ct:+,.0f} |")

        # Functions outside the transports line up by name; the transports' own are listed apart.
        def by_fn(d):
            m = {}
            for (fn, mod), v in d.items():
                if mod in TRANSPORT_MODULE.values():
                    continue
                m[(fn, mod)] = m.get((fn, mod), 0) + v
            return m

        cf, rf = by_fn(per[C]), by_fn(per[RUST])
        keys = set(cf) | set(rf)
        diffs = sorted(keys, key=lambda k: -abs(rf.get(k, 0) - cf.get(k, 0)))[:15]
        # (the transports' symbols are mapped per load; the rest from the table at the end)
        names = demangle([k[0] for k in diffs])
        out.append("\nLargest differences outside the transport (same function, both runs):\n")
        out.append(f"| function [module] | {C} | {RUST} | difference |")
        out.append("|---|---:|---:|---:|")
        for k in diffs:
            out.append(f"| `{names[k[0]]}` [{k[1]}] | {cf.get(k, 0):,.0f} | {rf.get(k, 0):,.0f} | "
                       f"{rf.get(k, 0) - cf.get(k, 0):+,.0f} |")
        for t in (C, RUST):
            own = sorted(((v, fn) for (fn, mod), v in per[t].items() if mod == TRANSPORT_MODULE[t]),
                         reverse=True)[:12]
            names = demangle([fn for _, fn in own])
            out.append(f"\nThe transport's own functions, {t} (insns per I/O):\n")
            out.append("| function | insns/I/O |")
            out.append("|---|---:|")
            for v, fn in own:
                out.append(f"| `{names[fn]}` | {v:,.0f} |")
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
