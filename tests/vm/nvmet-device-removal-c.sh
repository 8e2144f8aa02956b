#!/bin/bash
# The same device removal and return with the C nvmet-rdma (the control): its queues end
# and acknowledged data stays, but its port listens again only once re-enabled.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_device_removal_test nvmet-rdma
