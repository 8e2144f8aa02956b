#!/bin/bash
# rdma_server + rdma_client over rxe, then over siw (one boot): the send round trip, bad
# input, server unload.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/demo-send.sh"
demo_send_test rxe
demo_send_test siw
