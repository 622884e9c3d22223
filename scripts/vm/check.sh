#!/usr/bin/env bash
# make check-vm: the root tests in every kernel of VM_KERNELS (default "6.12 6.1"), one guest
# each (scripts/vm/run.sh), then one line per kernel. Exit status: 0 when every guest ran to its
# end marker and no test failed there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tree=$(cd "$here/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
	echo "memtrack: check-vm fetches kernels into ${VM_CACHE:-/var/cache/memtrack-vm}; run it as root (sudo make check-vm)" >&2
	exit 1
fi

kernels=${VM_KERNELS:-6.12 6.1}
results=()
failed=0
for k in $kernels; do
	echo "=== kernel $k" >&2
	rc=0
	log=$tree/.output/vm/$k/console.log
	"$here/run.sh" "$k" || rc=$?
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" 2>/dev/null | tail -n1 || true)
	if [ ! -e "$log" ]; then
		results+=("$k: not run: fetching the kernel or building the initramfs failed (see above)")
	elif [ "$rc" -eq 124 ]; then
		results+=("$k: no result (timeout, panic or boot failure; see .output/vm/$k/console.log)")
	elif [ "$rc" -eq 0 ]; then
		results+=("$k: ${summary:-ok}")
	else
		results+=("$k: ${summary:-failed} (status $rc)")
	fi
	[ "$rc" -eq 0 ] || failed=1
done
echo
printf 'check-vm %s\n' "${results[@]}"
exit $failed
