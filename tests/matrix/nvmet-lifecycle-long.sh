#!/bin/bash
# make check's lifecycle test of nvmet_rdma_rs over rxe with the library's 200 connect
# cycles (make check runs 100, to fit its hour), as the C control runs them.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_lifecycle_test nvmet_rdma_rs
