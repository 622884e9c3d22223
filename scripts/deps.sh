#!/usr/bin/env bash
# Install the Debian packages memtrack needs to build, test and benchmark, if any is missing.
# Usage: scripts/deps.sh [--check] [vm]   (--check: only report, exit 1 when something is missing;
#                                        vm: also what `make check-vm` needs)
set -euo pipefail
check=0; vm=0
for a in "$@"; do
	case $a in
	--check) check=1 ;;
	vm) vm=1 ;;
	*) echo "memtrack: unknown argument '$a'; usage: $0 [--check] [vm]" >&2; exit 2 ;;
	esac
done
pkgs=(
	make gcc g++ clang llvm pkg-config bpftool libbpf-dev libelf-dev zlib1g-dev libzstd-dev zstd
	libmsgpack-dev libjansson-dev libyaml-dev libcmocka-dev
	# call stacks: unwinding copied user stacks (src/stacks/unwind_dwfl.c); memtrack report:
	# symbolisation (elfutils libdw/libdwfl), C++ and Rust demangling (libiberty); libdw's own
	# compression libraries' archives (memtrack links these statically: Makefile)
	libdw-dev libiberty-dev liblzma-dev libbz2-dev
	# where a uprobe may sit past instructions the kernel would single-step (probe_place.c)
	libcapstone-dev
	# the pprof test reads our profiles back with an independent decoder
	python3-protobuf protobuf-compiler
	# --stacks in process: the interposer dlopens libunwind.so.8
	libunwind8
	# allocators the tests track besides glibc
	libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev
	# real programs the overhead suite's rows run (benchmarks/memtrack.yml)
	sqlite3 python3
	# what users would pick instead, measured beside memtrack by the same suite (heaptrack-*,
	# massif-* rows)
	heaptrack valgrind
	# a 32-bit test program (build/targets/alloc_fixed32: test_foreign_abi)
	gcc-multilib
	# <sys/sdt.h>: test_usdt checks that memtrack reads its notes like ours (include/memtrack.h
	# itself needs nothing)
	systemtap-sdt-dev
)
# The VM lane (scripts/vm): an emulator, busybox for the guest's tools, cpio for its initramfs,
# e2fsprogs (mkfs.ext4) for its disk. Only for check-vm: qemu is large, and `make check` does
# not need it.
if [ $vm = 1 ]; then pkgs+=(qemu-system-x86 busybox-static cpio e2fsprogs); fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ $check = 1 ]; then
	echo "memtrack: missing packages: ${missing[*]}" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "memtrack: missing packages: ${missing[*]}; run: sudo $0" >&2
	exit 1
fi
echo "memtrack: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
