#!/usr/bin/env bash
# `make demo`: sets up the host, builds (or reuses) the kernel and the modules, installs
# the modules into a copy of the kernel's module tree with `make modules_install`, boots
# the VM from that tree and runs tests/demo/demo.sh with its console shown live. The
# guest's transcript is kept as transcript.txt beside the serial log.
#
# usage: demo.sh [--check] [-k KERNEL_BUILD] [-o RUN_DIR]
#   --check  as make check runs it: no set-up or module build (done already), console not
#            shown, and the transcript checked step by step (tests/demo/check-transcript.sh)
#   -k       kernel build directory (default: scripts/build-kernel.sh's output)
#   -o       run directory (default: $CACHE_DIR/runs/demo)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

check=0 kbuild= run_dir=$CACHE_DIR/runs/demo
while [ $# -gt 0 ]; do
	case $1 in
	--check) check=1 ;;
	-k) kbuild=$2; shift ;;
	-o) run_dir=$2; shift ;;
	*) die "usage: demo.sh [--check] [-k KERNEL_BUILD] [-o RUN_DIR]" ;;
	esac
	shift
done

if [ $check = 0 ]; then
	"$REPO_ROOT/scripts/setup-host.sh"
fi
[ -n "$kbuild" ] || kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
kbuild=$(realpath "$kbuild") run_dir=$(realpath -m "$run_dir")
[ $check = 1 ] || make -s -C "$REPO_ROOT" KDIR="$kbuild" modules

# The kernel's own modules plus ours, installed the way a user installs them.
modroot=$run_dir.modroot
rm -rf "$modroot"
mkdir -p "$(dirname "$modroot")"
cp -a "$kbuild/modroot" "$modroot"
make -s -C "$REPO_ROOT" KDIR="$kbuild" INSTALL_MOD_PATH="$modroot" modules_install

verbose=(-v)
[ $check = 0 ] || verbose=()
rc=0
"$REPO_ROOT/scripts/vm-run.sh" "${verbose[@]}" -k "$kbuild" -M "$modroot" -t 600 -o "$run_dir" \
	"$REPO_ROOT/tests/demo/demo.sh" || rc=$?
cp "$run_dir/test.log" "$run_dir/transcript.txt" 2>/dev/null || true
if [ $rc != 0 ]; then
	grep -h "DEMO FAILED" "$run_dir/transcript.txt" >&2 || true
	# A splat: name the step whose kernel log it is in.
	# (the scanner exits 1 when it finds one)
	first=$(python3 "$REPO_ROOT/scripts/scan-kernel-log.py" "$run_dir/serial.log" 2>&1 |
		sed -n 's/^splat: line \([0-9]*\):.*/\1/p' | head -n 1 || true)
	if [ -n "$first" ]; then
		step=$(head -n "$first" "$run_dir/serial.log" | grep -o 'rrs: demo step .*' | tail -n 1 || true)
		step=${step:-rrs: demo set-up}
		log "the kernel log shows a splat in ${step#rrs: demo }:"
		sed -n "${first}p" "$run_dir/serial.log" >&2
	fi
	die "the demo failed ($(cat "$run_dir/verdict" 2>/dev/null || echo no verdict)); serial log: $run_dir/serial.log"
fi
if [ $check = 1 ]; then
	"$REPO_ROOT/tests/demo/check-transcript.sh" "$run_dir/transcript.txt"
fi
echo "demo finished; transcript: $run_dir/transcript.txt, serial log: $run_dir/serial.log"
