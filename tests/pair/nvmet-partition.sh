#!/bin/bash
# A network partition between an NVMe-oF host and target on two kernels
# (scripts/vm-pair.sh): the wire between them drops every frame while the guests' links
# stay up.
# usage: nvmet-partition.sh [TRANSPORT_MODULE [PROVIDER]] (default nvmet_rdma_rs rxe)
# - longer than the keep-alive timeout (5 s), for 15 s, under the host's verified writes:
#   the target's keep-alive timer expires and tears the controller down, and the
#   transport its queues (logged; for ours, no queue left in debugfs); once the wire is
#   back the host reconnects by itself, and every block it wrote reads back intact;
# - shorter than the keep-alive (0.2 s, timed by the relay) under verified writes: the
#   writes go on without an error, and no queue is left over. Whether the host's RC QPs
#   ride it out (retransmission; then no keep-alive may expire) or fail and the host
#   reconnects (its disconnect may be lost in the cut: then the old controller goes at
#   its keep-alive expiry) varies under TCG: the test says which;
# - afterwards: no queue left, unload, no leak on the target.
# The C nvmet-rdma runs it too, as the control: the -c.sh script beside this one.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
. "$RRS_REPO/tests/lib/pair.sh"
transport=${1:-nvmet_rdma_rs} provider=${2:-rxe}
KATO=5

pair_net_setup
rdma_link_add "${provider}0" "$provider" wire

target() {
	kmemleak_start
	pair_nvmet_target "$transport" "$provider"
	pair_signal target-ready

	pair_wait 600 writes-running
	local made
	made=$(controllers_made)
	step "target: the wire cut for 15 s (keep-alive $KATO s) under the host's writes"
	pair_wire_cut
	wait_until 30 bash -c "dmesg | grep -Eq 'nvmet: ctrl [0-9]+ keep-alive timer \($KATO seconds\) expired!'"
	if [ "$transport" = nvmet_rdma_rs ]; then
		wait_until 30 bash -c "! grep -q qid /sys/kernel/debug/nvmet_rdma_rs/queues"
		assert_dmesg "nvmet_rdma_rs: queue .* released"
	fi
	sleep $((15 - KATO))
	pair_wire_mend
	pair_signal wire-back
	# (the host's reconnect makes a controller again)
	wait_until 120 controllers_made_above "$made"

	pair_wait 600 load-running
	made=$(controllers_made)
	local expired
	expired=$(dmesg | grep -c "keep-alive timer" || true)
	step "target: the wire cut for 0.2 s under the host's writes"
	pair_wire_cut_for 200
	pair_signal blip-done
	pair_wait 300 load-done
	if [ "$(controllers_made)" = "$made" ]; then
		echo "0.2 s partition: the host's queues rode it out (no controller made again)"
		[ "$(dmesg | grep -c "keep-alive timer" || true)" = "$expired" ] ||
			fail "a 0.2 s partition the host's queues rode out expired a keep-alive timer"
	else
		# (a disconnect the host sent while the wire was cut is lost: the CM does not send
		# a DREQ again once the host destroyed the id, and the old controller goes when
		# its keep-alive expires)
		echo "0.2 s partition: the host's QPs failed and it reconnected"
	fi
	if [ "$transport" = nvmet_rdma_rs ]; then
		# (the host's controller, an admin and an I/O queue: the queues of one it left are gone)
		wait_until 30 bash -c "[ \$(grep -c qid /sys/kernel/debug/nvmet_rdma_rs/queues) = 2 ]"
	fi
	# (the host stays connected until the count above is taken)
	pair_signal queues-checked

	pair_target_finish "$transport"
	echo "pair nvmet-partition $transport over $provider: target ok"
}

host() {
	modprobe nvme-rdma
	pair_wait 600 target-ready
	local dev ctrl
	# (reconnecting every second, never giving up)
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --keep-alive-tmo=$KATO --reconnect-delay=1 --ctrl-loss-tmo=-1)
	ctrl=$(host_ctrl "$NQN")
	step "host: 24 MiB of verified writes across a 15 s partition"
	local stat=/sys/block/${dev#/dev/}/stat before
	before=$(awk '{print $5}' "$stat")
	fio --name=across --filename="$dev" --ioengine=libaio --direct=1 --allow_file_create=0 \
		--rw=randwrite --bs=4k --size=24M --iodepth=16 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --output=/tmp/fio-across.out >/dev/null 2>&1 &
	local fio_pid=$!
	wait_until 180 bash -c "[ \$(awk '{print \$5}' $stat) -gt $before ] || ! kill -0 $fio_pid"
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio-across.out; fail "fio ended before the partition"; }
	pair_signal writes-running
	pair_wait 120 wire-back
	local rc=0
	wait $fio_pid || rc=$?
	[ $rc = 0 ] || { cat /tmp/fio-across.out; fail "fio across the partition ended with status $rc"; }
	grep -Eq "err= *0" /tmp/fio-across.out || { cat /tmp/fio-across.out; fail "fio across the partition saw errors"; }
	assert_dmesg "$ctrl: Successfully reconnected" "the host did not reconnect after the partition"
	# (read back once more, from scratch: what the host was told is written is there)
	fio_verify_only "$dev" across --rw=randwrite --bs=4k --size=24M --iodepth=16

	step "host: verified writes across a 0.2 s partition"
	local reconnects
	reconnects=$(dmesg | grep -c "$ctrl: Successfully reconnected")
	load_start "$dev" 20
	pair_signal load-running
	pair_wait 120 blip-done
	load_end clean
	pair_signal load-done
	if [ "$(dmesg | grep -c "$ctrl: Successfully reconnected")" = "$reconnects" ]; then
		echo "0.2 s partition: no reconnect"
	else
		echo "0.2 s partition: the host reconnected"
	fi
	pair_wait 120 queues-checked
	host_disconnect

	pair_host_finish
	echo "pair nvmet-partition $transport over $provider: host ok"
}

case $RRS_ROLE in
target) target ;;
host) host ;;
*) fail "unknown role $RRS_ROLE" ;;
esac
