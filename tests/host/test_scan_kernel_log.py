#!/usr/bin/env python3
"""Unit tests of scripts/scan-kernel-log.py on captured kernel logs (tests/fixtures)."""
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures")

spec = importlib.util.spec_from_file_location("scan", os.path.join(REPO, "scripts", "scan-kernel-log.py"))
scan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scan)


def problems(name, allowed=frozenset("OE"), known=frozenset(), notes=None):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return scan.scan(f, set(allowed), set(known), notes)


class ScanKernelLog(unittest.TestCase):
    def test_clean_log_passes_and_user_space_text_is_ignored(self):
        self.assertEqual(problems("clean.log"), [])

    def test_each_splat_kind_is_caught(self):
        cases = {
            "warn.log": "WARNING",
            "lockdep.log": "WARNING",
            "kfence.log": "BUG",
            "kasan.log": "BUG",
            "kmemleak.log": "kmemleak",
            "atomic-sleep.log": "BUG",
            "rust-panic.log": "Rust panic",
            "interleaved.log": "WARNING",
        }
        for fixture, kind in cases.items():
            with self.subTest(fixture=fixture):
                found = problems(fixture)
                self.assertTrue(found, f"{fixture}: nothing found")
                self.assertIn(f": {kind}: ", found[0])

    def first_problem(self, fixture, kind):
        found = problems(fixture)
        self.assertTrue(found, f"{fixture}: nothing found")
        self.assertIn(f": {kind}: ", found[0])
        return found

    def test_fault_injection_stack_dumps_excused_only_when_declared(self):
        with open(os.path.join(FIXTURES, "fault-stacks.log"), encoding="utf-8") as f:
            lines = f.readlines()
        # Undeclared: the injected failure's dump is a call trace like any other.
        found = scan.scan(lines, set("OE"))
        self.assertTrue(found[0].startswith("line 6: call trace: "), found)
        # Declared: that dump is excused; the WARNING after it and its trace are not.
        found = scan.scan(lines, set("OE"), fault_stack_dumps=True)
        self.assertEqual(len(found), 2, found)
        self.assertIn(": WARNING: drivers/infiniband/core/cma.c:123", found[0])
        self.assertIn("line 18: call trace: ", found[1])

    def test_interleaved_fault_injection_dumps_are_excused_both(self):
        # Two failures on two CPUs: both headers first, then the two dumps; a third
        # call trace after them is not excused.
        with open(os.path.join(FIXTURES, "fault-stacks-interleaved.log"), encoding="utf-8") as f:
            found = scan.scan(f, set("OE"), fault_stack_dumps=True)
        self.assertEqual(len(found), 1, found)
        self.assertTrue(found[0].startswith("line 16: call trace: "), found)

    def test_kasan_report_is_caught(self):
        found = self.first_problem("kasan.log", "BUG")
        self.assertIn("BUG: KASAN: slab-use-after-free in", found[0])
        self.assertIn("unexpected taint B (tainted=4128)", found[-1])

    def test_general_protection_fault_is_caught_and_named(self):
        # 7.2 prints the die header with "Oops: "; the GPF pattern comes first to name it.
        found = self.first_problem("gpf.log", "general protection fault")
        self.assertTrue(found[0].startswith("line 4: general protection fault: Oops: general protection "
                                            "fault, probably for non-canonical address 0x8cb2f1d64e0a7b38"))
        self.assertIn("unexpected taint D (tainted=4224)", found[-1])

    def test_hung_task_is_caught(self):
        found = self.first_problem("hung-task.log", "hung task")
        self.assertIn("INFO: task rmmod:318 blocked for more than 122 seconds.", found[0])

    def test_rcu_stall_is_caught(self):
        found = self.first_problem("rcu-stall.log", "RCU stall")
        self.assertIn("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", found[0])

    def test_list_corruption_line_alone_is_caught(self):
        # The log ends at the corruption line: no WARNING (or kernel BUG at
        # lib/list_debug.c), no trace, no taint line; that line alone fails the run.
        self.assertEqual(problems("list-corruption.log"), [
            "line 6: list corruption: list_del corruption, ff1100010a2d41e8->next is LIST_POISON1 "
            "(dead000000000100)"])

    def test_each_report_form_is_caught_by_its_first_line(self):
        # Every form the 7.2 sources print (kernel/hung_task.c, kernel/rcu/tree_stall.h,
        # tree_exp.h, tasks.h, lib/list_debug.c, arch/x86/kernel/traps.c), and older GPF headers.
        cases = [
            ("Oops: general protection fault, probably for non-canonical address 0xdffffc0000000003: "
             "0000 [#1] SMP KASAN NOPTI", "general protection fault"),
            ("Oops: general protection fault, maybe for address 0xffa0000000400000: 0000 [#2] SMP NOPTI",
             "general protection fault"),
            ("Oops: segment-related general protection fault: 0000 [#1] SMP NOPTI", "general protection fault"),
            ("general protection fault, probably for non-canonical address 0xdead000000000122: 0000 [#1] "
             "PREEMPT SMP KASAN NOPTI", "general protection fault"),
            ("general protection fault: 0000 [#1] SMP PTI", "general protection fault"),
            ("INFO: task kworker/u8:2:93 blocked for more than 120 seconds.", "hung task"),
            ("INFO: task nvme:412 blocked in I/O wait for more than 245 seconds.", "hung task"),
            ("INFO: task fio worker:530 blocked for more than 120 seconds.", "hung task"),
            ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "RCU stall"),
            ("rcu: INFO: rcu_sched self-detected stall on CPU", "RCU stall"),
            ("rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-...D } 21002 jiffies "
             "s: 1265 root: 0x2/.", "RCU stall"),
            ("rcu: INFO: rcu_preempt detected stall, but suppressed full report due to a stuck CSD-lock.",
             "RCU stall"),
            ("INFO: rcu_tasks detected stalls on tasks:", "RCU stall"),
            ("list_add corruption. prev is NULL.", "list corruption"),
            ("list_add corruption. next->prev should be prev (ff1100010a2d4108), but was ff1100010a2d41e8. "
             "(next=ff11000104e1c9a8).", "list corruption"),
            ("list_add corruption. prev->next should be next (ff11000104e1c9a8), but was 0000000000000000. "
             "(prev=ff1100010a2d4108).", "list corruption"),
            ("list_add double add: new=ff1100010a2d41e8, prev=ff1100010a2d41e8, next=ff11000104e1c9a8.",
             "list corruption"),
            ("list_del corruption, ff1100010a2d41e8->next is NULL", "list corruption"),
            ("list_del corruption, ff1100010a2d41e8->prev is LIST_POISON2 (dead000000000122)",
             "list corruption"),
            ("list_del corruption. prev->next should be ff1100010a2d41e8, but was ff1100010a2d4108. "
             "(prev=ff11000104e1c9a8)", "list corruption"),
            ("list_del corruption. next->prev should be ff1100010a2d41e8, but was dead000000000122. "
             "(next=ff11000104e1c9a8)", "list corruption"),
        ]
        for text, kind in cases:
            with self.subTest(text=text):
                found = scan.scan([f"[  211.004118] {text}\n"], {"O", "E"})
                self.assertEqual(found, [f"line 1: {kind}: {text}"])

    def test_lookalikes_of_these_reports_pass(self):
        # Boot lines about RCU, the tests' own step marks in the kernel log (which say
        # "corruption", "hang", "blocked for more than", "RCU stall", "list_del"), and a
        # user-space program's general protection fault: no kernel report among them.
        self.assertEqual(problems("report-lookalikes.log"), [])

    def test_kunit_failure_is_caught_and_passing_suites_pass(self):
        # A failing case and its suite are each a report; the suites' test taint (N) is
        # allowed everywhere, as the test kernel runs them whenever nvmet_rdma_rs loads.
        found = problems("kunit-failure.log", allowed=scan.ALWAYS_ALLOWED)
        self.assertEqual(len(found), 2, found)
        self.assertIn(": KUnit failure: ", found[0])
        self.assertIn("not ok 2 ipv6", found[0])
        self.assertIn("not ok 1 rdma_rs_socket_addr", found[1])
        self.assertEqual(problems("kunit-pass.log", allowed=scan.ALWAYS_ALLOWED), [])

    def test_unexpected_taint_fails(self):
        found = problems("taint-only.log")
        self.assertEqual(len(found), 1)
        self.assertIn("unexpected taint P", found[0])

    def test_declared_taint_is_allowed(self):
        self.assertEqual(problems("expected-taint.log", allowed="OEW"), [])
        self.assertIn("unexpected taint W", problems("expected-taint.log")[0])

    def test_declaration_is_read_from_the_test_script(self):
        script = os.path.join(REPO, "tests", "meta", "provoke-warn.sh")
        self.assertEqual(scan.expected_taint(script), {"O", "E", "N", "W"})


    def test_known_c_report_only_where_declared(self):
        name = "c-nvmet-rdma-connect-in-cm-handler"
        # Undeclared, the C transport's lockdep report fails the run like any other.
        self.assertIn(": WARNING: ", problems("c-nvmet-rdma-lockdep.log")[0])
        # Declared, that report (its trace included) is a note, not a problem.
        notes = []
        self.assertEqual(problems("c-nvmet-rdma-lockdep.log", known={name}, notes=notes), [])
        self.assertEqual(len(notes), 1)
        self.assertIn(name, notes[0])
        # The same chain through this project's module is never excused.
        self.assertTrue(problems("rs-lockdep-lookalike.log", known={name}))
        # Nor is any other report in a test that declares it.
        self.assertTrue(problems("lockdep.log", known={name}))
        self.assertTrue(problems("warn.log", known={name}))

    def test_known_reports_are_read_from_the_control_tests(self):
        for folder, test in (("matrix", "nvmet-io-c"), ("matrix", "nvmet-lifecycle-c"), ("matrix", "nvmet-teardown-c")):
            script = os.path.join(REPO, "tests", folder, f"{test}.sh")
            self.assertEqual(scan.known_reports(script), {"c-nvmet-rdma-connect-in-cm-handler"})
        for test in ("nvmet-lifecycle", "nvmet-teardown", "nvmet-io"):
            script = os.path.join(REPO, "tests", "vm", f"{test}.sh")
            self.assertEqual(scan.known_reports(script), set())


if __name__ == "__main__":
    unittest.main()
