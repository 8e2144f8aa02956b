# What nvmet_rdma_rs shows of itself (debugfs `latency`, `stats.json`, the live view
# tools/nvmet-rdma-top, its tracepoints), checked against fio; run by nvmet_io_test in
# its rxe body (nvmet_hostile_test checks the reject tracepoint).
# usage (after scripts/guest/lib.sh and tests/lib/nvmet.sh, with the target of
# nvmet_io_test set up: $NQN on port 1 at ADDRESS:4420, namespace 1 a null_blk):
#   observe_test ADDRESS
# shellcheck shell=bash

OBSERVE_DIR=/sys/kernel/debug/nvmet_rdma_rs
OBSERVE_CHECK="$RRS_REPO/tests/lib/observe_check.py"

# observe_fio NAME DEVICE [fio options...]: a fio job, its JSON result in /tmp/fio-NAME.json.
observe_fio() {
	local name=$1 dev=$2
	shift 2
	fio --name="$name" --filename="$dev" --ioengine=libaio --direct=1 --allow_file_create=0 \
		--output-format=json --output="/tmp/fio-$name.json" "$@" ||
		{ cat "/tmp/fio-$name.json"; fail "fio $name failed"; }
}

# observe_counts: the I/O queues' histogram counts and counters in stats.json (what a
# command still completing changes; not its durations, whose conversion moves with every
# read, nor the admin queue's, where keep-alives come and go).
observe_counts() {
	python3 -c 'import json, sys
for q in json.load(sys.stdin)["queues"]:
    if q["qid"]:
        print(q["queue"], q["commands"], q["read_bytes"], q["write_bytes"], q["in_capsule_bytes"],
              [h["count"] for c in q["latency"].values() for h in c.values()])' \
		<"$OBSERVE_DIR/stats.json"
}

# observe_snapshot NAME: copies stats.json to /tmp/stats-NAME.json once its counts have
# settled: fio has a command's response before the target's SEND of it completes (the
# host's acknowledgement comes after), and the target records the command then.
observe_snapshot() {
	local before after tries=0
	after=$(observe_counts)
	while :; do
		sleep 0.3
		before=$after
		after=$(observe_counts)
		[ "$before" = "$after" ] && break
		tries=$((tries + 1))
		[ $tries -lt 60 ] || fail "stats.json never settled: $after"
	done
	cp "$OBSERVE_DIR/stats.json" "/tmp/stats-$1.json"
}

# observe_settled_copy FILE: stats.json, once its ports' counts (errors, teardowns,
# rejects) read the same twice 0.5 s apart, copied to FILE.
observe_settled_copy() {
	local before after tries=0 counts='import json, sys
print([(p["errors_by_kind"], p["torn_down"], p["rejects"]) for p in json.load(sys.stdin)["ports"]])'
	after=$(python3 -c "$counts" <"$OBSERVE_DIR/stats.json")
	while :; do
		sleep 0.5
		before=$after
		after=$(python3 -c "$counts" <"$OBSERVE_DIR/stats.json")
		[ "$before" = "$after" ] && break
		tries=$((tries + 1))
		[ $tries -lt 60 ] || fail "stats.json's port counts never settled: $after"
	done
	cp "$OBSERVE_DIR/stats.json" "$1"
}

# delay_nullb_add NAME NSEC / delay_nullb_remove NAME: a 64 MiB memory-backed null_blk,
# /dev/NAME, whose commands complete NSEC after they came.
delay_nullb_add() {
	local dir=/sys/kernel/config/nullb/$1
	mkdir "$dir"
	echo 2 >"$dir/irqmode"
	echo "$2" >"$dir/completion_nsec"
	echo 1 >"$dir/memory_backed"
	echo 64 >"$dir/size"
	echo 1 >"$dir/power"
	wait_until 10 test -b "/dev/$1"
}
delay_nullb_remove() {
	echo 0 >"/sys/kernel/config/nullb/$1/power"
	rmdir "/sys/kernel/config/nullb/$1"
}

# trace_start EVENT [FILTER] ...: clears the trace buffer and enables the
# nvmet_rdma_rs events named (nvmet_rdma_rs_EVENT), each with FILTER if given
# (FILTER applies to every event named); trace_stop FILE: stops, saves the trace to
# FILE and disables the events.
TRACEFS=/sys/kernel/tracing
trace_start() {
	local filter="" e
	[ -e "$TRACEFS/trace" ] || mount -t tracefs nodev "$TRACEFS"
	[ -d "$TRACEFS/events/nvmet_rdma_rs" ] || fail "no nvmet_rdma_rs events in tracefs"
	if [ "${1:-}" = --filter ]; then
		filter=$2
		shift 2
	fi
	echo 0 >"$TRACEFS/tracing_on"
	echo >"$TRACEFS/trace"
	for e in "$@"; do
		[ -n "$filter" ] && echo "$filter" >"$TRACEFS/events/nvmet_rdma_rs/nvmet_rdma_rs_$e/filter"
		echo 1 >"$TRACEFS/events/nvmet_rdma_rs/nvmet_rdma_rs_$e/enable"
	done
	echo 1 >"$TRACEFS/tracing_on"
}
trace_stop() {
	echo 0 >"$TRACEFS/tracing_on"
	cat "$TRACEFS/trace" >"$1"
	echo 0 >"$TRACEFS/events/nvmet_rdma_rs/enable"
	local f
	for f in "$TRACEFS"/events/nvmet_rdma_rs/*/filter; do echo 0 >"$f"; done
}

observe_test() {
	local ip=$1 dev ctrl slow
	step "statistics and latency histograms agree with fio; a slow namespace's time is in the core phase; the live view"
	dev=$(host_connect "$ip" 4420 --nr-io-queues=1)
	ctrl=$(host_ctrl "$NQN")
	# One command per fio I/O: the host's block layer must not merge neighbours (two
	# random 4 KiB reads side by side would reach the target as one 8 KiB command).
	echo 2 >"/sys/block/${dev#/dev/}/queue/nomerges"

	# A bad write is refused, with one line.
	if echo bogus >"$OBSERVE_DIR/latency" 2>/dev/null; then fail "debugfs latency took 'bogus'"; fi
	assert_dmesg "nvmet_rdma_rs: latency: write \`reset\`, \`on\` or \`off\`"

	echo reset >"$OBSERVE_DIR/latency"
	observe_snapshot before
	# 4 KiB reads (keyed: RDMA WRITE), 64 KiB writes (keyed: RDMA READ, over the 16 KiB
	# in-capsule limit), 4 KiB writes (in-capsule).
	observe_fio reads "$dev" --rw=randread --bs=4k --iodepth=8 --size=8M --number_ios=400
	observe_fio keyed "$dev" --rw=randwrite --bs=64k --iodepth=4 --offset=8M --size=8M --number_ios=100
	observe_fio inline "$dev" --rw=randwrite --bs=4k --iodepth=4 --offset=16M --size=4M --number_ios=200
	observe_snapshot after
	python3 "$OBSERVE_CHECK" agree /tmp/stats-{before,after}.json /tmp/fio-{reads,keyed,inline}.json ||
		fail "the statistics or histograms disagree with fio"
	cat "$OBSERVE_DIR/latency"
	# (the start of stats.json, for the record)
	head -c 1500 /tmp/stats-after.json
	echo

	# A namespace whose backend takes 50 ms (well above what the transport's phases take
	# under TCG on a busy host): the time lands in the core phase.
	delay_nullb_add nullb_delay 50000000
	nvmet_namespace "$NQN" 3 /dev/nullb_delay
	nvme ns-rescan "/dev/$ctrl"
	wait_until 20 ns_dev "$ctrl" 3
	slow=$(ns_dev "$ctrl" 3)
	wait_until 10 test -b "$slow"
	echo reset >"$OBSERVE_DIR/latency"
	observe_snapshot slow-before
	observe_fio slow "$slow" --rw=randread --bs=4k --iodepth=1 --size=4M --number_ios=20
	observe_snapshot slow-after
	python3 "$OBSERVE_CHECK" slow /tmp/stats-slow-{before,after}.json 50000000 ||
		fail "the slow namespace's delay is not where the histograms put it"

	# What the commands wait for, now: 4 reads of 50 ms each kept in flight for 3 s are
	# seen in the core.
	fio --name=inflight --filename="$slow" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
		--iodepth=4 --size=4M --time_based --runtime=3 --output=/tmp/fio-inflight.out &
	local fio_pid=$!
	: >/tmp/stats-inflight.jsonl
	while kill -0 "$fio_pid" 2>/dev/null; do
		sleep 0.2
		tr -d '\n' <"$OBSERVE_DIR/stats.json" >>/tmp/stats-inflight.jsonl
		echo >>/tmp/stats-inflight.jsonl
	done
	wait "$fio_pid" || { cat /tmp/fio-inflight.out; fail "fio on the slow namespace failed"; }
	python3 "$OBSERVE_CHECK" in_flight /tmp/stats-inflight.jsonl 4 ||
		fail "stats.json's in_flight does not show the slow namespace's reads"

	# Timing off: the counters count, the histograms do not.
	echo off >"$OBSERVE_DIR/latency"
	observe_snapshot off-before
	observe_fio untimed "$dev" --rw=randread --bs=4k --iodepth=4 --size=8M --number_ios=50
	observe_snapshot off-after
	echo on >"$OBSERVE_DIR/latency"
	python3 "$OBSERVE_CHECK" untimed /tmp/stats-off-{before,after}.json /tmp/fio-untimed.json ||
		fail "timing off still timed, or stopped counting"

	# The live view, beside reads.
	fio --name=top --filename="$dev" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
		--iodepth=4 --size=8M --time_based --runtime=8 --output=/tmp/fio-top.out &
	fio_pid=$!
	"$RRS_REPO/tools/nvmet-rdma-top" -i 1 -n 3 --json >/tmp/top.json || fail "nvmet-rdma-top failed"
	"$RRS_REPO/tools/nvmet-rdma-top" -i 1 -n 1 | tee /tmp/top.txt
	wait "$fio_pid" || { cat /tmp/fio-top.out; fail "fio beside the live view failed"; }
	python3 "$OBSERVE_CHECK" top /tmp/top.json || fail "the live view is wrong"
	grep -q "^queue port  qid" /tmp/top.txt || fail "the live view's text has no header"
	"$RRS_REPO/tools/nvmet-rdma-top" --hist read | tee /tmp/hist.txt
	grep -q "queue [0-9]* qid 1, read: [0-9]* commands" /tmp/hist.txt || fail "no histogram of the I/O queue's reads"

	# Tracepoints: one 4 KiB read and one 64 KiB write on the I/O queue, each traced
	# step by step.
	trace_start --filter "qid == 1" req_recv req_read req_submit req_complete req_written req_sent req_free
	dd if="$dev" of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>/dev/null || fail "dd read failed"
	dd if=/dev/zero of="$dev" bs=64k count=1 seek=300 oflag=direct 2>/dev/null || fail "dd write failed"
	trace_stop /tmp/trace-req.txt
	grep nvmet_rdma_rs_req /tmp/trace-req.txt | head -20
	python3 "$OBSERVE_CHECK" trace /tmp/trace-req.txt || fail "the request tracepoints are wrong"

	host_disconnect
	echo 0 >"$NVMET/subsystems/$NQN/namespaces/3/enable"
	rmdir "$NVMET/subsystems/$NQN/namespaces/3"
	delay_nullb_remove nullb_delay
	assert_queues_clean
}
