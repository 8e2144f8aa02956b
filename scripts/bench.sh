#!/usr/bin/env bash
# make bench: C nvmet-rdma against nvmet_rdma_rs with fio through the kernel NVMe/RDMA
# host, beside perftest and the demo pair's bench on the same rxe device, in one VM
# booted from the benchmark kernel (kernel/debug.config + kernel/bench.config: no
# lockdep, kmemleak, KFENCE or SLUB debugging). Writes bench.md (tables), bench.png
# (chart) and the raw results to OUT_DIR, prints the tables, and ends with the line
# `min ratio Rust/C: X.XX`. Measures; asserts no speed.
#
# usage: bench.sh [--smoke] [-o OUT_DIR]
#   --smoke  one short point per tool on the test kernel and the modules as `make`
#            built them (what make check runs so that this script cannot rot)
#   -o       default: $CACHE_DIR/bench/<date>-<profile>; $CACHE_DIR/bench/latest links to it
set -euo pipefail
. "$(dirname "$0")/lib.sh"

profile=full out=
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) profile=smoke ;;
	-o) out=$2; shift ;;
	*) die "usage: bench.sh [--smoke] [-o OUT_DIR]" ;;
	esac
	shift
done
out=${out:-$CACHE_DIR/bench/$(date +%Y%m%d-%H%M%S)-$profile}

"$REPO_ROOT/scripts/setup-host.sh" >&2
vm_args=()
if [ $profile = full ]; then
	kbuild=$("$REPO_ROOT/scripts/build-kernel.sh" "$REPO_ROOT/kernel/debug.config" "$REPO_ROOT/kernel/bench.config")
	# Built beside the kernel, not in the repository (whose .ko files are the test kernel's).
	moddir=$CACHE_DIR/modules/$(basename "$kbuild")
	mkdir -p "$moddir"
	log "building the modules for $(basename "$kbuild") in $moddir"
	make -s -C "$REPO_ROOT" KDIR="$kbuild" MO="$moddir" modules >&2
	vm_args=(-m "$moddir" -t 3600)
else
	kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
	# (make check has just built them, with clippy: keep those)
	for m in rdma_server rdma_client nvmet_rdma_rs; do
		[ -f "$REPO_ROOT/$m/$m.ko" ] || { make -s -C "$REPO_ROOT" KDIR="$kbuild" modules >&2; break; }
	done
	vm_args=(-t 900)
fi

mkdir -p "$out"
"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" "${vm_args[@]}" -o "$out/vm" \
	"$REPO_ROOT/tests/bench/bench-guest.sh" "$profile" >&2
mkdir -p "$CACHE_DIR/bench"
ln -sfn "$(realpath "$out")" "$CACHE_DIR/bench/latest"
python3 "$REPO_ROOT/scripts/bench-report.py" --kernel "$(basename "$kbuild")" "$out/vm/raw" "$out"
