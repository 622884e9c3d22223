#!/usr/bin/env bash
# The proof for memtrack-bench's memory mode: A/A comparisons of five real programs (python3,
# sqlite3, perl, git, clang++ parsing C++; scripts/memory-aa/aa.yml) must report no regression,
# and the same programs with a heap GROW% larger (scripts/memory-aa/ballast.c: one extra block,
# live from before main to exit) must be reported regressed, every time. Prints both tallies and
# the per-metric CV over every A round (the README's table).
# Usage: scripts/memory-aa.sh [BUILD]      (root: memory mode runs memtrack)
# Environment:
#   AA_PAIRS=20        comparisons of each kind
#   AA_THRESHOLD=2%    compare --threshold (below GROW, or the growth cannot count)
#   AA_GROW=5          percent of each program's median peak heap the ballast adds
#   AA_ARGS=...        more `memtrack-bench run` flags, e.g. --no-aslr (default: rounds = 5)
#   AA_OUT=DIR         work folder (default BUILD/memory-aa); its runs/ keeps every JSON
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=${AA_PAIRS:-20}
threshold=${AA_THRESHOLD:-2%}
grow=${AA_GROW:-5}
read -r -a args <<< "${AA_ARGS:---min-rounds 5 --max-rounds 5}"
# shellcheck source=scripts/memory-aa/setup.sh
. scripts/memory-aa/setup.sh
mkdir -p "$AA/runs"
rm -f "$AA"/runs/*.json

run() { # NAME: one memtrack-bench run of the config into runs/NAME.json
	"$bench" run "$config" --mode memory --no-progress "${args[@]}" \
		--json "$AA/runs/$1.json" > /dev/null
}

echo "memory-aa: calibrating (one run) ..." >&2
run calibrate
declare -A ballast
for n in "${names[@]}"; do
	heap=$(jq -r --arg n "$n" '.results[] | select(.name == $n) | .memory.peak_heap.median' \
		"$AA/runs/calibrate.json")
	ballast[$n]=$(awk -v h="$heap" -v g="$grow" 'BEGIN { printf "%010d", int(h * g / 100 + 0.999) }')
done

declare -A aa_reg aa_imp grow_hit
for n in "${names[@]}"; do aa_reg[$n]=0; aa_imp[$n]=0; grow_hit[$n]=0; done
status() { # MARKDOWN NAME: the row's status cell
	awk -F' [|] ' -v n="$2" '$1 == "| Memory" && $2 == n { sub(/ [|]$/, "", $6); print $6 }' "$1"
}
for ((i = 1; i <= pairs; i++)); do
	echo "memory-aa: pair $i/$pairs ..." >&2
	side_a
	run "base-$i"
	# alternate the order, so neither side always runs right after the base
	for side in $( ((i % 2)) && echo "aa grow" || echo "grow aa"); do
		side_a
		if [ "$side" = grow ]; then
			for n in "${names[@]}"; do export "$(ballast_var "$n")=${ballast[$n]}"; done
		fi
		run "$side-$i"
	done
	for side in aa grow; do
		"$bench" compare "$AA/runs/base-$i.json" "$AA/runs/$side-$i.json" \
			--threshold "$threshold" > "$AA/runs/$side-$i.md"
	done
	for n in "${names[@]}"; do
		s=$(status "$AA/runs/aa-$i.md" "$n")
		[[ $s == regressed* ]] && aa_reg[$n]=$((aa_reg[$n] + 1))
		[[ $s == improved* ]] && aa_imp[$n]=$((aa_imp[$n] + 1))
		s=$(status "$AA/runs/grow-$i.md" "$n")
		[[ $s == regressed*"Peak heap"* ]] && grow_hit[$n]=$((grow_hit[$n] + 1))
	done
done

echo
echo "$pairs pairs, threshold $threshold, ballast $grow% of the median peak heap, run flags: ${args[*]}"
echo
echo "| Program | A/A regressed | A/A improved | +$grow% heap reported | Ballast |"
echo "|---|---:|---:|---:|---:|"
for n in "${names[@]}"; do
	echo "| $n | ${aa_reg[$n]} | ${aa_imp[$n]} | ${grow_hit[$n]}/$pairs | $((10#${ballast[$n]})) B |"
done
echo
echo "CV over every A round (base and aa runs: $((2 * pairs)) runs), in %; = identical in all:"
echo
echo "| Program | Peak heap | Peak RSS | Allocated | Allocs | Leaked |"
echo "|---|---:|---:|---:|---:|---:|"
for n in "${names[@]}"; do
	jq -s -r --arg n "$n" '
		[.[] | .results[] | select(.name == $n) | .memory] as $m
		| ["peak_heap", "peak_rss", "allocated_bytes", "allocs", "leaked_bytes"]
		| map(. as $k | [$m[] | .[$k].values[]]
			| (add / length) as $mean
			| (map((. - $mean) * (. - $mean)) | add / (length - 1) | sqrt) as $sd
			| ($sd / $mean * 100 * 1000 | round / 1000) as $cv
			| if min == max then "=" elif $cv == 0 then "<0.001" else ($cv | tostring) end)
		| "| \($n) | " + join(" | ") + " |"' "$AA"/runs/base-*.json "$AA"/runs/aa-*.json
done
