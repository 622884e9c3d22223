#!/usr/bin/env bash
# What a memtrack run costs the rest of the machine. Uprobes are set on library files, so while
# memtrack runs (and until its detacher has closed the links), every process that calls a probed
# allocator traps, tracked or not: the BPF programs filter it out, the traps are paid. This times
# an allocation storm outside memtrack, alone and while memtrack tracks `sleep`, and prints the
# medians (ms) and their ratio. MODE (default auto) is the --alloc-hooks mode: under auto the
# tracked `sleep` is served by the interposer, so no allocator uprobe is installed and the
# ratio is 1 but for noise (bound: 1.1); under uprobe every malloc of the storm traps.
# Needs root and a built tree.
# Usage: [MODE=auto|preload|uprobe] scripts/neighbour-cost.sh [BUILD] [ROUNDS] [PAIRS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
pairs=${3:-200000}
mode=${MODE:-auto}
storm=$build/targets/alloc_storm
out=$(mktemp -d)
trap 'kill "$mt" 2>/dev/null || true; rm -rf "$out"' EXIT

time_storms() {
	for ((i = 0; i < rounds; i++)); do
		local t0 t1
		t0=$(date +%s%N)
		"$storm" "$pairs" > /dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000))
	done | sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.1f", m / 1000 }'
}

alone=$(time_storms)
"$build/memtrack" track -q --alloc-hooks "$mode" -o "$out" -- sleep 3600 &
mt=$!
sleep 1.5 # loaded and attached
during=$(time_storms)
kill "$mt"
wait "$mt" 2>/dev/null || true
echo "alloc_storm $pairs (untracked): alone $alone ms, while memtrack ($mode) runs $during ms," \
	"ratio $(awk -v a="$alone" -v d="$during" 'BEGIN { printf "%.2f", d / a }')"
