# krping's loop through the demo pair over one RDMA provider, as a guest test body.
# usage (from a tests/vm script): demo_ping_test rxe|siw
# shellcheck shell=bash

demo_ping_test() {
	local provider=$1 ip=$RRS_IP4_A
	local ping=/sys/kernel/debug/rdma_demo/ping
	kmemleak_start
	veth_setup
	rdma_link_add "${provider}0" "$provider" veth0
	modprobe rdma_server addr="$ip"
	modprobe rdma_client server="$ip" unsafe_global_rkey=1
	assert_dmesg "rdma_client: connected to $ip:7174"

	step "ping with validate: sizes around page boundaries, both memory modes, server invalidation"
	for size in 1 4095 4096 4097 65536 1048576; do
		for mode in mem_mode=dma mem_mode=reg mem_mode=reg,server_inv; do
			echo "count=2,size=$size,validate,$mode" >"$ping" || fail "ping size=$size $mode failed"
		done
	done
	assert_dmesg "rdma_client: ping: 2 iterations of 1048576 bytes \(Reg, validated, server_inv\) done"
	grep -q "read_msgs 36 " /sys/kernel/debug/rdma_demo/stats || fail "stats: $(cat /sys/kernel/debug/rdma_demo/stats)"

	step "validation compares: a byte the server damages is caught"
	echo 1 >/sys/kernel/debug/rdma_server/corrupt_next
	expect_write_error "$ping" "count=1,size=4096,validate" "Input/output error"
	assert_dmesg "rdma_client: ping: validation failed in iteration 0 at offset 0"
	echo "count=3,size=4096,validate" >"$ping" || fail "ping after the damaged one failed"

	step "bad option strings are refused, naming the option"
	expect_write_error "$ping" "size=0" "Invalid argument"
	assert_dmesg "ping: size=0 is not a number from 1 to 4194304"
	expect_write_error "$ping" "size=4194305" "Invalid argument"
	expect_write_error "$ping" "count=abc" "Invalid argument"
	expect_write_error "$ping" "mem_mode=foo" "Invalid argument"
	assert_dmesg "ping: bad option 'mem_mode=foo'"
	expect_write_error "$ping" "validate,bogus" "Invalid argument"
	expect_write_error "$ping" "mem_mode=dma,server_inv" "Invalid argument"
	echo "count=1,size=100,validate" >"$ping" || fail "ping after bad options failed"

	step "unload"
	rmmod rdma_client
	rmmod rdma_server
	rdma_link_delete "${provider}0"
	kmemleak_check
	echo "demo-ping over $provider: ok"
}
