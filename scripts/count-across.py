#!/usr/bin/env python3
"""Run-to-run spread of the counted figure: several counted runs (vm-run.sh run
directories of tests/bench/count-guest.sh, e.g. OUT_DIR/count-vm of `make bench`) side by
side, per point: each transport's median instructions per I/O in each run and their
spread across the runs, and each run's ratio with its 95% interval.

usage: count-across.py RUN_DIR RUN_DIR [RUN_DIR...]
"""

import importlib.util
import os
import statistics
import sys

from paired_ratio import paired_ratio

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("count_report", os.path.join(HERE, "count-report.py"))
count_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(count_report)


def costs(run):
    """({(point, transport): {round: insns per I/O}}, pair) of one counted run."""
    r = count_report.read_run(run)
    return {(p, t): by_round for (t, p), by_round in r["cost"].items()}, r["pair"]


def main():
    runs = sys.argv[1:]
    if len(runs) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    data = [costs(r) for r in runs]
    base, new = data[0][1]
    points = []
    for d, _ in data:
        for p, _ in d:
            if p not in points:
                points.append(p)
    heads = " | ".join(f"run {i + 1}" for i in range(len(runs)))
    print(f"| point | transport | {heads} | spread across runs |")
    print("|---|---|" + "---:|" * (len(runs) + 1))
    for p in points:
        for t in (base, new):
            meds = [statistics.median(d[(p, t)].values()) for d, _ in data if (p, t) in d]
            spread = (max(meds) - min(meds)) / statistics.median(meds)
            print(f"| {p} | {t} | " + " | ".join(f"{m:,.0f}" for m in meds) + f" | {spread:.2%} |")
    print(f"\n| point | {heads} | spread of the ratio |")
    print("|---|" + "---|" * len(runs) + "---:|")
    for p in points:
        cells, ratios = [], []
        for d, _ in data:
            b, n = d.get((p, base), {}), d.get((p, new), {})
            g, lo, hi = paired_ratio([(b[k], n[k]) for k in sorted(b) if k in n])
            ratios.append(g)
            cells.append(f"{g:.3f}" + ("" if lo is None else f" ({lo:.3f}–{hi:.3f})"))
        print(f"| {p} | " + " | ".join(cells) + f" | {max(ratios) - min(ratios):.3f} |")


if __name__ == "__main__":
    main()
