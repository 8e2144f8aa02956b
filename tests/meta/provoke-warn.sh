#!/bin/bash
# Not a test of the suite: the harness's own check (tests/host/harness-catches-splat.sh)
# runs this and expects the VM runner to FAIL it, although the script itself exits 0,
# because the kernel log shows a real WARN raised through LKDTM.
# rrs-expect-taint: W
. "$RRS_REPO/scripts/guest/lib.sh"
modprobe lkdtm
echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT
echo "provoked a WARN; the runner must fail this run"
