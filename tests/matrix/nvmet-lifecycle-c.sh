#!/bin/bash
# Lifecycle of the C nvmet-rdma (the control) over rxe: connect/disconnect cycles, a second port on IPv6, a port
# removed under a connected host, bad port settings, unload.
# The C transport may report a lockdep chain of its own (commands run from its RDMA CM
# handler); see KNOWN_REPORTS in scripts/scan-kernel-log.py.
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_lifecycle_test nvmet-rdma
