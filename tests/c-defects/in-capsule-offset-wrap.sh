#!/bin/bash
# Not a test, and in no suite: it shows a defect of the C nvmet-rdma of 7.2.13 and ends
# in a kernel Oops on purpose. One I/O capsule whose in-capsule SGL offset is
# 2^64 - 256 with a length of 512 passes C's check (`off + len > inline_data_size`
# wraps to 256) and nvmet_rdma_use_inline_sg indexes inline_sg[2^52 - 1]: a general
# protection fault in nvmet_rdma_handle_command, from any host that can connect.
# (The first rows of the case show C taking in-capsule lengths past what the capsule
# carried, with status 0.) nvmet_rdma_rs answers each row SGL Offset Invalid
# (tests/vm/nvmet-hostile.sh). Run:
#   scripts/vm-run.sh -t 300 tests/c-defects/in-capsule-offset-wrap.sh
# and read the Oops in the run's serial.log (vm-run.sh reports FAIL for it).
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
body_start "the C nvmet-rdma and an in-capsule offset of 2^64 - 256"
cc -O1 -Wall -o /tmp/nvmf-hostile "$RRS_REPO/tests/hostile/nvmf-hostile.c" -lrdmacm -libverbs
nvmet_rxe_target nvmet-rdma
/tmp/nvmf-hostile -a "$RRS_IP4_A" -n "$NQN" -v -c in-capsule-offsets || true
sleep 5
