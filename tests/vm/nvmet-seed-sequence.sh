#!/bin/bash
# The target set-up of the project's origin notes (../shared/seeds), typed as the admin
# typed it, with two substitutions: our transport module in place of nvmet-rdma, and a
# null_blk device in place of the SSD /dev/nvme0n1. Then the host side of the same notes.
. "$RRS_REPO/scripts/guest/lib.sh"

kmemleak_start
veth_setup
rdma_link_add rxe_eth0 rxe veth0
modprobe null_blk nr_devices=1 memory_backed=1 gb=1

step "the admin's commands"
modprobe nvmet
modprobe nvmet_rdma_rs
modprobe nvme-rdma
mkdir /sys/kernel/config/nvmet/subsystems/nvme-subsystem-name
cd /sys/kernel/config/nvmet/subsystems/nvme-subsystem-name || fail "no subsystem directory"
echo 1 > attr_allow_any_host
mkdir namespaces/10
cd namespaces/10 || fail "no namespace directory"
echo -n /dev/nullb0> device_path
echo 1 > enable
mkdir /sys/kernel/config/nvmet/ports/1
cd /sys/kernel/config/nvmet/ports/1 || fail "no port directory"
echo "$RRS_IP4_A" > addr_traddr
echo rdma > addr_trtype
echo 4420 > addr_trsvcid
echo ipv4 > addr_adrfam
ln -s /sys/kernel/config/nvmet/subsystems/nvme-subsystem-name /sys/kernel/config/nvmet/ports/1/subsystems/nvme-subsystem-name
cd /

step "dmesg shows the port enabled"
dmesg -T | grep "enabling port" | tee /tmp/enabling.out
grep -q "nvmet_rdma_rs: enabling port 1 ($RRS_IP4_A:4420)" /tmp/enabling.out || fail "no 'enabling port' line"

step "the host's commands"
nvme discover -t rdma -q nvme-subsystem-name -a "$RRS_IP4_A" -s 4420 | tee /tmp/discover.out
grep -q "subnqn: *nvme-subsystem-name" /tmp/discover.out || fail "discovery does not list the subsystem"
nvme connect -t rdma -q nvme-subsystem-name -n nvme-subsystem-name -a "$RRS_IP4_A" -s 4420 || fail "nvme connect failed"
wait_until 20 sh -c "ls /sys/block | grep -q '^nvme[0-9]*n10$\|^nvme[0-9]*n1$'"
dev=/dev/$(ls /sys/block | grep -m1 '^nvme[0-9]*n')
wait_until 10 test -b "$dev"
echo seed | dd of="$dev" bs=4k count=1 conv=sync oflag=direct 2>/dev/null || fail "write to $dev failed"
[ "$(dd if="$dev" bs=4k count=1 iflag=direct 2>/dev/null | head -c 4)" = seed ] || fail "read back from $dev failed"
nvme disconnect -n nvme-subsystem-name || fail "nvme disconnect failed"

step "clean up"
rm /sys/kernel/config/nvmet/ports/1/subsystems/nvme-subsystem-name
rmdir /sys/kernel/config/nvmet/ports/1
rmdir /sys/kernel/config/nvmet/subsystems/nvme-subsystem-name/namespaces/10
rmdir /sys/kernel/config/nvmet/subsystems/nvme-subsystem-name
modprobe -r nvme-rdma
rmmod nvmet_rdma_rs
rdma_link_delete rxe_eth0
kmemleak_check
echo "nvmet-seed-sequence: ok"
