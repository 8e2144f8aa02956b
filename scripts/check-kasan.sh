#!/usr/bin/env bash
# make check-kasan: the KASAN kernel (kernel/debug.config + kernel/kasan.config, built
# with clang-19), the project's modules built against it as a user builds against their
# own clang-built kernel (`make KDIR=...`, tests/host/build-against.sh), then the guest
# tests that drive the modules hardest, on that kernel: any KASAN report (or any other
# splat) fails the test that caused it. Ends with "N passed, N failed".
#
# RRS_TESTS="nvmet-io ..." runs only the named VM tests.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/suite.sh"

t0=$(date +%s)
"$REPO_ROOT/scripts/setup-host.sh" || { result setup 1; finish; }
kbuild=$("$REPO_ROOT/scripts/build-kernel.sh" "$REPO_ROOT/kernel/debug.config" "$REPO_ROOT/kernel/kasan.config") ||
	{ result kernel-build-kasan 1; finish; }
log "KASAN kernel ready after $(($(date +%s) - t0))s: $kbuild"

moddir=$CACHE_DIR/modules/$(basename "$kbuild")
"$REPO_ROOT/tests/host/build-against.sh" "$kbuild" "$moddir"
result host/build-against-clang-kernel $?
[ "$failed" = 0 ] || finish

tests=(${RRS_TESTS:-demo-send demo-ping demo-link-delete nvmet-io nvmet-teardown nvmet-lifecycle nvmet-hostile})
for t in "${tests[@]}"; do
	# (KASAN makes the guest about twice as slow: nvmet-io takes about 1500 s alone. Its
	# quarantine and shadow take memory: these guests keep the 4 GiB they were verified
	# with, not the test kernel's 2.)
	RRS_VM_MEM=${RRS_VM_MEM:-4096} "$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -m "$moddir/src" -t 2700 \
		-o "$CACHE_DIR/runs/kasan/$t" "$REPO_ROOT/tests/vm/$t.sh"
	result "vm-kasan/$t" $?
done
log "KASAN suite took $(($(date +%s) - t0))s; VM logs in $CACHE_DIR/runs/kasan"
finish
