# Pass/fail bookkeeping and common steps of the test suites (scripts/check*.sh).
# Sourced after scripts/lib.sh, not run.
# shellcheck shell=bash

passed=0 failed=0 failures=()

# result NAME RC: counts and prints one check's outcome.
result() {
	if [ "$2" = 0 ]; then
		passed=$((passed + 1)); printf 'PASS  %s\n' "$1"
	else
		failed=$((failed + 1)); failures+=("$1"); printf 'FAIL  %s\n' "$1"
	fi
}

# finish: prints the failures and the line "N passed, N failed", and exits (non-zero
# if anything failed).
finish() {
	((${#failures[@]} == 0)) || printf 'failed: %s\n' "${failures[*]}"
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

# suite_setup [CONFIG_FRAGMENT...]: the host's set-up, then the test kernel (built once
# with the fragments, reused after): sets $kbuild and $t0 (the suite's start). A failure
# is counted and ends the suite.
suite_setup() {
	t0=$(date +%s)
	"$REPO_ROOT/scripts/setup-host.sh" || { result setup 1; finish; }
	kbuild=$("$REPO_ROOT/scripts/build-kernel.sh" "$@") || { result kernel-build 1; finish; }
	log "kernel ready after $(($(date +%s) - t0))s: $kbuild"
}

# suite_modules_copy DIR: the modules as `make` builds them against $kbuild, from a copy
# of the sources in DIR/src (the repository's .ko files are left as they are; its log in
# DIR/build.log). Counted as host/modules-build; a failure ends the suite.
suite_modules_copy() {
	local rc=0
	copy_sources "$1/src"
	make -C "$1/src" KDIR="$kbuild" RRS_TEST_HOOKS=1 modules >"$1/build.log" 2>&1 || rc=$?
	[ $rc = 0 ] || tail -n 30 "$1/build.log"
	result host/modules-build $rc
	[ $rc = 0 ] || finish
}

# make bench cannot rot: one short point per tool, through the whole pipeline (VM,
# raw results, report, chart), and the counted figure (its own VM under the insn-count
# plugin). It checks that numbers came out, never how big they are. (make check-matrix;
# make check names it in RRS_TESTS only: its 9 minutes do not fit make check's hour.)
# usage: bench_smoke OUT-DIR
bench_smoke() {
	local out=$1 rc
	"$REPO_ROOT/scripts/bench.sh" --smoke -o "$out" >"$out.log" 2>&1 &&
		tail -n 1 "$out.log" | grep -Eqx 'transport cost Rust/C, worst row: [0-9]+\.[0-9]{3} \(±[0-9]+\.[0-9]{3}\)' &&
		grep -Eq '^\| randread-4k-qd32 \| [0-9,.]+ \| [0-9.]+% \| [0-9,.]+ \| [0-9.]+% \| [0-9.]+ \|' "$out/count.md" &&
		grep -Eq '^\| randread-4k-qd32 \| [0-9,]+ \| [0-9.]+% \| [0-9,]+ \| [0-9.]+% \| [-+][0-9,]+ \| [0-9.]+ \|' "$out/count.md" &&
		grep -Eq '^\| transport \| [0-9,]+ \| [0-9,]+ \|' "$out/count-split.md" &&
		grep -Eq '^\| randread-4k-qd32 \| IOPS \| [0-9.]+ .*\| [0-9.]+ .*\| [0-9.]+ \|' "$out/bench.md" &&
		grep -Eq '^\| RDMA WRITE bandwidth, 128 KiB \| MB/s \| [0-9.]+ ' "$out/bench.md" &&
		grep -Eq '^\| own \| 128 \| [-0-9,]+ \| [-0-9,]+ \| [-0-9,]+ \| [-0-9,]+ \|' "$out/bench.md" &&
		grep -Eq '^\| RDMA WRITE latency, 4 KiB \| median \(µs\) \| .* \| [0-9.]+ ' "$out/bench.md" &&
		head -c 8 "$out/bench.png" | grep -q PNG &&
		grep -Eq '^\| core \| [1-9][0-9]* \| [0-9.]+ \|' "$out/bench.md" &&
		head -c 8 "$out/latency.png" | grep -q PNG
	rc=$?
	[ $rc = 0 ] || tail -n 30 "$out.log"
	return $rc
}
