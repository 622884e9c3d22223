#!/usr/bin/env bash
# Fetch a Debian cloud kernel for the VM lane and print the path of its vmlinuz.
# Usage: scripts/vm/kernel.sh VERSION        (VERSION: 6.12 or 6.1, see suite_of below)
# Environment:
#   VM_CACHE    where kernels are kept (default /var/cache/memtrack-vm: outside the work tree,
#               so `make clean` keeps them and every work tree of the project shares them)
#   VM_REFRESH=1  look for a newer package even when one is cached
#   VM_MIRROR   the Debian mirror (default: the first one in this system's apt sources)
#
# The package comes from a private apt state (sources list, lists, cache under VM_CACHE), so
# the host's apt configuration and package lists are never changed; `apt-get download` only
# needs the mirror. A cached kernel is used without touching the network.
set -euo pipefail

die() { echo "memtrack: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 VERSION (6.12 or 6.1)"
ver=$1
# Which Debian suite ships that kernel series as linux-image-<ver>.*-cloud-amd64-unsigned.
case $ver in
6.12) suite=trixie ;;
6.1) suite=bookworm ;;
*) die "no Debian suite known for kernel $ver; known: 6.12 (trixie), 6.1 (bookworm)" ;;
esac

cache=${VM_CACHE:-/var/cache/memtrack-vm}
dir=$cache/kernel-$ver
mkdir -p "$dir" 2>/dev/null || die "cannot create '$dir'; set VM_CACHE to a writable folder"

# Two work trees may fetch the same kernel at once: one does it, the other waits.
exec 9>"$dir/.lock"
flock 9

if [ -s "$dir/vmlinuz" ] && [ "${VM_REFRESH:-0}" != 1 ]; then
	echo "$dir/vmlinuz"
	exit 0
fi

# The mirror configured on this system (deb822 .sources or one-line .list), never a fixed
# host name: CI and developers' machines point at their own mirrors. Only an entry that serves
# the system's own release (e.g. bookworm) counts: that excludes the security archive and
# third-party repositories.
# Prints "URI SUITE..." per entry.
entries_of_system() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3 }'
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		sed '/^[ \t]*#/d' "$f" | awk 'BEGIN { RS = ""; FS = "\n" }
		     {
		         deb = 0; uris = ""; suites = ""
		         for (i = 1; i <= NF; i++) {
		             if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
		             if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
		             if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
		         }
		         if (deb) { n = split(uris, u, /[ \t]+/); for (j = 1; j <= n; j++) print u[j], suites }
		     }'
	done
}
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
mirror=${VM_MIRROR:-$(entries_of_system | awk -v c="$codename" '{ for (i = 2; i <= NF; i++) if ($i == c) { print $1; exit } }')}
[ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list*; set VM_MIRROR=http://.../debian"

apt_dir=$dir/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb $mirror $suite main" >"$apt_dir/sources.list"
apt_opts=(
	-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
	-o "APT::Get::List-Cleanup=0"
	# the download lands in a root-owned folder the _apt user cannot write
	-o "APT::Sandbox::User=root"
)
echo "memtrack: fetching the $suite package list from $mirror" >&2
apt-get "${apt_opts[@]}" -qq --error-on=any update >&2 ||
	die "cannot update the $suite package list from '$mirror'; check the network or set VM_MIRROR"

# "6.1" must not match 6.12: the version is followed by a dot. Newest by version order.
pattern="^linux-image-${ver//./\\.}\\.[0-9].*-cloud-amd64-unsigned\$"
pkg=$(apt-cache "${apt_opts[@]}" search --names-only "$pattern" | awk '{ print $1 }' | sort -V | tail -n1)
[ -n "$pkg" ] || die "no package matching '$pattern' in $suite at '$mirror'"

work=$(mktemp -d "$dir/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "memtrack: downloading $pkg" >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq download "$pkg" >&2) ||
	die "cannot download '$pkg' from '$mirror'"
dpkg-deb -x "$work"/*.deb "$work/root"
images=("$work"/root/boot/vmlinuz-*)
vmlinuz=${images[0]}
[ -f "$vmlinuz" ] || die "'$pkg' has no /boot/vmlinuz-*"
cp "$work"/root/boot/config-* "$dir/config.tmp"
cp "$vmlinuz" "$dir/vmlinuz.tmp"
mv "$dir/config.tmp" "$dir/config"
echo "$pkg" >"$dir/package"
mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
# The package lists are only needed to pick a package: ~20 MB not worth keeping.
rm -rf "$apt_dir"
echo "$dir/vmlinuz"
