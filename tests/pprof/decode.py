#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reads a gzipped pprof profile with python3's protobuf (profile.proto beside this file, compiled
by protoc into a temporary directory) and prints it in a plain form the tests compare:
sample types, default type, period, times, then each sample's frames root first (a Location's
lines are innermost first: printed reversed) with its values, then the mappings.
Checks what a reader relies on: ids in range, string indices in the table, string 0 empty."""
import gzip
import importlib
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run(["protoc", "-I", here, "--python_out", tmp, "profile.proto"], check=True)
    sys.path.insert(0, tmp)
    pb = importlib.import_module("profile_pb2")

    prof = pb.Profile()
    with gzip.open(sys.argv[1], "rb") as f:
        prof.ParseFromString(f.read())

s = prof.string_table
assert s[0] == "", "string 0 must be empty"


def st(i):
    assert 0 <= i < len(s), f"string index {i} out of range"
    return s[i]


funcs = {f.id: f for f in prof.function}
locs = {l.id: l for l in prof.location}
maps = {m.id: m for m in prof.mapping}
assert len(funcs) == len(prof.function) and len(locs) == len(prof.location)
print("sample_types " + " ".join(f"{st(t.type)}/{st(t.unit)}" for t in prof.sample_type))
print("default " + st(prof.default_sample_type))
print(f"period_type {st(prof.period_type.type)}/{st(prof.period_type.unit)} period {prof.period}")
print(f"time_nanos {prof.time_nanos} duration_nanos {prof.duration_nanos}")
for smp in prof.sample:
    frames = []
    for lid in smp.location_id:  # leaf first
        loc = locs[lid]
        assert loc.mapping_id == 0 or loc.mapping_id in maps
        if loc.mapping_id:
            m = maps[loc.mapping_id]
            assert m.memory_start <= loc.address < m.memory_limit
        for ln in loc.line:  # innermost first
            fn = funcs[ln.function_id]
            name = st(fn.name)
            if fn.filename:
                name += f"@{st(fn.filename)}:{ln.line}"
            frames.append(name)
    assert len(smp.value) == len(prof.sample_type)
    print("sample " + ";".join(reversed(frames)) + " " + " ".join(str(v) for v in smp.value))
for m in prof.mapping:
    print(f"mapping {m.id} {st(m.filename)} {st(m.build_id) or '-'} "
          f"functions={int(m.has_functions)} lines={int(m.has_line_numbers)} "
          f"inline={int(m.has_inline_frames)}")
