#!/bin/bash
# The guest half of `make bench-profile` (scripts/bench.sh --profile): where the CPU time
# of a 4 KiB random read and write at depth 32 goes, with the C nvmet-rdma and with
# nvmet_rdma_rs, on the benchmark kernel. `perf record -a -g` samples the whole guest
# with the software cpu-clock (a TCG guest has no PMU); perf's reports per symbol (self
# and with children) and per object go to /run/results/raw. Measures; judges nothing.
#
# usage (guest): profile-guest.sh [SECONDS]   (default 10)
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

seconds=${1:-10}
raw=/run/results/raw
mkdir -p "$raw"
# Kernel and module symbols for perf.
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

veth_setup
rdma_link_add rxe0 rxe veth0
modprobe nvmet
modprobe nvme-rdma
modprobe null_blk nr_devices=1 queue_mode=2 irqmode=0 submit_queues=2 gb=4

for transport in nvmet-rdma nvmet_rdma_rs; do
	step "profile $transport"
	modprobe "$transport"
	nvmet_subsystem "$NQN"
	nvmet_namespace "$NQN" 1 /dev/nullb0
	nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
	nvmet_link 1 "$NQN"
	dev=$(host_connect "$RRS_IP4_A" 4420 --nr-io-queues=2)
	for rw in randread randwrite; do
		opts=(--filename="$dev" --ioengine=libaio --direct=1 --time_based --rw=$rw --bs=4k
			--iodepth=32 --norandommap --randrepeat=0)
		fio --name=warm "${opts[@]}" --runtime=2 >/dev/null
		data=/tmp/perf-$transport-$rw.data
		perf record -q -a -g -F 499 -o "$data" -- \
			fio --name="$rw" "${opts[@]}" --runtime="$seconds" --output-format=json \
			--output="$raw/fio-$transport-$rw.json" 2>"$raw/perf-record-$transport-$rw.err" ||
			{ cat "$raw/perf-record-$transport-$rw.err"; fail "perf record of $transport $rw failed"; }
		report=(perf report -i "$data" --stdio -g none)
		err=/tmp/perf-report.err
		"${report[@]}" --no-children --sort sym --percent-limit 0.2 >"$raw/self-$transport-$rw.txt" 2>$err &&
			"${report[@]}" --children --sort sym --percent-limit 1 >"$raw/children-$transport-$rw.txt" 2>$err &&
			"${report[@]}" --no-children --sort dso >"$raw/objects-$transport-$rw.txt" 2>$err ||
			{ cat $err; fail "perf report of $transport $rw failed"; }
		rm -f "$data"
		echo "  $transport $rw profiled"
	done
	host_disconnect
	nvmet_clear
	rmmod "$transport"
done
echo "profile: reports in $raw"
