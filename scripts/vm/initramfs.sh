#!/usr/bin/env bash
# Build the guest's initramfs from this tree's build output.
# Usage: scripts/vm/initramfs.sh OUT.cpio.gz [--disk IMG] [-- COMMAND...]
#   no COMMAND: the guest runs the root tests (build/tests/<name> of every tests/bpf/<name>.c, or
#   VM_TESTS="test_a test_b") through scripts/run-tests.sh; with COMMAND: that, through bash, in
#   /memtrack (the tree's root in the guest: build/ and scripts/ are there).
#   --disk IMG: also write IMG, a raw ext4 image holding the same root, which the guest's /init
#   switches to when it is attached (scripts/vm/run.sh). Without mkfs.ext4, or when it fails,
#   IMG is not written (a warning says so) and the guest runs from the initramfs alone.
# Environment: BUILD (default build), VM_FILES (more host files for the guest, e.g.
#   "/usr/sbin/bpftool"; ELF files bring their shared libraries).
#
# Why dynamic binaries plus their libraries and not static builds: memtrack attaches its uprobes
# to the files the targets really map (libc.so.6, libstdc++, libjemalloc...), and resolves them
# as ld.so does (ld.so.cache, default dirs). The guest must therefore hold the same shared
# libraries at the same paths as the host, which copying `ldd`'s answer for every binary gives
# for free; static builds would test a different thing. The guest has the host's merged-/usr
# layout, a generated ld.so.cache, busybox for the tools, and bash (memtrack runs shell strings
# through `bash -c`, run-tests.sh is bash).
set -euo pipefail

die() { echo "memtrack: $*" >&2; exit 1; }

usage="usage: $0 OUT.cpio.gz [--disk IMG] [-- COMMAND...]"
[ $# -ge 1 ] || die "$usage"
out=$1; shift
disk=
if [ $# -ge 2 ] && [ "$1" = "--disk" ]; then
	disk=$2
	shift 2
fi
cmd=()
if [ $# -gt 0 ]; then
	[ "$1" = "--" ] || die "$usage"
	shift
	cmd=("$@")
fi

here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "$here/../.." && pwd)
build=$(cd "$tree" && realpath -m "${BUILD:-build}")
[ -x "$build/memtrack" ] || die "cannot open '$build/memtrack': No such file; run make first"
command -v busybox >/dev/null || die "busybox is missing; run: scripts/deps.sh vm"
command -v cpio >/dev/null || die "cpio is missing; run: scripts/deps.sh vm"

root=$(mktemp -d "${TMPDIR:-/tmp}/memtrack-vm-root.XXXXXX")
trap 'rm -rf "$root"' EXIT

# Same merged-/usr layout as the host, so every path ldd prints is valid in the guest too.
for d in bin sbin lib lib64; do
	if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$root/$d"; else mkdir -p "$root/$d"; fi
done
# /disk: where the initramfs's /init mounts the disk before switching to it. /var/tmp: the
# tests' folder for file pages (mt_disk_dir in tests/lib), on ext4 when the root is the disk.
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,etc,proc,sys,dev,tmp,var/tmp,root,disk,memtrack/scripts}
chmod 1777 "$root/tmp" "$root/var/tmp"

# The work below avoids a fork per file where it can: on a loaded 2-CPU machine a fork and
# exec costs ~30 ms, and the guest gets a few hundred files.
declare -A seen=() realdir=()
# The host's canonical form of a folder (merged /usr: /lib/x86_64-linux-gnu -> /usr/lib/...).
canon_dir() {
	local d=$1
	[ -n "${realdir[$d]:-}" ] || realdir[$d]=$(realpath -m "$d")
	REPLY=${realdir[$d]}
}

# Copy one host file to the same path in the guest, recreating each symlink on the way.
add_file() {
	local p=$1 dir dest t
	while [ -z "${seen[$p]:-}" ]; do
		seen[$p]=1
		canon_dir "${p%/*}"; dir=$REPLY
		dest=$root$dir/${p##*/}
		if [ -e "$dest" ] || [ -L "$dest" ]; then return 0; fi
		[ -d "$root$dir" ] || mkdir -p "$root$dir"
		if [ -L "$p" ]; then
			cp -P "$p" "$dest"
			t=$(readlink "$p")
			case $t in /*) p=$t ;; *) p=$dir/$t ;; esac
		else
			[ -e "$p" ] || die "cannot open '$p': No such file or directory"
			cp "$p" "$dest"
			return 0
		fi
	done
}

is_elf() {
	local magic=
	LC_ALL=C read -r -N 4 magic <"$1" 2>/dev/null || true
	[ "$magic" = $'\x7fELF' ]
}

# The tree's binaries: memtrack, tests, targets (and whatever else was built, e.g. from another
# branch), at /memtrack/build like in the tree, so the test harness finds them by its cwd.
elves=()
mkdir -p "$root/memtrack/build"
while IFS= read -r -d '' f; do
	is_elf "$f" || continue
	rel=${f#"$build"/}
	case $rel in */*) mkdir -p "$root/memtrack/build/${rel%/*}" ;; esac
	cp "$f" "$root/memtrack/build/$rel"
	elves+=("$f")
done < <(find "$build" -maxdepth 2 -type f -perm -u+x -size -64M -print0)
cp "$tree/scripts/run-tests.sh" "$root/memtrack/scripts/"
# The targets' sources: test_report_stacks finds the line of a call in tests/targets/stacks.c
# (it read 0 lines of a missing file, "c's allocation at line 48, want 0").
mkdir -p "$root/memtrack/tests/targets"
cp "$tree"/tests/targets/*.c "$root/memtrack/tests/targets/"

bash_bin=$(command -v bash)
busybox_bin=$(command -v busybox)
add_file "$bash_bin"
add_file "$busybox_bin"
elves+=("$bash_bin")
# The host's own (dynamic) ls and cat: test_track_auto's "dynamically linked tree" runs them
# and wants every process served by the interposer, which busybox's static applets cannot be.
# busybox --install at boot leaves them in place.
for f in ls cat; do
	f=$(command -v "$f")
	add_file "$f"
	elves+=("$f")
done
for f in ${VM_FILES:-}; do
	add_file "$f"
	if is_elf "$f"; then elves+=("$f"); fi
done

# Every shared library ld.so would load for these binaries (ldd: the host's own resolution;
# one call for all). Static executables get "not a dynamic executable", and ldd fails.
while IFS= read -r lib; do
	add_file "$lib"
done < <(ldd "${elves[@]}" 2>/dev/null | awk '/^[ \t]/ && /=> \// { print $3; next } /^[ \t]+\// { print $1 }' | sort -u)

# busybox for everything else (mount, poweroff, grep, sed, rm...): /bin/sh for /init now, the
# other applets by `busybox --install -s` at boot, which leaves existing files (bash) alone.
canon_dir /bin
[ -e "$root$REPLY/sh" ] || ln -s "$(realpath "$busybox_bin")" "$root$REPLY/sh"

# ld.so.cache for exactly these files: memtrack reads it like ld.so does.
cp -a /etc/ld.so.conf "$root/etc/"
[ -d /etc/ld.so.conf.d ] && cp -a /etc/ld.so.conf.d "$root/etc/"
ldconfig -r "$root"
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

# What the guest runs: /init reads these.
if [ ${#cmd[@]} -gt 0 ]; then
	printf '%q ' "${cmd[@]}" >"$root/memtrack/vm-command"
	echo >>"$root/memtrack/vm-command"
else
	if [ -n "${VM_TESTS:-}" ]; then
		tests=$VM_TESTS
	else
		tests=$(cd "$tree/tests/bpf" && ls test_*.c | sed 's/\.c$//')
	fi
	for t in $tests; do
		[ -x "$root/memtrack/build/tests/$t" ] ||
			die "cannot open '$build/tests/$t': No such file; run make $(basename "$build")/tests/$t"
		echo "build/tests/$t"
	done >"$root/memtrack/vm-tests"
fi
install -m 0755 "$here/init" "$root/init"

mkdir -p "$(dirname "$out")"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) |
	gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"

# The disk: the same root, on ext4, so that the tests' binaries, the libraries they map and
# /var/tmp are on a disk file system (file pages, not tmpfs's shmem ones: the file-page rmap
# scenarios and small_member_exit need that). mkfs.ext4 -d fills it from the folder, with no
# loop mount. Size: the root plus 256 MiB for the tests' files (8 MiB each); sparse, so the
# unused part costs nothing. lazy_itable_init=0: the inode tables are zeroed here, instead of
# by the guest's ext4lazyinit thread while the tests run (emulated, and a stray I/O load).
# -T default: 4 KiB blocks like a real disk's ext4 (mke2fs makes a file system this small with
# 1 KiB blocks otherwise).
# A fresh image every run: nothing of a previous run leaks into this one.
if [ -n "$disk" ]; then
	rm -f "$disk"
	if ! command -v mkfs.ext4 >/dev/null; then
		echo "memtrack: mkfs.ext4 is missing (scripts/deps.sh vm): the guest gets no disk, the tests that need one skip" >&2
	else
		mib=$(($(du -sm "$root" | cut -f1) + 256))
		if truncate -s "${mib}M" "$disk.tmp" &&
			mkfs.ext4 -q -F -T default -L memtrack -m 0 -E lazy_itable_init=0,lazy_journal_init=0 \
				-d "$root" "$disk.tmp" >&2; then
			mv "$disk.tmp" "$disk"
		else
			rm -f "$disk.tmp"
			echo "memtrack: cannot make the guest's disk image '$disk': the guest gets no disk, the tests that need one skip" >&2
		fi
	fi
fi
