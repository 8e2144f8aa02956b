#!/bin/bash
# A hostile NVMe/RDMA host on rdma-core against nvmet_rdma_rs: truncated and oversized
# capsules, every SGL type, bad keys, odd lengths and offsets (in-capsule data at a
# non-zero offset read back), commands before Connect and before the target's
# ESTABLISHED event, absurd queue sizes, bursts, disconnects during an RDMA READ, a
# reconnect storm; then over siw, connects with private data shorter than the record.
# Arguments go to nvmf-hostile (scripts/hostile-random.sh passes a seed).
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_hostile_test nvmet_rdma_rs "$@"
