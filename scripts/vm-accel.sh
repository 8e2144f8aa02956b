#!/usr/bin/env bash
# Prints the accelerator the VM runner should use: "kvm" when /dev/kvm really
# boots a kernel, "tcg" otherwise. On some machines /dev/kvm exists but fails
# (emulation errors, hangs), so it is probed once by booting the kernel to its
# first panic (no root file system) and the answer is cached per machine.
# RRS_ACCEL=kvm|tcg overrides.
#
# usage: vm-accel.sh BZIMAGE
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ -n "${RRS_ACCEL:-}" ]; then echo "$RRS_ACCEL"; exit 0; fi
cache=$CACHE_DIR/kvm-probe-$(hostname)
if [ -f "$cache" ]; then cat "$cache"; exit 0; fi

answer=tcg
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	probe_log=$(mktemp)
	timeout -k 5 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nographic -no-reboot -nic none \
		-monitor none -kernel "$1" -append "console=ttyS0 panic=-1 root=/dev/nonexistent" \
		</dev/null >"$probe_log" 2>&1 || true
	if grep -q "Kernel panic" "$probe_log"; then answer=kvm; fi
	rm -f "$probe_log"
fi
log "accelerator: $answer (cached in $cache)"
mkdir -p "$CACHE_DIR"
echo "$answer" >"$cache"
echo "$answer"
