#!/usr/bin/env python3
"""Unit tests of scripts/count-report.py and scripts/paired_ratio.py on a made-up counted
run: known block counts in, known instructions per I/O, ratios and split out."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from paired_ratio import paired_ratio  # noqa: E402

# Kernel text: one vmlinux function, one each in rxe and in the two transports.
KALLSYMS = """ffffffff81000000 T copy_page
ffffffff81001000 T after_copy_page
ffffffffc0100000 t rxe_requester\t[rdma_rxe]
ffffffffc0101000 t rxe_end\t[rdma_rxe]
"""
C_SYMS = "ffffffffc0200000 t nvmet_rdma_recv_done\t[nvmet_rdma]\nffffffffc0201000 t nvmet_rdma_end\t[nvmet_rdma]\n"
RS_SYMS = ("ffffffffc0200000 t _RNvNtCs1a_10nvmet_rdma7command9recv_done\t[nvmet_rdma_rs]\n"
           "ffffffffc0201000 t end\t[nvmet_rdma_rs]\n")


# The call chains of every window: the transport's function (node 1) calls a vmlinux
# helper (in its node) and rxe (node 3), which calls a vmlinux helper of its own (in
# rxe's node); node 2, an RDMA core function (neutral) the transport calls, runs the
# helper here.
KALLSYMS_CORE = "ffffffffc0300000 t ib_dma_helper\t[ib_core]\n"
NODES = [(1, 0, 0xffffffffc0200000), (2, 1, 0xffffffffc0300000), (3, 1, 0xffffffffc0100000)]


def window(seq, blocks, nodes=()):
    """One detailed interval of the plugin's output; blocks: {vaddr: (insns, execs, node,
    locked)} (node 0: the root; user space has no chain)."""
    total = sum(b[0] * b[1] for b in blocks.values())
    lines = [f"interval {seq} total {total} blocks {len(blocks)}"]
    lines += [f"b {v:x} {b[0]} {b[1]} {b[3]}" for v, b in blocks.items()]
    lines += [f"n {n} {p} {f:x}" for n, p, f in nodes]
    per_node = {}
    for v, b in blocks.items():
        if v >= 1 << 63:
            i, lk = per_node.get(b[2], (0, 0))
            per_node[b[2]] = (i + b[0] * b[1], lk + b[3] * b[1])
    lines += [f"c {n} {i} {lk}" for n, (i, lk) in per_node.items()]
    return lines + [f"end {seq}"]


def make_run(root, costs, n1=100, n2=300, rounds=(1, 2, 3)):
    """A run directory whose cost per I/O for (transport, round) is costs[...]: every I/O
    runs 10 transport instructions, 20 in rxe, the rest in copy_page and user space.
    Of copy_page's, the transport's call runs 5 (C) or 3 (Rust), rxe's 7; the
    transport's block has 2 (C) or 1 (Rust) locked instructions, its helper 1."""
    raw = os.path.join(root, "raw")
    os.makedirs(raw)
    marks, out, seq = [], [], 0
    for rnd in rounds:
        for t in ("nvmet-rdma", "nvmet_rdma_rs"):
            for n in (n1, n2):
                marks.append("total gap")
                out += [f"interval {seq} total 999 blocks 1", f"end {seq}"]
                seq += 1
                per_io = costs[(t, rnd)]
                helper = 5 if t == "nvmet-rdma" else 3
                # a fixed 5000 in each window (fio's start) that the difference cancels
                blocks = {
                    0xffffffffc0200010: (10, n, 1, 2 if t == "nvmet-rdma" else 1),
                    0xffffffff81000200: (helper, n, 2, 1),
                    0xffffffffc0100020: (20, n, 3, 0),
                    0xffffffff81000300: (7, n, 3, 0),
                    0xffffffff81000100: (per_io - 10 - 20 - 4 - helper - 7, n, 0, 0),
                    0x401000: (4, n, 0, 0),
                    0x402000: (5000, 1, 0, 0),
                }
                marks.append(f"detail {t} randread-4k-qd1 {rnd} {n}")
                out += window(seq, blocks, NODES if seq == 1 else ())
                # (each boot numbers its own nodes: renumbered by count-merge.py)
                seq += 1
            with open(os.path.join(raw, f"kallsyms-{t}-{rnd}.txt"), "w") as f:
                f.write(C_SYMS if t == "nvmet-rdma" else RS_SYMS)
    with open(os.path.join(raw, "marks.txt"), "w") as f:
        f.write("\n".join(marks) + "\n")
    with open(os.path.join(root, "insn-count.txt"), "w") as f:
        f.write("\n".join(out) + "\n")
    with open(os.path.join(raw, "kallsyms.txt"), "w") as f:
        f.write(KALLSYMS + KALLSYMS_CORE)
    with open(os.path.join(raw, "machine.txt"), "w") as f:
        f.write(f"profile counted\npair nvmet-rdma nvmet_rdma_rs\nrounds 3\nn1 {n1}\nn2 {n2}\n"
                "kernel 7.2.13\nfio fio-3.33\n")


class PairedRatio(unittest.TestCase):
    def test_equal_pairs_have_no_width(self):
        r, lo, hi = paired_ratio([(2.0, 1.0), (4.0, 2.0), (6.0, 3.0)])
        self.assertAlmostEqual(r, 2.0)
        self.assertAlmostEqual(lo, 2.0)
        self.assertAlmostEqual(hi, 2.0)

    def test_one_pair_has_no_interval(self):
        self.assertEqual(paired_ratio([(3.0, 2.0)])[1:], (None, None))

    def test_interval_is_symmetric_in_logs_and_widens_with_spread(self):
        r, lo, hi = paired_ratio([(1.1, 1.0), (0.9, 1.0), (1.0, 1.0)])
        self.assertAlmostEqual(lo * hi, r * r, places=9)
        _, lo2, hi2 = paired_ratio([(1.2, 1.0), (0.8, 1.0), (1.0, 1.0)])
        self.assertLess(lo2, lo)
        self.assertGreater(hi2, hi)


class CountReport(unittest.TestCase):
    def run_report(self, costs):
        tmp = tempfile.mkdtemp()
        make_run(os.path.join(tmp, "run"), costs)
        out = os.path.join(tmp, "out")
        res = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "count-report.py"),
                              os.path.join(tmp, "run"), out], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout, out

    def test_cost_per_io_ratio_and_split(self):
        costs = {("nvmet-rdma", r): 1000 for r in (1, 2, 3)}
        costs.update({("nvmet_rdma_rs", r): 980 for r in (1, 2, 3)})
        stdout, out = self.run_report(costs)
        # (W(300) - W(100)) / 200: the fixed 5000 cancels; C/Rust = 1000/980
        self.assertIn("| randread-4k-qd1 | 1,000 | 0.00% | 980 | 0.00% | -20 | 1.020 | 1.020–1.020 |", stdout)
        self.assertIn("whole guest, lowest Rust/C (nvmet-rdma over nvmet_rdma_rs): 1.02 (±0.00)", stdout)
        # the transport's own 10 and the helper it calls (5 or 3); not rxe, nor rxe's helper
        self.assertIn("| randread-4k-qd1 | 15.0 | 0.00% | 13.0 | 0.00% | 0.867 | 0.867–0.867 |", stdout)
        # locked: its own 2 or 1, and the helper's 1
        self.assertIn("| randread-4k-qd1 | 3.0 | 0.00% | 2.0 | 0.00% | 0.667 | 0.667–0.667 |", stdout)
        self.assertEqual(stdout.strip().splitlines()[-1], "transport cost Rust/C, worst row: 0.867 (±0.000)")
        with open(os.path.join(out, "count-split.md")) as f:
            split = f.read()
        self.assertIn("| transport | 10 | 10 | +0 |", split)
        self.assertIn("| rxe | 20 | 20 | +0 |", split)
        self.assertIn("| user space (fio) | 4 | 4 | +0 |", split)
        self.assertIn("| kernel (vmlinux) | 966 | 946 | -20 |", split)
        self.assertIn("`copy_page` [vmlinux] | 966 | 946 | -20 |", split)
        self.assertIn("`nvmet_rdma::command::recv_done` | 10 |", split)
        # inclusive, by transport function: its own 10 and its helper's 3
        self.assertIn("`nvmet_rdma::command::recv_done` | 13.0 |", split)
        self.assertIn("| nvmet_rdma_rs | 1.0 |", split)
        self.assertTrue(os.path.getsize(os.path.join(out, "count.png")) > 0)

    def test_spread_between_rounds_widens_the_interval(self):
        costs = {("nvmet-rdma", r): 1000 for r in (1, 2, 3)}
        costs.update({("nvmet_rdma_rs", 1): 950, ("nvmet_rdma_rs", 2): 1000, ("nvmet_rdma_rs", 3): 1050})
        stdout, _ = self.run_report(costs)
        line = [x for x in stdout.splitlines() if x.startswith("whole guest")][0]
        self.assertRegex(line, r"^whole guest, lowest Rust/C \(nvmet-rdma over nvmet_rdma_rs\): 1\.00 \(±0\.[0-9][0-9]\) at ")
        self.assertNotIn("1.00 (±0.00)", line)
        self.assertIn("| 1,000 | 10.00% |", stdout)


class CountMerge(unittest.TestCase):
    def test_boots_merge_into_one_run(self):
        tmp = tempfile.mkdtemp()
        costs = {("nvmet-rdma", r): 1000 for r in range(1, 7)}
        costs.update({("nvmet_rdma_rs", r): 980 + r for r in range(1, 7)})
        make_run(os.path.join(tmp, "a"), costs, rounds=(1, 2, 3))
        make_run(os.path.join(tmp, "b"), costs, rounds=(4, 5, 6))
        res = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "count-merge.py"),
                              os.path.join(tmp, "m"), os.path.join(tmp, "a"), os.path.join(tmp, "b")],
                             capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        res = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "count-report.py"),
                              os.path.join(tmp, "m"), os.path.join(tmp, "out")], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        # six rounds, each its own Rust cost; the transport's figure from both boots' chains
        self.assertIn("| round 6 |", res.stdout)
        self.assertIn("| randread-4k-qd1 | nvmet_rdma_rs | 981 | 982 | 983 | 984 | 985 | 986 |", res.stdout)
        self.assertIn("| randread-4k-qd1 | 15.0 | 0.00% | 13.0 | 0.00% | 0.867 | 0.867–0.867 |", res.stdout)


if __name__ == "__main__":
    unittest.main()
