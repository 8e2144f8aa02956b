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

    def test_unexpected_taint_fails(self):
        found = problems("taint-only.log")
        self.assertEqual(len(found), 1)
        self.assertIn("unexpected taint P", found[0])

    def test_declared_taint_is_allowed(self):
        self.assertEqual(problems("expected-taint.log", allowed="OEW"), [])
        self.assertIn("unexpected taint W", problems("expected-taint.log")[0])

    def test_declaration_is_read_from_the_test_script(self):
        script = os.path.join(REPO, "tests", "meta", "provoke-warn.sh")
        self.assertEqual(scan.expected_taint(script), {"O", "E", "W"})


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
        for test in ("nvmet-lifecycle-c", "nvmet-teardown-c", "nvmet-io-c"):
            script = os.path.join(REPO, "tests", "vm", f"{test}.sh")
            self.assertEqual(scan.known_reports(script), {"c-nvmet-rdma-connect-in-cm-handler"})
        for test in ("nvmet-lifecycle", "nvmet-teardown", "nvmet-io"):
            script = os.path.join(REPO, "tests", "vm", f"{test}.sh")
            self.assertEqual(scan.known_reports(script), set())


if __name__ == "__main__":
    unittest.main()
