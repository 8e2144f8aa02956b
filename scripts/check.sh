#!/usr/bin/env bash
# The project's test suite (`make check`): sets up the host, builds (or reuses) the
# pinned kernel, builds the modules with clippy, runs the host-side checks and then
# every VM test in tests/vm/, and ends with the line "N passed, N failed".
#
# RRS_TESTS="smoke demo ..." runs only the named VM tests (host checks always run).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/suite.sh"

suite_setup

# Host-side checks.
python3 "$REPO_ROOT/tests/host/test_scan_kernel_log.py" -q
result host/scan-kernel-log $?
python3 "$REPO_ROOT/tests/host/test_count_report.py" -q
result host/count-report $?

make -s -C "$REPO_ROOT" fmt-check
result host/rustfmt $?
# The transport's modules import in one direction; `bindings::` only in the layers.
python3 "$REPO_ROOT/tests/host/check_layers.py"
result host/layers $?

# The transport's network parsing (nvmet_rdma_rs/wire.rs) and T10-PI signature set-up
# (nvmet_rdma_rs/protection.rs), unit-tested on the host.
CARGO_TARGET_DIR=$CACHE_DIR/cargo-target cargo test --quiet --offline \
	--manifest-path "$REPO_ROOT/tests/host/wire/Cargo.toml"
result host/nvmet-wire-unit-tests $?

# ... and fuzzed: a short pass (scripts/fuzz-wire.sh; `make fuzz` runs longer).
"$REPO_ROOT/scripts/fuzz-wire.sh" 30
result host/nvmet-wire-fuzz $?

# The hostile NVMe/RDMA host (tests/hostile, run in the VM by nvmet-hostile) builds
# warning-free against rdma-core.
cc -O1 -Wall -Wextra -Wno-missing-field-initializers -Werror -o "$CACHE_DIR/nvmf-hostile" \
	"$REPO_ROOT/tests/hostile/nvmf-hostile.c" -lrdmacm -libverbs
result host/hostile-host-builds $?

build_log=$CACHE_DIR/runs/modules-build.log
mkdir -p "$(dirname "$build_log")"
make -C "$REPO_ROOT" clean >/dev/null
# (with the test hold points, nvmet_rdma_rs/test_hooks.rs, which the VM tests use)
make -C "$REPO_ROOT" KDIR="$kbuild" CLIPPY=1 RRS_TEST_HOOKS=1 modules >"$build_log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -Ei '^(warning|error)|: warning:' "$build_log"; then
	log "the module build printed warnings (full log: $build_log)"
	rc=1
fi
[ $rc = 0 ] || tail -n 40 "$build_log"
result host/modules-build-clippy-clean $rc
if [ $rc != 0 ]; then finish; fi

# No safe transport code can misuse the layers: each compile-fail probe of
# tests/host/probes fails to compile with the errors it names (README.md there); and
# the runner fails a probe that fails for another reason.
python3 "$REPO_ROOT/tests/host/probes/run.py" --tree "$REPO_ROOT"
result host/soundness-probes $?
python3 "$REPO_ROOT/tests/host/probes/run.py" --self-test --tree "$REPO_ROOT"
result host/soundness-probes-self-test $?

# VM tests.
tests=() run_demo=1
if [ -n "${RRS_TESTS:-}" ]; then
	run_demo=0
	for t in $RRS_TESTS; do
		if [ "$t" = demo ]; then run_demo=1; else tests+=("$REPO_ROOT/tests/vm/$t.sh"); fi
	done
else
	tests=("$REPO_ROOT"/tests/vm/*.sh)
fi

# make demo cannot rot: its guest script, with the modules installed by make
# modules_install, and its transcript checked step by step (and against the README's).
if [ $run_demo = 1 ]; then
	"$REPO_ROOT/scripts/demo.sh" --check -k "$kbuild" -o "$CACHE_DIR/runs/latest/demo"
	result vm/demo $?
fi
for t in "${tests[@]}"; do
	name=vm/$(basename "$t" .sh)
	"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -t 900 -o "$CACHE_DIR/runs/latest/$(basename "$t" .sh)" "$t"
	result "$name" $?
done

# make bench cannot rot: one short point per tool, through the whole pipeline (VM,
# raw results, report, chart), and the counted figure (its own VM under the insn-count
# plugin). It checks that numbers came out, never how big they are.
bench_out=$CACHE_DIR/runs/latest/bench-smoke
"$REPO_ROOT/scripts/bench.sh" --smoke -o "$bench_out" >"$bench_out.log" 2>&1 &&
	tail -n 1 "$bench_out.log" | grep -Eqx 'transport cost Rust/C, worst row: [0-9]+\.[0-9]{3} \(±[0-9]+\.[0-9]{3}\)' &&
	grep -Eq '^\| randread-4k-qd32 \| [0-9,.]+ \| [0-9.]+% \| [0-9,.]+ \| [0-9.]+% \| [0-9.]+ \|' "$bench_out/count.md" &&
	grep -Eq '^\| randread-4k-qd32 \| [0-9,]+ \| [0-9.]+% \| [0-9,]+ \| [0-9.]+% \| [-+][0-9,]+ \| [0-9.]+ \|' "$bench_out/count.md" &&
	grep -Eq '^\| transport \| [0-9,]+ \| [0-9,]+ \|' "$bench_out/count-split.md" &&
	grep -Eq '^\| randread-4k-qd32 \| IOPS \| [0-9.]+ .*\| [0-9.]+ .*\| [0-9.]+ \|' "$bench_out/bench.md" &&
	grep -Eq '^\| RDMA WRITE bandwidth, 128 KiB \| MB/s \| [0-9.]+ ' "$bench_out/bench.md" &&
	grep -Eq '^\| own \| 128 \| [-0-9,]+ \| [-0-9,]+ \| [-0-9,]+ \| [-0-9,]+ \|' "$bench_out/bench.md" &&
	grep -Eq '^\| RDMA WRITE latency, 4 KiB \| median \(µs\) \| .* \| [0-9.]+ ' "$bench_out/bench.md" &&
	head -c 8 "$bench_out/bench.png" | grep -q PNG &&
	grep -Eq '^\| core \| [1-9][0-9]* \| [0-9.]+ \|' "$bench_out/bench.md" &&
	head -c 8 "$bench_out/latency.png" | grep -q PNG
rc=$?
[ $rc = 0 ] || tail -n 30 "$bench_out.log"
result host/bench-smoke $rc

"$REPO_ROOT/tests/host/harness-catches-splat.sh" "$kbuild"
result host/harness-catches-splat $?

log "suite took $(($(date +%s) - t0))s; VM logs in $CACHE_DIR/runs/latest"
finish
