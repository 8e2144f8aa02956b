#!/bin/bash
# Smoke test: the three modules load, see rxe and siw devices come and go through
# their ib_clients, and unload cleanly, with no kernel splat and no leak.
. "$RRS_REPO/scripts/guest/lib.sh"

MODULES=(rdma_server rdma_client nvmet_rdma_rs)

kmemleak_start
veth_setup

step "an rxe device present before the modules load is reported at registration"
rdma_link_add rxe0 rxe veth0

step "load the modules"
modprobe nvmet   # nvmet_rdma_rs builds on the nvmet core
for m in "${MODULES[@]}"; do
	modprobe "$m"
	assert_dmesg "$m: (loaded|listening on 0.0.0.0:7174|registered as the NVMe-oF RDMA transport)" "$m did not log its load"
	assert_dmesg "$m: device rxe0 \(1 port, RoCE\) added" "$m did not see rxe0"
done


step "a siw device added while loaded is seen by all"
rdma_link_add siw0 siw veth1
for m in "${MODULES[@]}"; do
	wait_until 10 assert_dmesg "$m: device siw0 \(1 port, iWARP\) added"
done

step "deleting the links removes the devices from every client"
rdma_link_delete rxe0
rdma_link_delete siw0
for m in "${MODULES[@]}"; do
	assert_dmesg "$m: device rxe0 removed"
	assert_dmesg "$m: device siw0 removed"
	[ "$(module_refcount "$m")" = 0 ] || fail "$m refcount is $(module_refcount "$m") with no users"
done

step "a device re-added is seen again, and unloading removes it from the clients"
rdma_link_add rxe1 rxe veth0
for m in "${MODULES[@]}"; do
	assert_dmesg "$m: device rxe1 \(1 port, RoCE\) added"
done
for m in "${MODULES[@]}"; do
	rmmod "$m"
	assert_dmesg "$m: device rxe1 removed"
	assert_dmesg "$m: unloading"
	[ ! -d "/sys/module/$m" ] || fail "$m still loaded after rmmod"
done
rdma_link_delete rxe1
modprobe -r rdma_rxe siw nvmet

kmemleak_check
echo "smoke: ok"
