#!/bin/bash
# NVMe-oF I/O through nvmet_rdma_rs, one boot: over rxe with shared receive queues
# (use_srq=1, srq_size=256), then over siw with receive queues of each queue's own:
# discover, connect, fio with verify (in-capsule up to 16 KiB over one to four pages, and
# keyed, 512 B to 1 MiB, depth 1 to 128), a file namespace, reconnect, unload.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
NVMET_MODULE_ARGS="use_srq=1 srq_size=256" nvmet_io_test nvmet_rdma_rs rxe
nvmet_io_test nvmet_rdma_rs siw
