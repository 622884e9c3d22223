#!/usr/bin/env bash
# make check-vm: the root tests in every kernel of VM_KERNELS (default "6.12 6.1"), one guest
# each (scripts/vm/run.sh), then one line per kernel. Exit status: 0 when every guest ran to its
# end marker and no test failed there.
# The guests run at the same time (VM_SEQUENTIAL=1: one after the other): each is one
# single-threaded emulator, so two of them use the machine's two CPUs and halve the wall time.
# Their consoles are printed as they come, each line prefixed with its kernel.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "$here/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
	echo "memtrack: check-vm fetches kernels into ${VM_CACHE:-/var/cache/memtrack-vm}; run it as root (sudo make check-vm)" >&2
	exit 1
fi

read -r -a kernels <<<"${VM_KERNELS:-6.12 6.1}"
[ ${#kernels[@]} -gt 0 ] || { echo "memtrack: VM_KERNELS is empty" >&2; exit 1; }

# Fetch first, one at a time, so a download failure is reported on its own and early.
for k in "${kernels[@]}"; do
	"$here/kernel.sh" "$k" >/dev/null
done

start=$(date +%s)
run_one() {
	local k=$1 rc
	set +e
	"$here/run.sh" "$k" 2>&1 | sed -u "s/^/[$k] /"
	rc=${PIPESTATUS[0]}
	set -e
	echo "$rc" >"$tree/.output/vm/$k.status"
}
mkdir -p "$tree/.output/vm"
pids=()
for k in "${kernels[@]}"; do
	rm -f "$tree/.output/vm/$k.status"
	if [ "${VM_SEQUENTIAL:-0}" = 1 ]; then
		run_one "$k"
	else
		run_one "$k" &
		pids+=($!)
	fi
done
for p in "${pids[@]}"; do wait "$p" || true; done

failed=0
echo
for k in "${kernels[@]}"; do
	log=$tree/.output/vm/$k/console.log
	rc=$(cat "$tree/.output/vm/$k.status" 2>/dev/null || echo 1)
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" 2>/dev/null | tail -n1 || true)
	if [ ! -e "$log" ]; then
		line="not run: fetching the kernel or building the initramfs failed (see above)"
	elif [ "$rc" -eq 124 ]; then
		line="no result (timeout, panic or boot failure; see .output/vm/$k/console.log)"
	elif [ "$rc" -eq 0 ]; then
		line=${summary:-ok}
	else
		line="${summary:-failed} (status $rc)"
	fi
	echo "check-vm $k: $line"
	grep -E '^failing: ' "$log" 2>/dev/null | tail -n1 | sed "s/^/check-vm $k: /" || true
	[ "$rc" -eq 0 ] || failed=1
done
echo "check-vm: $(($(date +%s) - start)) s"
exit $failed
