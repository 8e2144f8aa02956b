#!/usr/bin/env bash
# Installs everything the build and the VM harness need on a fresh Debian 12 machine.
# Idempotent: each step checks whether its result is already there.
#
# usage: setup-host.sh             everything make, make check and make demo need (but
#                                  cargo-fuzz, which only the fuzzer needs)
#        setup-host.sh --clang N   clang-N, lld-N, llvm-N and libclang1-N only (a kernel
#                                  built with LLVM=-N: make check-kasan's)
#        setup-host.sh --fuzz      cargo-fuzz only (scripts/fuzz-wire.sh asks for it: make
#                                  check's fuzz pass and make fuzz; a first make demo does
#                                  not wait for its build)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# install_debian PACKAGE...: installs those of the packages that are missing.
install_debian() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || log "apt-get update failed; trying with the existing lists"
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

if [ "${1:-}" = --clang ]; then
	[[ "${2:-}" =~ ^[0-9]+$ ]] || die "usage: setup-host.sh --clang VERSION"
	install_debian "clang-$2" "lld-$2" "llvm-$2" "libclang1-$2"
	exit 0
fi

if [ "${1:-}" = --fuzz ]; then
	if ! command -v cargo-fuzz >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo-fuzz" ]; then
		log "installing cargo-fuzz"
		cargo install --locked cargo-fuzz@0.13.2
	fi
	exit 0
fi

DEB_PACKAGES=(
	# kernel build
	build-essential gcc make flex bison bc libelf-dev libssl-dev cpio kmod rsync python3 xz-utils
	# VM harness
	qemu-system-x86
	# guest userspace (the guest shares the host's root file system)
	iproute2 rdma-core ibverbs-providers ibverbs-utils rdmacm-utils librdmacm-dev libibverbs-dev
	nvme-cli fio perftest procps util-linux
	# make bench's chart
	gnuplot-nox
)

install_debian "${DEB_PACKAGES[@]}"

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "adding rust-src"
	rustup component add rust-src
fi

if ! command -v bindgen >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/bindgen" ]; then
	log "installing bindgen-cli"
	cargo install --locked bindgen-cli
fi

if [ ! -e "$LIBCLANG_DIR/libclang.so" ]; then
	log "installing libclang $LIBCLANG_VERSION (PyPI wheel) into $LIBCLANG_PREFIX"
	python3 -m pip install --quiet --disable-pip-version-check \
		--target "$LIBCLANG_PREFIX" "libclang==$LIBCLANG_VERSION"
fi

"$(dirname "$0")/install-nvmetcli.sh"

log "host set-up complete (libclang: $LIBCLANG_DIR)"
