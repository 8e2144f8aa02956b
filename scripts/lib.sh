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
export LIBCLANG_PATH=$LIBCLANG_DIR

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }
