#!/usr/bin/env python3
"""Builds against builds, in rotated rounds: the way to compare on a machine whose speed drifts.

Each round runs, per row, the bare command and the tracked command once per build, starting the
round at a different one (rotation), with the machine's drift hitting every build alike. Each
command is spawned without a shell (posix_spawn: no page-table copy of this process, no shell
start in the figures), its output to /dev/null; its wall is timed here and its CPU is what
wait4 reports (the whole tree it waited for). Prints per row: the bare median, each build's
median wall (and its ratio to bare) and CPU, and for every build after the first the median of
its per-round ratios to the first, wall and CPU.

Usage:
  scripts/rounds.py ROUNDS BUILD[,BUILD...] 'NAME|BARE CMD|TRACKED CMD'...
In TRACKED CMD, {M} is replaced by each build's memtrack; a build may start with VAR=value
words (environment). Before every command /tmp/rounds.out (pass it as the tracked command's
-o) and /tmp/rounds.db are removed. Example:
  scripts/rounds.py 21 /tmp/base/build/memtrack,build/memtrack \\
    'storm|build/targets/alloc_storm 2000000|{M} track -q -o /tmp/rounds.out -- build/targets/alloc_storm 2000000' \\
    'true|/bin/true|{M} track -q -o /tmp/rounds.out -- /bin/true'
"""
import os
import shlex
import shutil
import statistics as st
import sys
import time

SCRATCH = ('/tmp/rounds.out', '/tmp/rounds.db')


def spawn(cmd):
    """Runs cmd (words, leading VAR=value words are environment); returns (wall s, CPU s)."""
    for path in SCRATCH:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.unlink(path)
    argv, env = shlex.split(cmd), dict(os.environ)
    while argv and '=' in argv[0] and not argv[0].startswith('/'):
        k, v = argv.pop(0).split('=', 1)
        env[k] = v
    argv[0] = shutil.which(argv[0]) or argv[0]
    null = [(os.POSIX_SPAWN_OPEN, fd, '/dev/null', os.O_WRONLY, 0) for fd in (1, 2)]
    t = time.monotonic()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=null)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t
    if status:
        print('rounds: %r exited with status %#x' % (cmd, status), file=sys.stderr)
    return wall, ru.ru_utime + ru.ru_stime


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, builds, rows = int(sys.argv[1]), sys.argv[2].split(','), sys.argv[3:]
    res = {}
    for r in range(rounds):
        for row in rows:
            name, bare, tracked = row.split('|')
            jobs = [('bare', bare)] + [(b, tracked.replace('{M}', b)) for b in builds]
            k = r % len(jobs)
            for label, cmd in jobs[k:] + jobs[:k]:
                res.setdefault((name, label), []).append(spawn(cmd))
                time.sleep(0.1)  # the previous run's detacher: let it go in every round alike
    for row in rows:
        name = row.split('|')[0]
        bare = st.median(w for w, _ in res[(name, 'bare')])
        first = res[(name, builds[0])]
        line = '%-10s bare %.1f ms' % (name, 1e3 * bare)
        for b in builds:
            v = res[(name, b)]
            wall = st.median(w for w, _ in v)
            line += ' | %s: %.1f ms (%.2fx), CPU %.1f ms' % (
                b, 1e3 * wall, wall / bare, 1e3 * st.median(c for _, c in v))
            if b != builds[0]:
                line += ', per round %.3f (CPU %.3f)' % (
                    st.median(x[0] / y[0] for x, y in zip(v, first)),
                    st.median(x[1] / y[1] for x, y in zip(v, first)))
        print(line, flush=True)


if __name__ == '__main__':
    main()
