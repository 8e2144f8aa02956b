#!/usr/bin/env python3
"""Merges the counted runs of several boots (one round each, scripts/bench.sh) into one
run directory that scripts/count-report.py reads as one run of all the rounds.

usage: count-merge.py OUT_RUN RUN...

Each RUN is a vm-run.sh run directory (insn-count.txt, raw/). The plugin's intervals and
chain nodes are numbered per boot: the merge renumbers them (node 0, the root, stays the
root), appends a mark for each boot's last interval (the tail the plugin writes at exit,
which has no mark of its own), and concatenates the marks in the same order. The other
raw files (fio results, kallsyms per transport and round) are copied; the kernel's
symbol table of the first boot stands for all, which the merge checks: the same kernel
with the same modules loaded in the same order puts them at the same addresses.
"""
import os
import shutil
import sys


def strip_transports(path):
    with open(path) as f:
        return [l for l in f if "[nvmet_rdma]" not in l and "[nvmet_rdma_rs]" not in l]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.splitlines()[3])
    out, runs = sys.argv[1], sys.argv[2:]
    raw_out = os.path.join(out, "raw")
    os.makedirs(raw_out, exist_ok=True)
    seq_base = node_base = 0
    marks_out = []
    machine = None
    common = None
    with open(os.path.join(out, "insn-count.txt"), "w") as ic:
        for run in runs:
            raw = os.path.join(run, "raw")
            with open(os.path.join(raw, "marks.txt")) as f:
                marks = [l.rstrip("\n") for l in f if l.strip()]
            intervals = max_node = 0
            with open(os.path.join(run, "insn-count.txt")) as f:
                for line in f:
                    p = line.split()
                    if p[0] in ("interval", "end"):
                        intervals = max(intervals, int(p[1]) + 1)
                        p[1] = str(int(p[1]) + seq_base)
                    elif p[0] == "n":
                        max_node = max(max_node, int(p[1]))
                        p[1] = str(int(p[1]) + node_base)
                        p[2] = str(int(p[2]) + node_base) if p[2] != "0" else "0"
                    elif p[0] == "c" and p[1] != "0":
                        p[1] = str(int(p[1]) + node_base)
                    ic.write(" ".join(p) + "\n")
            # (the tail after the boot's last marker)
            marks += ["total tail"] * (intervals - len(marks))
            marks_out += marks
            seq_base += intervals
            node_base += max_node + 1
            for name in os.listdir(raw):
                if name in ("marks.txt", "machine.txt", "kallsyms.txt"):
                    continue
                shutil.copy(os.path.join(raw, name), raw_out)
            table = strip_transports(os.path.join(raw, "kallsyms.txt"))
            if common is None:
                common = table
                shutil.copy(os.path.join(raw, "kallsyms.txt"), raw_out)
            elif table != common:
                print(f"count-merge: {run}: the kernel's symbols differ from the first boot's; "
                      "its modules are mapped with the first boot's table", file=sys.stderr)
            with open(os.path.join(raw, "machine.txt")) as f:
                this = [l for l in f]
            machine = machine or this
    with open(os.path.join(raw_out, "marks.txt"), "w") as f:
        f.write("\n".join(marks_out) + "\n")
    with open(os.path.join(raw_out, "machine.txt"), "w") as f:
        for line in machine:
            f.write(f"rounds {len(runs)} (one boot each)\n" if line.startswith("rounds ") else line)


if __name__ == "__main__":
    main()
