# Two guests on one wire (scripts/vm-pair.sh): a target and a host, each its own kernel,
# as in a deployment. Sourced by tests/pair/*.sh after scripts/guest/lib.sh.
# shellcheck shell=bash

# The wire's addresses, by role.
PAIR_IP_TARGET=10.88.0.1
PAIR_IP_HOST=10.88.0.2
PAIR_DIR=/run/pair

[ -n "${RRS_ROLE:-}" ] && [ -d "$PAIR_DIR" ] || fail "not a guest of vm-pair.sh (no role or no /run/pair)"

# pair_peer: the other guest's role.
pair_peer() { [ "$RRS_ROLE" = target ] && echo host || echo target; }

# pair_net_setup: the wire's NIC (the virtio-net device, by the MAC vm-pair.sh gave it)
# up as `wire` with this guest's address; prints nothing.
pair_net_setup() {
	local nic
	nic=$(ip -o link | awk -F': ' '/52:54:00:77:88:0/ { print $2; exit }')
	[ -n "$nic" ] || fail "no NIC on the wire"
	ip link set "$nic" name wire
	local ip=$PAIR_IP_HOST
	[ "$RRS_ROLE" = target ] && ip=$PAIR_IP_TARGET
	ip addr add "$ip/24" dev wire
	# (the NIC says 9000 so that it receives into buffers rxe can free with IRQs off:
	# scripts/vm-run.sh; the wire carries ordinary Ethernet frames)
	ip link set wire mtu 1500
	ip link set wire up
}

# pair_signal NAME: leaves the sign NAME for the peer.
pair_signal() {
	echo "$RRS_ROLE" >"$PAIR_DIR/$1.tmp"
	mv "$PAIR_DIR/$1.tmp" "$PAIR_DIR/$1"
	echo "rrs: pair: signalled $1" >/dev/kmsg
}

# pair_wait SECONDS NAME: waits for the peer's sign NAME; fails at once if the peer's test
# ended without it (the peer's status is in its own log).
pair_wait() {
	local limit=$1 name=$2 peer
	peer=$(pair_peer)
	local deadline=$((SECONDS + limit))
	until [ -e "$PAIR_DIR/$name" ]; do
		[ ! -e "$PAIR_DIR/$peer.ended" ] || fail "the $peer's test ended (status $(cat "$PAIR_DIR/$peer.ended")) before it signalled $name"
		((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for the $peer to signal $name"
		sleep 0.5
	done
	echo "rrs: pair: $peer signalled $name" >/dev/kmsg
}

# pair_wire_cut: cuts the wire (the relay between the guests drops every frame, both ways,
# from within 50 ms), the guests' links staying up: a network partition.
pair_wire_cut() {
	touch "$PAIR_DIR/wire-cut"
	sleep 0.1
	echo "rrs: pair: wire cut" >/dev/kmsg
}

# pair_wire_cut_for MS: cuts the wire for MS milliseconds, timed by the relay (a slow
# guest does not stretch it); returns once the cut is over.
pair_wire_cut_for() {
	echo "$1" >"$PAIR_DIR/wire-cut.tmp"
	mv "$PAIR_DIR/wire-cut.tmp" "$PAIR_DIR/wire-cut-ms"
	# (the relay takes the file away when it starts the cut)
	wait_until 10 test ! -e "$PAIR_DIR/wire-cut-ms"
	echo "rrs: pair: wire cut for $1 ms" >/dev/kmsg
	sleep "$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))"
}

# pair_wire_mend: joins the wire again.
pair_wire_mend() {
	rm -f "$PAIR_DIR/wire-cut"
	sleep 0.1
	echo "rrs: pair: wire mended" >/dev/kmsg
}

# pair_nvmet_target TRANSPORT_MODULE PROVIDER: the target guest's side: the transport
# loaded, a memory-backed null_blk namespace of $NQN on $PAIR_IP_TARGET:4420 (port 1).
pair_nvmet_target() {
	nvmet_load "$1"
	modprobe null_blk nr_devices=1 memory_backed=1 gb=1
	step "target: a null_blk namespace on $PAIR_IP_TARGET:4420 over $2 ($1)"
	nvmet_subsystem "$NQN"
	nvmet_namespace "$NQN" 1 /dev/nullb0
	nvmet_port 1 ipv4 "$PAIR_IP_TARGET" 4420
	nvmet_link 1 "$NQN"
}

# controllers_made: how many controllers the target's nvmet core made so far.
controllers_made() { dmesg | grep -c "nvmet: Created nvm controller" || true; }

# controllers_made_above N: the core made more than N controllers so far.
controllers_made_above() { [ "$(controllers_made)" -gt "$1" ]; }

# pair_target_finish TRANSPORT_MODULE: once the host is done (its sign host-done): no
# queue left, the configuration cleared, the transport unloaded, kmemleak clean; then
# the sign target-done.
pair_target_finish() {
	pair_wait 1800 host-done
	step "target: no queue left, unload, no leak"
	nvmet_assert_idle "$1"
	if [ "$1" = nvmet_rdma_rs ]; then
		assert_no_dmesg "released after 0 commands" "a queue was released without its host's Connect"
	fi
	nvmet_clear
	rmmod "$1"
	kmemleak_check
	pair_signal target-done
}

# pair_host_finish: the host is done (the sign host-done), and stays up until the target
# has seen its last disconnect through and checked itself (target-done).
pair_host_finish() {
	pair_signal host-done
	pair_wait 600 target-done
	modprobe -r nvme-rdma
}
