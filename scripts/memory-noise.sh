#!/usr/bin/env bash
# What moves memory figures from round to round and run to run, measured on scripts/memory-aa's
# five real programs (python3, sqlite3, perl, git, clang++), for the README's "Reading memory
# numbers". Prints, as Markdown:
#   1. per-metric CV over ROUNDS rounds with address-space randomisation on and off (--no-aslr);
#   2. the first round against the others (does a warm-up round matter?);
#   3. environment size: each program tracked by memtrack directly with a variable 1 and 101
#      bytes long, then the same through memtrack-bench, which pads the environment;
#   4. hash seeds: perl with and without PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0.
# Usage: scripts/memory-noise.sh [BUILD]   (root)   Environment: NOISE_ROUNDS=10, AA_OUT as
# for scripts/memory-aa.sh (shares its work folder).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${NOISE_ROUNDS:-10}
# shellcheck source=scripts/memory-aa/setup.sh
. scripts/memory-aa/setup.sh
out=$AA/noise
mkdir -p "$out"

run() { # OUT FLAGS...
	local o=$1
	shift
	"$bench" run "$config" --mode memory --no-progress --min-rounds "$rounds" \
		--max-rounds "$rounds" --json "$o" "$@" > /dev/null
}
cv_table() { # JSON: per-metric CV in %, "=" when every round agrees
	echo "| Program | Peak heap | Peak RSS | Allocated | Allocs | Leaked |"
	echo "|---|---:|---:|---:|---:|---:|"
	jq -r '.results[] | .name as $n | .memory
		| [.peak_heap, .peak_rss, .allocated_bytes, .allocs, .leaked_bytes]
		| map(if .min == .max then "=" else (.cv * 100 * 1000 | round / 1000
			| if . == 0 then "<0.001" else tostring end) end)
		| "| \($n) | " + join(" | ") + " |"' "$1"
}

echo "## 1. CV over $rounds rounds (%)"
run "$out/aslr.json"
run "$out/no-aslr.json" --no-aslr
echo
echo "Address-space randomisation on (the default):"
echo
cv_table "$out/aslr.json"
echo
echo "Off (--no-aslr):"
echo
cv_table "$out/no-aslr.json"

echo
echo "## 2. First round against the median of the others (peak RSS; heap figures alike)"
echo
echo "| Program | ASLR on | ASLR off |"
echo "|---|---:|---:|"
jq -s -r '.[0].results as $a | .[1].results as $b | range($a | length) as $i
	| [$a[$i], $b[$i]] | map(.memory.peak_rss.values
		| (.[1:] | sort | .[length / 2 | floor]) as $m | (.[0] - $m) / $m * 100
		| . * 100 | round / 100 | tostring + "%")
	| "| \($a[$i].name) | " + join(" | ") + " |"' "$out/aslr.json" "$out/no-aslr.json"

echo
echo "## 3. Environment size: a variable 1 then 101 bytes long (ASLR off, perl's hash seed fixed)"
echo
export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
echo "| Program | memtrack alone: peak heap, allocated | through memtrack-bench (padded) |"
echo "|---|---|---|"
short=x
long=$(printf 'x%.0s' {1..101})
mapfile -t cmds < <(awk -F'exec: "' '/exec:/ { sub(/"$/, "", $2); print $2 }' "$config")
for i in "${!names[@]}"; do
	# shellcheck disable=SC2016 # envsubst's list of the variables it may replace
	cmd=$(envsubst '${AA} ${AA_COMMIT} ${AA_BALLAST_python3} ${AA_BALLAST_sqlite3}
		${AA_BALLAST_perl} ${AA_BALLAST_git} ${AA_BALLAST_clang}' <<< "${cmds[$i]}")
	d=()
	for v in "$short" "$long"; do
		dir=$(mktemp -d)
		NOISE_VAR=$v setarch "$(uname -m)" -R "$MEMTRACK" track -q -o "$dir" "$cmd" \
			> /dev/null 2>&1
		d+=("$(jq -r '.results | "\(.peak_heap) \(.allocated_bytes)"' "$dir"/*.memtrack.json)")
		rm -rf "$dir"
	done
	read -r h1 a1 <<< "${d[0]}"
	read -r h2 a2 <<< "${d[1]}"
	for v in "$short" "$long"; do
		NOISE_VAR=$v "$bench" run "$config" --mode memory --no-progress --min-rounds 2 \
			--max-rounds 2 --no-aslr --bench "${names[$i]}" --json "$out/env-${#v}.json" > /dev/null
	done
	b=$(jq -s -r '[.[] | .results[0].memory | .peak_heap.median, .allocated_bytes.median]
		| "\(.[2] - .[0]) B, \(.[3] - .[1]) B"' "$out/env-1.json" "$out/env-101.json")
	echo "| ${names[$i]} | $((h2 - h1)) B, $((a2 - a1)) B | $b |"
done

echo
echo "## 4. Hash seeds: perl, $rounds rounds, ASLR off"
echo
cat > "$out/perl.yml" << 'YML'
benchmarks:
  - name: perl
    exec: "/usr/bin/perl -e 'my %h; $h{$_} = $_ x 3 for 1 .. 50000; print scalar(keys %h), qq(\\n)'"
  - name: perl, fixed seed
    exec: "PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 /usr/bin/perl -e 'my %h; $h{$_} = $_ x 3 for 1 .. 50000; print scalar(keys %h), qq(\\n)'"
YML
env -u PERL_HASH_SEED -u PERL_PERTURB_KEYS "$bench" run "$out/perl.yml" --mode memory --no-progress --min-rounds "$rounds" \
	--max-rounds "$rounds" --no-aslr --json "$out/perl.json" > /dev/null
echo
cv_table "$out/perl.json"
