#!/bin/bash
# The `make demo` guest script: what the modules do today, shown step by step.
# (As the demo pair and the target land, this grows into: server + client ping,
# then an nvmet target on rxe with nvme connect and fio.)
. "$RRS_REPO/scripts/guest/lib.sh"

show() { echo "# $*"; "$@"; }

veth_setup
step "soft-RoCE and soft-iWARP devices on a veth pair inside the guest"
rdma_link_add rxe0 rxe veth0
rdma_link_add siw0 siw veth1
show rdma link show

step "loading the three Rust modules"
modprobe nvmet
for m in rdma_server rdma_client nvmet_rdma_rs; do show modprobe "$m"; done
show lsmod
dmesg | grep -E 'rdma_server|rdma_client|nvmet_rdma_rs'

step "removing the rxe device: every module's ib_client is told"
show rdma link delete rxe0
sleep 1
dmesg | grep -E 'rxe0 removed'

step "unloading"
for m in rdma_server rdma_client nvmet_rdma_rs; do show rmmod "$m"; done
dmesg | grep -E ': unloading|removed'
echo "demo: done"
