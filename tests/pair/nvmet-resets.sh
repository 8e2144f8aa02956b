#!/bin/bash
# What a host and an administrator do to a live target, across two kernels
# (scripts/vm-pair.sh): the behaviours the community's NVMe test suite runs over RDMA,
# each asserted here.
# usage: nvmet-resets.sh [TRANSPORT_MODULE [PROVIDER [RESETS]]] (default nvmet_rdma_rs rxe 50)
# - RESETS controller resets (`nvme reset`) in a row under the host's verified writes:
#   each ends live, the writes end without an error;
# - a disconnect during writes (they end, whatever fio makes of a controller the host
#   removed under it), and what was written before reads back intact after a
#   reconnect;
# - the host's I/O queue count changed between connects (1, then 2 with a write queue),
#   and the subsystem's attr_qid_max set to 1 and then 2 under verified writes (the core
#   ends the controller each time, the host reconnects, the writes go on);
# - the host's controller made fatal from the target side (the nvmet core's debugfs
#   `state`, "fatal") under verified writes: the core logs it and deletes the
#   controller, the transport closes its queues, the host reconnects and the writes end
#   without an error; the same debugfs directory's `host_traddr`, which the core asks
#   the transport for, names the host's address;
# - flush and discard on a file namespace (the ranges around the discarded one intact),
#   write-zeroes on the null_blk namespace (the range reads back as zeroes, the ranges
#   around it intact);
# - a namespace added and disabled on the target while the host is connected: the host
#   sees it come and go (asynchronous event, rescan);
# - the discovery log's generation counter grows when a port is added, and the new
#   port's discovery log lists the subsystem there.
# The C nvmet-rdma runs it too, as the control: the -c.sh script beside this one.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
. "$RRS_REPO/tests/lib/pair.sh"
transport=${1:-nvmet_rdma_rs} provider=${2:-rxe} resets=${3:-50}
NVMET_DEBUGFS=/sys/kernel/debug/nvmet

target() {
	kmemleak_start
	pair_nvmet_target "$transport" "$provider"
	truncate -s 64M /tmp/ns2.img /tmp/ns3.img
	nvmet_namespace "$NQN" 2 /tmp/ns2.img
	pair_signal target-ready

	pair_wait 1200 load-running
	step "target: attr_qid_max 1 under the host's writes, then 2 again"
	echo 1 >"$NVMET/subsystems/$NQN/attr_qid_max"
	pair_signal qid-max-1
	pair_wait 300 reconnected-1
	echo 2 >"$NVMET/subsystems/$NQN/attr_qid_max"
	pair_signal qid-max-2

	pair_wait 600 want-fatal
	step "target: the host's controller made fatal from the target (debugfs state) under its writes"
	local dirs dir cntlid made
	# (the host's one controller: discovery controllers come and go, this one stays)
	dirs=$(ls -d "$NVMET_DEBUGFS/$NQN"/ctrl* 2>/dev/null)
	[ "$(wc -w <<<"$dirs")" = 1 ] || fail "not one controller in the nvmet core's debugfs: ${dirs:-none}"
	dir=$dirs cntlid=${dirs##*/ctrl}
	# (the core asks the transport for the host's address: ours answers from its queue)
	[ "$(cat "$dir/host_traddr")" = "$PAIR_IP_HOST" ] ||
		fail "debugfs host_traddr of ctrl $cntlid: '$(cat "$dir/host_traddr")', not the host's $PAIR_IP_HOST"
	made=$(controllers_made)
	local before=
	# (the host's queues are this controller's: its only one)
	if [ "$transport" = nvmet_rdma_rs ]; then
		before=$(listed_queues)
		[ -n "$before" ] || fail "ours lists no queue of the connected host"
	fi
	echo fatal >"$dir/state"
	wait_until 30 bash -c "dmesg | grep -q 'nvmet: ctrl $cntlid fatal error occurred!'"
	if [ -n "$before" ]; then
		# (the core's delete_ctrl: ours closes every queue of that controller)
		wait_until 60 none_listed $before
		echo "queues $before of ctrl $cntlid closed"
	fi
	# (the host sees its queues go, and reconnects: a new controller)
	wait_until 120 controllers_made_above "$made"
	[ ! -e "$dir" ] || [ "$(ls -d "$NVMET_DEBUGFS/$NQN"/ctrl* | wc -l)" = 1 ] ||
		fail "the fatal controller's debugfs directory stayed beside the new one"
	pair_signal fatal-done

	pair_wait 600 want-ns3
	step "target: namespace 3 added, then disabled"
	nvmet_namespace "$NQN" 3 /tmp/ns3.img
	pair_signal ns3-added
	pair_wait 300 saw-ns3
	echo 0 >"$NVMET/subsystems/$NQN/namespaces/3/enable"
	pair_signal ns3-disabled

	pair_wait 300 want-port2
	step "target: a second port, 4421"
	nvmet_port 2 ipv4 "$PAIR_IP_TARGET" 4421
	nvmet_link 2 "$NQN"
	pair_signal port2-added

	pair_target_finish "$transport"
	echo "pair nvmet-resets $transport over $provider: target ok"
}

# listed_queues: the numbers of the queues ours lists in debugfs.
listed_queues() { awk '/qid/ {print $2}' /sys/kernel/debug/nvmet_rdma_rs/queues | xargs; }

# none_listed QUEUE...: ours lists none of the queues numbered QUEUE.
none_listed() { ! listed_queues | tr ' ' '\n' | grep -qxF "$(printf '%s\n' "$@")"; }

# io_queues CTRL: the I/O queues host controller CTRL made when it last connected.
io_queues() {
	dmesg | sed -nE "s/.*nvme $1: creating ([0-9]+) I\/O queues.*/\1/p" | tail -1
}

# queues_made CTRL [N]: how many times host controller CTRL made its I/O queues (N of them).
queues_made() {
	dmesg | grep -c "nvme $1: creating ${2:-[0-9]*} I/O queues" || true
}

# discovery_log [SERVICE]: the discovery log of the target's port on SERVICE (default
# 4420), as nvme-cli's JSON.
discovery_log() {
	nvme discover -t rdma -a "$PAIR_IP_TARGET" -s "${1:-4420}" -o json 2>/dev/null
}

host() {
	modprobe nvme-rdma
	pair_wait 600 target-ready
	local dev ctrl i n
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --reconnect-delay=1 --ctrl-loss-tmo=-1)
	ctrl=$(host_ctrl "$NQN")

	step "host: $resets controller resets under verified writes"
	local made
	made=$(queues_made "$ctrl")
	for ((i = 1; i <= resets; )); do
		# (ten resets under each load; the load outlives them, and must end clean)
		load_start "$dev" 30
		for ((n = 0; n < 10 && i <= resets; n++, i++)); do
			nvme reset "/dev/$ctrl" || fail "reset $i failed"
			wait_until 60 bash -c "[ \$(cat /sys/class/nvme/$ctrl/state) = live ]"
		done
		load_end clean
	done
	n=$(($(queues_made "$ctrl") - made))
	((n >= resets)) || fail "$resets resets, but the host made its I/O queues again $n times"

	step "host: a disconnect during writes; what was written before reads back"
	fio_verify "$dev" before --rw=randwrite --bs=8k --size=8M --iodepth=8
	fio --name=cut --filename="$dev" --ioengine=libaio --direct=1 --allow_file_create=0 --rw=randwrite --bs=4k \
		--offset=32M --size=16M --iodepth=16 --time_based --runtime=20 \
		--output=/tmp/fio-cut.out >/dev/null 2>&1 &
	local fio_pid=$!
	sleep 3
	kill -0 $fio_pid || { cat /tmp/fio-cut.out; fail "the writes ended before the disconnect"; }
	host_disconnect
	local rc=0
	wait $fio_pid || rc=$?
	echo "the writes cut by the disconnect ended with status $rc: $(grep -Eo 'err= *[0-9]+[^,]*' /tmp/fio-cut.out | head -1)"
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --nr-io-queues=1)
	ctrl=$(host_ctrl "$NQN")
	fio_verify_only "$dev" before --rw=randwrite --bs=8k --size=8M --iodepth=8
	[ "$(io_queues "$ctrl")" = 1 ] || fail "asked for 1 I/O queue, made $(io_queues "$ctrl")"
	host_disconnect

	step "host: 2 I/O queues (one for writes) on a new connect"
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --nr-io-queues=1 --nr-write-queues=1)
	ctrl=$(host_ctrl "$NQN")
	[ "$(io_queues "$ctrl")" = 2 ] || fail "asked for 2 I/O queues, made $(io_queues "$ctrl")"
	fio_verify "$dev" two-queues --rw=randrw --bs=4k --offset=48M --size=4M --iodepth=8
	host_disconnect

	# (one I/O queue: a reconnect that gets fewer queues than a write-queue split asks for
	# oopses this kernel's nvme-rdma host, whatever the target: see nvmet-rdma-rs.md)
	step "host: attr_qid_max set to 1 and then 2 under verified writes: the core ends the controller each time"
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --nr-io-queues=1 --reconnect-delay=1 --ctrl-loss-tmo=-1)
	ctrl=$(host_ctrl "$NQN")
	made=$(queues_made "$ctrl")
	load_start "$dev" 90
	pair_signal load-running
	pair_wait 120 qid-max-1
	wait_until 120 bash -c "[ \$(dmesg | grep -c 'nvme $ctrl: creating [0-9]* I/O queues') -gt $made ]"
	wait_until 60 bash -c "[ \$(cat /sys/class/nvme/$ctrl/state) = live ]"
	[ "$(io_queues "$ctrl")" = 1 ] || fail "attr_qid_max 1, but the host made $(io_queues "$ctrl") I/O queues"
	pair_signal reconnected-1
	pair_wait 120 qid-max-2
	wait_until 120 bash -c "[ \$(dmesg | grep -c 'nvme $ctrl: creating [0-9]* I/O queues') -gt $((made + 1)) ]"
	wait_until 60 bash -c "[ \$(cat /sys/class/nvme/$ctrl/state) = live ]"
	load_end clean

	step "host: the target makes the controller fatal under verified writes: the host reconnects, the writes go on"
	local reconnects
	reconnects=$(dmesg | grep -c "$ctrl: Successfully reconnected" || true)
	load_start "$dev" 60
	pair_signal want-fatal
	pair_wait 180 fatal-done
	wait_until 60 bash -c "[ \$(dmesg | grep -c '$ctrl: Successfully reconnected') -gt $reconnects ]"
	wait_until 60 bash -c "[ \$(cat /sys/class/nvme/$ctrl/state) = live ]"
	load_end clean

	step "host: flush and discard on namespace 2 (a file), write-zeroes on namespace 1 (null_blk)"
	local dev2
	wait_until 20 bash -c ". $RRS_REPO/tests/lib/nvmet.sh; ns_dev $ctrl 2 >/dev/null"
	dev2=$(ns_dev "$ctrl" 2)
	head -c 3M /dev/urandom >/tmp/pattern
	dd if=/tmp/pattern of="$dev2" bs=1M oflag=direct 2>/dev/null || fail "write to namespace 2 failed"
	nvme flush "$dev2" >/dev/null || fail "flush failed"
	blkdiscard -o 1M -l 1M "$dev2" || fail "discard failed"
	dd if="$dev2" of=/tmp/back bs=1M count=3 iflag=direct 2>/dev/null || fail "read of namespace 2 failed"
	# (a discarded range reads as the namespace's deallocated blocks do, which NVMe leaves
	# to the controller: only the ranges around it are checked)
	cmp -s -n 1M /tmp/pattern /tmp/back || fail "the MiB before the discarded one changed"
	cmp -s -i 2M /tmp/pattern /tmp/back || fail "the MiB after the discarded one changed"
	# (the null_blk has no Write Zeroes of its own: the nvmet core writes zero pages)
	dd if=/tmp/pattern of="$dev" bs=1M seek=60 oflag=direct 2>/dev/null || fail "write to namespace 1 failed"
	blkdiscard -z -o 61M -l 1M "$dev" || fail "write-zeroes failed"
	dd if="$dev" of=/tmp/back bs=1M skip=60 count=3 iflag=direct 2>/dev/null || fail "read of namespace 1 failed"
	# (no process substitution: the guest's /dev has no fd/)
	dd if=/tmp/back of=/tmp/zeroed bs=1M skip=1 count=1 2>/dev/null
	cmp -s -n 1M /dev/zero /tmp/zeroed || fail "the zeroed MiB does not read as zeroes"
	cmp -s -n 1M /tmp/pattern /tmp/back || fail "the MiB before the zeroed one changed"
	cmp -s -i 2M /tmp/pattern /tmp/back || fail "the MiB after the zeroed one changed"

	step "host: namespace 3 comes and goes while connected"
	pair_signal want-ns3
	pair_wait 120 ns3-added
	wait_until 30 bash -c ". $RRS_REPO/tests/lib/nvmet.sh; ns_dev $ctrl 3 >/dev/null"
	pair_signal saw-ns3
	pair_wait 120 ns3-disabled
	wait_until 30 bash -c ". $RRS_REPO/tests/lib/nvmet.sh; ! ns_dev $ctrl 3 >/dev/null"

	step "host: the discovery log's generation counter"
	local gen1 gen2
	gen1=$(discovery_log | python3 -c 'import json,sys; print(json.load(sys.stdin)["genctr"])') ||
		fail "no discovery log"
	pair_signal want-port2
	pair_wait 120 port2-added
	local log2
	log2=$(discovery_log) || fail "no discovery log after the second port"
	gen2=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["genctr"])' <<<"$log2")
	((gen2 > gen1)) || fail "the generation counter stayed at $gen1 after a port was added ($gen2)"
	# (a port's discovery log lists what that port offers: the new port's lists the
	# subsystem on 4421)
	local log3
	log3=$(discovery_log 4421) || fail "no discovery log on the second port"
	python3 -c 'import json,sys; r = json.load(sys.stdin)["records"]; sys.exit(0 if any(x["trsvcid"] == "4421" and x["subnqn"] == sys.argv[1] for x in r) else 1)' "$NQN" <<<"$log3" ||
		fail "the second port's discovery log does not list the subsystem on 4421: $log3"
	echo "discovery generation $gen1 -> $gen2"

	host_disconnect
	pair_host_finish
	echo "pair nvmet-resets $transport over $provider: host ok"
}

pair_net_setup
rdma_link_add "${provider}0" "$provider" wire
case $RRS_ROLE in
target) target ;;
host) host ;;
*) fail "unknown role $RRS_ROLE" ;;
esac
