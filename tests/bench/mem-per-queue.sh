#!/bin/bash
# Memory per queue, nvmet_rdma_rs beside the C nvmet-rdma, on rxe (make bench runs it on
# the benchmark kernel; its smoke, one configuration, in make check): for each transport,
# with its own receive queues and with an SRQ (use_srq), at the host's default queue
# depth (128) and the largest the RDMA transports allow (256), /proc/meminfo and the CQ
# entries of every CQ (`rdma res show cq`) before and after four hosts connect (one admin
# and one I/O queue each), after a warm-up connect. Host-side costs are the same for both
# transports. The whole is repeated ROUNDS times (default 3), the transports alternating
# within a round, so that the report has an interval. Writes /run/results/raw/mem.txt, one
# line per configuration and round:
#   mem TRANSPORT SRQ DEPTH CONTROLLERS slab_kb=N vmalloc_kb=N memfree_kb=N used_kb=N cqes=N round=R
# (used_kb: the drop in free memory, MemFree and the per-CPU lists' free pages; memfree_kb:
# MemFree's drop alone)
#
# usage (guest): mem-per-queue.sh [smoke | ROUNDS] (smoke: one configuration, one round)
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
kb() { awk -v k="$1" '$1 == k":" {print $2}' /proc/meminfo; }
cqes() { rdma res show cq | awk '{ for (i = 1; i < NF; i++) if ($i == "cqe") n += $(i + 1) } END { print n + 0 }'; }
# Free pages the page allocator keeps in per-CPU lists are not in MemFree: a queue's
# teardown frees its pages there and the next connect takes them back without MemFree
# moving, so MemFree alone moved several MB between identical runs (an SRQ's thousands of
# pages). Free memory here is MemFree plus those lists' pages (/proc/zoneinfo's `count`).
pcp_kb() { awk '$1 == "count:" { n += $2 } END { print n * '"$(($(getconf PAGESIZE) / 1024))"' }' /proc/zoneinfo; }
snap() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sleep 2
	# (the CQ count first: running rdma between the two free-memory reads would move pages
	# between the free pool and the per-CPU lists in that gap)
	local q
	q=$(cqes)
	echo "$(kb SUnreclaim) $(kb VmallocUsed) $(kb MemFree) $q $(pcp_kb)"
}
raw=/run/results/raw
mkdir -p "$raw"
out=$raw/mem.txt
: >"$out"
veth_setup
rdma_link_add rxe0 rxe veth0
modprobe null_blk nr_devices=1 memory_backed=1 gb=1
configs=("0 128" "1 128" "0 256" "1 256")
rounds=${1:-3}
if [ "$rounds" = smoke ]; then
	configs=("0 128")
	rounds=1
fi
controllers=4
for ((round = 1; round <= rounds; round++)); do
for config in "${configs[@]}"; do
	read -r srq depth <<<"$config"
	order=(nvmet-rdma nvmet_rdma_rs)
	((round % 2)) || order=(nvmet_rdma_rs nvmet-rdma)
	for t in "${order[@]}"; do
		step "round $round: $t, use_srq=$srq, queue depth $depth"
		NVMET_MODULE_ARGS="use_srq=$srq" nvmet_load "$t"
		nvmet_subsystem "$NQN"
		nvmet_namespace "$NQN" 1 /dev/nullb0
		nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
		nvmet_link 1 "$NQN"
		# warm-up connect (pool CQs, caches), then the measured controllers
		fabrics_connect "$RRS_IP4_A" 4420 ",nr_io_queues=1,queue_size=$depth" >/dev/null || fail "warm-up connect"
		for c in /sys/class/nvme/nvme*; do echo 1 >"$c/delete_controller"; done
		sleep 2
		read -r s0 v0 f0 q0 p0 <<<"$(snap)"
		for ((i = 1; i <= controllers; i++)); do
			fabrics_connect "$RRS_IP4_A" 4420 \
				",nr_io_queues=1,queue_size=$depth,hostnqn=$(test_host_nqn $i),hostid=$(test_host_id $i)" >/dev/null ||
				fail "connect $i"
		done
		sleep 3
		read -r s1 v1 f1 q1 p1 <<<"$(snap)"
		echo "mem $t $srq $depth $controllers slab_kb=$((s1 - s0)) vmalloc_kb=$((v1 - v0)) memfree_kb=$((f0 - f1)) used_kb=$((f0 + p0 - f1 - p1)) cqes=$((q1 - q0)) round=$round" |
			tee -a "$out"
		for c in /sys/class/nvme/nvme*; do echo 1 >"$c/delete_controller"; done
		sleep 3
		nvmet_clear
		rmmod "${t//-/_}"
	done
done
done
echo "mem: $out"
