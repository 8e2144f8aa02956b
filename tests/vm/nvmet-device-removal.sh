#!/bin/bash
# nvmet_rdma_rs when its rxe device goes away under a live port, connected host and I/O,
# and comes back: queues end, the listener is repaired by itself, acknowledged data stays.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_device_removal_test nvmet_rdma_rs
