#!/usr/bin/env bash
# Boots two guests of one kernel build, a target and a host, joined by one virtual wire
# (a virtio-net NIC each, the frames carried as UDP datagrams between two loopback ports
# of this machine: nothing leaves it), and runs the same test script in both: each
# guest's $RRS_ROLE says which side it is. The two share a directory, their /run/pair,
# for signs (tests/lib/pair.sh). Each guest has one vCPU. The run passes when both
# guests pass (scripts/vm-run.sh's verdict: the test's status and a clean kernel log).
#
# usage: vm-pair.sh [-k KERNEL_BUILD] [-m MODULES_DIR] [-t TIMEOUT_S] [-o RUN_DIR] TEST_SCRIPT [ARGS...]
#   RUN_DIR/target and RUN_DIR/host hold each guest's run (vm-run.sh -o), RUN_DIR/pair
#   the shared directory.
# Environment: RRS_VM_MEM (MiB per guest, default 3072).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kbuild_args=() moddir_args=() timeout_s=900 run_dir=
while getopts "k:m:t:o:" opt; do
	case $opt in
	k) kbuild_args=(-k "$OPTARG") ;;
	m) moddir_args=(-m "$OPTARG") ;;
	t) timeout_s=$OPTARG ;;
	o) run_dir=$OPTARG ;;
	*) die "bad option" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "usage: vm-pair.sh [-k KBUILD] [-m MODDIR] [-t SECS] [-o DIR] TEST_SCRIPT [ARGS...]"
name=$(basename "$1" .sh)
run_dir=${run_dir:-$CACHE_DIR/runs/$(date +%Y%m%d-%H%M%S)-$name-pair-$$}
rm -rf "$run_dir"
mkdir -p "$run_dir/pair"

# Two free UDP ports on the loopback, one per end of the wire.
read -r port_target port_host < <(python3 -c '
import socket
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

log "$name: target and host guests on one wire (udp 127.0.0.1:$port_target <-> :$port_host), runs in $run_dir"
export RRS_VM_CPUS=1 RRS_VM_MEM=${RRS_VM_MEM:-3072} RRS_VM_PAIR_DIR=$run_dir/pair
RRS_VM_ROLE=target RRS_VM_WIRE=$port_target:$port_host:52:54:00:77:88:01 \
	"$REPO_ROOT/scripts/vm-run.sh" "${kbuild_args[@]}" "${moddir_args[@]}" -t "$timeout_s" \
	-o "$run_dir/target" "$@" &
target_pid=$!
RRS_VM_ROLE=host RRS_VM_WIRE=$port_host:$port_target:52:54:00:77:88:02 \
	"$REPO_ROOT/scripts/vm-run.sh" "${kbuild_args[@]}" "${moddir_args[@]}" -t "$timeout_s" \
	-o "$run_dir/host" "$@" &
host_pid=$!
rc=0
wait $target_pid || rc=1
wait $host_pid || rc=1
if [ $rc = 0 ]; then
	log "PASS $name (pair)"
else
	log "FAIL $name (pair): target $(cat "$run_dir/target/verdict" 2>/dev/null || echo none), host $(cat "$run_dir/host/verdict" 2>/dev/null || echo none)"
fi
exit $rc
