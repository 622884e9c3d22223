#!/usr/bin/env bash
# Interleaved A/B timing for a noisy machine: memtrack-bench runs each benchmark's rounds back
# to back, so load that changes between rows skews their ratio; here round r runs every command
# once before round r+1 starts. Prints, per command, the median and minimum of wall time and of
# CPU time (user + sys of the command and all its children, from GNU time), in ms.
# Usage: scripts/interleave.sh ROUNDS 'name=command' ...
#   scripts/interleave.sh 5 "floor=build/memtrack-floor -- build/targets/alloc_storm 200000" \
#       "track=build/memtrack track -q -o /tmp/o -- build/targets/alloc_storm 200000"
set -uo pipefail
rounds=$1; shift
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
declare -A wall cpu
for ((r = 0; r < rounds; r++)); do
	for spec in "$@"; do
		name=${spec%%=*}
		/usr/bin/time -f '%e %U %S' -o "$tmp" bash -c "${spec#*=}" > /dev/null 2>&1 ||
			echo "interleave: '$name' failed in round $r" >&2
		read -r e u s < <(tail -n 1 "$tmp")
		wall[$name]+="$e "
		cpu[$name]+="$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }') "
	done
done
for spec in "$@"; do
	name=${spec%%=*}
	for kind in wall cpu; do
		declare -n v=$kind
		# shellcheck disable=SC2086 # the lists are split on purpose
		printf '%s\n' ${v[$name]} | sort -g | awk -v n="$name" -v k="$kind" '
			{ x[NR] = $1 * 1000 }
			END { m = NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
			      printf "%-20s %-4s median %9.0f ms  min %9.0f ms  rounds %d\n", n, k, m, x[1], NR }'
	done
done
