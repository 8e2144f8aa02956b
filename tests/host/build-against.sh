#!/usr/bin/env bash
# Builds the project's modules against kernel build tree KDIR the way a user does
# (`make KDIR=...`, then `make modules_install INSTALL_MOD_PATH=...`), from a copy of the
# sources in OUT_DIR (the repository's .ko files stay the test kernel's), and checks:
# - the build printed no warning, in particular not kbuild's "the compiler differs from
#   the one used to build the kernel";
# - each module's .comment names the compiler the kernel's .config names;
# - modules_install put the three modules under lib/modules/<release>/updates and depmod
#   indexed them, so that modprobe finds them.
# OUT_DIR/src holds the built modules afterwards (scripts/vm-run.sh -m OUT_DIR/src).
#
# usage: build-against.sh KDIR OUT_DIR
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

kdir=$(realpath "${1:?usage: build-against.sh KDIR OUT_DIR}")
out=${2:?usage: build-against.sh KDIR OUT_DIR}
src=$out/src install=$out/install
copy_sources "$src"

failed=0
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then echo "ok: $what"; else echo "FAIL: $what" >&2; failed=1; fi
}

built_by=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$kdir/.config")
log "building against $kdir (built by: $built_by)"
make -C "$src" KDIR="$kdir" modules >"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; die "make KDIR=$kdir failed"; }
check "the build printed no warning" \
	bash -c "! grep -Ei 'warning|differs|does not match' '$out/build.log'"
# (gcc records "GCC: (Debian 12.2.0-14+deb12u1) 12.2.0" for "gcc-12 (Debian ...) 12.2.0")
comment=$(sed -E 's/^gcc(-[0-9]+)? //' <<<"$built_by")
for m in rdma_server rdma_client nvmet_rdma_rs; do
	check "$m.ko was compiled by $built_by" \
		bash -c "readelf -p .comment '$src/$m/$m.ko' | grep -qF '$comment'"
done

# (into a copy of the kernel's installed modules where it has them, as on a real system:
# depmod then resolves every symbol the modules need)
rm -rf "$install"
if [ -d "$kdir/modroot/lib/modules" ]; then cp -a "$kdir/modroot" "$install"; fi
make -C "$src" KDIR="$kdir" INSTALL_MOD_PATH="$install" modules_install >"$out/install.log" 2>&1 ||
	{ cat "$out/install.log"; die "make modules_install failed"; }
release=$(cat "$kdir/include/config/kernel.release")
for m in rdma_server rdma_client nvmet_rdma_rs; do
	check "$m is installed in updates/ and indexed by depmod" \
		grep -q "^updates/$m/$m\.ko:" "$install/lib/modules/$release/modules.dep"
done
[ $failed = 0 ] || die "building against $kdir: checks failed (logs in $out)"
echo "build against $kdir: ok"
