#!/bin/bash
# The C nvmet-rdma (the control) through tests/pair/nvmet-partition.sh (see there), over rxe.
# It may report a lockdep chain of its own (commands run from its RDMA CM handler); see
# KNOWN_REPORTS in scripts/scan-kernel-log.py.
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/tests/pair/nvmet-partition.sh" nvmet-rdma rxe "$@"
