#!/usr/bin/env bash
# `make demo`: sets up the host, builds the kernel and the modules, boots the VM and
# runs the demo script with its console shown live.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$REPO_ROOT/scripts/setup-host.sh"
kbuild=$("$REPO_ROOT/scripts/build-kernel.sh")
make -C "$REPO_ROOT" KDIR="$kbuild" modules
"$REPO_ROOT/scripts/vm-run.sh" -v -k "$kbuild" -o "$CACHE_DIR/runs/demo" "$REPO_ROOT/tests/demo/demo.sh"
echo "demo finished; full serial log: $CACHE_DIR/runs/demo/serial.log"
