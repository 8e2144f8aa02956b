#!/bin/bash
# rdma_client's ping (krping's loop) over rxe, then over siw (one boot): sizes, memory
# modes, validation, bad options, bench.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/demo-ping.sh"
demo_ping_test rxe
demo_ping_test siw
