#!/usr/bin/env bash
# make bench: C nvmet-rdma against nvmet_rdma_rs with fio through the kernel NVMe/RDMA
# host, beside perftest and the demo pair's bench on the same rxe device, in one VM
# booted from the benchmark kernel (kernel/debug.config + kernel/bench.config: no
# lockdep, kmemleak, KFENCE or SLUB debugging); then the same transports counted: a
# second VM under QEMU's instruction count with the insn-count plugin
# (tests/bench/count-guest.sh, scripts/count-report.py), whose instructions per I/O move
# far less with the host's load than time does (Documentation/bench.md: how much). Writes bench.md (wall-clock tables), bench.png (chart),
# count.md and count-split.md (the counted figure, and where it goes by module and
# function) and the raw results to OUT_DIR, prints the tables, and ends with the line
# `transport cost Rust/C, worst row: X.XXX (±Y.YYY)` of the counted figure (count-report.py).
# Measures; asserts no speed.
#
# usage: bench.sh [--smoke | --profile | --counted] [--compare REV] [--rounds N] [--seconds S]
#                 [--windows N1:N2] [-o OUT_DIR]
#   --smoke    one short point per tool on the test kernel and the modules as `make`
#              built them, and a counted run of one point over two small rounds (what
#              make check runs so that this script cannot rot)
#   --profile  no tables: perf profiles (cpu-clock, whole guest) of 4 KiB random read and
#              write at depth 32 with each transport on the benchmark kernel, printed side
#              by side (make bench-profile); --seconds is the profiled run's length, 10 by
#              default; --rounds does not apply
#   --counted  the counted figure and the memory per controller (mem.md), no wall-clock VM
#   --compare REV  the counted figure only, of nvmet_rdma_rs as REV (any git revision)
#              builds it against nvmet_rdma_rs as the working tree builds it, alternating
#              in one VM: judges a change against its parent (`--compare HEAD~1`)
#   --rounds   rounds of every point (default 3 wall-clock, 5 counted; smoke 1 and 2)
#   --seconds  fio run time per wall-clock point and round (default 10; smoke 2)
#   --windows  the counted figure's two windows of I/Os per point (default 2000:6000;
#              smoke 200:600): cost = (W(N2) - W(N1)) / (N2 - N1)
#   -o       default: $CACHE_DIR/bench/<date>-<profile>; $CACHE_DIR/bench/latest links to it
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The bench's guests have the 4 GiB its figures were measured with (bench.md, "The
# machine"); the test guests' 2 GiB only saves the debug kernel's kmemleak scans, which
# the bench kernel does not have.
export RRS_VM_MEM=${RRS_VM_MEM:-4096}

profile=full out= rounds= seconds= compare= moddir= windows=
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) profile=smoke ;;
	--profile) profile=profile ;;
	--counted) profile=counted ;;
	--compare) profile=counted compare=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--seconds) seconds=$2; shift ;;
	--windows) windows=$2; shift ;;
	-o) out=$2; shift ;;
	*) die "usage: bench.sh [--smoke | --profile | --counted] [--compare REV] [--rounds N] [--seconds S] [--windows N1:N2] [-o OUT_DIR]" ;;
	esac
	shift
done
[[ -z "$rounds" || "$rounds" =~ ^[1-9][0-9]?$ ]] || die "--rounds: 1..99"
[[ -z "$seconds" || "$seconds" =~ ^[1-9][0-9]{0,2}$ ]] || die "--seconds: 1..999"
[[ -z "$windows" || "$windows" =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || die "--windows: N1:N2"
# counted: rounds, I/Os of the two windows, points (all when none)
if [ $profile = smoke ]; then
	count_args=("${rounds:-2}" 200 600 randread-4k-qd32)
	rounds=${rounds:-1} seconds=${seconds:-2}
else
	count_args=("${rounds:-5}" 2000 6000)
	[ -z "$windows" ] || count_args=("${count_args[0]}" "${windows%%:*}" "${windows##*:}")
fi
rounds=${rounds:-3} seconds=${seconds:-10}
guest_args=("$profile" "$rounds" "$seconds")
out=${out:-$CACHE_DIR/bench/$(date +%Y%m%d-%H%M%S)-$profile}
if [ -n "$compare" ]; then
	compare_sha=$(git -C "$REPO_ROOT" rev-parse --verify "$compare^{commit}") || die "--compare: no revision $compare"
	count_args+=(--compare)
fi

"$REPO_ROOT/scripts/setup-host.sh" >&2
vm_args=()
if [ $profile != smoke ]; then
	kbuild=$("$REPO_ROOT/scripts/build-kernel.sh" "$REPO_ROOT/kernel/debug.config" "$REPO_ROOT/kernel/bench.config")
	# Built from a copy of the sources beside the kernel, not in the repository.
	moddir=$CACHE_DIR/modules/$(basename "$kbuild")
	copy_sources "$moddir"
	log "building the modules for $(basename "$kbuild") in $moddir"
	make -s -C "$moddir" KDIR="$kbuild" modules >&2
	vm_args=(-m "$moddir" -t $((600 + rounds * (seconds * 10 + 120) * 2)))
else
	kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
	# (make check has just built them, with clippy: keep those)
	for m in rdma_server rdma_client nvmet_rdma_rs; do
		[ -f "$REPO_ROOT/$m/$m.ko" ] || { make -s -C "$REPO_ROOT" KDIR="$kbuild" modules >&2; break; }
	done
	vm_args=(-t 900)
fi

mkdir -p "$out"
plugin=$("$REPO_ROOT/scripts/build-insn-count.sh")

# counted_run: the counted VM (instructions per I/O) and its report, count.md.
counted_run() {
	local vm_extra=()
	if [ -n "$compare" ]; then
		local base=$CACHE_DIR/compare/$compare_sha
		rm -rf "$base" && mkdir -p "$base/src" "$base/ko"
		git -C "$REPO_ROOT" archive "$compare_sha" | tar -x -C "$base/src"
		log "building nvmet_rdma_rs of $compare ($compare_sha) for $(basename "$kbuild")"
		make -s -C "$base/src" KDIR="$kbuild" modules >&2
		cp "$base/src/nvmet_rdma_rs/nvmet_rdma_rs.ko" "$base/ko/"
		vm_extra=(-x "$base/ko")
	fi
	# One boot per round, so that the interval over the rounds includes what differs from
	# boot to boot (within one boot an A/A pair read 1.005 (1.003-1.008): too narrow);
	# count-merge.py makes one run of them. (A round of all points takes about 5 minutes
	# on a quiet host, up to 15 on a busy one.)
	# (the smoke, which only shows that the pipeline works, keeps its rounds in one boot)
	local r boots=() runs=()
	if [ $profile = smoke ]; then
		boots=("1:${count_args[0]}")
	else
		for ((r = 1; r <= count_args[0]; r++)); do boots+=("$r:$r"); done
	fi
	for r in "${!boots[@]}"; do
		RRS_VM_COUNT=$plugin "$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" "${vm_extra[@]}" ${moddir:+-m "$moddir"} \
			-t 1800 -o "$out/count-vm-$r" \
			"$REPO_ROOT/tests/bench/count-guest.sh" "${boots[$r]}" "${count_args[@]:1}" >&2
		runs+=("$out/count-vm-$r")
	done
	rm -rf "$out/count-vm"
	python3 "$REPO_ROOT/scripts/count-merge.py" "$out/count-vm" "${runs[@]}"
	python3 "$REPO_ROOT/scripts/count-report.py" "$out/count-vm" "$out"
}

# mem_run: memory per controller, C beside Rust (the smoke: one configuration), appended to
# REPORT. (Three rounds of 4 configurations x 2 transports, about 9 minutes under TCG; the
# smoke, one of one.)
mem_run() {
	"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" ${moddir:+-m "$moddir"} -t 3600 -o "$out/mem-vm" \
		"$REPO_ROOT/tests/bench/mem-per-queue.sh" $([ $profile = smoke ] && echo smoke) >&2
	python3 "$REPO_ROOT/scripts/mem-report.py" "$out/mem-vm/raw/mem.txt" | tee -a "$1"
}

if [ $profile = counted ]; then
	# (a comparison of two builds of ours has no C side to measure memory against)
	# (the counted figure is this target's main output: it runs even if the memory VM failed)
	[ -n "$compare" ] || { rm -f "$out/mem.md"; mem_run "$out/mem.md" || log "the memory VM failed; the counted figure follows"; }
	counted_run
	exit 0
fi
if [ $profile = profile ]; then
	# (per transport and direction: a warm-up, the run, perf's reports)
	"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" -m "$moddir" -t $((600 + seconds * 8)) -o "$out/vm" \
		"$REPO_ROOT/tests/bench/profile-guest.sh" "$seconds" >&2
	# The top of each self-time profile, C beside Rust.
	for rw in randread randwrite; do
		for t in nvmet-rdma nvmet_rdma_rs; do
			{
				echo "## $t $rw: self time, top symbols"
				awk '!/^#/ && NF && n++ < 25 { printf "%-8s %s\n", $1, $NF }' "$out/vm/raw/self-$t-$rw.txt"
			} >"$out/top-$t-$rw.txt"
		done
		paste "$out/top-nvmet-rdma-$rw.txt" "$out/top-nvmet_rdma_rs-$rw.txt" | expand -t 48
	done
	echo "profiles: $out/vm/raw"
	exit 0
fi
"$REPO_ROOT/scripts/vm-run.sh" -k "$kbuild" "${vm_args[@]}" -o "$out/vm" \
	"$REPO_ROOT/tests/bench/bench-guest.sh" "${guest_args[@]}" >&2
mkdir -p "$CACHE_DIR/bench"
ln -sfn "$(realpath "$out")" "$CACHE_DIR/bench/latest"
python3 "$REPO_ROOT/scripts/bench-report.py" --kernel "$(basename "$kbuild")" "$out/vm/raw" "$out"
mem_run "$out/bench.md"
counted_run
