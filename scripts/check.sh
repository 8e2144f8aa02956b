#!/usr/bin/env bash
# The project's test suite (`make check`): sets up the host, builds (or reuses) the
# pinned kernel, builds the modules with clippy, runs the host-side checks and then
# every VM test in tests/vm/, and ends with the line "N passed, N failed".
#
# RRS_TESTS="smoke demo bench-smoke ..." runs only the named VM tests and jobs (host
# checks always run; bench-smoke, the bench's smoke, runs in make check-matrix and only
# when named here); RRS_CHECK_JOBS=N runs N of them at a time (2).
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

# VM tests, two at a time (RRS_CHECK_JOBS): these machines have two cores and no KVM,
# and a test spends much of its time waiting (timeouts, held commands, reconnect
# delays, time-based fio), so each of two VMs side by side takes about 1.35 times as
# long as alone and the suite about 0.7 times (the whole make check took 2065 s on
# 2026-11-28 with 2 GiB guests; 4633 s one at a time on d146cff). The slowest start
# first; each job's output is printed whole when it ends.
jobs_list=()
if [ -n "${RRS_TESTS:-}" ]; then
	for t in $RRS_TESTS; do jobs_list+=("$t"); done
else
	# (longest first, as measured alone: the rest are under four minutes each)
	jobs_list=(nvmet-io nvmet-teardown nvmet-hostile nvmet-lifecycle demo-ping
		nvmet-held-connect demo)
	for t in "$REPO_ROOT"/tests/vm/*.sh; do
		t=$(basename "$t" .sh)
		[[ " ${jobs_list[*]} " == *" $t "* ]] || jobs_list+=("$t")
	done
	jobs_list+=(harness-catches-splat)
fi

jobs_max=${RRS_CHECK_JOBS:-2}
jobs_dir=$CACHE_DIR/runs/latest/jobs
rm -rf "$jobs_dir"
mkdir -p "$jobs_dir"
declare -A job_names=()

# job_reap: waits for the next job to end, prints its output and counts its result.
job_reap() {
	local pid rc=0 name
	wait -n -p pid "${!job_names[@]}" || rc=$?
	name=${job_names[$pid]}
	unset "job_names[$pid]"
	cat "$jobs_dir/${name//\//_}.log"
	result "$name" $rc
}

# job_start NAME COMMAND...: runs COMMAND in the background once fewer than $jobs_max
# jobs run, its output kept for job_reap.
job_start() {
	local name=$1
	shift
	while ((${#job_names[@]} >= jobs_max)); do job_reap; done
	"$@" >"$jobs_dir/${name//\//_}.log" 2>&1 &
	job_names[$!]=$name
}


for t in "${jobs_list[@]}"; do
	case $t in
	# make demo cannot rot: its guest script, with the modules installed by make
	# modules_install, and its transcript checked step by step (and against the
	# README's).
	demo) job_start vm/demo "$REPO_ROOT/scripts/demo.sh" --check -k "$kbuild" -o "$CACHE_DIR/runs/latest/demo" ;;
	bench-smoke) job_start host/bench-smoke bench_smoke "$CACHE_DIR/runs/latest/bench-smoke" ;;
	harness-catches-splat) job_start host/harness-catches-splat "$REPO_ROOT/tests/host/harness-catches-splat.sh" "$kbuild" ;;
	# (a limit of about twice a test's time alone: it runs beside another VM)
	*) job_start "vm/$t" "$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -t 1500 \
		-o "$CACHE_DIR/runs/latest/$t" "$REPO_ROOT/tests/vm/$t.sh" ;;
	esac
done
while ((${#job_names[@]})); do job_reap; done

log "suite took $(($(date +%s) - t0))s; VM logs in $CACHE_DIR/runs/latest"
finish
