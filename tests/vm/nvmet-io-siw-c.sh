#!/bin/bash
# NVMe-oF I/O through the C nvmet-rdma (the control) over siw: discover, connect, fio with verify (in-capsule and
# keyed, 512 B to 1 MiB, depth 1 to 128), a file namespace, reconnect, unload.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_io_test nvmet-rdma siw
