#!/usr/bin/env bash
# Downloads the pinned Debian linux-source-7.2 package and unpacks it into the cache.
# Uses a private apt configuration so the system's sources are never touched: adding
# unstable to /etc/apt would upgrade libc and break the machine.
# Prints the path of the unpacked source tree on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

apt_dir=$APT_PRIVATE_DIR
mkdir -p "$CACHE_DIR/src"

find_tree() {
	local v=$1
	local d=$CACHE_DIR/src/$KERNEL_PKG-$v
	[ -f "$d/.unpacked" ] && echo "$d"
}

if tree=$(find_tree "$KERNEL_PKG_VERSION"); then
	echo "$tree"
	exit 0
fi

apt_private_update

version=$KERNEL_PKG_VERSION
available=$(apt-cache -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=- \
	-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::pkgcache="$apt_dir/pkgcache.bin" \
	-o Dir::Cache::srcpkgcache="$apt_dir/srcpkgcache.bin" madison "$KERNEL_PKG" | awk -F'|' '{gsub(/ /,"",$2); print $2}')
if ! grep -qx "$version" <<<"$available"; then
	newest=$(sort -V <<<"$available" | grep '^7\.2\.' | tail -n1 || true)
	[ -n "$newest" ] || die "no $KERNEL_PKG version is served (saw: ${available:-nothing})"
	log "############################################################"
	log "WARNING: pinned $KERNEL_PKG=$version is not served any more;"
	log "WARNING: falling back to the newest 7.2.x: $newest"
	log "WARNING: update KERNEL_PKG_VERSION in scripts/lib.sh"
	log "############################################################"
	version=$newest
	if tree=$(find_tree "$version"); then echo "$tree"; exit 0; fi
fi

deb=$apt_dir/archives/${KERNEL_PKG}_${version}_all.deb
if [ ! -s "$deb" ]; then
	log "downloading $KERNEL_PKG=$version"
	(cd "$apt_dir/archives" && apt_private download "$KERNEL_PKG=$version" >&2)
	mv "$apt_dir/archives/${KERNEL_PKG}_"*"${version#*:}"*_all.deb "$deb" 2>/dev/null || true
fi
[ -s "$deb" ] || die "download of $KERNEL_PKG=$version failed"

dest=$CACHE_DIR/src/$KERNEL_PKG-$version
rm -rf "$dest" "$dest.tmp"
mkdir -p "$dest.tmp"
log "unpacking $deb"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest.tmp" ./usr/src
tarball=$(ls "$dest.tmp"/usr/src/linux-source-*.tar.xz)
tar -xJf "$tarball" -C "$dest.tmp"
mv "$dest.tmp"/linux-source-7.2* "$dest"
rm -rf "$dest.tmp"
touch "$dest/.unpacked"
echo "$dest"
