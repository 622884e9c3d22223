#!/usr/bin/env python3
"""A tracked command's cost when runs are spaced out: nothing handed over between them.

memtrack hands its links to a run that starts within a second of its end (README, "How it
works"); back-to-back rounds measure that warm case. This alternates the bare command and the
tracked one with GAP seconds of sleep before each, so every tracked run starts cold, and prints
the medians (ms) and the tracked run's range.

Usage: scripts/coldstart.py MEMTRACK ROUNDS GAP [CMD...]   (CMD defaults to /bin/true)
Example: scripts/coldstart.py build/memtrack 10 1.5; the same with GAP 0.05 for the warm case.
"""
import shutil
import statistics as st
import subprocess
import sys
import time

OUT = '/tmp/coldstart.out'


def timed(argv):
    shutil.rmtree(OUT, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t) * 1e3


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    memtrack, rounds, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    cmd = sys.argv[4:] or ['/bin/true']
    bare, tracked = [], []
    for _ in range(rounds):
        time.sleep(gap)
        bare.append(timed(cmd))
        time.sleep(gap)
        tracked.append(timed([memtrack, 'track', '-q', '-o', OUT, '--'] + cmd))
    b, t = st.median(bare), st.median(tracked)
    print('gap %.2f s, %d rounds: bare %.1f ms, tracked %.1f ms (+%.1f ms), tracked %.1f-%.1f ms'
          % (gap, rounds, b, t, t - b, min(tracked), max(tracked)))


if __name__ == '__main__':
    main()
