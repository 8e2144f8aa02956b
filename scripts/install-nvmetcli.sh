#!/usr/bin/env bash
# Installs nvmetcli (the NVMe target configuration tool), which Debian 12 does not ship:
# its package is taken from Debian unstable through the private apt configuration (only
# downloaded and unpacked, never installed with dpkg), its Python dependency
# configshell-fb from PyPI, both into /usr/local/lib/nvmetcli; /usr/local/sbin/nvmetcli
# runs it with the system's Python. The VM guests share the host's root, so they see it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PREFIX=/usr/local/lib/nvmetcli
WRAPPER=/usr/local/sbin/nvmetcli

if [ -x "$WRAPPER" ] && [ -f "$PREFIX/.installed" ]; then
	exit 0
fi

[ -f "$APT_PRIVATE_DIR/sources.list" ] && [ -d "$APT_PRIVATE_DIR/lists" ] || apt_private_update
(cd "$APT_PRIVATE_DIR/archives" && apt_private download nvmetcli >&2 2>/dev/null) ||
	{ apt_private_update && (cd "$APT_PRIVATE_DIR/archives" && apt_private download nvmetcli >&2 2>/dev/null); }
deb=$(ls -t "$APT_PRIVATE_DIR"/archives/nvmetcli_*.deb | head -n1)
[ -s "$deb" ] || die "nvmetcli was not downloaded"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work"
rm -rf "$PREFIX"
mkdir -p "$PREFIX" "$(dirname "$WRAPPER")"
cp -a "$work"/usr/lib/python3/dist-packages/nvmet "$PREFIX/"
cp "$work"/usr/bin/nvmetcli "$PREFIX/nvmetcli"
cp -a "$work"/usr/share/doc/nvmetcli/examples "$PREFIX/examples"
log "installing configshell-fb (PyPI) into $PREFIX"
python3 -m pip install --quiet --disable-pip-version-check --target "$PREFIX" configshell-fb
cat >"$WRAPPER" <<WRAP
#!/bin/sh
# nvmetcli from Debian unstable with configshell-fb from PyPI; see scripts/install-nvmetcli.sh.
PYTHONPATH=$PREFIX\${PYTHONPATH:+:\$PYTHONPATH} exec /usr/bin/python3 $PREFIX/nvmetcli "\$@"
WRAP
chmod +x "$WRAPPER"
"$WRAPPER" --help >/dev/null 2>&1 || true
basename "$deb" >"$PREFIX/.installed"
log "nvmetcli installed: $WRAPPER ($(basename "$deb"))"
