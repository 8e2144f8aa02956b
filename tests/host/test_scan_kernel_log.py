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


def problems(name, allowed=frozenset("OE")):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return scan.scan(f, set(allowed))


class ScanKernelLog(unittest.TestCase):
    def test_clean_log_passes_and_user_space_text_is_ignored(self):
        self.assertEqual(problems("clean.log"), [])

    def test_each_splat_kind_is_caught(self):
        cases = {
            "warn.log": "WARNING",
            "lockdep.log": "WARNING",
            "kfence.log": "BUG",
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


if __name__ == "__main__":
    unittest.main()
