#!/bin/bash
# The VM runner must fail a run whose kernel log shows a splat even when the test
# script succeeds: boot a VM that raises a real WARN (LKDTM) and expect the verdict
# "splat". Usage: harness-catches-splat.sh KERNEL_BUILD
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/scripts/lib.sh"
run_dir=$CACHE_DIR/runs/harness-catches-splat
runner_log=$(mktemp)
trap 'rm -f "$runner_log"' EXIT
if "$repo/scripts/vm-run.sh" -k "$1" -t 300 -o "$run_dir" "$repo/tests/meta/provoke-warn.sh" 2>"$runner_log"; then
	cat "$runner_log" >&2
	echo "FAIL: the runner passed a run with a kernel WARN" >&2
	exit 1
fi
verdict=$(cat "$run_dir/verdict")
[ "$verdict" = splat ] || { cat "$runner_log" >&2; echo "FAIL: verdict '$verdict', expected 'splat'" >&2; exit 1; }
grep -q "splat: .*WARNING: .*lkdtm" "$runner_log" || { cat "$runner_log" >&2; echo "FAIL: the WARN was not named" >&2; exit 1; }
grep -q "provoked a WARN" "$run_dir/test.log" || { echo "FAIL: the provoking script did not run" >&2; exit 1; }
echo "harness-catches-splat: the runner failed the WARN run, as it must"
