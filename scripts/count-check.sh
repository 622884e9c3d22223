#!/bin/sh
# Checks memtrack's allocator counts against an independent LD_PRELOAD counter in the same run:
#   scripts/count-check.sh [BUILD] -- CMD ARGS...
# Runs `memtrack track` on CMD with build/tests/libmt_count.so preloaded (first, so it sees
# every call that goes through symbol lookup; an LD_PRELOAD already set stays after it), then
# prints, per process image that reached its exit, the counter's calls and memtrack's events
# after that process's last Exec, by type, and "ok" or "DIFF". Needs root (memtrack), zstd and
# python3 with msgpack (Debian: python3-msgpack). Exit status 1 when any process differs.
set -eu
BUILD=build
if [ "${1:-}" != "--" ]; then BUILD=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [BUILD] -- CMD ARGS..." >&2; exit 2; }
so=$(realpath "$BUILD/tests/libmt_count.so")
tmp=$(mktemp -d /tmp/memtrack-count-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
MT_COUNT_FILE=$tmp/counts LD_PRELOAD="$so${LD_PRELOAD:+ $LD_PRELOAD}" \
	"$BUILD/memtrack" track -q -o "$tmp/out" -- "$@" >"$tmp/stdout" 2>"$tmp/stderr" || true
art=$(ls "$tmp"/out/*.MemtrackArtifact.msgpack)
zstd -qdc "$art" >"$tmp/events"
/usr/bin/python3 - "$tmp/events" "$tmp/counts" <<'EOF'
import sys, msgpack
from collections import defaultdict
kinds = {"Malloc": 0, "Calloc": 1, "Realloc": 2, "AlignedAlloc": 3, "Free": 4}
names = ["malloc", "calloc", "realloc", "aligned", "free"]
ev = defaultdict(lambda: [0] * 5)
with open(sys.argv[1], "rb") as f:
    for e in msgpack.Unpacker(f, raw=False):
        t = e.get("type")
        if t == "Exec":
            ev[e["pid"]] = [0] * 5  # the counter reports each image at its exit
        elif t in kinds:
            ev[e["pid"]][kinds[t]] += 1
bad = 0
for line in open(sys.argv[2]):
    w = line.split()
    pid, c = int(w[1]), [int(x) for x in w[3::2]]
    if pid not in ev:
        continue  # memtrack itself (the counter is in its environment too)
    m = ev[pid]
    ok = m == c
    bad += not ok
    print("pid %-7d %s  %s" % (pid, "ok  " if ok else "DIFF",
          "  ".join("%s %d/%d" % (n, c[i], m[i]) for i, n in enumerate(names))))
print("counter/memtrack per type;", "all equal" if not bad else "%d process(es) differ" % bad)
sys.exit(1 if bad else 0)
EOF
