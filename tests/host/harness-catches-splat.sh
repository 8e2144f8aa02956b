#!/bin/bash
# The VM runner must fail a run whose kernel log shows a splat even when the test
# script succeeds: boot a VM that raises a real WARN (LKDTM) and expect the verdict
# "splat". Usage: harness-catches-splat.sh KERNEL_BUILD
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/scripts/lib.sh"
run_dir=$CACHE_DIR/runs/harness-catches-splat
if "$repo/scripts/vm-run.sh" -k "$1" -t 300 -o "$run_dir" "$repo/tests/meta/provoke-warn.sh"; then
	echo "FAIL: the runner passed a run with a kernel WARN" >&2
	exit 1
fi
verdict=$(cat "$run_dir/verdict")
[ "$verdict" = splat ] || { echo "FAIL: verdict '$verdict', expected 'splat'" >&2; exit 1; }
grep -q "provoked a WARN" "$run_dir/test.log" || { echo "FAIL: the provoking script did not run" >&2; exit 1; }
echo "harness-catches-splat: the runner failed the WARN run, as it must"
