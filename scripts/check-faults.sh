#!/usr/bin/env bash
# make check-faults: the fault-injection sweep. failslab and fail_page_alloc, aimed by
# the stack-trace filter at the project's modules, fail their allocations one at a time
# across the load, port enable and disable, connect, I/O, device removal and unload of
# nvmet_rdma_rs, and the same of the demo pair; every case must end in an error to the
# host or the admin (or be absorbed where the sweep says why) and a clean recovery, with no splat, no leak
# (kmemleak), no hang, and rmmod working at the end. A few VMs, a group of phases each
# (a hang ends its VM only). See Documentation/fault-injection.md. Ends with
# "N passed, N failed" (one line per VM) and the guests' summaries.
#
# --kasan (make check-faults-kasan): on the KASAN kernel of make check-kasan (built with
# clang-19; the modules built against it as make KDIR= does), with twice the time per VM;
# logs in runs/faults-kasan.
# RRS_FAULT_GROUPS="nvmet-admin demo ..." runs only the named groups;
# RRS_FAULT_OPTIONS="max=8 ..." passes options to the guest sweeps (tests/faults/*-sweep.sh).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/suite.sh"

# group -> guest script and phases
declare -A GROUP_SCRIPT=(
	[nvmet-admin]=nvmet-sweep.sh [nvmet-connect-io]=nvmet-sweep.sh
	[nvmet-removal]=nvmet-sweep.sh [demo]=demo-sweep.sh
)
declare -A GROUP_PHASES=(
	[nvmet-admin]="close-queues load unload port-enable port-disable"
	[nvmet-connect-io]="connect io"
	[nvmet-removal]="device-removal"
	[demo]="server-load client-load connect send ping device-removal unload"
)
read -r -a groups <<<"${RRS_FAULT_GROUPS:-nvmet-admin nvmet-connect-io nvmet-removal demo}"

kernel=() out=$CACHE_DIR/runs/faults limit=1800
case "${1:-}" in
--kasan) kernel=("$REPO_ROOT/kernel/debug.config" "$REPO_ROOT/kernel/kasan.config")
	out=$CACHE_DIR/runs/faults-kasan limit=3600 ;;
"") ;;
*) die "usage: check-faults.sh [--kasan]" ;;
esac

suite_setup "${kernel[@]}"
grep -q '^CONFIG_FAULT_INJECTION_STACKTRACE_FILTER=y' "$kbuild/.config" ||
	{ log "the test kernel lacks the fault-injection options of kernel/debug.config"; result kernel-config 1; finish; }

moddir=$CACHE_DIR/modules/faults-$(basename "$kbuild")
suite_modules_copy "$moddir"

mkdir -p "$out"
for g in "${groups[@]}"; do
	[ -n "${GROUP_SCRIPT[$g]:-}" ] || { log "unknown group $g"; result "faults/$g" 1; continue; }
	# shellcheck disable=SC2086 # (words)
	# (stacks: where each failure landed, so that an absorbed one is judged by its place)
	"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -m "$moddir/src" -t $limit -o "$out/$g" \
		"$REPO_ROOT/tests/faults/${GROUP_SCRIPT[$g]}" stacks ${RRS_FAULT_OPTIONS:-} ${GROUP_PHASES[$g]}
	result "faults/$g" $?
done

# The guests' own summaries, then where the details are.
for g in "${groups[@]}"; do
	[ -f "$out/$g/test.log" ] || continue
	echo "--- $g ($(cat "$out/$g/verdict" 2>/dev/null || echo "no verdict"))"
	sed -n '/^=== fault injection summary/,$p' "$out/$g/test.log" | grep -v '^===\|: ok$'
done
log "fault sweep took $(($(date +%s) - t0))s; logs in $out/<group>/{test.log,serial.log}"
finish
