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
