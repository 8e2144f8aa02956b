#!/usr/bin/env bash
# Boots the test kernel in QEMU with the host's root file system shared read-only
# over virtio-9p, runs one guest test script as the guest's init payload, and
# returns its exit status. The full serial log is kept in the run directory.
# The run fails when the test fails, when the guest does not report a status
# (crash, hang, timeout), or when the kernel log shows a splat or an unexpected
# taint (see scripts/scan-kernel-log.py).
#
# usage: vm-run.sh [-k KERNEL_BUILD] [-m MODULES_DIR | -M MODULE_TREE] [-x DIR] [-t TIMEOUT_S] [-o RUN_DIR] [-v] TEST_SCRIPT [ARGS...]
#   -k  kernel build directory (default: scripts/build-kernel.sh's output)
#   -m  a directory holding the project's modules built for that kernel (default: the
#       repository, as plain `make` builds them)
#   -M  boot with this module tree (INSTALL_MOD_PATH of the kernel's modules_install and
#       of the project's `make modules_install`) instead of the kernel's own plus the
#       project's .ko files: the guest loads the modules as installed
#   -x  files the guest needs besides the modules: DIR's files are copied to RUN_DIR/extra
#       (the guest's /run/results/extra)
#   -t  wall-clock limit for the whole VM run, seconds (default 600)
#   -o  where to keep serial.log, test.log, dmesg.txt, status and verdict (default: a new dir under $CACHE_DIR/runs)
#   -v  also print the serial console while the VM runs
# Environment: RRS_ACCEL=kvm|tcg forces the accelerator (default: probe KVM once, else TCG);
#              RRS_VM_MEM (MiB, default 2048), RRS_VM_CPUS (default: host cores, at most 4);
#              RRS_VM_COUNT=PLUGIN counts the guest's instructions (bench --counted): one
#              vCPU, single-threaded TCG with a clock that advances one nanosecond per
#              instruction (-icount shift=0,sleep=off), and the insn-count plugin
#              (scripts/insn-count) writing to RUN_DIR/insn-count.txt; the marker program
#              beside the plugin (insn-mark) goes to the guest as /run/results/insn-mark.
#              Two guests on one wire (scripts/vm-pair.sh): RRS_VM_WIRE=LOCAL:REMOTE:MAC
#              gives the guest a virtio-net NIC with MAC whose frames travel as UDP
#              datagrams between 127.0.0.1:LOCAL and the peer guest's 127.0.0.1:REMOTE
#              (nothing leaves the machine); RRS_VM_PAIR_DIR=DIR shares DIR read-write as
#              the guest's /run/pair, where the two guests leave each other signs;
#              RRS_VM_ROLE=NAME is the guest's role (its test's $RRS_ROLE).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kbuild= moddir= modtree= extra= timeout_s=600 run_dir= verbose=0
while getopts "k:m:M:x:t:o:v" opt; do
	case $opt in
	k) kbuild=$OPTARG ;;
	m) moddir=$OPTARG ;;
	M) modtree=$(realpath "$OPTARG") ;;
	x) extra=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	o) run_dir=$OPTARG ;;
	v) verbose=1 ;;
	*) die "bad option" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "usage: vm-run.sh [-k KBUILD] [-m MODDIR | -M MODTREE] [-x DIR] [-t SECS] [-o DIR] [-v] TEST_SCRIPT [ARGS...]"
test_script=$(realpath "$1")
shift
[ -f "$test_script" ] || die "no such test script: $test_script"
for word in "$test_script" "$@"; do
	case "$word" in *[[:space:],]*) die "paths and arguments must not contain spaces or commas (kernel command line): '$word'" ;; esac
done

[ -n "$kbuild" ] || kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
bzimage=$kbuild/arch/x86/boot/bzImage
[ -f "$bzimage" ] || die "no kernel image in $kbuild"
modtree=${modtree:-$kbuild/modroot}
[ -d "$modtree/lib/modules" ] || die "no installed modules in $modtree"

name=$(basename "$test_script" .sh)
if [ -z "$run_dir" ]; then
	run_dir=$CACHE_DIR/runs/$(date +%Y%m%d-%H%M%S)-$name-$$
fi
rm -rf "$run_dir"
mkdir -p "$run_dir"
run_dir=$(realpath "$run_dir")

# The guest runs its own copy of the script, from the results share: the test may
# live anywhere on the host, including under a directory the guest mounts over.
cp "$test_script" "$run_dir/test.sh"
# Modules built elsewhere travel the same way (the guest's /root is a tmpfs).
if [ -n "$moddir" ]; then
	mkdir "$run_dir/modules"
	find "$moddir" -name '*.ko' -exec cp {} "$run_dir/modules/" \;
	[ -n "$(ls "$run_dir/modules")" ] || die "no modules (*.ko) under $moddir"
fi
if [ -n "$extra" ]; then
	mkdir "$run_dir/extra"
	cp -r "$extra"/. "$run_dir/extra/"
fi

accel=$("$REPO_ROOT/scripts/vm-accel.sh" "$bzimage")
cpus=${RRS_VM_CPUS:-$(($(nproc) > 4 ? 4 : $(nproc)))}
# 2 GiB: the tests' null_blk and file namespaces are memory-backed but written sparsely
# (tens of MiB). More only slows the guest: kmemleak's scan walks every page frame, and
# took 8.7 s per scan with 4 GiB against 3.8 s with 2 (each test body scans three times).
mem=${RRS_VM_MEM:-2048}
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
*) accel_args=(-accel tcg,thread=multi -cpu max) ;;
esac
if [ -n "${RRS_VM_COUNT:-}" ]; then
	[ -f "$RRS_VM_COUNT" ] || die "no insn-count plugin at $RRS_VM_COUNT"
	cp "$(dirname "$RRS_VM_COUNT")/insn-mark" "$run_dir/"
	# (-icount needs single-threaded TCG; QEMU 7.2 shares the instruction budget
	# unfairly between vCPUs under it, hence one; the guest's clocks, RTC and random
	# numbers then follow the instruction count, not the host)
	accel=tcg-icount cpus=1
	# (`noreplace-smp`: a kernel with one CPU patches its `lock` prefixes out, in C
	# modules' LOCK_PREFIX atomics but not in Rust's `core` atomics, and the locked
	# instruction count would compare a UP C with an SMP Rust; real targets have more
	# than one CPU)
	cmdline_extra=" noreplace-smp"
	accel_args=(-accel tcg,thread=single -cpu max -icount shift=0,align=off,sleep=off
		-rtc clock=vm -seed 1 -plugin "$RRS_VM_COUNT,out=$run_dir/insn-count.txt,syms=$kbuild/System.map")
fi

net_args=(-nic none)
if [ -n "${RRS_VM_WIRE:-}" ]; then
	wire_local=${RRS_VM_WIRE%%:*} wire_rest=${RRS_VM_WIRE#*:}
	wire_remote=${wire_rest%%:*} wire_mac=${wire_rest#*:}
	# (`host_mtu=9000,mrg_rxbuf=off`: the guest's virtio-net then receives into "big
	# packet" buffers, not page_pool pages (virtnet_create_page_pools). rxe's receiver
	# frees the packets of a QP going to reset or error under the QP's state lock with
	# IRQs off (rxe_receiver, drain_req_pkts), and page_pool warns on a page returned with
	# IRQs off: a host's `nvme reset` over rxe on a page_pool NIC warns every time. The
	# guest sets its MTU back to 1500: pair_net_setup.)
	net_args=(-netdev "dgram,id=wire,local.type=inet,local.host=127.0.0.1,local.port=$wire_local,remote.type=inet,remote.host=127.0.0.1,remote.port=$wire_remote"
		-device "virtio-net-pci,netdev=wire,mac=$wire_mac,host_mtu=9000,mrg_rxbuf=off")
fi
pair_args=()
if [ -n "${RRS_VM_PAIR_DIR:-}" ]; then
	[ -d "$RRS_VM_PAIR_DIR" ] || die "no directory $RRS_VM_PAIR_DIR (RRS_VM_PAIR_DIR)"
	pair_args=(-virtfs "local,path=$(realpath "$RRS_VM_PAIR_DIR"),mount_tag=pair,security_model=none")
	cmdline_extra="${cmdline_extra:-} RRS_PAIR=1"
fi
[ -z "${RRS_VM_ROLE:-}" ] || cmdline_extra="${cmdline_extra:-} RRS_ROLE=$RRS_VM_ROLE"

# Unknown key=value kernel parameters become the environment of init.
# The root (the host's, read-only) is cached in the guest (cache=loose): its binaries
# and libraries do not change during a run, and without the cache every exec reads them
# over 9p again (a tmpfs mount took 1.8 s under TCG, 0.3 s cached; a boot's set-up went
# from 14 s to about 5). The repository, the results and the pair directory stay
# uncached: the guest reads the tests live and the host reads what the guest writes.
cmdline="console=ttyS0,115200 root=rootfs rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose ro"
cmdline+=" init=$REPO_ROOT/scripts/guest/init.sh panic=-1 loglevel=6 printk.time=1 log_buf_len=16M"
cmdline+=" RRS_REPO=$REPO_ROOT RRS_TEST_NAME=$name RRS_ACCEL=$accel"
[ "$modtree" = "$kbuild/modroot" ] || cmdline+=" RRS_MODULES=installed"
cmdline+=${cmdline_extra:-}
[ $# -eq 0 ] || cmdline+=" RRS_ARGS=$(IFS=,; echo "$*")"

# A guest that has not reached its init (RRS-BEGIN) within RRS_BOOT_LIMIT seconds (300;
# 900 for the counted runs)
# hung while booting: under TCG a boot has been seen to stop for good after the delay
# calibration, once in a few dozen. It is booted again, once; the hung boot's log is kept
# as serial.boot-hang.log.
boot_limit=${RRS_BOOT_LIMIT:-300}
[ "$accel" != tcg-icount ] || boot_limit=${RRS_BOOT_LIMIT:-900}
for attempt in 1 2; do
	log "booting $name ($accel, $cpus cpus, ${mem} MiB, limit ${timeout_s}s), log: $run_dir/serial.log"
	start=$(date +%s)
	set +e
	timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
		-machine q35 "${accel_args[@]}" -smp "$cpus" -m "$mem" \
		-nographic -no-reboot "${net_args[@]}" -monitor none \
		-kernel "$bzimage" -append "$cmdline" \
		-chardev stdio,id=con0,signal=off,logfile="$run_dir/serial.log" -serial chardev:con0 \
		-virtfs local,path=/,mount_tag=rootfs,security_model=none,readonly=on,multidevs=remap \
		-virtfs local,path="$REPO_ROOT",mount_tag=repo,security_model=none,readonly=on \
		-virtfs local,path="$modtree",mount_tag=kmods,security_model=none,readonly=on \
		-virtfs local,path="$run_dir",mount_tag=results,security_model=none \
		"${pair_args[@]}" \
		</dev/null >"$run_dir/console.out" 2>"$run_dir/qemu.err" &
	qemu_pid=$!
	set -e
	if [ $verbose = 1 ] && [ $attempt = 1 ]; then
		tail -n +1 -F --pid=$qemu_pid "$run_dir/serial.log" 2>/dev/null &
	fi
	booted=0
	while kill -0 $qemu_pid 2>/dev/null; do
		if grep -q "RRS-BEGIN" "$run_dir/serial.log" 2>/dev/null; then booted=1; break; fi
		(($(date +%s) - start < boot_limit)) || break
		sleep 2
	done
	# (booted, or qemu ended by itself: the checks below say how it went)
	if [ $booted = 1 ] || ! kill -0 $qemu_pid 2>/dev/null || [ $attempt = 2 ]; then break; fi
	log "$name: the guest did not reach its init within ${boot_limit}s (a boot hang): booting it again"
	kill $qemu_pid 2>/dev/null || true
	wait $qemu_pid 2>/dev/null || true
	mv "$run_dir/serial.log" "$run_dir/serial.boot-hang.log"
done
set +e
wait $qemu_pid
qemu_rc=$?
set -e
sleep 0.2
elapsed=$(($(date +%s) - start))

if [ $qemu_rc = 124 ] || [ $qemu_rc = 137 ]; then
	log "FAIL $name: VM timed out after ${timeout_s}s"
	echo timeout >"$run_dir/verdict"
	exit 1
fi

status=$(cat "$run_dir/status" 2>/dev/null || echo none)
scan_rc=0
python3 "$REPO_ROOT/scripts/scan-kernel-log.py" --test "$test_script" "$run_dir/serial.log" >&2 || scan_rc=$?

if [ "$status" = none ]; then
	log "FAIL $name: the guest reported no status (crash or early exit; qemu rc $qemu_rc) after ${elapsed}s"
	echo no-status >"$run_dir/verdict"
	exit 1
fi
if [ "$status" != 0 ]; then
	log "FAIL $name: test exited with status $status after ${elapsed}s"
	echo "test-failed $status" >"$run_dir/verdict"
	exit 1
fi
if [ $scan_rc != 0 ]; then
	log "FAIL $name: kernel log shows a splat or unexpected taint (test itself passed) after ${elapsed}s"
	echo splat >"$run_dir/verdict"
	exit 1
fi
log "PASS $name (${elapsed}s)"
echo pass >"$run_dir/verdict"
