#!/usr/bin/env bash
# make demo: the README's first command. Makes the testbed's data, runs a 4-rank ddpbench job
# with a straggler (rank 2 sleeps 40 ms before each batch) under ddpspy, prints the report, and
# writes its HTML report and its timeline for Perfetto UI / Chromium's DevTools (docs/viewer.md).
set -eu
cd "$(dirname "$0")/.."
out=build/demo
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
build/ddpbench gen-data "$out/data" --samples 4096 --sequences 1024
rm -rf "$out/trace"
echo "demo: running 4 ranks of build/ddpbench under ddpspy (rank 2 is a straggler: +40 ms per step)"
build/ddpspy run -o "$out/trace" -- mpirun "${root[@]}" --oversubscribe -np 4 \
	build/ddpbench train --data "$out/data" --steps 30 --hidden 128 --straggler-rank 2 --straggler-ms 40 \
	| tail -n 2 | head -n 1
echo "demo: build/ddpspy report $out/trace --html $out/report.html"
echo
build/ddpspy report "$out/trace" --html "$out/report.html" 2>/dev/null
build/ddpspy view "$out/trace" -o "$out/trace.json" 2>/dev/null
echo
echo "demo: the same report as one HTML page: $out/report.html (open it in a browser; no script, nothing fetched)"
echo "demo: the timeline of the slowest and typical steps: $out/trace.json (open it at https://ui.perfetto.dev"
echo "      or in Chrome's DevTools, Performance panel, 'Load profile'; made by build/ddpspy view $out/trace -o $out/trace.json)"
