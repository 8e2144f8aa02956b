#!/bin/bash
# The guest half of `make bench` (scripts/bench.sh boots it with scripts/vm-run.sh):
# over one rxe device, for each round, the in-tree C nvmet-rdma and nvmet_rdma_rs in
# turn (the order alternates between rounds) serve a null_blk namespace to the kernel
# NVMe/RDMA host, and fio measures every point below; then the same device's raw
# capability with perftest and with the demo pair's bench modes. Raw results (fio JSON,
# /proc/stat CPU time, perftest and demo output) go to /run/results/raw for
# scripts/bench-report.py. Nothing here judges a speed.
#
# usage (guest): bench-guest.sh full|smoke [ROUNDS [SECONDS]]
#   full   every point, every perftest and demo mode; 3 rounds of 10 s per fio point
#   smoke  one fio point, one perftest and one demo mode; 1 round of 2 s (make check)
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

profile=${1:-full}
raw=/run/results/raw
mkdir -p "$raw"

# name|I/O queues the host connects with|fio options
ALL_POINTS=(
	"randread-4k-qd1|2|--rw=randread --bs=4k --iodepth=1"
	"randread-4k-qd32|2|--rw=randread --bs=4k --iodepth=32"
	"randread-4k-qd128|2|--rw=randread --bs=4k --iodepth=128"
	"randwrite-4k-qd1|2|--rw=randwrite --bs=4k --iodepth=1"
	"randwrite-4k-qd32|2|--rw=randwrite --bs=4k --iodepth=32"
	"randwrite-4k-qd128|2|--rw=randwrite --bs=4k --iodepth=128"
	"seqread-128k-qd16|2|--rw=read --bs=128k --iodepth=16"
	"seqwrite-128k-qd16|2|--rw=write --bs=128k --iodepth=16"
	"randread-4k-qd32-2q2j|2|--rw=randread --bs=4k --iodepth=32 --numjobs=2 --group_reporting"
	"randread-4k-qd32-1q1j|1|--rw=randread --bs=4k --iodepth=32 --numjobs=1"
)
# name|perftest program|options (sizes match the fio rows they bound: 128 KiB for
# bandwidth, 4 KiB for latency; ib_send_lat at the demo's largest SEND). Latency runs
# count iterations: only then does perftest report the median and the 99th percentile.
ALL_PERFTEST=(
	"write_bw-128k|ib_write_bw|-s 131072 -D 5"
	"read_bw-128k|ib_read_bw|-s 131072 -D 5"
	"write_lat-4k|ib_write_lat|-s 4096 -n 5000"
	"read_lat-4k|ib_read_lat|-s 4096 -n 5000"
	"send_lat-1k|ib_send_lat|-s 1024 -n 5000"
)
# name|demo bench options
ALL_DEMO=(
	"wlat-4k|mode=wlat,size=4096,count=3000"
	"rlat-4k|mode=rlat,size=4096,count=3000"
	"slat-1k|mode=slat,size=1024,count=3000"
	"bw-128k|mode=bw,size=131072,count=400,depth=16"
)
case $profile in
full) rounds=3 runtime=10 points=("${ALL_POINTS[@]}") perftests=("${ALL_PERFTEST[@]}") demos=("${ALL_DEMO[@]}") ;;
smoke)
	rounds=1 runtime=2 points=("${ALL_POINTS[1]}") perftests=("${ALL_PERFTEST[0]/-D 5/-D 2}")
	demos=("${ALL_DEMO[0]/count=3000/count=200}")
	;;
*) fail "unknown profile $profile (full or smoke)" ;;
esac
rounds=${2:-$rounds} runtime=${3:-$runtime}

# Busy CPU time of the whole guest (host side and target side together), in ticks.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

{
	echo "profile $profile"
	echo "rounds $rounds"
	echo "runtime_s $runtime"
	echo "clk_tck $(getconf CLK_TCK)"
	echo "cpus $(nproc)"
	echo "mem_mib $(($(awk '/MemTotal/ { print $2 }' /proc/meminfo) / 1024))"
	echo "accel $RRS_ACCEL"
	echo "kernel $(uname -r)"
	echo "cpu_model $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "fio $(fio --version)"
	echo "perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
	echo "lockdep $([ -e /proc/lockdep ] && echo on || echo off)"
	echo "kmemleak $([ -e /sys/kernel/debug/kmemleak ] && echo on || echo off)"
	echo "kfence $([ -d /sys/module/kfence ] && echo on || echo off)"
} >"$raw/machine.txt"

veth_setup
rdma_link_add rxe0 rxe veth0
modprobe nvmet
modprobe nvme-rdma
# No data kept, completions inline: the backend costs as little as it can.
modprobe null_blk nr_devices=1 queue_mode=2 irqmode=0 submit_queues=2 gb=4

# run_point TRANSPORT ROUND DEVICE NAME fio-options...: one fio run with its CPU time.
run_point() {
	local transport=$1 round=$2 dev=$3 name=$4 before after
	shift 4
	# (nvmet_rdma_rs: its latency histograms of this point alone, kept for the report's
	# latency chart)
	[ "$transport" = nvmet_rdma_rs ] && echo reset >/sys/kernel/debug/nvmet_rdma_rs/latency
	before=$(busy_ticks)
	# shellcheck disable=SC2068  # the options are words
	fio --name="$name" --filename="$dev" --ioengine=libaio --direct=1 --time_based \
		--runtime="$runtime" --norandommap --randrepeat=0 --output-format=json \
		--output="$raw/fio-$transport-$name-$round.json" $@ >/dev/null 2>"/tmp/fio-$name.err" ||
		{ cat "/tmp/fio-$name.err"; fail "fio $name over $transport failed"; }
	after=$(busy_ticks)
	echo "$transport $name $round $((after - before))" >>"$raw/cpu.txt"
	if [ "$transport" = nvmet_rdma_rs ]; then
		cp /sys/kernel/debug/nvmet_rdma_rs/stats.json "$raw/stats-$name-$round.json"
	fi
	echo "  $transport round $round $name done"
}

# serve TRANSPORT ROUND: loads the transport, exposes the namespace, runs the points.
serve() {
	local transport=$1 round=$2 queues point name nrq opts dev
	modprobe "$transport"
	nvmet_subsystem "$NQN"
	nvmet_namespace "$NQN" 1 /dev/nullb0
	nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
	nvmet_link 1 "$NQN"
	for queues in 2 1; do
		dev=
		for point in "${points[@]}"; do
			IFS='|' read -r name nrq opts <<<"$point"
			[ "$nrq" = "$queues" ] || continue
			[ -n "$dev" ] || dev=$(host_connect "$RRS_IP4_A" 4420 --nr-io-queues="$queues")
			run_point "$transport" "$round" "$dev" "$name" "$opts"
		done
		[ -z "$dev" ] || host_disconnect
	done
	nvmet_clear
	rmmod "$transport"
}

# perftest_point ROUND NAME PROGRAM OPTIONS: server and client on rxe0, over RDMA CM.
perftest_point() {
	local round=$1 name=$2 prog=$3 opts=$4 server try
	# shellcheck disable=SC2086
	stdbuf -o0 $prog -R -d rxe0 $opts >"/tmp/perftest-server.out" 2>&1 &
	server=$!
	# A client that comes before the server listens is rejected: wait for its banner.
	wait_until 30 grep -q "Waiting for client" /tmp/perftest-server.out
	# Even then, on a busy host, the client can come before the listen (REJECTED, and
	# perftest's client may crash on it): the server still waits, so try again.
	for try in 1 2 3; do
		# shellcheck disable=SC2086
		$prog -R -d rxe0 $opts "$RRS_IP4_A" >"$raw/perftest-$name-$round.txt" 2>&1 && break
		if [ $try = 3 ] || ! kill -0 "$server" 2>/dev/null; then
			cat "$raw/perftest-$name-$round.txt" /tmp/perftest-server.out
			fail "$prog $opts failed"
		fi
		echo "  perftest $name: client attempt $try failed, the server still waits: again"
		sleep 2
	done
	wait "$server" || { cat /tmp/perftest-server.out; fail "$prog server $opts failed"; }
	echo "  perftest round $round $name done"
}

# demo_point ROUND NAME OPTIONS: one run of the demo pair's bench.
demo_point() {
	local round=$1 name=$2 opts=$3
	echo "$opts" >/sys/kernel/debug/rdma_demo/bench || fail "demo bench $opts failed"
	cat /sys/kernel/debug/rdma_demo/bench >"$raw/demo-$name-$round.txt"
	echo "  demo round $round $name done"
}

: >"$raw/cpu.txt"
for ((round = 1; round <= rounds; round++)); do
	step "round $round of $rounds"
	order=(nvmet-rdma nvmet_rdma_rs)
	((round % 2)) || order=(nvmet_rdma_rs nvmet-rdma)
	for transport in "${order[@]}"; do
		serve "$transport" "$round"
	done
	for p in "${perftests[@]}"; do
		IFS='|' read -r name prog opts <<<"$p"
		perftest_point "$round" "$name" "$prog" "$opts"
	done
	modprobe rdma_server addr="$RRS_IP4_A"
	modprobe rdma_client server="$RRS_IP4_A"
	# (one "connected" line per round so far)
	wait_until 10 bash -c "[ \$(dmesg | grep -c 'rdma_client: session 0: connected to') -ge $round ]"
	for d in "${demos[@]}"; do
		IFS='|' read -r name opts <<<"$d"
		demo_point "$round" "$name" "$opts"
	done
	rmmod rdma_client
	rmmod rdma_server
done
echo "bench: raw results in $raw"
