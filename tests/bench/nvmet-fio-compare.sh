#!/bin/bash
# A first side-by-side of the two RDMA transports (not a test: it asserts no speed).
# Over rxe with a null_blk namespace, alternating C nvmet-rdma and nvmet_rdma_rs for
# $ROUNDS rounds, fio without verify: 4 KiB random read at depth 32, 4 KiB random write
# at depth 32, 128 KiB sequential read at depth 16. Prints one line per run and the
# medians. Run with: scripts/vm-run.sh -v -t 1800 tests/bench/nvmet-fio-compare.sh
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-15}
veth_setup
rdma_link_add rxe0 rxe veth0
modprobe nvmet
modprobe nvme-rdma
modprobe null_blk nr_devices=1 memory_backed=1 gb=1

# run_point TRANSPORT NAME fio-options...: prints "TRANSPORT NAME IOPS MB/s".
run_point() {
	local transport=$1 name=$2 dev
	shift 2
	dev=$(host_connect "$RRS_IP4_A" 4420)
	fio --name="$name" --filename="$dev" --ioengine=libaio --direct=1 --time_based \
		--runtime="$RUNTIME" --ramp_time=2 --output-format=terse --minimal "$@" >/tmp/bench.out 2>&1 ||
		{ cat /tmp/bench.out; fail "fio $name failed"; }
	# terse v3: read iops field 8, read bw (KiB/s) 7; write iops 49, write bw 48
	awk -F';' -v t="$transport" -v n="$name" '{ iops = $8 + $49; bw = ($7 + $48) / 1000; printf "%s %s %d %.1f\n", t, n, iops, bw }' /tmp/bench.out
	host_disconnect
}

results=/tmp/results.txt
: >"$results"
for ((round = 1; round <= ROUNDS; round++)); do
	for transport in nvmet-rdma nvmet_rdma_rs; do
		modprobe "$transport"
		nvmet_subsystem "$NQN"
		nvmet_namespace "$NQN" 1 /dev/nullb0
		nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
		nvmet_link 1 "$NQN"
		{
			run_point "$transport" randread4k-qd32 --rw=randread --bs=4k --iodepth=32
			run_point "$transport" randwrite4k-qd32 --rw=randwrite --bs=4k --iodepth=32
			run_point "$transport" seqread128k-qd16 --rw=read --bs=128k --iodepth=16
		} | tee -a "$results"
		nvmet_clear
		rmmod "$transport"
	done
done

echo "median over $ROUNDS rounds (IOPS, MB/s):"
for name in randread4k-qd32 randwrite4k-qd32 seqread128k-qd16; do
	for transport in nvmet-rdma nvmet_rdma_rs; do
		iops=$(awk -v t="$transport" -v n="$name" '$1 == t && $2 == n { print $3 }' "$results" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		bw=$(awk -v t="$transport" -v n="$name" '$1 == t && $2 == n { print $4 }' "$results" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		echo "RESULT $name $transport iops $iops mb_s $bw"
	done
done
