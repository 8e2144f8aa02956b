#!/bin/bash
# The teardown set of tests/vm/nvmet-teardown.sh over rxe, with every queue on the
# device's shared receive queues (use_srq=1): disconnect, unlink, port removal and
# namespace disable under verified load, device removal (also during a reconnect), an
# address change, unload with the listener repair retrying.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
NVMET_MODULE_ARGS="use_srq=1 srq_size=256" nvmet_teardown_test nvmet_rdma_rs rxe
