#!/usr/bin/env python3
"""Memory per controller (one admin and one I/O queue), C beside Rust, from the lines
tests/bench/mem-per-queue.sh writes (mem.txt): prints a Markdown table.

usage: mem-report.py MEM_TXT
"""
import sys


def main():
    rows = {}
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) < 9 or p[0] != "mem":
                continue
            t, srq, depth, n = p[1], p[2], int(p[3]), int(p[4])
            v = {k: int(x) / n for k, x in (kv.split("=") for kv in p[5:])}
            rows.setdefault((srq, depth), {})[t] = v
    print("## Memory per controller (one admin and one I/O queue)\n")
    print("From the guest: `/proc/meminfo` and the CQ entries of every CQ before and after "
          "four hosts connect; host-side costs included, the same for both. New CQEs: CQ entries of CQs created (queues take theirs from the RDMA core's CQ pools, which the warm-up connect filled). Rust/C is "
          "Rust's `MemFree` drop over C's.\n")
    print("| receive queues | depth | C MemFree kB | Rust MemFree kB | C slab kB | Rust slab kB "
          "| C vmalloc kB | Rust vmalloc kB | C new CQEs | Rust new CQEs | Rust/C |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (srq, depth), by in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        c, r = by.get("nvmet-rdma"), by.get("nvmet_rdma_rs")
        if not c or not r:
            continue
        ratio = r["memfree_kb"] / c["memfree_kb"] if c["memfree_kb"] else float("nan")
        print(f"| {'SRQ' if srq == '1' else 'own'} | {depth} | {c['memfree_kb']:,.0f} | "
              f"{r['memfree_kb']:,.0f} | {c['slab_kb']:,.0f} | {r['slab_kb']:,.0f} | "
              f"{c['vmalloc_kb']:,.0f} | {r['vmalloc_kb']:,.0f} | {c['cqes']:,.0f} | "
              f"{r['cqes']:,.0f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
