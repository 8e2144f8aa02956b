#!/bin/bash
# The same I/O through the C nvmet-rdma (the control), one boot: over rxe with shared
# receive queues (use_srq=1, srq_size=256), then over siw without.
# The C transport may report a lockdep chain of its own (commands run from its RDMA CM
# handler); see KNOWN_REPORTS in scripts/scan-kernel-log.py.
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
NVMET_MODULE_ARGS="use_srq=1 srq_size=256" nvmet_io_test nvmet-rdma rxe
nvmet_io_test nvmet-rdma siw
