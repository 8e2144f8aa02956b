# Helpers for guest test scripts (tests/vm/*.sh). Sourced, not run.
# A test fails by exiting non-zero; the VM runner also fails it on any kernel splat.
# shellcheck shell=bash
set -euo pipefail

# Addresses of the guest's private network (never leave the guest).
RRS_IP4_A=10.77.0.1
RRS_IP4_B=10.77.0.2
RRS_IP6_A=fd77::1
RRS_IP6_B=fd77::2
RRS_IP4_BOND=10.79.0.1

step() { echo "--- $*"; echo "rrs: step: $*" >/dev/kmsg; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# body_start NAME: a test body (one of several a boot may run: tests/vm/nvmet-io.sh runs
# one over rxe, then one over siw) starts here. Its log assertions see its own lines only:
# body_dmesg prints the kernel log from this mark on, so a line the body expects cannot
# come from an earlier body. (The kernel's log buffer is large enough for a whole boot:
# vm-run.sh sets log_buf_len.)
RRS_BODY_MARK=
RRS_BODIES=0
body_start() {
	RRS_BODIES=$((RRS_BODIES + 1))
	RRS_BODY_MARK="rrs: body $RRS_BODIES: $*"
	echo "$RRS_BODY_MARK" >/dev/kmsg
	# (not found: the mark has been overwritten, which the buffer's size rules out)
	dmesg | grep -F -- "$RRS_BODY_MARK" >/dev/null || fail "the kernel log lost the body mark"
}

# body_dmesg: the kernel log of the running body (the whole log if none was started).
body_dmesg() {
	dmesg | awk -v m="$RRS_BODY_MARK" 'm == "" || index($0, m) { on = 1 } on'
}

# assert_dmesg REGEX [MESSAGE]: the body's kernel log has a line matching REGEX.
assert_dmesg() {
	# (grep reads it all: with -q, an early exit would fail the pipe under pipefail)
	body_dmesg | grep -E -- "$1" >/dev/null || { body_dmesg | tail -n 30; fail "${2:-kernel log has no line matching: $1}"; }
}

# assert_no_dmesg REGEX [MESSAGE]: the body's kernel log has no line matching REGEX.
assert_no_dmesg() {
	if body_dmesg | grep -E -- "$1"; then fail "${2:-kernel log unexpectedly matches: $1}"; fi
}

# wait_until SECONDS CMD...: polls CMD every 0.2 s until it succeeds.
wait_until() {
	local limit=$1; shift
	local deadline=$((SECONDS + limit))
	until "$@"; do
		((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for: $*"
		sleep 0.2
	done
}

# veth_setup: a veth pair veth0 <-> veth1 with IPv4 and IPv6 addresses, both up (once).
veth_setup() {
	# (a test running several bodies in one boot sets it up once)
	ip link show veth0 >/dev/null 2>&1 && return 0
	ip link add veth0 type veth peer name veth1
	ip addr add "$RRS_IP4_A/24" dev veth0
	ip addr add "$RRS_IP4_B/24" dev veth1
	ip -6 addr add "$RRS_IP6_A/64" dev veth0 nodad
	ip -6 addr add "$RRS_IP6_B/64" dev veth1 nodad
	ip link set veth0 up
	ip link set veth1 up
}

# bond_setup: bond0, an active-backup bond of two veths (bond0a, bond0b; their peers are
# up, unused) holding $RRS_IP4_BOND. With fail_over_mac=active the bond takes its active
# slave's MAC: a failover (bond_failover) changes its address, which RDMA CM reports to
# the ids bound to it as ADDR_CHANGE.
bond_setup() {
	modprobe bonding max_bonds=0
	ip link add bond0 type bond mode active-backup fail_over_mac active
	local s
	for s in bond0a bond0b; do
		ip link add "$s" type veth peer name "$s-peer"
		ip link set "$s-peer" up
		ip link set "$s" master bond0
	done
	ip link set bond0 up
	ip addr add "$RRS_IP4_BOND/24" dev bond0
	wait_until 10 sh -c "grep -q 'Currently Active Slave: bond0a' /proc/net/bonding/bond0"
}

# bond_failover SLAVE: makes SLAVE bond0's active slave (and its MAC bond0's).
bond_failover() {
	ip link set bond0 type bond active_slave "$1"
	wait_until 10 sh -c "grep -q 'Currently Active Slave: $1' /proc/net/bonding/bond0"
}

# bond_delete: removes bond0 and its veths.
bond_delete() {
	ip link del bond0
	ip link del bond0a
	ip link del bond0b
}

# rdma_link_add NAME TYPE NETDEV: adds an rxe or siw device and waits for it.
rdma_link_add() {
	modprobe "$( [ "$2" = rxe ] && echo rdma_rxe || echo siw )"
	rdma link add "$1" type "$2" netdev "$3"
	wait_until 10 test -e "/sys/class/infiniband/$1"
}

rdma_link_delete() {
	rdma link delete "$1"
	wait_until 10 test ! -e "/sys/class/infiniband/$1"
}

# module_refcount NAME: the module's use count (fails if it is not loaded).
module_refcount() { cat "/sys/module/$1/refcnt"; }

# kmemleak_start: forget what was allocated so far, so that a later
# kmemleak_check reports only what the test leaked.
kmemleak_start() {
	echo scan >/sys/kernel/debug/kmemleak
	echo clear >/sys/kernel/debug/kmemleak
}

# kmemleak_check: scans twice (new objects need a grace period) and fails on any
# suspected leak; the report goes to the console, where the log scanner sees it too.
kmemleak_check() {
	sleep 5
	echo scan >/sys/kernel/debug/kmemleak
	sleep 1
	echo scan >/sys/kernel/debug/kmemleak
	local report
	report=$(cat /sys/kernel/debug/kmemleak)
	if [ -n "$report" ]; then
		echo "$report"
		fail "kmemleak reports leaks"
	fi
}

# expect_write_error FILE VALUE ERRNO-TEXT: writing VALUE to FILE must fail with that error.
expect_write_error() {
	local out
	if out=$( (echo "$2" >"$1") 2>&1); then fail "writing '$2' to $1 succeeded, expected: $3"; fi
	grep -q -- "$3" <<<"$out" || fail "writing '$2' to $1 failed with '$out', expected: $3"
}
