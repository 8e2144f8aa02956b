#!/bin/bash
# The same teardown under load with the C nvmet-rdma (the control); its port listens again
# after the device comes back only once re-enabled.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_teardown_test nvmet-rdma
