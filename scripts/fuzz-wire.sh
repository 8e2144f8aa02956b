#!/usr/bin/env bash
# Fuzzes nvmet_rdma_rs/wire.rs (the connect data and command capsule parsing) with the
# cargo fuzz target in tests/host/wire/fuzz: libFuzzer with AddressSanitizer, run on the
# machine's stable toolchain through RUSTC_BOOTSTRAP=1 (cargo fuzz needs nightly flags).
# The corpus grows under the cache from run to run; a crash lands in the cache's
# artifacts/ directory and fails the run (reproduce with: cargo fuzz run --fuzz-dir
# tests/host/wire/fuzz wire <artifact>).
#
# usage: fuzz-wire.sh [SECONDS]   (default 60; make check runs 30, make fuzz 600)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

seconds=${1:-60}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "usage: fuzz-wire.sh [SECONDS]"
"$REPO_ROOT/scripts/setup-host.sh" --fuzz
command -v cargo-fuzz >/dev/null 2>&1 || die "cargo-fuzz is missing (scripts/setup-host.sh --fuzz did not install it)"
work=$CACHE_DIR/fuzz/wire
mkdir -p "$work/corpus" "$work/artifacts"
cd "$REPO_ROOT/tests/host/wire"
log "fuzzing wire.rs for ${seconds}s (corpus: $work/corpus)"
rc=0
RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$CACHE_DIR/cargo-fuzz-target \
	cargo fuzz run --fuzz-dir fuzz wire "$work/corpus" -- \
	-max_total_time="$seconds" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
	>"$work/last-run.log" 2>&1 || rc=$?
grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)|ERROR|panicked|SUMMARY' "$work/last-run.log" || true
[ $rc = 0 ] || { tail -n 40 "$work/last-run.log"; die "the fuzzer failed (status $rc; inputs in $work/artifacts)"; }
