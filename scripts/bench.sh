#!/usr/bin/env bash
# Runs memtrack's overhead suite (benchmarks/memtrack.yml) in wall-time mode and prints the table.
# Usage: scripts/bench.sh [BUILD]          (BUILD: the build folder, default build)
# Environment:
#   BENCH_CONFIG=FILE another suite, e.g. benchmarks/consumer.yml (results-<name>.json)
#   BENCH_SMOKE=1    tiny times (no warm-up, 200 ms, 2 rounds): must complete, never judged on noise
#   BENCH_PREPARE=1  only create the scratch folder and the archives, then exit
#   BENCH_BASE=FILE  afterwards compare against FILE (a results.json from another run)
#   BENCH_ARGS=...   more `memtrack-bench run` flags (e.g. "--bench track-ls")
#   MEMTRACK, SCRATCH override $BUILD/memtrack and $BUILD/bench-scratch
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
BUILD=$(realpath -m "$build")
MEMTRACK=${MEMTRACK:-$BUILD/memtrack}
SCRATCH=${SCRATCH:-$build/bench-scratch}
export BUILD MEMTRACK SCRATCH
bench=$BUILD/memtrack-bench
out=$build/bench

mkdir -p "$SCRATCH/out" "$out"
# Pre-create what the rounds overwrite, so no measured round pays first-time block allocation.
[ -s "$SCRATCH/memtrack-bench-dd.bin" ] ||
	dd if=/dev/zero of="$SCRATCH/memtrack-bench-dd.bin" bs=1M count=64 2>/dev/null
[ -s "$SCRATCH/memtrack-bench.tar" ] ||
	tar -cf "$SCRATCH/memtrack-bench.tar" /usr/lib/x86_64-linux-gnu 2>/dev/null
[ "${BENCH_PREPARE:-0}" = 1 ] && exit 0

if [ ! -x "$bench" ]; then
	echo "memtrack-bench: $bench is missing; run make first" >&2
	exit 1
fi
if [ ! -x "$MEMTRACK" ]; then
	echo "memtrack-bench: $MEMTRACK is missing; run make first (or set MEMTRACK)" >&2
	exit 1
fi

config=${BENCH_CONFIG:-benchmarks/memtrack.yml}
results=$out/results.json
[ "$config" = benchmarks/memtrack.yml ] || results=$out/results-$(basename "$config" .yml).json
args=(run "$config" --json "$results")
# Entries whose binary may be absent (a partial build): skip them, loudly. The skips name rows of
# memtrack.yml only.
if [ "$config" != benchmarks/memtrack.yml ]; then
	:
elif [ ! -x "$BUILD/memtrack-floor" ]; then
	echo "memtrack-bench: $BUILD/memtrack-floor is missing; skipping the floor rows" >&2
	args+=(--skip floor-true --skip floor-alloc-storm)
fi
if [ "$config" = benchmarks/memtrack.yml ] && [ ! -x "$BUILD/targets/alloc_storm" ]; then
	echo "memtrack-bench: $BUILD/targets/alloc_storm is missing; skipping the alloc_storm rows" >&2
	args+=(--skip bare-alloc-storm --skip track-alloc-storm --skip floor-alloc-storm --skip track-storm-2x2-10s
		--skip bare-alloc-storm-2m --skip track-alloc-storm-2m --skip track-alloc-storm-2m-preload
		--skip track-alloc-storm-2m-auto)
fi
# The tools users would pick instead (rows heaptrack-*, massif-*): Debian packages that
# scripts/deps.sh installs; without one, its rows are skipped, loudly.
if [ "$config" = benchmarks/memtrack.yml ]; then
	for pair in heaptrack:heaptrack massif:valgrind; do
		rows=${pair%%:*} cmd=${pair#*:}
		if ! command -v "$cmd" >/dev/null; then
			echo "memtrack-bench: $cmd is not installed; skipping the $rows rows (scripts/deps.sh installs it)" >&2
			for r in true ls python sqlite alloc-storm-2m; do args+=(--skip "$rows-$r"); done
		elif [ ! -x "$BUILD/targets/alloc_storm" ]; then
			args+=(--skip "$rows-alloc-storm-2m")
		fi
	done
fi
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
	args+=(--warmup-time 0 --max-time 200ms --min-time 0 --min-rounds 2 --max-rounds 5)
fi
# shellcheck disable=SC2206 # BENCH_ARGS is split on purpose
args+=(${BENCH_ARGS:-})

"$bench" "${args[@]}"
echo "memtrack-bench: results in $results" >&2

if [ -n "${BENCH_BASE:-}" ]; then
	"$bench" compare "$BENCH_BASE" "$results" --markdown "$out/compare.md"
fi
