#!/usr/bin/env bash
# Run memtrack's root tests (or any command) as root inside another kernel, under qemu.
#
# Usage: scripts/vm/run.sh KERNEL_VERSION [-- COMMAND...]
#   KERNEL_VERSION  6.12 (Debian 13's cloud kernel: fentry, folio rmap functions, uprobe_multi)
#                   or 6.1 (Debian 12's cloud kernel: fentry, no uprobe_multi)
#   no COMMAND      run the root tests: build/tests/<name> for every tests/bpf/<name>.c (or
#                   VM_TESTS="test_track_rss test_track_fork") through scripts/run-tests.sh
#   COMMAND         run it with bash in /memtrack, the tree's root in the guest (build/ and
#                   scripts/run-tests.sh are there; the guest has busybox, bash and the shared
#                   libraries of everything under build/), e.g.
#                     scripts/vm/run.sh 6.12 -- build/memtrack track --rmap -- build/targets/rss_touch
#                     scripts/vm/run.sh 6.12 -- bash -c 'grep folio_add /proc/kallsyms'
#
# Needs root (apt-get download into the cache), qemu-system-x86, busybox-static, cpio and
# e2fsprogs (scripts/deps.sh vm) and a built tree (make all and the root tests: make check-vm
# does both).
#
# The guest's disk: every run writes .output/vm/KERNEL_VERSION/disk.img, a fresh sparse ext4
# image (the root plus 256 MiB) holding the same files as the initramfs, attached as an NVMe
# drive. /init mounts it and switches to it, so the tests, their targets, the libraries they
# map and /var/tmp are on ext4: the file-page rmap scenarios get real file pages (tmpfs pages
# are shmem) and a target's own text is not shmem. /tmp stays tmpfs (run outputs, as before).
# When the image cannot be made, attached or mounted, the guest says so on the console and
# runs from the initramfs; the tests that need a disk then skip with their reason.
# To use it from another work tree, copy scripts/vm/ there: it takes the binaries from the
# build/ folder of the tree it lives in.
#
# Prints the guest's console as it goes; the log is kept in .output/vm/KERNEL_VERSION/console.log.
# Exit status: the tests' (or the command's) status in the guest; 124 when no end marker came
# within VM_TIMEOUT (a hang, a panic, a guest that did not boot); 1 when fetching or building failed.
#
# Environment:
#   BUILD        the build folder (default build)
#   VM_TIMEOUT   seconds before the guest is given up (default 1200: the whole root suite
#                takes 6-11 min here on a loaded machine; a hang costs this much)
#   VM_MEM       guest memory in MiB (default 1024)
#   VM_SMP       guest CPUs (default 2: per-CPU counters and threads need more than one)
#   VM_FILES     more host files to put in the guest ("/usr/sbin/bpftool"), with their libraries
#   VM_DISK=0    no disk: the guest runs from the initramfs (tmpfs) alone, as before the disk
#                existed; the four tests that need a disk file system skip, saying why
#   VM_CACHE, VM_REFRESH, VM_MIRROR: see scripts/vm/kernel.sh
#
# KVM hangs on the machines this was written on: qemu runs with TCG (pure emulation), ~10-20x
# slower than the host for CPU-bound work.
set -euo pipefail

die() { echo "memtrack: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: $0 KERNEL_VERSION [-- COMMAND...]"
ver=$1; shift
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
	die "usage: $0 KERNEL_VERSION [-- COMMAND...]"
fi

here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "$here/../.." && pwd)
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 is missing; run: scripts/deps.sh vm"

work=$tree/.output/vm/$ver
initrd=$work/initramfs.cpio.gz
disk=$work/disk.img
log=$work/console.log
# A console log is always this run's: check.sh tells "never booted" from its absence.
rm -f "$log"
mkdir -p "$work"
vmlinuz=$("$here/kernel.sh" "$ver")
disk_opts=()
if [ "${VM_DISK:-1}" != 0 ]; then disk_opts=(--disk "$disk"); else rm -f "$disk"; fi
"$here/initramfs.sh" "$initrd" "${disk_opts[@]}" "$@"

# The disk as an NVMe drive: NVMe and ext4 are built into both cloud kernels (=y in their
# config), while virtio_blk is a module there, which would mean carrying .ko files. cache=unsafe:
# a scratch image, rewritten by the next run, so the guest's flushes need not reach the host's
# disk. memtrack_disk= tells /init which device to wait for (NVMe probes asynchronously) and
# mount; the kernel does not know the parameter and leaves it alone. No image (VM_DISK=0, no
# mkfs.ext4): no disk, and the tests that need one skip.
qemu_disk=()
append="console=ttyS0 quiet loglevel=4 panic=-1 oops=panic rdinit=/init"
if [ -s "$disk" ]; then
	qemu_disk=(-drive "file=$disk,format=raw,if=none,id=disk,cache=unsafe"
		-device "nvme,drive=disk,serial=memtrack")
	append+=" memtrack_disk=/dev/nvme0n1"
fi

timeout_s=${VM_TIMEOUT:-1200}
echo "memtrack: booting $(cat "$(dirname "$vmlinuz")/package" 2>/dev/null || echo "$vmlinuz") under qemu (TCG, timeout ${timeout_s}s)" >&2
start=$(date +%s)
# -no-reboot with panic=-1: a panicking guest ends qemu at once instead of hanging to the
# timeout. No network: everything is in the initramfs (and on the disk), results come on ttyS0.
# --foreground keeps qemu in the caller's process group, so Ctrl-C at the terminal stops it too.
# thread=single: with one host thread per vCPU (thread=multi) the 6.12 guest once died at boot
# on a stray int3 in kernel text being patched (cross-CPU code modification under TCG); one
# thread for both vCPUs also leaves the machine's other CPU to other work.
# oops=panic: an oops in the guest ends the run with its trace, instead of a hung test.
set +e
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
	-accel tcg,thread=single -cpu max -smp "${VM_SMP:-2}" -m "${VM_MEM:-1024}" \
	-nodefaults -display none -no-reboot -serial stdio \
	-kernel "$vmlinuz" -initrd "$initrd" "${qemu_disk[@]}" -append "$append" \
	</dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
elapsed=$(($(date +%s) - start))

status=$(sed -n 's/^memtrack-vm: end status=\([0-9][0-9]*\)$/\1/p' "$log" | tail -n1)
if [ -z "$status" ]; then
	if [ "$qemu_rc" -eq 124 ]; then
		echo "memtrack: the $ver guest did not finish within ${timeout_s}s; console in $log (raise VM_TIMEOUT if it was only slow)" >&2
	else
		echo "memtrack: the $ver guest stopped without its end marker (qemu exit $qemu_rc); console in $log" >&2
	fi
	exit 124
fi
echo "memtrack: $ver guest finished in ${elapsed}s with status $status" >&2
exit "$status"
