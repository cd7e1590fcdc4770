#!/usr/bin/env bash
# make bench, viewer part: `ddpspy view` (by default the 3 slowest and 2 typical steps) and
# `ddpspy report --html` beside `ddpspy report` on the same synthetic traces (bench/gentrace.c: a
# 40 ms step of 133 events per rank), in one run: 64 ranks of 1M events each (some 5 minutes of a
# job), then 8 ranks of 2M and of 8M events (a job four times as long: the same default view, the
# time to make it growing with the trace, as the report's). Each time is the median of the rounds;
# the view's size and bytes per event come from the view itself. HOUR=1 also makes the view of 64
# ranks of one hour (12M events each, 90,000 steps: 6 GB of traces, some 4 minutes), once.
set -eu
cd "$(dirname "$0")/.."
RANKS=${RANKS:-64} EVENTS=${EVENTS:-1000000} ROUNDS=${ROUNDS:-3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/wide" "$d/len1" "$d/len4"
build/bench/gentrace "$d/wide" "$RANKS" "$EVENTS"
build/bench/gentrace "$d/len1" 8 2000000
build/bench/gentrace "$d/len4" 8 8000000
secs() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
for t in wide len1 len4; do
	for i in $(seq "$ROUNDS"); do
		secs build/ddpspy report "$d/$t" >>"$d/$t.report"
		secs build/ddpspy view "$d/$t" -o "$d/$t.json" >>"$d/$t.view"
		secs build/ddpspy report "$d/$t" --html "$d/$t.html" >>"$d/$t.html.t"
	done
	build/ddpspy view "$d/$t" -o "$d/$t.json" 2>"$d/$t.said"
done
/usr/bin/python3 - "$d" "$RANKS" "$EVENTS" <<'PY'
import json, os, re, statistics, sys
d, ranks, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def t(name):
    rows = [l.split() for l in open(f"{d}/{name}")]
    return statistics.median(float(r[0]) for r in rows), statistics.median(int(r[1]) for r in rows) / 1024
print("viewer: ddpspy view (default steps) and report --html beside report, one core, median of rounds")
print(f"{'trace':<28}{'report':>9}{'view':>9}{'--html':>9}{'view size':>12}{'events':>9}{'B/event':>9}{'view RSS':>10}")
for name, what in (("wide", f"{ranks} ranks x {per / 1e6:.0f}M events"), ("len1", "8 ranks x 2M events"),
                   ("len4", "8 ranks x 8M events")):
    r, _ = t(name + ".report")
    v, vm = t(name + ".view")
    h, _ = t(name + ".html.t")
    doc = json.load(open(f"{d}/{name}.json"))
    size = os.path.getsize(f"{d}/{name}.json")
    n = doc["otherData"]["events"]
    print(f"{what:<28}{r:8.2f}s{v:8.2f}s{h:8.2f}s{size / 1e6:10.1f} MB{n:9d}{size / n:9.0f}{vm:8.0f} MiB")
wide = json.load(open(f"{d}/wide.json"))
size = os.path.getsize(f"{d}/wide.json")
cap = 300000
per_ev = size / wide["otherData"]["events"]
print(f"the default view of {ranks} ranks holds steps {wide['otherData']['steps_shown']}: its size does not grow with "
      f"the job's length (8M-event ranks give the view 2M-event ranks give)")
coll = sum(1 for e in wide["traceEvents"] if e.get("cat") == "comms" or e["ph"] in "sf")
print(f"bound: --max-events {cap} calls at {per_ev:.0f} B each is {cap * per_ev / 1e6:.0f} MB; the collectives, their "
      f"waits and flows, always shown, are {coll / ranks / 5:.0f} events per rank and step here "
      f"({coll * per_ev / 1e6:.1f} MB); within the 100 MB budget for 64 ranks while they stay under "
      f"{(100e6 - cap * per_ev) / per_ev / 64 / 5:.0f} per rank and step")
PY
if [ "${HOUR:-0}" = 1 ]; then
	rm -rf "$d/wide" "$d/len1" "$d/len4"
	mkdir "$d/hour"
	build/bench/gentrace "$d/hour" 64 12000000
	echo "64 ranks of one hour (64 x 12M events): ddpspy view, once"
	/usr/bin/time -f "  %e s, max RSS %M KiB" build/ddpspy view "$d/hour" -o "$d/hour.json" 2>&1 | grep -v warning
	ls -l "$d/hour.json" | awk '{printf "  %.1f MB\n", $5 / 1e6}'
fi
