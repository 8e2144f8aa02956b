#!/usr/bin/env bash
# Configures and builds the pinned kernel with checked-in config fragments, merged in
# order (an option in a later fragment wins). The build directory is keyed by kernel
# version, the last fragment's name and the fragments' hash, so a second run (or CI on
# the same machine) reuses it. Prints the build directory on stdout.
#
# usage: build-kernel.sh [fragment...]   (default: kernel/kunit.config
#        kernel/nvmet-debugfs.config kernel/debug.config,
#        the test kernel, with KUnit; make bench uses kernel/debug.config
#        kernel/bench.config, make check-kasan kernel/debug.config kernel/kasan.config)
#
# The compiler is gcc, unless a fragment has a line "# rrs-build: LLVM=-N": then clang-N
# (Debian 12's clang-19 and its libclang for bindgen, installed on demand).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

fragments=("$@")
((${#fragments[@]})) || fragments=("$REPO_ROOT/kernel/kunit.config" "$REPO_ROOT/kernel/nvmet-debugfs.config" "$REPO_ROOT/kernel/debug.config")
for f in "${fragments[@]}"; do [ -f "$f" ] || die "no config fragment $f"; done
name=$(basename "${fragments[-1]}" .config)

src=$("$REPO_ROOT/scripts/fetch-kernel.sh")
version=$(basename "$src")
hash=$( (cat "${fragments[@]}"; echo "$version") | sha256sum | cut -c1-12)
out=$CACHE_DIR/build/$version-$name-$hash

# One build of a kernel at a time: a second caller (`make` while `make check` builds the
# kernel) waits for the first and then reuses its result, instead of building into the
# same directory at once (which corrupts it) or removing it as superseded.
mkdir -p "$CACHE_DIR/build"
exec 9>"$CACHE_DIR/build/.lock-$version-$name"
flock 9

if [ -f "$out/.built" ]; then
	log "reusing kernel build $out"
	echo "$out"
	exit 0
fi

llvm=$(sed -n 's/^# rrs-build: LLVM=\(-[0-9]*\)$/\1/p' "${fragments[@]}" | tail -n 1)
if [ -n "$llvm" ]; then
	"$REPO_ROOT/scripts/setup-host.sh" --clang "${llvm#-}" >&2
	compilers=(LLVM="$llvm" LIBCLANG_PATH="/usr/lib/llvm${llvm}/lib")
else
	compilers=(LLVM= CC=gcc HOSTCC=gcc LIBCLANG_PATH="$LIBCLANG_DIR")
fi

mkdir -p "$out"
kmake() {
	make -C "$src" O="$out" "${compilers[@]}" BINDGEN=bindgen "$@"
}

log "checking the Rust toolchain"
kmake rustavailable >&2 || die "Rust is not available for this kernel (run scripts/setup-host.sh)"

log "configuring $out from tinyconfig + kvm_guest.config + ${fragments[*]##*/}"
kmake tinyconfig >&2
cp "$out/.config" "$out/.config.tiny"
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config.tiny" \
	"$src/kernel/configs/kvm_guest.config" "${fragments[@]}" >&2
kmake olddefconfig >&2

# Every option the fragments ask for (the last word on each) must have survived
# dependency resolution.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) opt=${line%%=*}; grep -q "^$opt=" "$out/.config" && { log "config: $opt is set, wanted off"; bad=1; } ;;
	CONFIG_*=*) grep -qx "$line" "$out/.config" || { log "config: wanted $line, got: $(grep "^${line%%=*}=" "$out/.config" || echo unset)"; bad=1; } ;;
	esac
done < <(grep -h '^CONFIG_' "${fragments[@]}" | awk -F= '{ last[$1] = $0; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
	END { for (i = 1; i <= n; i++) print last[order[i]] }')
[ $bad = 0 ] || die "config fragments not honoured (see above)"

log "building kernel and modules in $out ($(nproc) jobs)"
kmake -j"$(nproc)" bzImage modules >&2
rm -rf "$out/modroot"
kmake INSTALL_MOD_PATH="$out/modroot" INSTALL_MOD_STRIP=1 modules_install >&2
touch "$out/.built"

# Older builds of the same source and fragment are superseded: drop them.
for old in "$CACHE_DIR/build/$version-$name-"*; do
	[ "$old" = "$out" ] || { log "removing superseded build $old"; rm -rf "$old"; }
done
echo "$out"
