#!/bin/bash
# The `make demo` guest script: what the modules do today, shown step by step.
# (When the target transport lands, this grows into an nvmet target on rxe with
# nvme connect and fio.)
. "$RRS_REPO/scripts/guest/lib.sh"

show() { echo "# $*"; "$@"; }

veth_setup
step "a soft-RoCE device on a veth pair inside the guest"
rdma_link_add rxe0 rxe veth0
show rdma link show

step "the demo pair: server listens, client connects"
show modprobe rdma_server addr="$RRS_IP4_A"
show modprobe rdma_client server="$RRS_IP4_A"
dmesg | grep -E 'rdma_(server|client):'

step "a round trip: SEND, then the server's RDMA READ and RDMA WRITE"
echo "# echo 'hello from the client' > /sys/kernel/debug/rdma_demo/send"
echo 'hello from the client' >/sys/kernel/debug/rdma_demo/send
show cat /sys/kernel/debug/rdma_demo/reply
show cat /sys/kernel/debug/rdma_server/last_msg
show cat /sys/kernel/debug/rdma_server/connections
show cat /sys/kernel/debug/rdma_demo/stats

step "the target transport skeleton sees the device too"
modprobe nvmet
show modprobe nvmet_rdma_rs
dmesg | grep 'nvmet_rdma_rs:'

step "unloading"
for m in rdma_client rdma_server nvmet_rdma_rs; do show rmmod "$m"; done
dmesg | grep -E 'released|unloading'
echo "demo: done"
