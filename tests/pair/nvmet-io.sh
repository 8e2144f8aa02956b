#!/bin/bash
# NVMe-oF between two kernels (scripts/vm-pair.sh): the target in one guest, the kernel
# host in the other, over rxe or siw on the wire between them, as deployed.
# usage: nvmet-io.sh [TRANSPORT_MODULE [PROVIDER [CYCLES]]] (default nvmet_rdma_rs rxe 50)
# - verified fio writes, in-capsule (4 KiB, the port's default inline size) and keyed
#   (64 KiB), read back on the host;
# - the transport's module refuses to unload while the host is connected, and the
#   host's I/O goes on (verified again);
# - under the host's verified writes, the target's port removed and made again, then the
#   target's RDMA device deleted and added again: the host holds its I/O over each,
#   reconnects by itself, and its writes end without an error and read back intact.
#   Ours listens again by itself once the device is back; the C transport does not (its
#   listener goes with the device), so for it the test enables the port again, as its
#   administrator would;
# - CYCLES connects and disconnects of a controller (one I/O queue of 32), each live;
# - on the target afterwards: no queue left, the transport unloads once the ports are
#   gone, and kmemleak finds nothing.
# The C nvmet-rdma runs it too, as the control: the -c.sh script beside this one.
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
. "$RRS_REPO/tests/lib/pair.sh"
transport=${1:-nvmet_rdma_rs} provider=${2:-rxe} cycles=${3:-50}

pair_net_setup
rdma_link_add "${provider}0" "$provider" wire

target() {
	kmemleak_start
	pair_nvmet_target "$transport" "$provider"
	pair_signal target-ready

	pair_wait 900 host-connected
	step "target: $transport refuses to unload while the host is connected"
	if rmmod "$transport" 2>/tmp/rmmod.err; then fail "rmmod $transport succeeded with a host connected"; fi
	grep -q "in use" /tmp/rmmod.err || fail "rmmod $transport: $(cat /tmp/rmmod.err), expected: in use"
	pair_signal unload-refused

	pair_wait 300 load-running
	step "target: port 1 removed under the host's writes, and made again 3 s later"
	nvmet_unlink 1 "$NQN"
	rmdir "$NVMET/ports/1"
	sleep 3
	nvmet_port 1 ipv4 "$PAIR_IP_TARGET" 4420
	nvmet_link 1 "$NQN"
	pair_signal port-back

	pair_wait 300 load-running-2
	step "target: $provider device deleted under the host's writes, and added again 3 s later"
	rdma_link_delete "${provider}0"
	if [ "$transport" = nvmet_rdma_rs ]; then
		assert_dmesg "nvmet_rdma_rs: port 1: listener lost \(DeviceRemoval\); re-creating it"
		wait_until 20 bash -c "! grep -q qid /sys/kernel/debug/nvmet_rdma_rs/queues"
	fi
	sleep 3
	rdma_link_add "${provider}0" "$provider" wire
	if [ "$transport" = nvmet_rdma_rs ]; then
		wait_until 30 bash -c "dmesg | grep -q 'nvmet_rdma_rs: port 1: listening again on $PAIR_IP_TARGET:4420'"
	else
		# (the C transport drops a port's listener with its device and does not listen
		# again (nvmet_rdma_device_removal): the administrator enables the port again)
		echo "the C transport's port 1 is not listening after its device came back: enabling it again"
		nvmet_unlink 1 "$NQN"
		nvmet_link 1 "$NQN"
	fi
	pair_signal device-back

	pair_target_finish "$transport"
	echo "pair nvmet-io $transport over $provider: target ok"
}

host() {
	modprobe nvme-rdma
	pair_wait 600 target-ready
	step "host: connect to $PAIR_IP_TARGET:4420 across the wire"
	local dev
	dev=$(host_connect "$PAIR_IP_TARGET" 4420)
	fio_verify "$dev" incapsule --rw=randwrite --bs=4k --size=8M --iodepth=16
	fio_verify "$dev" keyed --rw=randwrite --bs=64k --offset=8M --size=16M --iodepth=8
	pair_signal host-connected
	pair_wait 300 unload-refused
	step "host: I/O goes on after the refused unload"
	fio_verify "$dev" after-rmmod --rw=randrw --bs=16k --offset=24M --size=8M --iodepth=4
	fio_verify_only "$dev" incapsule --rw=randwrite --bs=4k --size=8M --iodepth=16
	host_disconnect

	# (reconnecting every second, never giving up: the host rides out what the target does)
	dev=$(host_connect "$PAIR_IP_TARGET" 4420 --reconnect-delay=1 --ctrl-loss-tmo=-1)
	step "host: verified writes while the target removes its port and makes it again"
	load_start "$dev" 40
	pair_signal load-running
	pair_wait 120 port-back
	load_end clean
	step "host: verified writes while the target's RDMA device goes and comes back"
	load_start "$dev" 60
	pair_signal load-running-2
	pair_wait 120 device-back
	load_end clean
	fio_verify_only "$dev" incapsule --rw=randwrite --bs=4k --size=8M --iodepth=16
	host_disconnect

	step "host: $cycles connects and disconnects, each live"
	local i ctrl opts=",nr_io_queues=1,queue_size=32,hostnqn=$(test_host_nqn 3),hostid=$(test_host_id 3)"
	for ((i = 1; i <= cycles; i++)); do
		ctrl=$(fabrics_connect "$PAIR_IP_TARGET" 4420 "$opts") || fail "cycle $i: connect failed"
		[ "$(cat "/sys/class/nvme/$ctrl/state")" = live ] || fail "cycle $i: $ctrl is $(cat "/sys/class/nvme/$ctrl/state")"
		fabrics_disconnect "$ctrl"
	done
	pair_host_finish
	echo "pair nvmet-io $transport over $provider: host ok"
}

case $RRS_ROLE in
target) target ;;
host) host ;;
*) fail "unknown role $RRS_ROLE" ;;
esac
