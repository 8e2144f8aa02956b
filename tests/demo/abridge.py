#!/usr/bin/env python3
"""Abridges a `make demo` transcript for the README: step headers, every command and note,
and at most a few lines of each command's output (the lines that say the most first).

usage: abridge.py TRANSCRIPT                 prints the abridged transcript
       abridge.py TRANSCRIPT --update README  replaces the README's block between
                                              "<!-- demo transcript: begin" and
                                              "<!-- demo transcript: end" with it

Regenerate the README's block from a real run whenever tests/demo/demo.sh changes;
tests/demo/check-transcript.sh (run by make check) fails when its commands no longer
match a run's.
"""
import re
import sys

MAX_OUTPUT = 5
# Output lines worth keeping over others, when a command prints more than MAX_OUTPUT.
SALIENT = re.compile(r"IOPS=|lat \(|err=|enabling port|released|subnqn|nvmet_rdma_rs|/dev/nvme|"
                     r"lat_median|mb_s|established|done|queue |updates/|"
                     r'"(trtype|traddr|inline_data_size|path|nqn)"')


def abridge(lines):
    out, pending = [], []

    def flush():
        if len(pending) <= MAX_OUTPUT:
            out.extend(pending)
        else:
            keep = [l for l in pending if SALIENT.search(l)][:MAX_OUTPUT] or pending[:MAX_OUTPUT]
            out.extend(keep)
            out.append("...")
        pending.clear()

    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith(("# ", "=== ", "(")) or not line.strip():
            flush()
            if line.strip() or (out and out[-1].strip()):
                out.append(line)
        else:
            pending.append(line)
    flush()
    return out


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--update"):
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        block = abridge(f)
    # (the guest's kernel messages are interleaved in the console, not in the transcript)
    text = "\n".join(block).strip("\n") + "\n"
    if len(sys.argv) == 2:
        sys.stdout.write(text)
        return
    readme = sys.argv[3]
    with open(readme, encoding="utf-8") as f:
        content = f.read()
    pattern = re.compile(r"(<!-- demo transcript: begin[^\n]*\n```text\n).*?(```\n<!-- demo transcript: end)",
                         re.S)
    if not pattern.search(content):
        sys.exit(f"{readme}: no demo transcript block")
    content = pattern.sub(lambda m: m.group(1) + text + m.group(2), content)
    with open(readme, "w", encoding="utf-8") as f:
        f.write(content)


if __name__ == "__main__":
    main()
