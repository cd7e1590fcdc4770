#!/usr/bin/env bash
# The pictures in README.md and docs/viewer.md, made again from the stored 4-rank straggler trace
# (tests/fixtures/straggler-4ranks: rank 2 sleeps 40 ms before each batch): the HTML report in
# Chromium, and the view in Chromium's own DevTools with the straggler's flows drawn. Needs what
# .ci/deps --browser installs.
set -eu
cd "$(dirname "$0")/.."
make -s all
bash .ci/deps --quiet --browser
fx=tests/fixtures/straggler-4ranks
d=build/screenshots
mkdir -p "$d" docs/img
build/ddpspy report "$fx" --html "$d/report.html" >/dev/null
build/ddpspy view "$fx" -o "$d/trace.json"
node tests/viewer/browser.mjs page "$d/report.html" docs/img/report.png >/dev/null
node tests/viewer/browser.mjs flows "$d/trace.json" docs/img/trace-devtools.png 2 >/dev/null
ls -l docs/img/report.png docs/img/trace-devtools.png
