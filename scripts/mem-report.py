#!/usr/bin/env python3
"""Memory per controller (one admin and one I/O queue), C beside Rust, from the lines
tests/bench/mem-per-queue.sh writes (mem.txt): prints a Markdown table. Each cell is the
median over the rounds; Rust/C is the geometric mean of the rounds' paired ratios of the
drop in free memory (`MemFree` plus the free pages in the page allocator's per-CPU lists,
which `MemFree` leaves out), with its 95% interval (paired_ratio.py; none for one round).

usage: mem-report.py MEM_TXT
"""
import statistics
import sys

from paired_ratio import paired_ratio


def main():
    # {(srq, depth): {transport: {round: {metric: kB per controller}}}}
    rows = {}
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) < 9 or p[0] != "mem":
                continue
            t, srq, depth, n = p[1], p[2], int(p[3]), int(p[4])
            fields = dict(kv.split("=") for kv in p[5:])
            rnd = int(fields.pop("round", 1))
            v = {k: int(x) / n for k, x in fields.items()}
            # (lines written before the per-CPU lists were counted: MemFree alone)
            v.setdefault("used_kb", v["memfree_kb"])
            rows.setdefault((srq, depth), {}).setdefault(t, {})[rnd] = v
    print("## Memory per controller (one admin and one I/O queue)\n")
    print("From the guest: `/proc/meminfo` and the CQ entries of every CQ before and after "
          "four hosts connect; host-side costs included, the same for both. New CQEs: CQ entries of CQs created (queues take theirs from the RDMA core's CQ pools, which the warm-up connect filled). Each cell is "
          "the median over the rounds. Used: the drop in free memory, `MemFree` plus the free pages "
          "the page allocator keeps in per-CPU lists (`/proc/zoneinfo`), which `MemFree` leaves "
          "out and a teardown refills; slab: `SUnreclaim` (ours keeps in-capsule buffers in "
          "kmalloc's 4 KiB slab, where C takes whole pages: the same memory, counted under slab). "
          "Rust/C is Rust's used memory over C's, the geometric mean of the rounds' ratios with "
          "its 95% interval.\n")
    print("| receive queues | depth | C used kB | Rust used kB | C slab kB | Rust slab kB "
          "| C vmalloc kB | Rust vmalloc kB | C new CQEs | Rust new CQEs | Rust/C | 95% interval | rounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for (srq, depth), by in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        c, r = by.get("nvmet-rdma"), by.get("nvmet_rdma_rs")
        if not c or not r:
            continue

        def med(runs, k):
            return statistics.median(v[k] for v in runs.values())

        rounds = sorted(set(c) & set(r))
        ratio, lo, hi = paired_ratio([(r[i]["used_kb"], c[i]["used_kb"]) for i in rounds])
        interval = f"{lo:.3f}–{hi:.3f}" if lo is not None else "–"
        ratio_s = f"{ratio:.3f}" if ratio is not None else "–"
        print(f"| {'SRQ' if srq == '1' else 'own'} | {depth} | {med(c, 'used_kb'):,.0f} | "
              f"{med(r, 'used_kb'):,.0f} | {med(c, 'slab_kb'):,.0f} | {med(r, 'slab_kb'):,.0f} | "
              f"{med(c, 'vmalloc_kb'):,.0f} | {med(r, 'vmalloc_kb'):,.0f} | {med(c, 'cqes'):,.0f} | "
              f"{med(r, 'cqes'):,.0f} | {ratio_s} | {interval} | {len(rounds)} |")


if __name__ == "__main__":
    main()
