#!/bin/sh
# Runs a command under `memtrack track --alloc-hooks uprobe` and then `preload` and compares the
# manifests' heap counts per type (events.by_type), and who served each process:
#   scripts/modes-check.sh [-n NAME] [BUILD] -- CMD ARGS...
# One line per mode, then "same" or "DIFF" (exit status 1). NAME labels the row (default: CMD).
# A third run, uprobe+env, tells the interposer's presence from its recording (below).
# MODES_CHECK_ENV="VAR=value ..." is set for the command in both modes (e.g. LD_PRELOAD of an
# allocator: set for memtrack, which keeps it after the interposer). Needs root.
# The table of issue 12: scripts/modes-check-real.sh.
set -eu
BUILD=build
name=
[ "${1:-}" = "-n" ] && { name=$2; shift 2; }
if [ "${1:-}" != "--" ]; then BUILD=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: $0 [-n NAME] [BUILD] -- CMD ARGS..." >&2; exit 2; }
[ -n "$name" ] || name=$1
tmp=$(mktemp -d /tmp/memtrack-modes-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# uprobe+env: uprobe mode with what preload mode adds to the command's environment (the
# interposer in LD_PRELOAD, passing through since its shared file does not exist, and the
# variable naming it, of the same length): differences that remain against preload mode are
# the interposer's recording, those that vanish come from its presence (README).
pre=$(realpath "$BUILD/libmemtrack-preload.so")
fake=/dev/shm/memtrack-$$-0000000000000000
for m in uprobe uprobe+env preload; do
	extra=
	[ $m = uprobe+env ] && extra="LD_PRELOAD=$pre${LD_PRELOAD:+:$LD_PRELOAD} MEMTRACK_PRELOAD_SHM=$fake"
	hooks=${m%+env}
	# shellcheck disable=SC2086 # lists of assignments
	env ${MODES_CHECK_ENV:-} $extra "$BUILD/memtrack" track -q --alloc-hooks $hooks -o "$tmp/$m" \
		-- "$@" >"$tmp/$m.stdout" 2>"$tmp/$m.stderr" </dev/null || echo $? >"$tmp/$m.rc"
done
/usr/bin/python3 - "$tmp" "$name" <<'EOF'
import glob, json, os, sys
tmp, name = sys.argv[1], sys.argv[2]
types = ["Malloc", "Calloc", "Realloc", "AlignedAlloc", "Free"]
rows = {}
bycomm = {}
for m in ("uprobe", "uprobe+env", "preload"):
    man = glob.glob(os.path.join(tmp, m, "*.memtrack.json"))
    if not man:
        sys.stderr.write(open(os.path.join(tmp, m + ".stderr")).read())
        sys.exit("%s: no manifest in %s mode" % (name, m))
    j = json.load(open(man[0]))
    bt = j["events"]["by_type"]
    served = {}
    for p in j["processes"]:
        for fam, how in (p.get("alloc_hooks") or {}).items():
            served.setdefault("%s=%s" % (fam, how), 0)
            served["%s=%s" % (fam, how)] += 1
    rc = open(os.path.join(tmp, m + ".rc")).read().strip() if os.path.exists(
        os.path.join(tmp, m + ".rc")) else "0"
    rows[m] = [bt.get(t, 0) for t in types]
    for p in j["processes"]:
        c = bycomm.setdefault(p.get("comm", "?"), {}).setdefault(m, [0, 0])
        c[0] += p.get("allocs", 0)
        c[1] += p.get("frees", 0)
    print("%-22s %-10s procs %-3d rc %-3s %s  [%s]" % (
        name, m, len(j["processes"]), rc,
        " ".join("%s %d" % (t, v) for t, v in zip(types, rows[m])),
        " ".join("%s:%d" % kv for kv in sorted(served.items()))))
same = rows["uprobe"] == rows["preload"]
env_same = rows["uprobe+env"] == rows["preload"]
print("%-22s %s%s" % (name, "same" if same else "DIFF " + " ".join(
    "%s %+d" % (t, b - a) for t, a, b in zip(types, rows["uprobe"], rows["preload"]) if a != b),
    "" if same else "; against uprobe+env: " + ("same" if env_same else " ".join(
        "%s %+d" % (t, b - a) for t, a, b in zip(types, rows["uprobe+env"], rows["preload"])
        if a != b))))
if not same:  # where (against uprobe+env): allocations and frees per process name
    for comm, c in sorted(bycomm.items()):
        u, p = c.get("uprobe+env", [0, 0]), c.get("preload", [0, 0])
        if u != p:
            print("%-22s   %-16s allocs %d -> %d, frees %d -> %d" % ("", comm, u[0], p[0], u[1], p[1]))
sys.exit(0 if same else 1)
EOF
