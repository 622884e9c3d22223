#!/usr/bin/env bash
# Runs the cmocka test binaries: unit tests, then (after "--") root tests. Prints each binary's
# result and one closing line "N passed, N failed, N skipped" over all of them.
# Exit status: 0 when nothing failed.
set -u
build=$1; shift
unit=(); root=(); side=unit
for a in "$@"; do
	if [ "$a" = "--" ]; then side=root; continue; fi
	if [ $side = unit ]; then unit+=("$a"); else root+=("$a"); fi
done
passed=0; failed=0; skipped=0; broken=()
run_one() {
	local bin=$1 out rc
	out=$(CMOCKA_MESSAGE_OUTPUT=stdout "$bin" 2>&1); rc=$?
	local p f s
	p=$(printf '%s\n' "$out" | grep -cE '^\[       OK \]')
	# cmocka names a failed or skipped test twice (as it happens, and in the closing list):
	# count names once
	f=$(printf '%s\n' "$out" | grep -E '^\[  FAILED  \] [^0-9]' | sort -u | wc -l)
	s=$(printf '%s\n' "$out" | grep -E '^\[  SKIPPED \] [^0-9]' | sort -u | wc -l)
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	printf '%-40s %3d passed, %d failed, %d skipped\n' "$(basename "$bin")" "$p" "$f" "$s"
	if [ "$f" -ne 0 ]; then broken+=("$bin"); printf '%s\n' "$out" | sed 's/^/    /' | tail -40; fi
}
for b in "${unit[@]}"; do run_one "$b"; done
if [ ${#root[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "root tests skipped: they need root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN); run: sudo make check"
		for b in "${root[@]}"; do run_one "$b"; done
	else
		for b in "${root[@]}"; do run_one "$b"; done
	fi
fi
echo
[ ${#broken[@]} -gt 0 ] && echo "failing: ${broken[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
