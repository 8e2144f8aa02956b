#!/usr/bin/env python3
"""Fails (exit 1) when a VM's serial log shows a kernel splat or an unexpected taint.

Kernel messages are the console text after a printk timestamp, "[   12.345678] ...",
wherever it starts (the console interleaves kernel messages into user-space lines);
user-space output without one (which may well say "WARNING:") is not scanned. The guest's init
prints "RRS-TAINT: <n>" after the test; taint bits other than O (out-of-tree module),
E (unsigned module) and N (a KUnit suite ran) fail the run unless the test script declares them with a
line "# rrs-expect-taint: W" (letters as in Documentation/admin-guide/tainted-kernels).

A control test (one that runs the C transport) may declare a known report of the C code
with a line "# rrs-known-report: NAME", NAME one of KNOWN_REPORTS: a report that matches
that signature in full (every required text in the report, none of the forbidden ones)
is printed as known instead of failing the run. Nothing else is ever excused, and a
report that also involves this project's modules never matches.

A fault-injection sweep that asks for the stack of each injected failure (to name where
it landed) declares "# rrs-fault-stacks": then the stack dump that fault injection prints
right after "FAULT_INJECTION: forcing a failure" (up to its "</TASK>") is not a call
trace to fail on. Any other report inside it still is.

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
    # x86 die header, "Oops: general protection fault, probably for non-canonical address
    # 0x...: 0000 [#1] ..." (older kernels: no "Oops: "), named ahead of Oops. Not the line
    # for a user-space program's GPF, "traps: prog[123] general protection fault ip:...".
    ("general protection fault", re.compile(r"general protection fault\b.*: [0-9a-f]{4} \[#\d+\]")),
    ("Oops", re.compile(r"\bOops\b")),
    ("kernel panic", re.compile(r"Kernel panic")),
    ("lockdep", re.compile(r"possible (recursive|circular) locking|inconsistent lock state|"
                           r"lock held when returning to user space|suspicious RCU usage")),
    ("scheduling while atomic", re.compile(r"scheduling while atomic")),
    ("KFENCE", re.compile(r"KFENCE: ")),
    ("kmemleak", re.compile(r"kmemleak: \d+ new suspected memory leaks|unreferenced object 0x")),
    # khungtaskd: "INFO: task rmmod:318 blocked for more than 122 seconds." ("blocked in I/O
    # wait for" when it sleeps in io_schedule; a task's name may hold spaces)
    ("hung task", re.compile(r"INFO: task .+:\d+ blocked (in I/O wait )?for more than")),
    # "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "rcu: INFO: rcu_sched self-detected
    # stall on CPU", "... detected expedited stalls ...", "INFO: rcu_tasks detected stalls on tasks:"
    ("RCU stall", re.compile(r"INFO: rcu_\w+ (self-)?detected (expedited )?stall")),
    # lib/list_debug.c (DEBUG_LIST): "list_add corruption. prev->next should be ...", "list_del
    # corruption, ...->next is LIST_POISON1", "list_add double add: ..."; caught even without the
    # WARNING (kernel BUG with BUG_ON_DATA_CORRUPTION) that follows
    ("list corruption", re.compile(r"list_(add|del) corruption|list_add double add")),
    ("UBSAN", re.compile(r"UBSAN: ")),
    ("Rust panic", re.compile(r"rust_panic|panicked at ")),
    ("slab corruption", re.compile(r"\bBUG \S+ \(.*\): |Poison overwritten|Redzone overwritten|Object padding overwritten")),
    ("call trace", re.compile(r"^\s*Call Trace:")),
    # A KUnit case or suite that failed, in KTAP ("    not ok 2 ipv6", "not ok 1 suite");
    # the passing ones say "ok N ...".
    ("KUnit failure", re.compile(r"^\s*not ok \d+ ")),
]

# Reports of the kernel's own C code that a control test may declare (see the docstring):
# name -> (what the report must contain, what it must not).
KNOWN_REPORTS = {
    # drivers/nvme/target/rdma.c runs commands that arrived before the connection was
    # established from its RDMA CM handler, holding the queue id's handler_mutex; an I/O
    # queue's Connect takes nvmet_config_sem there, while configfs holds nvmet_config_sem
    # when a port goes and the listener's id is destroyed (handler_mutex again, another
    # id of the same lock class). nvmet_rdma_rs runs commands from its CQ, never from a
    # CM handler, so it cannot make this chain.
    "c-nvmet-rdma-connect-in-cm-handler": (
        ["possible circular locking dependency detected", "nvmet_config_sem",
         "&id_priv->handler_mutex", "nvmet_rdma_cm_handler+", "nvmet_execute_io_connect+",
         "rdma_destroy_id+", "nvmet_rdma_disable_port+"],
        ["nvmet_rdma_rs", "rdma_server", "rdma_client"],
    ),
}

TAINT_LETTERS = "PFSRMBUDAWCIOELKXTNJ"
# O: out-of-tree module, E: unsigned module, N: a KUnit suite ran (the test kernel runs
# the binding layers' suites when nvmet_rdma_rs loads; a failing case is a report above).
ALWAYS_ALLOWED = {"O", "E", "N"}


def expected_taint(test_script):
    allowed = set(ALWAYS_ALLOWED)
    if test_script:
        with open(test_script, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r"#\s*rrs-expect-taint:\s*([A-Z]+)", line)
                if m:
                    allowed |= set(m.group(1))
    return allowed


def known_reports(test_script):
    names = set()
    if test_script:
        with open(test_script, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r"#\s*rrs-known-report:\s*(\S+)", line)
                if m:
                    if m.group(1) not in KNOWN_REPORTS:
                        raise SystemExit(f"{test_script}: unknown rrs-known-report {m.group(1)}")
                    names.add(m.group(1))
    return names


def fault_stacks(test_script):
    """Whether the test declares "# rrs-fault-stacks" (see the docstring)."""
    if test_script:
        with open(test_script, encoding="utf-8", errors="replace") as f:
            return any(re.match(r"#\s*rrs-fault-stacks\s*$", line) for line in f)
    return False


def report_block(messages, start):
    """The kernel messages of the report that begins at messages[start]: up to the end of
    its stack dump (a "</TASK>" line or "---[ end trace"), at most 200 messages."""
    end = start
    for end in range(start, min(start + 200, len(messages))):
        text = messages[end][1]
        if text.strip() == "</TASK>" or "---[ end trace" in text:
            break
    return messages[start:end + 1]


def matches_known(block, names):
    text = "\n".join(m for _, m in block)
    for name in names:
        required, forbidden = KNOWN_REPORTS[name]
        if all(r in text for r in required) and not any(f in text for f in forbidden):
            return name
    return None


def taint_letters(value):
    return {TAINT_LETTERS[bit] for bit in range(len(TAINT_LETTERS)) if value >> bit & 1}


def scan(lines, allowed_taint, known=frozenset(), notes=None, fault_stack_dumps=False):
    """Returns a list of problems found in the log lines. Reports matching one of the
    `known` signatures are described in `notes` (a list) instead. With
    `fault_stack_dumps`, the call traces fault injection prints are not problems."""
    problems = []
    taint = None
    messages = []  # (line number, kernel message text)
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        m = re.match(r"^RRS-TAINT: (\d+)", line)
        if m:
            taint = int(m.group(1))
            continue
        k = KERNEL_MESSAGE.search(line)
        if k:
            messages.append((number, k.group(1)))
    excused_until = 0
    # Fault injection's dumps still to end ("</TASK>"): two failures on two CPUs at once
    # print both headers before either dump.
    fault_dumps = 0
    for index, (number, text) in enumerate(messages):
        if fault_stack_dumps and "FAULT_INJECTION: forcing a failure" in text:
            fault_dumps += 1
        elif fault_dumps and text.strip() == "</TASK>":
            fault_dumps -= 1
        for name, pattern in SPLATS:
            if not pattern.search(text):
                continue
            if number <= excused_until:
                break
            if name == "call trace" and fault_dumps:
                break
            block = report_block(messages, index)
            which = matches_known(block, known) if known else None
            if which:
                excused_until = block[-1][0]
                if notes is not None:
                    notes.append(f"line {number}: known report {which}: {text.strip()}")
                break
            problems.append(f"line {number}: {name}: {text.strip()}")
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
    notes = []
    with open(args.log, encoding="utf-8", errors="replace") as f:
        problems = scan(f, expected_taint(args.test), known_reports(args.test), notes,
                        fault_stacks(args.test))
    for n in notes:
        print(f"splat: {n} (declared by the test; C code, not this project's)", file=sys.stderr)
    for p in problems[:40]:
        print(f"splat: {p}", file=sys.stderr)
    if len(problems) > 40:
        print(f"splat: ... and {len(problems) - 40} more", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
