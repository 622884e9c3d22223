# shellcheck shell=bash
# Sourced by scripts/memory-aa.sh and scripts/memory-noise.sh from the repository root, with
# $1 = BUILD: sets bench, MEMTRACK, AA (the work folder, with the ballast library, the C++ source
# and a bare clone), config and names, and every AA_BALLAST_* to zero (the A side).
build=${1:-build}
BUILD=$(realpath -m "$build")
bench=$BUILD/memtrack-bench
export MEMTRACK=${MEMTRACK:-$BUILD/memtrack}
AA=$(realpath -m "${AA_OUT:-$build/memory-aa}")
export AA
# shellcheck disable=SC2034 # used by the scripts that source this
config=scripts/memory-aa/aa.yml
# shellcheck disable=SC2034
names=(python3 sqlite3 perl git clang++)

for f in "$bench" "$MEMTRACK"; do
	[ -x "$f" ] || { echo "memory-aa: cannot run '$f': not built; run make all" >&2; exit 2; }
done
mkdir -p "$AA"
cc -O2 -Wall -Werror -shared -fPIC -o "$AA/ballast.so" scripts/memory-aa/ballast.c
cp scripts/memory-aa/x.cc "$AA/x.cc"
# A snapshot, so commits landing meanwhile do not change what git reads.
[ -d "$AA/repo.git" ] || git clone -q --bare . "$AA/repo.git"
AA_COMMIT=$(git -C "$AA/repo.git" rev-parse HEAD)
export AA_COMMIT

ballast_var() { local v=${1//+/}; echo "AA_BALLAST_$v"; } # clang++ -> AA_BALLAST_clang
# Zero-padded, so the A side's environment is as long as the B side's.
side_a() { for n in "${names[@]}"; do export "$(ballast_var "$n")=0000000000"; done; }
side_a
