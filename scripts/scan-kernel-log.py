#!/usr/bin/env python3
"""Fails (exit 1) when a VM's serial log shows a kernel splat or an unexpected taint.

Kernel messages are the console text after a printk timestamp, "[   12.345678] ...",
wherever it starts (the console interleaves kernel messages into user-space lines);
user-space output without one (which may well say "WARNING:") is not scanned. The guest's init
prints "RRS-TAINT: <n>" after the test; taint bits other than O (out-of-tree module)
and E (unsigned module) fail the run unless the test script declares them with a
line "# rrs-expect-taint: W" (letters as in Documentation/admin-guide/tainted-kernels).

usage: scan-kernel-log.py [--test TEST_SCRIPT] SERIAL_LOG
"""
import argparse
import re
import sys

KERNEL_MESSAGE = re.compile(r"\[\s*\d+\.\d+\]\s?(.*)$")

# Each pattern names one kind of report the project treats as a failure.
SPLATS = [
    ("BUG", re.compile(r"\bBUG: ")),                       # incl. KFENCE, sleeping in atomic, soft lockup
    ("kernel BUG", re.compile(r"kernel BUG at ")),
    ("WARNING", re.compile(r"\bWARNING: ")),                # WARN_ON and every lockdep report
    ("Oops", re.compile(r"\bOops\b")),
    ("general protection fault", re.compile(r"general protection fault")),
    ("kernel panic", re.compile(r"Kernel panic")),
    ("lockdep", re.compile(r"possible (recursive|circular) locking|inconsistent lock state|"
                           r"lock held when returning to user space|suspicious RCU usage")),
    ("scheduling while atomic", re.compile(r"scheduling while atomic")),
    ("KFENCE", re.compile(r"KFENCE: ")),
    ("kmemleak", re.compile(r"kmemleak: \d+ new suspected memory leaks|unreferenced object 0x")),
    ("hung task", re.compile(r"INFO: task \S+ blocked for more than")),
    ("RCU stall", re.compile(r"rcu: INFO: rcu_\w+ (self-)?detected stall")),
    ("list corruption", re.compile(r"list_(add|del) corruption")),
    ("UBSAN", re.compile(r"UBSAN: ")),
    ("Rust panic", re.compile(r"rust_panic|panicked at ")),
    ("slab corruption", re.compile(r"\bBUG \S+ \(.*\): |Poison overwritten|Redzone overwritten|Object padding overwritten")),
    ("call trace", re.compile(r"^\s*Call Trace:")),
]

TAINT_LETTERS = "PFSRMBUDAWCIOELKXTNJ"
ALWAYS_ALLOWED = {"O", "E"}


def expected_taint(test_script):
    allowed = set(ALWAYS_ALLOWED)
    if test_script:
        with open(test_script, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r"#\s*rrs-expect-taint:\s*([A-Z]+)", line)
                if m:
                    allowed |= set(m.group(1))
    return allowed


def taint_letters(value):
    return {TAINT_LETTERS[bit] for bit in range(len(TAINT_LETTERS)) if value >> bit & 1}


def scan(lines, allowed_taint):
    """Returns a list of problems found in the log lines."""
    problems = []
    taint = None
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        m = re.match(r"^RRS-TAINT: (\d+)", line)
        if m:
            taint = int(m.group(1))
            continue
        k = KERNEL_MESSAGE.search(line)
        if not k:
            continue
        for name, pattern in SPLATS:
            if pattern.search(k.group(1)):
                problems.append(f"line {number}: {name}: {k.group(1).strip()}")
                break
    if taint is not None:
        unexpected = taint_letters(taint) - allowed_taint
        if unexpected:
            problems.append(f"unexpected taint {''.join(sorted(unexpected))} (tainted={taint})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", help="test script, for its rrs-expect-taint declaration")
    parser.add_argument("log")
    args = parser.parse_args()
    with open(args.log, encoding="utf-8", errors="replace") as f:
        problems = scan(f, expected_taint(args.test))
    for p in problems[:40]:
        print(f"splat: {p}", file=sys.stderr)
    if len(problems) > 40:
        print(f"splat: ... and {len(problems) - 40} more", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
