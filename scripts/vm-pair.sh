#!/usr/bin/env bash
# Boots two guests of one kernel build, a target and a host, joined by one virtual wire
# (a virtio-net NIC each, the frames carried as UDP datagrams on this machine's loopback
# through a relay, scripts/wire-relay.py, that a guest can tell to drop everything: a
# network partition; nothing leaves the machine), and runs the same test script in both:
# each guest's $RRS_ROLE says which side it is. The two share a directory, their
# /run/pair, for signs and the wire's switch (tests/lib/pair.sh). Each guest has one
# vCPU. The run passes when both guests pass (scripts/vm-run.sh's verdict: the test's
# status and a clean kernel log).
#
# usage: vm-pair.sh [-k KERNEL_BUILD] [-m MODULES_DIR] [-t TIMEOUT_S] [-o RUN_DIR] TEST_SCRIPT [ARGS...]
#   RUN_DIR/target and RUN_DIR/host hold each guest's run (vm-run.sh -o), RUN_DIR/pair
#   the shared directory, RUN_DIR/wire.txt the relay's counts (frames passed, dropped,
#   cuts).
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

# Four free UDP ports on the loopback: each guest's QEMU, and the relay's side facing it.
read -r port_target port_host relay_target relay_host < <(python3 -c '
import socket
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

python3 "$REPO_ROOT/scripts/wire-relay.py" "$relay_target" "$relay_host" "$port_target" "$port_host" \
	"$run_dir/pair/wire-cut" "$run_dir/wire.txt" &
relay_pid=$!
trap 'kill $relay_pid 2>/dev/null || true' EXIT
log "$name: target and host guests on one wire (udp 127.0.0.1:$port_target <-> relay :$relay_target/:$relay_host <-> :$port_host), runs in $run_dir"
export RRS_VM_CPUS=1 RRS_VM_MEM=${RRS_VM_MEM:-3072} RRS_VM_PAIR_DIR=$run_dir/pair
RRS_VM_ROLE=target RRS_VM_WIRE=$port_target:$relay_target:52:54:00:77:88:01 \
	"$REPO_ROOT/scripts/vm-run.sh" "${kbuild_args[@]}" "${moddir_args[@]}" -t "$timeout_s" \
	-o "$run_dir/target" "$@" &
target_pid=$!
RRS_VM_ROLE=host RRS_VM_WIRE=$port_host:$relay_host:52:54:00:77:88:02 \
	"$REPO_ROOT/scripts/vm-run.sh" "${kbuild_args[@]}" "${moddir_args[@]}" -t "$timeout_s" \
	-o "$run_dir/host" "$@" &
host_pid=$!
rc=0
wait $target_pid || rc=1
wait $host_pid || rc=1
kill $relay_pid 2>/dev/null
wait $relay_pid 2>/dev/null || true
log "$name: the wire: $(tr '\n' ' ' <"$run_dir/wire.txt" 2>/dev/null)"
if [ $rc = 0 ]; then
	log "PASS $name (pair)"
else
	log "FAIL $name (pair): target $(cat "$run_dir/target/verdict" 2>/dev/null || echo none), host $(cat "$run_dir/host/verdict" 2>/dev/null || echo none)"
fi
exit $rc
