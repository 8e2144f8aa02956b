#!/bin/bash
# The demo pair survives its rxe device going away: deleting the link while a client is
# connected tears both ends down (DEVICE_REMOVAL), nothing leaks, the wildcard listener
# keeps listening, and the client reconnects on a new link; then everything is unloaded
# and reloaded and works again.
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
kmemleak_check
echo "demo-link-delete: ok"
