#!/usr/bin/env bash
# make demo: track the bundled demo program (allocations, a thread, a fork, an RSS ramp), print
# the summary, the report and the artifact's path.
set -euo pipefail
build=$1; out=$2
if [ "$(id -u)" -ne 0 ]; then
	echo "memtrack: the demo loads BPF programs: run it as root (sudo make demo)" >&2
	exit 1
fi
rm -rf "$out"; mkdir -p "$out"
echo "\$ $build/memtrack track -o $out -- $build/targets/demo"
status=0
"$build/memtrack" track -o "$out" -- "$build/targets/demo" || status=$?
art=$(ls "$out"/*.MemtrackArtifact.msgpack)
echo
echo "\$ $build/memtrack report $art"
"$build/memtrack" report "$art"
"$build/memtrack" report --svg "$out/demo.svg" "$art" >/dev/null
echo
echo "artifact: $art"
echo "manifest: ${art%.MemtrackArtifact.msgpack}.memtrack.json"
echo "plot:     $out/demo.svg"
exit $status
