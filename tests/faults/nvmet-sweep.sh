#!/bin/bash
# The fault-injection sweep of nvmet_rdma_rs in one VM (scripts/check-faults.sh runs it
# a few times, a group of phases each, so that a hang in one phase cannot hide the
# others). See tests/faults/nvmet.sh for the phases, Documentation/fault-injection.md.
# usage (guest, through scripts/vm-run.sh): nvmet-sweep.sh [OPTION...] PHASE...
#   PHASE: load unload port-enable port-disable close-queues connect io device-removal
#   OPTION: max=N (cases per failslab sweep, default 12), pmax=N (per fail_page_alloc
#           sweep, default 5), dense=N (every K up to N, default 5),
#           ks=K:K:... (exactly these K per sweep), stacks (FI_VERBOSE=2: where each
#           failure was injected, so that one absorbed is judged by where it landed;
#           make check-faults always passes it)
# The stack dumps of injected failures (the stacks option) are not splats:
# rrs-fault-stacks
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
. "$RRS_REPO/tests/faults/lib.sh"
. "$RRS_REPO/tests/faults/nvmet.sh"

phases=()
for arg in "$@"; do
	fi_option "$arg" && continue
	case $arg in
	load | unload | port-enable | port-disable | close-queues | connect | io | device-removal) phases+=("$arg") ;;
	*) fail "unknown phase or option $arg" ;;
	esac
done
((${#phases[@]})) || fail "usage: nvmet-sweep.sh [OPTION...] PHASE..."
t0=$SECONDS
fn_setup
for phase in "${phases[@]}"; do
	t=$SECONDS
	case $phase in
	load) fn_phase_load ;;
	unload) fn_phase_unload ;;
	port-enable) fn_phase_port_enable ;;
	port-disable) fn_phase_port_disable ;;
	close-queues) fn_phase_close_queues ;;
	connect) fn_phase_connect ;;
	io) fn_phase_io ;;
	device-removal) fn_phase_removal ;;
	esac
	echo "phase $phase took $((SECONDS - t))s"
done
fn_teardown
echo "nvmet-sweep took $((SECONDS - t0))s"
fi_finish
echo "nvmet-sweep ${phases[*]}: ok"
