#!/usr/bin/env python3
"""Runs the compile-fail probes of this directory (README.md here).

Each probe `*.rs` is compiled into the nvmet_rdma_rs crate (the `soundness_probe` module
at the end of nvmet_rdma_rs/nvmet_rdma.rs) with the rustc or clippy-driver command kbuild
recorded for that crate, to metadata only (type, borrow and lint checks; nothing in the
tree is written). A probe's header names what it must give:
  // expect: E0133 E0599   rustc fails, and every error is one of these codes
                           (`lint`: an error without a code, e.g. forbid(unsafe_code))
  // expect: ok            it compiles, without warnings

usage: run.py [--tree DIR] [--self-test] [PROBE.rs...]
  --tree DIR    the module tree `make modules` built (default: this repository)
  --self-test   checks the runner itself: fails a probe that fails for the wrong reason
Exit status 1 if a probe fails or none ran."""
import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CMD_FILE = os.path.join("nvmet_rdma_rs", ".nvmet_rdma.o.cmd")
# `error[E0133]: ...` or `error: ...`; not the summary that ends a failed compile.
ERROR = re.compile(r"^error(?:\[(E\d{4})\])?: ")
SUMMARY = re.compile(r"^(error: aborting due to |Some errors have detailed|For more information)")
WARNING = re.compile(r"^warning(\[\w+\])?: (?!\d+ warnings? emitted)")


def crate_command(tree):
    """(env, argv) of the crate's compile, as kbuild recorded it, without its outputs."""
    path = os.path.join(tree, CMD_FILE)
    if not os.path.isfile(path):
        sys.exit(f"no {path}: build the modules first (make modules)")
    saved = re.search(r"^savedcmd_\S+ := (.*)$", open(path).read(), re.M)
    if not saved:
        sys.exit(f"{path} holds no savedcmd_ line")
    # kbuild writes `$` as `$$` and `#` as `$(pound)`; `;` starts objtool and the like.
    lex = shlex.shlex(saved.group(1).replace("$(pound)", "#").replace("$$", "$"),
                      posix=True, punctuation_chars=";")
    lex.whitespace_split = True
    words = list(lex)
    words = words[:words.index(";")] if ";" in words else words
    env = {"RUSTC_BOOTSTRAP": "1"}  # (exported by the kernel's Makefile: -Z flags)
    while words and re.match(r"[A-Za-z_]\w*=", words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if not words or not re.search(r"rustc|clippy-driver", os.path.basename(words[0])):
        sys.exit(f"{path}: not a rustc or clippy-driver command: {' '.join(words[:1])}")
    roots = [w for w in words if w.endswith("nvmet_rdma.rs")]
    if len(roots) != 1 or not os.path.isfile(os.path.join(tree, roots[0])):
        sys.exit(f"{path}: no crate root nvmet_rdma.rs found from {tree}")
    # Its outputs are replaced by the probe's: drop --emit=..., --out-dir DIR.
    argv = [w for i, w in enumerate(words)
            if not w.startswith(("--emit", "--out-dir")) and words[i - 1] != "--out-dir"]
    # ... and what the kernel's Makefile exports to it (clippy's configuration is the
    # source tree's, `source` in a build tree of its own) and rdma/rdma.mk (the bindings).
    objtree = env.get("OBJTREE", "")
    source = os.path.join(objtree, "source")
    env["CLIPPY_CONF_DIR"] = os.path.realpath(source if os.path.isdir(source) else objtree)
    env["RDMA_RS_BINDINGS"] = os.path.join(tree, "nvmet_rdma_rs", "rdma_bindings_generated.rs")
    if not os.path.isfile(env["RDMA_RS_BINDINGS"]):
        sys.exit(f"no {env['RDMA_RS_BINDINGS']}: build the modules first (make modules)")
    return env, argv


def expectation(probe):
    """The codes the probe's `// expect:` line names ({"ok"} or codes), or None."""
    for line in open(probe):
        if not line.startswith("//"):
            break
        m = re.match(r"//\s*expect:\s*(.*)", line)
        if m:
            codes = set(m.group(1).split())
            ok = codes == {"ok"} or (codes and all(re.fullmatch(r"E\d{4}|lint", c) for c in codes))
            return codes if ok else None
    return None


def compile_probe(probe, tree, env, argv):
    """(exit status, stderr, seconds) of the crate's compile with the probe in."""
    with tempfile.TemporaryDirectory(prefix="rdma-rs-probe-") as tmp:
        cmd = argv + ["--cfg", "rdma_rs_probe", f"--emit=metadata={tmp}/probe.rmeta",
                      "--out-dir", tmp]
        full_env = dict(os.environ, **env, RDMA_RS_PROBE=os.path.abspath(probe))
        start = time.monotonic()
        p = subprocess.run(cmd, cwd=tree, env=full_env, capture_output=True, text=True)
        return p.returncode, p.stderr, time.monotonic() - start


def judge(expect, rc, out):
    """(passed, what to print after PASS/FAIL, the first lines that show why)."""
    lines = out.splitlines()
    # (the lines to show stop at the summary)
    lines = lines[:next((i for i, l in enumerate(lines) if SUMMARY.match(l)), len(lines))]
    errors = [i for i, l in enumerate(lines) if ERROR.match(l)]
    codes = [ERROR.match(lines[i]).group(1) or "lint" for i in errors]
    got = " ".join(dict.fromkeys(codes))  # (each once)
    if expect == {"ok"}:
        warnings = [i for i, l in enumerate(lines) if WARNING.match(l)]
        if rc == 0 and not warnings:
            return True, "compiles", []
        first = (errors or warnings or [0])[0]
        return False, f"expected it to compile, got {got or 'warnings'}", \
            lines[first:first + 15]
    if rc == 0:
        return False, "it compiles", []
    if not codes:
        return False, f"rustc exited {rc} without an error", lines[:15]
    wrong = [i for i, c in zip(errors, codes) if c not in expect]
    if wrong:
        return False, f"got {got} (expected {' '.join(sorted(expect))})", \
            lines[wrong[0]:wrong[0] + 15]
    return True, got, []


def evaluate(probes, tree):
    """(passed, what, why, seconds) of each probe, compiled two at a time."""
    env, argv = crate_command(tree)

    def one(probe):
        expect = expectation(probe)
        if expect is None:
            return False, "no valid `// expect:` line in its header", [], 0.0
        rc, out, secs = compile_probe(probe, tree, env, argv)
        return (*judge(expect, rc, out), secs)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        yield from pool.map(one, probes)


def run(probes, tree):
    """Runs the probes and prints one line each; True if all passed."""
    start, failed = time.monotonic(), 0
    for probe, (ok, what, why, secs) in zip(probes, evaluate(probes, tree)):
        name = os.path.basename(probe)[:-3]
        print(f"probe {name}: {'PASS (' + what + ')' if ok else 'FAIL: ' + what}"
              f" [{secs:.1f}s]", flush=True)
        print("".join(f"    {line}\n" for line in why), end="")
        failed += not ok
    print(f"{len(probes) - failed} of {len(probes)} probes passed"
          f" in {time.monotonic() - start:.1f}s")
    return bool(probes) and not failed


# Probes whose outcome is known: (text, whether the runner must pass it).
SELF_TEST = {
    # Fails with E0425 (an unresolved name) besides the E0133 it expects: must FAIL.
    "typo": ("// expect: E0133\nfn probe() -> u8 {\n    no_such_function();\n"
             "    core::mem::zeroed()\n}\n", False),
    # Fails with E0133 only (an unsafe fn called from safe code): must PASS.
    "unsafe-call": ("// expect: E0133\nfn probe() -> u8 {\n    core::mem::zeroed()\n}\n",
                    True),
}


def self_test(tree):
    """Runs the SELF_TEST probes; True if the runner judged each one right."""
    with tempfile.TemporaryDirectory(prefix="rdma-rs-probe-self-test-") as tmp:
        probes = [os.path.join(tmp, f"{name}.rs") for name in SELF_TEST]
        for path, (text, _) in zip(probes, SELF_TEST.values()):
            open(path, "w").write(text)
        good = True
        for (name, (_, should_pass)), (passed, what, why, _) in zip(
                SELF_TEST.items(), evaluate(probes, tree)):
            right = passed == should_pass
            print(f"self-test {name}: {'right' if right else 'WRONG'}, the runner says"
                  f" {'PASS' if passed else 'FAIL'} ({what})")
            print("".join(f"    {line}\n" for line in why[:3] if not right), end="")
            good &= right
        return good


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", default=os.path.abspath(os.path.join(HERE, "..", "..", "..")))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("probes", nargs="*")
    args = parser.parse_args()
    tree = os.path.abspath(args.tree)
    if args.self_test:
        return 0 if self_test(tree) else 1
    probes = args.probes or sorted(
        os.path.join(HERE, n) for n in os.listdir(HERE) if n.endswith(".rs"))
    return 0 if run(probes, tree) else 1


if __name__ == "__main__":
    sys.exit(main())
