#!/bin/bash
# The demo pair survives its rxe device going away: deleting the link while a client is
# connected tears both ends down (DEVICE_REMOVAL), nothing leaks, the wildcard listener
# keeps listening, and the client reconnects on a new link; then everything is unloaded
# and reloaded and works again. Then the same with the server listening on the device's
# own address (`addr=`), whose listener id is bound to the device: it must let the
# device go too (it used to keep `rdma link delete` blocked for ever in cma_remove_one).
. "$RRS_REPO/scripts/guest/lib.sh"

demo=/sys/kernel/debug/rdma_demo
kmemleak_start
veth_setup
rdma_link_add rxe0 rxe veth0
modprobe rdma_server
modprobe rdma_client server="$RRS_IP4_A"
echo before >"$demo/send"
[ "$(cat "$demo/reply")" = before ] || fail "no reply before the link deletion"

step "delete the rxe link while connected"
rdma_link_delete rxe0
wait_until 20 grep -q "connected 0" "$demo/stats"
wait_until 20 sh -c "! grep -q . /sys/kernel/debug/rdma_server/connections"
assert_dmesg "rdma_server: connection 1 released"
expect_write_error "$demo/send" "lost" "not connected"

step "a new link: reconnect and send again"
rdma_link_add rxe1 rxe veth0
echo connect >"$demo/ctl"
echo after >"$demo/send"
[ "$(cat "$demo/reply")" = after ] || fail "no reply on the new link"
grep -q " rxe1 established" /sys/kernel/debug/rdma_server/connections || fail "connections: $(cat /sys/kernel/debug/rdma_server/connections)"

step "unload and reload everything"
rmmod rdma_client
rmmod rdma_server
modprobe rdma_server
modprobe rdma_client server="$RRS_IP4_A"
echo reloaded >"$demo/send"
[ "$(cat "$demo/reply")" = reloaded ] || fail "no reply after reloading"
rmmod rdma_client
rmmod rdma_server
rdma_link_delete rxe1

step "a server bound to the device's address: the link deletion does not wait for it"
ip=$RRS_IP4_A
body_start "a server bound to the device's address" # (its assertions see its own lines)
rdma_link_add rxe2 rxe veth0
modprobe rdma_server addr="$ip"
modprobe rdma_client server="$ip" unsafe_global_rkey=1
echo bound >"$demo/send"
[ "$(cat "$demo/reply")" = bound ] || fail "no reply from the bound server"
echo "count=2,size=4096,validate,mem_mode=dma" >"$demo/ping" || fail "ping failed"
rdma link delete rxe2 &
pid=$!
deleted=0
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || { deleted=1; break; }; sleep 0.2; done
if [ $deleted = 0 ]; then
	cat "/proc/$pid/stack" 2>/dev/null
	# Unloading the server destroys its listener and lets the removal finish.
	rmmod rdma_client rdma_server
	wait "$pid"
	fail "rdma link delete blocked for 20 s (an RDMA CM id kept rxe2)"
fi
wait "$pid" || fail "rdma link delete failed"
wait_until 10 test ! -e /sys/class/infiniband/rxe2
assert_dmesg "rdma_server: listener's device is going away"
assert_dmesg "rdma_server: connection [0-9]+ released"
grep -q "connected 0" "$demo/stats" || fail "stats: $(cat "$demo/stats")"

step "unload, and listen again on a new link"
rmmod rdma_client
rmmod rdma_server
rdma_link_add rxe3 rxe veth0
modprobe rdma_server addr="$ip"
modprobe rdma_client server="$ip"
echo after >"$demo/send"
[ "$(cat "$demo/reply")" = after ] || fail "no reply on the new link"
rmmod rdma_client
rmmod rdma_server
rdma_link_delete rxe3
kmemleak_check
echo "demo-link-delete: ok"
