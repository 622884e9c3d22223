#!/usr/bin/env bash
# Runs the cmocka test binaries: unit tests, then (after "--") root tests. Prints each binary's
# result and one closing line "N passed, N failed, N skipped" over all of them.
# Exit status: 0 when nothing failed.
#
# With --repeat N (make check-repeat N=20): the whole list N times in a row, one line per round,
# stopping at the first failing binary, which is named with its failed tests, the round and its
# output; the closing line then counts every test run in every round.
# Usage: scripts/run-tests.sh [--repeat N] BUILD UNIT_BIN... -- ROOT_BIN...
set -u
rounds=0
if [ "${1:-}" = "--repeat" ]; then
	rounds=${2:-}
	shift 2
	case $rounds in
	'' | *[!0-9]* | 0) echo "memtrack: --repeat wants a count of rounds (1 or more), got '$rounds'" >&2; exit 2 ;;
	esac
fi
build=$1; shift
unit=(); root=(); side=unit
for a in "$@"; do
	if [ "$a" = "--" ]; then side=root; continue; fi
	if [ $side = unit ]; then unit+=("$a"); else root+=("$a"); fi
done
passed=0; failed=0; skipped=0; broken=(); failing=()
# quiet=1 (repeat rounds): a binary's line and output only when it fails, and the names of
# skipped tests in the first round
run_one() {
	local bin=$1 quiet=${2:-0} out rc
	out=$(CMOCKA_MESSAGE_OUTPUT=stdout "$bin" 2>&1); rc=$?
	local p f s
	p=$(printf '%s\n' "$out" | grep -cE '^\[       OK \]')
	# cmocka names a failed or skipped test twice (as it happens, and in the closing list):
	# count names once
	f=$(printf '%s\n' "$out" | grep -E '^\[  FAILED  \] [^0-9]' | sort -u | wc -l)
	s=$(printf '%s\n' "$out" | grep -E '^\[  SKIPPED \] [^0-9]' | sort -u | wc -l)
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	if [ "$quiet" = 0 ] || [ "$f" -ne 0 ]; then
		printf '%-40s %3d passed, %d failed, %d skipped\n' "$(basename "$bin")" "$p" "$f" "$s"
	elif [ "$s" -ne 0 ] && [ "$round" -le 1 ]; then
		printf '%-40s skipped: %s\n' "$(basename "$bin")" "$(printf '%s\n' "$out" |
			grep -E '^\[  SKIPPED \] [^0-9]' | sort -u | sed 's/^\[  SKIPPED \] //' | paste -sd ' ')"
	fi
	if [ "$f" -ne 0 ]; then
		broken+=("$bin")
		last_failed=$(printf '%s\n' "$out" | grep -E '^\[  FAILED  \] [^0-9]' | sort -u |
			sed 's/^\[  FAILED  \] //' | paste -sd ' ')
		failing+=("$(basename "$bin") (${last_failed:-exit status $rc})")
		printf '%s\n' "$out" | sed 's/^/    /' | tail -40
	fi
}
# One pass over every binary (root ones only as root: otherwise they skip themselves).
run_all() {
	local quiet=$1 b
	for b in "${unit[@]}"; do
		run_one "$b" "$quiet"
		[ "$quiet" = 1 ] && [ ${#broken[@]} -gt 0 ] && return
	done
	if [ ${#root[@]} -gt 0 ]; then
		if [ "$(id -u)" -ne 0 ] && [ "$round" -le 1 ]; then
			echo "root tests skipped: they need root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN); run: sudo make check"
		fi
		for b in "${root[@]}"; do
			run_one "$b" "$quiet"
			[ "$quiet" = 1 ] && [ ${#broken[@]} -gt 0 ] && return
		done
	fi
}
round=0
if [ "$rounds" -eq 0 ]; then
	run_all 0
else
	for round in $(seq "$rounds"); do
		start=$SECONDS; before=$passed; sk=$skipped
		run_all 1
		if [ ${#broken[@]} -gt 0 ]; then
			echo "round $round of $rounds: $(basename "${broken[0]}") failed: ${last_failed:-its exit status}; stopping"
			break
		fi
		printf 'round %d of %d: %d passed, %d skipped, %d s\n' "$round" "$rounds" \
			$((passed - before)) $((skipped - sk)) $((SECONDS - start))
	done
fi
echo
# one line naming each failed binary and its failed tests: check-vm's summary repeats it
[ ${#failing[@]} -gt 0 ] && echo "failing: ${failing[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
