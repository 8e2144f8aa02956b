#!/bin/bash
# Connects and disconnects in a row over siw (iWARP), each connect live within 10 s: the
# accept inside the RDMA CM handler against siw_accept's early MPA reply.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_connect_storm_test nvmet_rdma_rs siw
