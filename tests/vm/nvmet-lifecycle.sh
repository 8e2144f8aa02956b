#!/bin/bash
# Lifecycle of nvmet_rdma_rs over rxe: connect/disconnect cycles, a second port on IPv6, a port
# removed under a connected host, bad port settings, unload.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
# (100 connect cycles here, to fit make check's hour; the C control in make check-matrix
# runs the library's 200)
NVMET_CYCLES=${NVMET_CYCLES:-100} nvmet_lifecycle_test nvmet_rdma_rs
