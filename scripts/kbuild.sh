#!/usr/bin/env bash
# Runs kbuild for this project's out-of-tree modules (`make modules`, `make
# modules_install`) against a kernel build tree, with the compilers and the libclang
# that suit that kernel:
#
# - the kernel: $KDIR, or else the pinned test kernel (set up and built on first use);
# - the C compiler: the one the kernel's .config names (CONFIG_CC_IS_CLANG or
#   CONFIG_CC_IS_GCC, CONFIG_CC_VERSION_TEXT): clang as LLVM=-N or LLVM=1, gcc as
#   CC=gcc-N or CC=gcc, whichever prints the same version text; an LLVM or CC the user
#   set (command line or environment) is used as given instead;
# - libclang for bindgen: $LIBCLANG_PATH if the user set one; for a clang-built kernel,
#   the same LLVM's libclang (/usr/lib/llvm-N/lib) if installed; else the project's
#   (scripts/setup-host.sh puts it in the cache); else none, and bindgen searches the
#   system's usual places.
#
# usage: kbuild.sh modules|modules_install [make variables...]
# environment: KDIR, CLIPPY, INSTALL_MOD_PATH, INSTALL_MOD_DIR, LLVM, CC, LIBCLANG_PATH
set -euo pipefail
user_libclang=${LIBCLANG_PATH:-}
. "$(dirname "$0")/lib.sh"

target=${1:?usage: kbuild.sh modules|modules_install}
shift
# (the Makefile passes unset variables as empty ones, which kbuild would take as set:
# INSTALL_MOD_DIR= installs outside updates/)
for v in KDIR CLIPPY INSTALL_MOD_PATH INSTALL_MOD_DIR RRS_TEST_HOOKS; do
	[ -n "${!v:-}" ] || unset "$v"
done

kdir=${KDIR:-}
if [ -z "$kdir" ]; then
	"$REPO_ROOT/scripts/setup-host.sh" >&2
	kdir=$("$REPO_ROOT/scripts/build-kernel.sh")
fi
config=$kdir/.config
[ -f "$config" ] && grep -qx 'CONFIG_RUST=y' "$config" ||
	die "$kdir is not a configured kernel build tree with CONFIG_RUST=y"

# config_value NAME: the value of CONFIG_NAME in the kernel's .config, unquoted.
config_value() { sed -n "s/^CONFIG_$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" "$config"; }
# version_text COMPILER: its first --version line as kbuild records it (no '#').
version_text() { LC_ALL=C "$1" --version 2>/dev/null | head -n 1 | tr -d '#'; }

built_by=$(config_value CC_VERSION_TEXT)
clang_kernel=0 major=
if grep -qx 'CONFIG_CC_IS_CLANG=y' "$config"; then
	clang_kernel=1 major=$(($(config_value CLANG_VERSION) / 10000))
else
	major=$(($(config_value GCC_VERSION) / 10000))
fi
vars=()
if [ -n "${LLVM+set}" ] || [ -n "${CC+set}" ]; then
	[ -n "${LLVM+set}" ] && vars+=("LLVM=$LLVM")
	[ -n "${CC+set}" ] && vars+=("CC=$CC" "HOSTCC=${HOSTCC:-$CC}")
elif [ $clang_kernel = 1 ]; then
	llvm=
	for candidate in "-$major" 1; do
		compiler=clang$([ "$candidate" = 1 ] || echo "$candidate")
		command -v "$compiler" >/dev/null || continue
		[ -n "$llvm" ] || llvm=$candidate
		if [ "$(version_text "$compiler")" = "$built_by" ]; then llvm=$candidate; break; fi
	done
	[ -n "$llvm" ] || die "$kdir was built by '$built_by'; neither clang-$major nor clang is on PATH (set LLVM=)"
	vars+=("LLVM=$llvm")
else
	cc=
	for compiler in "gcc-$major" gcc; do
		command -v "$compiler" >/dev/null || continue
		[ -n "$cc" ] || cc=$compiler
		if [ "$(version_text "$compiler")" = "$built_by" ]; then cc=$compiler; break; fi
	done
	[ -n "$cc" ] || die "$kdir was built by '$built_by'; neither gcc-$major nor gcc is on PATH (set CC=)"
	vars+=("LLVM=" "CC=$cc" "HOSTCC=$cc")
fi

# has_libclang DIR: DIR holds a libclang shared library bindgen can load.
has_libclang() { compgen -G "$1/libclang*.so*" >/dev/null; }
libclang=
if [ -n "$user_libclang" ]; then
	has_libclang "$user_libclang" || die "LIBCLANG_PATH=$user_libclang holds no libclang*.so*"
	libclang=$user_libclang
elif [ $clang_kernel = 1 ] && has_libclang "/usr/lib/llvm-$major/lib"; then
	libclang=/usr/lib/llvm-$major/lib
elif has_libclang "$LIBCLANG_DIR"; then
	libclang=$LIBCLANG_DIR
fi
[ -z "$libclang" ] || vars+=("LIBCLANG_PATH=$libclang")

[ -n "${CLIPPY:-}" ] && vars+=("CLIPPY=1")
# (the test hold points of nvmet_rdma_rs/test_hooks.rs; the test suites build with them)
[ "${RRS_TEST_HOOKS:-}" = 1 ] && vars+=("RRS_TEST_HOOKS=1")
log "$target for $kdir: ${vars[*]}"
exec make -C "$kdir" M="$REPO_ROOT" BINDGEN=bindgen "${vars[@]}" "$@" "$target"
