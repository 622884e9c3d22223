#!/usr/bin/env bash
# What a memtrack run costs the rest of the machine. Uprobes are set on library files, so while
# memtrack runs (and until its detacher has closed the links), every process that calls a probed
# allocator traps, tracked or not: the BPF programs filter it out, the traps are paid. This times
# an allocation storm outside memtrack, alone and while memtrack tracks `sleep`, in interleaved
# rounds (alone, then memtrack started, during, memtrack stopped: the machine's drift hits
# both), and prints the medians (ms) and the median of the rounds' ratios. MODE (default auto)
# is the --alloc-hooks mode: under auto the tracked `sleep` is served by the interposer, no
# allocator uprobe is installed, and the ratio is 1 but for noise (target <= 1.1); under uprobe
# every malloc of the storm traps.
# Both the storm and the tracked `sleep` load a private copy of libc (LD_LIBRARY_PATH): other
# memtrack runs on this machine probe the system's libc, and would trap the storm in both
# phases; memtrack's own probes on the copy are what this measures.
# NEIGHBOUR=dlopen times PAIRS rounds of dlopen/dlsym/dlclose of libz (targets/dlopen_loop)
# instead of the storm: under uprobe mode glibc's dlopen has memtrack's return probe.
# TRACK=TARGET runs BUILD/targets/TARGET once in the tracked tree before its `sleep` (e.g.
# alloc_jemalloc: a program linked with a shared jemalloc, which auto mode serves too).
# UNSERVED=1 runs `env -i ... alloc_fixed 1 1` there first: a process auto mode cannot serve,
# which needs glibc's uprobes while it runs (src/track/tracker_glibc.c).
# Needs root and a built tree.
# Usage: [MODE=auto|preload|uprobe] [NEIGHBOUR=storm|dlopen] [TRACK=TARGET] [UNSERVED=1]
#        scripts/neighbour-cost.sh [BUILD] [ROUNDS] [PAIRS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
pairs=${3:-200000}
mode=${MODE:-auto}
case ${NEIGHBOUR:-storm} in
storm) storm=$build/targets/alloc_storm ;;
dlopen) storm=$build/targets/dlopen_loop ;;
*) echo "NEIGHBOUR is storm or dlopen" >&2; exit 2 ;;
esac
out=$(mktemp -d)
mt=
trap '[ -n "$mt" ] && kill "$mt" 2>/dev/null; rm -rf "$out"' EXIT
mkdir "$out/lib" "$out/o"
cp "$(ldd "$storm" | awk '$1 == "libc.so.6" { print $3 }')" "$out/lib/"
export LD_LIBRARY_PATH=$out/lib

storm_us() {
	local t0 t1
	t0=$(date +%s%N)
	"$storm" "$pairs" > /dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000))
}

median() {
	sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

for ((i = 0; i < rounds; i++)); do
	a=$(storm_us)
	LD_LIBRARY_PATH= "$build/memtrack" track -q --alloc-hooks "$mode" -o "$out/o" -- \
		env LD_LIBRARY_PATH="$out/lib" sh -c "${UNSERVED:+env -i LD_LIBRARY_PATH=$out/lib $build/targets/alloc_fixed 1 1; }${TRACK:+$build/targets/$TRACK > /dev/null; }exec sleep 3600" &
	mt=$!
	sleep 1 # loaded and attached
	d=$(storm_us)
	kill "$mt"
	wait "$mt" 2>/dev/null || true
	mt=
	sleep 1 # its detacher closes the links
	echo "$a $d"
done > "$out/rounds"
alone=$(awk '{ print $1 / 1000 }' "$out/rounds" | median)
during=$(awk '{ print $2 / 1000 }' "$out/rounds" | median)
ratio=$(awk '{ print $2 / $1 }' "$out/rounds" | median)
echo "$(basename "$storm") $pairs (untracked): alone $alone ms, while memtrack ($mode) runs $during ms," \
	"ratio $ratio (median of $rounds interleaved rounds)"
