# Shared settings for the project's scripts. Sourced, not run.
# shellcheck shell=bash

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything downloaded or built lives here, outside the repository.
CACHE_DIR=${RDMA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma-rust-modules}

# The pinned kernel: Debian's linux-source-7.2 package.
KERNEL_PKG=linux-source-7.2
KERNEL_PKG_VERSION=${KERNEL_PKG_VERSION:-7.2.13-1}
KERNEL_APT_SUITE=${KERNEL_APT_SUITE:-unstable}

LIBCLANG_VERSION=18.1.1
LIBCLANG_PREFIX=$CACHE_DIR/libclang-$LIBCLANG_VERSION
LIBCLANG_DIR=$LIBCLANG_PREFIX/clang/native

export PATH="$HOME/.cargo/bin:$PATH"

# copy_sources DEST: the project's sources without build outputs, tests or docs, into
# DEST, for a module build that must leave the repository's .ko files alone (they are the
# test kernel's; kbuild's MO= refuses a tree with an in-tree build).
copy_sources() {
	mkdir -p "$1"
	rsync -a --delete --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='*_generated.rs' --exclude=modules.order --exclude='*.d' \
		--exclude=Module.symvers --exclude='*.rmeta' --exclude=.git --exclude=tests \
		--exclude=Documentation "$REPO_ROOT/" "$1/"
}

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# A private apt configuration for Debian unstable (the kernel source, nvmetcli): it only
# downloads into the cache; the system's sources and packages are never touched.
APT_PRIVATE_DIR=$CACHE_DIR/apt
apt_private() {
	apt-get -q \
		-o Dir::Etc::SourceList="$APT_PRIVATE_DIR/sources.list" \
		-o Dir::Etc::SourceParts=- \
		-o Dir::State::Lists="$APT_PRIVATE_DIR/lists" \
		-o Dir::Cache::Archives="$APT_PRIVATE_DIR/archives" \
		-o Dir::Cache::pkgcache="$APT_PRIVATE_DIR/pkgcache.bin" \
		-o Dir::Cache::srcpkgcache="$APT_PRIVATE_DIR/srcpkgcache.bin" \
		-o APT::Get::List-Cleanup=0 \
		"$@"
}

# apt_private_update: writes the private sources and refreshes their lists.
apt_private_update() {
	mkdir -p "$APT_PRIVATE_DIR/lists/partial" "$APT_PRIVATE_DIR/archives/partial"
	cat >"$APT_PRIVATE_DIR/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $KERNEL_APT_SUITE main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main
SRC
	log "updating private apt lists in $APT_PRIVATE_DIR"
	apt_private update >&2
}
