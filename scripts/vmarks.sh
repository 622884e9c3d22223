#!/usr/bin/env bash
# The fixed cost's phases, build against build: runs `MEMTRACK track -v -- CMD` for each build
# in turn, ROUNDS times (rounds interleaved, so the machine's drift hits every build alike), and
# prints, per `-v` mark, each build's median time since the run's start and the median of its
# per-round difference from the first build (ms). The marks are tracker__mark's
# (src/track/tracker_priv.h); a mark a run did not print is left out of that round.
# Usage: scripts/vmarks.sh ROUNDS BUILD_DIR... [-- CMD...]   (default CMD: /bin/true)
#   scripts/vmarks.sh 40 /tmp/base/build build
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS BUILD_DIR... [-- CMD...]" >&2; exit 2; }
command -v python3 > /dev/null || { echo "vmarks: needs python3 (apt-get install python3)" >&2; exit 1; }
rounds=$1; shift
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do builds+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || set -- /bin/true
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
	for i in "${!builds[@]}"; do
		# one line per mark: round, build index, ms, the mark's words
		"${builds[$i]}/memtrack" track -v -o "$out/o" -- "$@" 2>&1 > /dev/null |
			sed -n "s/^memtrack: *\([0-9.]*\) ms \(.*\)$/$r $i \1 \2/p" >> "$out/marks"
		rm -rf "$out/o"
		sleep 0.2 # the previous run's detacher: let it go in every round alike
	done
done
python3 - "$out/marks" "${builds[@]}" <<'PY'
import collections, re, statistics as st, sys
t = collections.defaultdict(dict)  # (mark) -> {(round, build): ms}
order = []
for line in open(sys.argv[1]):
    r, b, ms, mark = line.rstrip('\n').split(' ', 3)
    mark = re.sub(r'\d+ of \d+', 'N of N', mark)
    if mark not in t:
        order.append(mark)
    t[mark][(int(r), int(b))] = float(ms)
builds = sys.argv[2:]
print('%-46s' % 'mark (ms since the start)' + ''.join('%22s' % b[-22:] for b in builds))
for mark in order:
    cells = []
    for b in range(len(builds)):
        own = [v for (r, bb), v in t[mark].items() if bb == b]
        diff = [t[mark][(r, b)] - t[mark][(r, 0)] for (r, bb) in t[mark] if bb == 0 and (r, b) in t[mark]]
        cells.append('%9.2f' % st.median(own) + ('' if b == 0 or not diff else ' (%+.2f)' % st.median(diff)) if own else '        -')
    print('%-46s' % mark[:46] + ''.join('%22s' % c for c in cells))
PY
