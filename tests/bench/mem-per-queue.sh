#!/bin/bash
# Memory per controller, nvmet_rdma_rs against the C nvmet-rdma, on rxe: /proc/meminfo
# before and after four hosts connect (one admin and one 128-deep I/O queue each), after a
# warm-up connect; prints "RESULT <transport>: ..." lines. Host-side costs are the same for
# both. Not part of make check; run it with
#   scripts/vm-run.sh -o DIR tests/bench/mem-per-queue.sh
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
kb() { awk -v k="$1" '$1 == k":" {print $2}' /proc/meminfo; }
snap() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 2; echo "$(kb SUnreclaim) $(kb VmallocUsed) $(kb MemFree)"; }
veth_setup
rdma_link_add rxe0 rxe veth0
modprobe null_blk nr_devices=1 memory_backed=1 gb=1
for t in nvmet_rdma_rs nvmet-rdma; do
	nvmet_load "$t"
	nvmet_subsystem "$NQN"
	nvmet_namespace "$NQN" 1 /dev/nullb0
	nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
	nvmet_link 1 "$NQN"
	# warm-up connect (pool CQs, caches), then measure 4 controllers
	dev=$(host_connect "$RRS_IP4_A" 4420 --nr-io-queues=1); host_disconnect; sleep 2
	set -- $(snap); s0=$1 v0=$2 f0=$3
	for i in 1 2 3 4; do
		fabrics_connect "$RRS_IP4_A" 4420 ",nr_io_queues=1,hostnqn=$(test_host_nqn $i),hostid=$(test_host_id $i)" || fail "connect $i"
	done
	sleep 3
	set -- $(snap); s1=$1 v1=$2 f1=$3
	echo "RESULT $t: 4 controllers (1 admin + 1 I/O queue each): SUnreclaim +$((s1 - s0)) kB, VmallocUsed +$((v1 - v0)) kB, MemFree -$((f0 - f1)) kB"
	[ "$t" = nvmet_rdma_rs ] && cat /sys/kernel/debug/nvmet_rdma_rs/queues
	rdma res show cq | head -20
	for c in /sys/class/nvme/nvme*; do echo 1 >"$c/delete_controller"; done
	sleep 3
	nvmet_clear
	rmmod "${t//-/_}"
done
