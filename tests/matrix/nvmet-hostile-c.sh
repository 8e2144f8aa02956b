#!/bin/bash
# The hostile host against the C nvmet-rdma (the control), with the cases that reach the
# paths the C transport fixed in 2025-26 (Documentation/nvmet-rdma-rs.md, "The C
# transport's recent fixes"): in-capsule data at a non-zero offset, commands before the
# target's ESTABLISHED event, queues torn down with commands in flight (a disconnect
# during RDMA READs, a keep-alive expiry, 132 at once), allocation failures injected on
# an I/O command's data path, and over siw connects with short private data, which C
# 7.2 takes (the case must fail there). Not in-capsule-offsets: its wrapping offset
# crashes C 7.2 (tests/c-defects/in-capsule-offset-wrap.sh shows it).
# The C transport may report a lockdep chain of its own (commands run from its RDMA CM
# handler); see KNOWN_REPORTS in scripts/scan-kernel-log.py.
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
nvmet_hostile_test nvmet-rdma -C -c in-capsule-at-offset -c early-commands -c disconnect-mid-read \
	-c keep-alive -c storm -c data-path-faults -c short-private-data
