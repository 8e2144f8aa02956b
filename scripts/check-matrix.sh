#!/usr/bin/env bash
# make check-matrix: what make check has no time for (it must end within 60 minutes from
# a fresh clone), one boot each, from tests/matrix/:
# - the teardown test of make check (tests/vm/nvmet-teardown.sh, over rxe with queues on
#   receive queues of their own) over rxe with shared receive queues (use_srq=1), and over
#   siw. (Not siw with shared receive queues: siw never reports
#   IB_EVENT_QP_LAST_WQE_REACHED, so the RDMA core's drain of each such QP waits its full
#   minute, for the C transport as for ours.) make check's nvmet-io boot ends both its
#   bodies, rxe with use_srq=1 and siw, with a device removal under verified load.
# - connects and disconnects in a row over siw, each live within 10 s (the accept in the
#   RDMA CM handler against siw_accept's early MPA reply).
# - the C nvmet-rdma (the control) through the lifecycle and teardown tests.
# About 55 minutes under TCG. Ends with "N passed, N failed".
#
# RRS_TESTS="nvmet-teardown-siw ..." runs only the named tests of tests/matrix/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/suite.sh"

suite_setup
moddir=$CACHE_DIR/modules/matrix-$(basename "$kbuild")
suite_modules_copy "$moddir"

tests=(${RRS_TESTS:-nvmet-teardown-srq nvmet-teardown-siw nvmet-connect-siw nvmet-lifecycle-c nvmet-teardown-c})
for t in "${tests[@]}"; do
	"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -m "$moddir/src" -t 1500 \
		-o "$CACHE_DIR/runs/matrix/$t" "$REPO_ROOT/tests/matrix/$t.sh"
	result "vm-matrix/$t" $?
done
log "matrix took $(($(date +%s) - t0))s; VM logs in $CACHE_DIR/runs/matrix"
finish
