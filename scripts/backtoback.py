#!/usr/bin/env python3
"""Builds against builds in back-to-back series: what a benchmark's rounds see.

rounds.py interleaves builds, so that the machine's drift hits them alike; but a run then
follows another build's run, and what one run leaves for the next (kept programs, tracepoint
links handed over: README, "Programs kept between runs") is shared or lost. Here each build
runs SERIES commands in a row, builds taking turns series by series, BLOCKS times; the first
command of each series is left out (it follows the other build). Commands are spawned without
a shell, as in rounds.py (its spawn: VAR=value words, /tmp/rounds.out removed before each).
Prints per row and build the median wall and CPU, and the bare command's median.

Usage:
  scripts/backtoback.py BLOCKS SERIES BUILD[,BUILD...] 'NAME|BARE CMD|TRACKED CMD'...
  scripts/backtoback.py 8 6 /tmp/base/build/memtrack,build/memtrack \\
    'true|/bin/true|{M} track -q -o /tmp/rounds.out -- /bin/true'
"""
import os
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rounds import spawn  # noqa: E402


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    blocks, series = int(sys.argv[1]), int(sys.argv[2])
    builds, rows = sys.argv[3].split(','), sys.argv[4:]
    res = {}
    for _ in range(blocks):
        for row in rows:
            name, bare, tracked = row.split('|')
            for label, cmd in [('bare', bare)] + [(b, tracked.replace('{M}', b)) for b in builds]:
                for i in range(series):
                    v = spawn(cmd)
                    if i:
                        res.setdefault((name, label), []).append(v)
    for row in rows:
        name = row.split('|')[0]
        bare = st.median(w for w, _ in res[(name, 'bare')])
        line = '%-10s bare %.1f ms' % (name, 1e3 * bare)
        for b in builds:
            v = res[(name, b)]
            wall = st.median(w for w, _ in v)
            line += ' | %s: %.1f ms (%.2fx, +%.1f ms), CPU %.1f ms' % (
                b, 1e3 * wall, wall / bare, 1e3 * (wall - bare), 1e3 * st.median(c for _, c in v))
        print(line, flush=True)


if __name__ == '__main__':
    main()
