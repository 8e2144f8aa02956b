#!/bin/bash
# nvmet_rdma_rs torn down under verified load: host disconnect, port unlinked, port removed,
# namespace disabled, rxe device deleted and back (its listener repaired by itself), and
# the port's address moved to another MAC by a bond failover (ADDR_CHANGE).
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_teardown_test nvmet_rdma_rs
