#!/bin/bash
# The same teardown under load with the C nvmet-rdma (the control); its port listens again
# after the device comes back only once re-enabled.
# The C transport may report a lockdep chain of its own (commands run from its RDMA CM
# handler); see KNOWN_REPORTS in scripts/scan-kernel-log.py.
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_teardown_test nvmet-rdma
