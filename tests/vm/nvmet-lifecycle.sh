#!/bin/bash
# Lifecycle of nvmet_rdma_rs over rxe: connect/disconnect cycles, a second port on IPv6, a port
# removed under a connected host, bad port settings, unload.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_lifecycle_test nvmet_rdma_rs
