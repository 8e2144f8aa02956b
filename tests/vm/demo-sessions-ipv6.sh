#!/bin/bash
# Several clients at once, over IPv6: rdma_client with sessions=4 connects four times to a
# server listening on the IPv6 wildcard; all four ping (validated) and send concurrently;
# the server lists four connections; unloading the server drops all four, reloading and
# `connect` brings them back; bad `sessions` values are refused.
. "$RRS_REPO/scripts/guest/lib.sh"

demo=/sys/kernel/debug/rdma_demo
server_dir=/sys/kernel/debug/rdma_server
ip=$RRS_IP6_A
kmemleak_start
veth_setup
rdma_link_add rxe0 rxe veth0

step "bad sessions values are refused"
for bad in 0 17; do
	if modprobe rdma_client sessions=$bad 2>/dev/null; then fail "rdma_client took sessions=$bad"; fi
	assert_dmesg "rdma_client: sessions=$bad is not from 1 to 16"
done

step "four sessions connect to the server on the IPv6 wildcard"
modprobe rdma_server addr=::
assert_dmesg "rdma_server: listening on \[::\]:7174"
modprobe rdma_client server="$ip" sessions=4
for n in 0 1 2 3; do assert_dmesg "rdma_client: session $n: connected to \[$ip\]:7174"; done
wait_until 10 sh -c "[ \$(grep -c established $server_dir/connections) = 4 ]"
grep -q "\[$ip\]" "$server_dir/connections" || fail "no IPv6 peers in: $(cat "$server_dir/connections")"

dirs="$demo $demo/session1 $demo/session2 $demo/session3"
step "all four ping and send at once"
pids=()
for d in $dirs; do
	(echo "count=20,size=65536,validate,server_inv" >"$d/ping" && echo "from $d" >"$d/send") &
	pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || fail "a concurrent session failed"; done
for d in $dirs; do
	[ "$(cat "$d/reply")" = "from $d" ] || fail "$d/reply is '$(cat "$d/reply")'"
	grep -q "connected 1 send_msgs 21 .* read_msgs 21 " "$d/stats" || fail "$d/stats: $(cat "$d/stats")"
done
cat "$server_dir/connections"
[ "$(grep -c ' read 21/' "$server_dir/connections")" = 4 ] || fail "server counters: $(cat "$server_dir/connections")"

step "unloading the server drops all four; reload and reconnect"
rmmod rdma_server
for d in $dirs; do wait_until 10 grep -q "connected 0" "$d/stats"; done
modprobe rdma_server addr="$ip"
for d in $dirs; do echo connect >"$d/ctl"; done
wait_until 10 sh -c "[ \$(grep -c established $server_dir/connections) = 4 ]"
for d in $dirs; do
	echo "again $d" >"$d/send"
	[ "$(cat "$d/reply")" = "again $d" ] || fail "$d: no reply after reconnecting"
done

step "unload"
rmmod rdma_client
wait_until 10 sh -c "! grep -q . $server_dir/connections"
rmmod rdma_server
rdma_link_delete rxe0
kmemleak_check
echo "demo-sessions-ipv6: ok"
