#!/usr/bin/env bash
# Builds the insn-count QEMU plugin and its guest marker (scripts/insn-count/) with the
# host's rustc into $CACHE_DIR/insn-count, when their sources changed, and prints the
# plugin's path (what vm-run.sh's RRS_VM_COUNT takes).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

src=$REPO_ROOT/scripts/insn-count
out=$CACHE_DIR/insn-count
mkdir -p "$out"
stamp=$(cat "$src"/*.rs "$0" | sha256sum | cut -c1-16)-$(rustc --version | sha256sum | cut -c1-8)
if [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ]; then
	log "building the insn-count plugin and marker in $out"
	rustc --edition 2021 -O --crate-type cdylib -o "$out/libinsncount.so" "$src/plugin.rs" >&2
	# (its decoding and call-chain tests, on the host)
	rustc --edition 2021 --test -o "$out/plugin-tests" "$src/plugin.rs" >&2
	"$out/plugin-tests" -q >&2
	# (static: running it inside a counted window loads no library over 9p)
	rustc --edition 2021 -O -C strip=symbols -C target-feature=+crt-static -o "$out/insn-mark" "$src/mark.rs" >&2
	echo "$stamp" >"$out/stamp"
fi
echo "$out/libinsncount.so"
