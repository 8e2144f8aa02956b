#!/bin/bash
# The guest half of `make bench --counted` (scripts/bench.sh boots it with vm-run.sh
# under RRS_VM_COUNT: one vCPU, -icount, the insn-count plugin). For each round, the C
# nvmet-rdma and nvmet_rdma_rs in turn (the order alternates: A B B A ...) serve a
# null_blk namespace over rxe to the kernel NVMe/RDMA host, and for every point fio does
# a warm-up run, then a run of N1 I/Os and one of N2 I/Os, each between two markers
# (insn-mark). The plugin counts every instruction the guest executes in each window,
# per translated block; the host takes (W(N2) - W(N1)) / (N2 - N1) as the cost of one
# I/O, so fio's start and exit, the markers themselves and anything else that is the
# same in both windows cancel out. The windows run in a root on the tmpfs (below), so
# that none of them waits for the host.
#
# Raw results in /run/results/raw: marks.txt (one line per marker, in the plugin's
# interval order), fio JSON, kallsyms (the whole table at the end, and each transport's
# own lines while it is loaded). Nothing here judges a speed.
#
# usage (guest): count-guest.sh ROUNDS N1 N2 [--compare] [POINT...]
#   ROUNDS     N (rounds 1 to N), or FIRST:LAST (scripts/bench.sh boots once per round,
#              so that the rounds' spread includes what differs between boots)
#   --compare  the pair is nvmet_rdma_rs as built from another revision (vm-run.sh -x put
#              it in /run/results/extra/nvmet_rdma_rs.ko; labelled nvmet_rdma_rs-base)
#              and nvmet_rdma_rs as built now, instead of the C nvmet-rdma and ours
# (the C transport's teardown can make lockdep report the chain below on the test kernel)
# rrs-known-report: c-nvmet-rdma-connect-in-cm-handler
. "$RRS_REPO/scripts/guest/lib.sh"
. "$RRS_REPO/tests/lib/nvmet.sh"

rounds=${1:-3} n1=${2:-2000} n2=${3:-6000}
first=1
case $rounds in *:*) first=${rounds%%:*} rounds=${rounds#*:} ;; esac
shift 3
pair=(nvmet-rdma nvmet_rdma_rs)
if [ "${1:-}" = --compare ]; then
	pair=(nvmet_rdma_rs-base nvmet_rdma_rs)
	[ -f /run/results/extra/nvmet_rdma_rs.ko ] || fail "--compare: no /run/results/extra/nvmet_rdma_rs.ko"
	shift
fi
raw=/run/results/raw
mkdir -p "$raw"
[ -x /run/results/insn-mark ] || fail "no /run/results/insn-mark: boot with RRS_VM_COUNT"

# name|fio options (4 KiB rows at depth 1 and 32, 128 KiB sequential at 16)
ALL_POINTS=(
	"randread-4k-qd1|--rw=randread --bs=4k --iodepth=1"
	"randread-4k-qd32|--rw=randread --bs=4k --iodepth=32"
	"randwrite-4k-qd1|--rw=randwrite --bs=4k --iodepth=1"
	"randwrite-4k-qd32|--rw=randwrite --bs=4k --iodepth=32"
	"seqread-128k-qd16|--rw=read --bs=128k --iodepth=16"
	"seqwrite-128k-qd16|--rw=write --bs=128k --iodepth=16"
	# (not fio: a controller's connect and disconnect, one admin and one I/O queue, in
	# windows of CYCLES1 and CYCLES2 cycles; its "per I/O" is per cycle)
	"connect-cycle|"
)
CYCLES1=2 CYCLES2=6
points=()
if [ $# -gt 0 ]; then
	for want in "$@"; do
		for p in "${ALL_POINTS[@]}"; do [ "${p%%|*}" = "$want" ] && points+=("$p"); done
	done
	[ ${#points[@]} = $# ] || fail "unknown point among: $*"
else
	points=("${ALL_POINTS[@]}")
fi

{
	echo "profile counted"
	echo "pair ${pair[*]}"
	echo "rounds $rounds"
	echo "n1 $n1"
	echo "n2 $n2"
	echo "cpus $(nproc)"
	echo "accel $RRS_ACCEL"
	echo "kernel $(uname -r)"
	echo "fio $(fio --version)"
	echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
} >"$raw/machine.txt"

# Every window runs inside a root on the tmpfs (fio, its libraries, bash, the marker and
# the point's script; the guest's /dev and /proc bound in), entered before the first mark
# of a point. The guest's own root is the host's file system over 9p: an exec of fio from
# there walks paths, opens its libraries and faults its pages in with replies that come
# when the host's load lets them, and the guest's path through the window (idle time
# skipped to a timer, one tick more or less, which batch a completion joins) would follow
# the host. In this root nothing in a window waits for the host. The labels, like fio's
# output, stay in the tmpfs until the end.
#
# fio runs at SCHED_FIFO priority 1 (chrt), so the work it wakes (the target's
# completion work, the host's) runs when fio waits, never in the middle of its
# submissions. At the default priority the scheduler's wake-up preemption decides, from
# the run's history, whether the target's work preempts fio after every submission (at
# depth 32, as costly per I/O as depth 1) or after a batch; randread-4k-qd32 settled in
# either, 191k or 136k instructions per I/O, window by window. At FIFO it always batches:
# on the hardware this models, target and host run on CPUs of their own and batch too.
fioroot=/tmp/fioroot
make_fio_root() {
	local f
	mkdir -p "$fioroot"/{bin,dev,proc,sys,tmp,out}
	cp /usr/bin/fio /bin/bash /usr/bin/chrt "$fioroot/bin/"
	cp /run/results/insn-mark "$fioroot/bin/insn-mark"
	for f in $(ldd /usr/bin/fio /bin/bash /usr/bin/chrt | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && NF > 1 { print $1 }' | sort -u); do
		cp -L --parents "$f" "$fioroot"
	done
	mount --bind /dev "$fioroot/dev"
	mount -t proc proc "$fioroot/proc"
	mount -t sysfs sysfs "$fioroot/sys"
	# point.sh TRANSPORT ROUND NAME N1 N2 DEVICE OPTIONS (inside the root): a warm-up run,
	# then the counted runs of N1 and N2 I/Os, each between two marks.
	cat >"$fioroot/bin/point.sh" <<'POINT'
set -eu
transport=$1 round=$2 name=$3 n1=$4 n2=$5 dev=$6 opts=$7
# fio FILE N SEED: N I/Os of the point (no disk statistics: they read sysfs)
run_fio() {
	# shellcheck disable=SC2086  # the options are words
	/bin/fio --name="$name" --filename="$dev" --ioengine=libaio --direct=1 --number_ios="$2" \
		--size=4g --norandommap --randseed="$3" --disk_util=0 --output-format=json --output="$1" $opts \
		>/dev/null 2>/tmp/fio.err || { cat /tmp/fio.err >&2; echo "fio $name over $transport failed" >&2; exit 1; }
}
# mark KIND LABEL: ends the plugin's interval (KIND total or detail) that LABEL names
mark() {
	echo "$1 $2" >>/out/marks.txt
	/bin/insn-mark "$1"
}
# (a warm-up: the transport's pools and the host's first I/Os)
run_fio /dev/null "$n1" 2
for n in "$n1" "$n2"; do
	mark total gap
	run_fio "/out/fio-$transport-$name-$round-$n.json" "$n" 1
	mark detail "$transport $name $round $n"
done
POINT
	# cycle.sh TRANSPORT ROUND N1 N2 ADDRESS NQN (inside the root, no host connected): a
	# warm-up cycle, then windows of N1 and N2 connect-disconnect cycles, each a write to
	# /dev/nvme-fabrics (nvme-cli's start-up would cost more than the cycle under TCG)
	# and one to the controller's delete_controller, which returns once it is gone.
	cat >"$fioroot/bin/cycle.sh" <<'CYCLE'
set -eu
transport=$1 round=$2 n1=$3 n2=$4 addr=$5 nqn=$6
mark() {
	echo "$1 $2" >>/out/marks.txt
	/bin/insn-mark "$1"
}
cycle() {
	local fd answer
	exec {fd}<>/dev/nvme-fabrics
	echo "transport=rdma,traddr=$addr,trsvcid=4420,nqn=$nqn,nr_io_queues=1" >&"$fd"
	read -r answer <&"$fd"
	exec {fd}>&-
	answer=${answer#instance=}
	echo 1 >"/sys/class/nvme/nvme${answer%%,*}/delete_controller"
}
cycle
for n in "$n1" "$n2"; do
	mark total gap
	for ((i = 0; i < n; i++)); do cycle; done
	mark detail "$transport connect-cycle $round $n"
done
CYCLE
}

veth_setup
rdma_link_add rxe0 rxe veth0
modprobe nvmet
modprobe nvme-rdma
# No data kept, completions inline: the backend costs as little as it can.
modprobe null_blk nr_devices=1 queue_mode=2 irqmode=0 submit_queues=1 gb=4
make_fio_root

for ((round = first; round <= rounds; round++)); do
	step "round $round of $rounds"
	order=("${pair[@]}")
	((round % 2)) || order=("${pair[1]}" "${pair[0]}")
	for transport in "${order[@]}"; do
		module=${transport%-base}
		if [ "$transport" = nvmet_rdma_rs-base ]; then
			insmod /run/results/extra/nvmet_rdma_rs.ko
		else
			modprobe "$transport"
		fi
		nvmet_subsystem "$NQN"
		nvmet_namespace "$NQN" 1 /dev/nullb0
		nvmet_port 1 ipv4 "$RRS_IP4_A" 4420
		nvmet_link 1 "$NQN"
		dev=$(host_connect "$RRS_IP4_A" 4420 --nr-io-queues=1)
		grep -F "[${module//-/_}]" /proc/kallsyms >"$raw/kallsyms-$transport-$round.txt"
		cycles=0
		for point in "${points[@]}"; do
			IFS='|' read -r name opts <<<"$point"
			[ "$name" = connect-cycle ] && { cycles=1; continue; }
			chroot "$fioroot" /bin/chrt --fifo 1 /bin/bash /bin/point.sh "$transport" "$round" "$name" "$n1" "$n2" "$dev" "$opts"
			echo "  $transport round $round $name done"
		done
		host_disconnect
		if [ $cycles = 1 ]; then
			chroot "$fioroot" /bin/bash /bin/cycle.sh "$transport" "$round" "$CYCLES1" "$CYCLES2" "$RRS_IP4_A" "$NQN"
			echo "  $transport round $round connect-cycle done"
		fi
		nvmet_clear
		rmmod "$module"
	done
done
echo "total end" >>"$fioroot/out/marks.txt"
"$fioroot/bin/insn-mark" total
cp "$fioroot"/out/* "$raw/"
# Everything but the transports, which come and go (their lines are above).
grep -v -e '\[nvmet_rdma\]' -e '\[nvmet_rdma_rs\]' /proc/kallsyms >"$raw/kallsyms.txt"
echo "count: raw results in $raw"
