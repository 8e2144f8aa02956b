#!/bin/bash
# How the transport registers: it refuses to load next to the C nvmet-rdma (one transport
# per type) with a clear message; without the C module around, linking an rdma port is
# all it takes, since the nvmet core loads "nvmet-transport-1", our alias.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

kmemleak_start
veth_setup
rdma_link_add rxe0 rxe veth0
modprobe null_blk nr_devices=1 memory_backed=1 gb=1

step "loading next to the C transport fails, naming the conflict"
modprobe nvmet
modprobe nvmet-rdma
if modprobe nvmet_rdma_rs 2>/dev/null; then fail "nvmet_rdma_rs loaded next to nvmet_rdma"; fi
assert_dmesg "nvmet_rdma_rs: another NVMe-oF RDMA transport is registered \(is nvmet_rdma loaded\?\)"
rmmod nvmet-rdma

step "module parameters: srq_size below 256 is refused at load and through sysfs"
if modprobe nvmet_rdma_rs srq_size=100 2>/dev/null; then fail "nvmet_rdma_rs loaded with srq_size=100"; fi
assert_dmesg "nvmet_rdma_rs: srq_size=100: must be a number of at least 256"
if modprobe nvmet_rdma_rs use_srq=maybe 2>/dev/null; then fail "nvmet_rdma_rs loaded with use_srq=maybe"; fi
modprobe nvmet_rdma_rs use_srq=y srq_size=300
[ "$(cat /sys/module/nvmet_rdma_rs/parameters/use_srq)" = Y ] || fail "use_srq does not read Y"
[ "$(cat /sys/module/nvmet_rdma_rs/parameters/srq_size)" = 300 ] || fail "srq_size does not read 300"
expect_write_error /sys/module/nvmet_rdma_rs/parameters/srq_size 255 "Invalid argument"
expect_write_error /sys/module/nvmet_rdma_rs/parameters/srq_size abc "Invalid argument"
echo 512 >/sys/module/nvmet_rdma_rs/parameters/srq_size
[ "$(cat /sys/module/nvmet_rdma_rs/parameters/srq_size)" = 512 ] || fail "srq_size does not read 512"

step "the binding layers' KUnit suites passed when the module loaded (kernels with KUnit)"
if [ -d /sys/kernel/debug/kunit ]; then
	for suite in rdma_rs_socket_addr rdma_rs_completion_dispatch rdma_rs_slot_handoff rdma_rs_recv_token rdma_rs_publish_once rdma_rs_percpu_gate rdma_rs_page_sgl rdma_rs_mr_state rdma_rs_dma_copy nvmet_rs_binding; do
		results=/sys/kernel/debug/kunit/$suite/results
		[ -r "$results" ] || fail "KUnit suite $suite did not run"
		cases=$(sed -n 's/^    1\.\.\([0-9]*\)$/\1/p' "$results")
		passed=$(grep -c '^    ok [0-9]* ' "$results")
		if grep -q 'not ok' "$results" || ! grep -qx "ok 1 $suite" "$results" ||
			[ "$passed" != "$cases" ]; then
			cat "$results"
			fail "KUnit suite $suite failed"
		fi
		echo "KUnit suite $suite: $passed of $cases cases passed"
	done
else
	echo "no KUnit in this kernel: the suites are not built"
fi
rmmod nvmet_rdma_rs

step "the alias: linking a port loads the transport"
modinfo -F alias nvmet_rdma_rs | grep -qx "nvmet-transport-1" || fail "no nvmet-transport-1 alias"
# This guest's module tree without the C transport, so the alias has one answer.
kver=$(uname -r)
find "/run/modroot/lib/modules/$kver" -name 'nvmet-rdma.ko*' -delete
depmod -b /run/modroot -a "$kver"
nvmet_subsystem "$NQN"
nvmet_namespace "$NQN" 1 /dev/nullb0
nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
[ ! -d /sys/module/nvmet_rdma_rs ] || fail "nvmet_rdma_rs loaded too early"
nvmet_link 1 "$NQN"
[ -d /sys/module/nvmet_rdma_rs ] || fail "linking the port did not load nvmet_rdma_rs"
assert_dmesg "nvmet_rdma_rs: enabling port 1 \($RRS_IP4_A:4420\)"
modprobe nvme-rdma
dev=$(host_connect "$RRS_IP4_A" 4420)
fio_verify "$dev" alias --rw=randwrite --bs=4k --iodepth=4 --size=1M
host_disconnect

step "unload"
nvmet_clear
modprobe -r nvme-rdma
rmmod nvmet_rdma_rs
rdma_link_delete rxe0
kmemleak_check
echo "nvmet-registration: ok"
