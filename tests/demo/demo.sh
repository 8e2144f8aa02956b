#!/bin/bash
# The `make demo` guest script: the product at work, as an admin and a storage engineer
# use it. An NVMe-oF target served by nvmet_rdma_rs over soft-RoCE, set up through
# configfs (then saved and restored with nvmetcli), used by the kernel's nvme-rdma host
# with nvme-cli and fio, inspected through debugfs and `rdma res`; then the demo pair;
# then the admin's teardown. Every command is shown ("# command") before its output.
#
# Any failing command or assertion ends the script non-zero with the step named; a kernel
# splat fails the run too (scripts/demo.sh names the step it came in). `make check` runs
# this script as well (tests/demo/check-transcript.sh checks the transcript step by step).
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"
set -E

NQN=nqn.2026-11.io.rdma-rs:demo
TARGET_IP=$RRS_IP4_A
CFS=/sys/kernel/config/nvmet
DEMO_STEPS=7
current_step="set-up"

# run CMD...: shows a simple command, then runs it.
run() {
	printf '# %s\n' "$*"
	"$@"
}

# shell LINE: shows a command line with redirections or pipes as typed, then runs it.
shell() {
	printf '# %s\n' "$1"
	eval "$1"
}

# note TEXT: a line of explanation between commands.
note() { printf '(%s)\n' "$*"; }

# demo_step N TITLE: starts step N (marked in the kernel log too).
demo_step() {
	current_step="$1/$DEMO_STEPS: $2"
	echo
	echo "=== Step $current_step"
	echo "rrs: demo step $current_step" >/dev/kmsg
}

finish() {
	local rc=$?
	if [ "$rc" = 0 ]; then
		echo
		echo "=== demo: all $DEMO_STEPS steps done"
	else
		echo
		echo "=== DEMO FAILED in step $current_step (exit status $rc)" >&2
	fi
}
trap finish EXIT

# (kmemleak, where the kernel has it, checks at the end that nothing leaked)
kmemleak=0
[ -e /sys/kernel/debug/kmemleak ] && kmemleak=1
[ $kmemleak = 0 ] || kmemleak_start

demo_step 1 "an RDMA device: soft-RoCE (rxe) on a veth pair inside the guest"
veth_setup
note "the target listens on veth0's $TARGET_IP; the host side runs in this same guest"
run modprobe rdma_rxe
run rdma link add rxe0 type rxe netdev veth0
wait_until 10 test -e /sys/class/infiniband/rxe0
run rdma link show
note "siw (soft-iWARP) works the same way: rdma link add siw0 type siw netdev veth0; the tests run over both"
note "the project's modules are installed like any out-of-tree module (make modules_install):"
run modinfo -F filename nvmet_rdma_rs rdma_server rdma_client

demo_step 2 "the target, configured through configfs as an admin does it"
run modprobe nvmet
run modprobe nvmet_rdma_rs
run modprobe null_blk nr_devices=1 memory_backed=1 gb=1
run truncate -s 256M /var/tmp/demo-ns2.img
run mkdir "$CFS/subsystems/$NQN"
shell "cd $CFS/subsystems/$NQN"
shell "echo 1 > attr_allow_any_host"
run mkdir namespaces/1
shell "echo -n /dev/nullb0 > namespaces/1/device_path"
shell "echo 1 > namespaces/1/enable"
run mkdir namespaces/2
shell "echo -n /var/tmp/demo-ns2.img > namespaces/2/device_path"
shell "echo 1 > namespaces/2/enable"
run mkdir "$CFS/ports/1"
shell "cd $CFS/ports/1"
shell "echo $TARGET_IP > addr_traddr"
shell "echo rdma > addr_trtype"
shell "echo 4420 > addr_trsvcid"
shell "echo ipv4 > addr_adrfam"
shell "echo 8192 > param_inline_data_size"
run ln -s "$CFS/subsystems/$NQN" "$CFS/ports/1/subsystems/$NQN"
shell "cd ~"
shell "dmesg | grep 'enabling port'"
note "the same target through nvmetcli: saved as JSON, cleared, restored"
run nvmetcli save /root/nvmet-demo.json
run cat /root/nvmet-demo.json
run nvmetcli clear
run ls "$CFS/ports" "$CFS/subsystems"
[ -z "$(ls -A "$CFS/ports")$(ls -A "$CFS/subsystems")" ] || fail "nvmetcli clear left ports or subsystems"
run nvmetcli restore /root/nvmet-demo.json
shell "dmesg | grep -E 'enabling port|disabling port'"
run cat /sys/kernel/debug/nvmet_rdma_rs/ports

demo_step 3 "the host: nvme-cli over the kernel's nvme-rdma"
run modprobe nvme-rdma
run nvme discover -t rdma -a "$TARGET_IP" -s 4420
run nvme connect -t rdma -n "$NQN" -a "$TARGET_IP" -s 4420
wait_until 20 bash -c ". $RRS_REPO/tests/lib/nvmet.sh; c=\$(host_ctrl $NQN) && ns_dev \$c 1 && ns_dev \$c 2" >/dev/null
ctrl=$(host_ctrl "$NQN")
ns1=$(ns_dev "$ctrl" 1)
ns2=$(ns_dev "$ctrl" 2)
wait_until 10 test -b "$ns1"
wait_until 10 test -b "$ns2"
run nvme list
note "block device names count namespaces as the host found them: NSID 1 is $ns1, NSID 2 is $ns2"
run cat "/sys/class/nvme/$ctrl/transport" "/sys/class/nvme/$ctrl/address"

demo_step 4 "I/O: fio writes and reads back every block with crc32c checksums"
fio_common="--ioengine=libaio --direct=1 --verify=crc32c --verify_fatal=1"
note "NSID 1 (null_blk): 8 KiB random writes at depth 16, in the command capsule (param_inline_data_size 8192)"
shell "fio --name=ns1-8k --filename=$ns1 --rw=randwrite --bs=8k --iodepth=16 --size=8M $fio_common --output=/tmp/fio-ns1.txt"
shell "grep -E 'err=|IOPS=|^ +lat \\(.sec\\): min' /tmp/fio-ns1.txt"
note "NSID 2 (a file): 64 KiB sequential writes at depth 8, through RDMA READ"
shell "fio --name=ns2-64k --filename=$ns2 --rw=write --bs=64k --iodepth=8 --size=16M $fio_common --output=/tmp/fio-ns2.txt"
shell "grep -E 'err=|IOPS=|^ +lat \\(.sec\\): min' /tmp/fio-ns2.txt"
grep -q "err= 0" /tmp/fio-ns1.txt && grep -q "err= 0" /tmp/fio-ns2.txt || fail "fio reported errors"
note "the target's live view (tools/nvmet-rdma-top, like iostat -x) while fio reads NSID 1 for 4 s: per queue and port, commands/s, MB/s, latency percentiles (µs) over each second, waits"
cd "$RRS_REPO"
shell "fio --name=ns1-read --filename=$ns1 --rw=randread --bs=8k --iodepth=8 --size=8M --time_based --runtime=4 --ioengine=libaio --direct=1 --output=/tmp/fio-read.txt &"
run tools/nvmet-rdma-top -i 1 -n 3
wait
note "latency per queue and port since the module loaded, by class and phase: wait (slot, send queue), rdma_read, core (nvmet and the backend), out (RDMA WRITE and SEND)"
run cat /sys/kernel/debug/nvmet_rdma_rs/latency
note "the reads' latency histogram (log2 buckets)"
run tools/nvmet-rdma-top --hist read

demo_step 5 "what the transport shows: per-queue counters in debugfs, its QPs in rdma res"
note "one line per queue: commands, in-capsule and keyed (RDMA) data, bytes moved, send-queue waits, errors"
run cat /sys/kernel/debug/nvmet_rdma_rs/queues
run rdma res show qp
rdma res show qp | grep -q 'comm \[nvmet_rdma_rs\]' || fail "rdma res show qp names no QP of nvmet_rdma_rs"

demo_step 6 "the demo pair: RDMA CM, SEND/RECV, RDMA READ/WRITE, fast registration"
run modprobe rdma_server addr="$TARGET_IP"
run modprobe rdma_client server="$TARGET_IP"
wait_until 10 grep -q established /sys/kernel/debug/rdma_server/connections
shell "echo 'hello over RDMA' > /sys/kernel/debug/rdma_demo/send"
run cat /sys/kernel/debug/rdma_demo/reply
[ "$(cat /sys/kernel/debug/rdma_demo/reply)" = "hello over RDMA" ] || fail "the reply differs from what was sent"
note "krping's ping loop, each round trip validated"
shell "echo count=20,size=65536,validate > /sys/kernel/debug/rdma_demo/ping"
shell "dmesg | grep 'rdma_client: ping:' | tail -n 1"
note "a short latency and bandwidth bench"
shell "echo mode=wlat,size=4096,count=200 > /sys/kernel/debug/rdma_demo/bench"
run cat /sys/kernel/debug/rdma_demo/bench
shell "echo mode=bw,size=65536,count=200,depth=8 > /sys/kernel/debug/rdma_demo/bench"
run cat /sys/kernel/debug/rdma_demo/bench
run cat /sys/kernel/debug/rdma_server/connections

demo_step 7 "teardown, as an admin does it"
run nvme disconnect -n "$NQN"
wait_until 20 sh -c "! grep -q qid /sys/kernel/debug/nvmet_rdma_rs/queues"
run rm "$CFS/ports/1/subsystems/$NQN"
run rmdir "$CFS/ports/1"
run rmdir "$CFS/subsystems/$NQN/namespaces/1" "$CFS/subsystems/$NQN/namespaces/2"
run rmdir "$CFS/subsystems/$NQN"
run rmmod rdma_client rdma_server nvmet_rdma_rs
shell "dmesg | grep -E 'nvmet_rdma_rs: (queue .* released|disabling port|unloading)|rdma_server: connection .* released'"
run rdma link delete rxe0
[ $kmemleak = 0 ] || kmemleak_check
