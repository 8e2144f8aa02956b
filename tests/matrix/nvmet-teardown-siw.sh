#!/bin/bash
# The teardown set of tests/vm/nvmet-teardown.sh over siw (iWARP), queues with receive
# queues of their own.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_teardown_test nvmet_rdma_rs siw
