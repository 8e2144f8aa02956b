#!/bin/bash
# The fault-injection sweep of the demo pair (rdma_server, rdma_client) in one VM. See
# tests/faults/demo.sh for the phases, Documentation/fault-injection.md.
# usage (guest, through scripts/vm-run.sh): demo-sweep.sh [OPTION...] PHASE...
#   PHASE: server-load client-load connect send ping device-removal unload
#   OPTION: as tests/faults/nvmet-sweep.sh's (max=N pmax=N dense=N ks=K:K:... stacks)
# The stack dumps of injected failures (the stacks option) are not splats:
# rrs-fault-stacks
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/faults/lib.sh"
. "$RRS_REPO/tests/faults/demo.sh"

phases=()
for arg in "$@"; do
	fi_option "$arg" && continue
	case $arg in
	server-load | client-load | connect | send | ping | device-removal | unload) phases+=("$arg") ;;
	*) fail "unknown phase or option $arg" ;;
	esac
done
((${#phases[@]})) || fail "usage: demo-sweep.sh [OPTION...] PHASE..."
t0=$SECONDS
fd_setup
for phase in "${phases[@]}"; do
	t=$SECONDS
	case $phase in
	server-load) fd_phase_server_load ;;
	client-load) fd_phase_client_load ;;
	connect) fd_phase_connect ;;
	send) fd_phase_send ;;
	ping) fd_phase_ping ;;
	device-removal) fd_phase_removal ;;
	unload) fd_phase_unload ;;
	esac
	echo "phase $phase took $((SECONDS - t))s"
done
fd_teardown
echo "demo-sweep took $((SECONDS - t0))s"
fi_finish
echo "demo-sweep ${phases[*]}: ok"
