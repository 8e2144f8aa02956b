#!/bin/bash
# rdma_client's ping (krping's loop) over rxe: sizes, memory modes, validation, bad options.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/demo-ping.sh"
demo_ping_test rxe
