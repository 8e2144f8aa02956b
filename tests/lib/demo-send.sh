# The demo pair's send round trip over one RDMA provider, as a guest test body.
# usage (from a tests/vm script): demo_send_test rxe|siw
# shellcheck shell=bash

demo_send_test() {
	local provider=$1 ip=$RRS_IP4_A netdev=veth0
	local demo=/sys/kernel/debug/rdma_demo server_dir=/sys/kernel/debug/rdma_server
	body_start "demo_send_test $*"
	kmemleak_start
	veth_setup
	rdma_link_add "${provider}0" "$provider" "$netdev"

	step "bad module parameters are refused with a clear message"
	if modprobe rdma_server addr=10.77.0.999 2>/dev/null; then fail "rdma_server took addr=10.77.0.999"; fi
	assert_dmesg "rdma_server: addr: not an IPv4 or IPv6 address"

	step "server listens, client connects at load"
	modprobe rdma_server addr="$ip"
	assert_dmesg "rdma_server: listening on $ip:7174"
	modprobe rdma_client server="$ip"
	assert_dmesg "rdma_client: session 0: connected to $ip:7174"
	wait_until 10 grep -q established "$server_dir/connections"
	grep -q " ${provider}0 established" "$server_dir/connections" || fail "connections: $(cat "$server_dir/connections")"

	step "send: the text comes back through SEND, RDMA READ and RDMA WRITE"
	echo hello >"$demo/send"
	[ "$(cat "$demo/reply")" = hello ] || fail "reply is '$(cat "$demo/reply")', expected hello"
	[ "$(cat "$server_dir/last_msg")" = hello ] || fail "last_msg is '$(cat "$server_dir/last_msg")'"
	local long
	long=$(head -c 600 /dev/zero | tr '\0' 'x')-end
	echo "$long" >"$demo/send"
	[ "$(cat "$demo/reply")" = "$long" ] || fail "the 604-byte text did not come back intact"
	for i in 1 2 3 4 5 6; do echo "message $i" >"$demo/send"; done
	[ "$(cat "$demo/reply")" = "message 6" ] || fail "reply after six sends: '$(cat "$demo/reply")'"
	grep -q "read 8/" "$server_dir/connections" || fail "server counted no 8 reads: $(cat "$server_dir/connections")"
	grep -q "send_msgs 8 .*read_msgs 8 read_bytes 663 write_msgs 8 write_bytes 663" "$demo/stats" || fail "stats: $(cat "$demo/stats")"

	step "bad input is refused, and the connection still works"
	expect_write_error "$demo/send" "" "Invalid argument"
	expect_write_error "$demo/send" "$(head -c 1100 /dev/zero | tr '\0' 'y')" "Invalid argument"
	expect_write_error "$demo/ctl" "bogus" "Invalid argument"
	expect_write_error "$demo/ctl" "connect" "already connected"
	assert_dmesg "rdma_client: ctl: unknown command"
	echo again >"$demo/send"
	[ "$(cat "$demo/reply")" = again ] || fail "no reply after bad input"

	step "unloading the server disconnects the client; it reconnects through ctl"
	rmmod rdma_server
	assert_dmesg "rdma_server: connection [0-9]+ released"
	expect_write_error "$demo/send" "lost" "not connected"
	modprobe rdma_server addr="$ip"
	echo connect >"$demo/ctl"
	echo back >"$demo/send"
	[ "$(cat "$demo/reply")" = back ] || fail "no reply after reconnecting"

	step "unload everything"
	rmmod rdma_client
	rmmod rdma_server
	rdma_link_delete "${provider}0"
	kmemleak_check
	echo "demo-send over $provider: ok"
}
