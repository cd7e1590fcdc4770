#!/usr/bin/env bash
# make bench, collector part: `ddpspy report` on 64 synthetic rank files of 1M events each
# (bench/gentrace.c), next to merely decoding the same files with msgpack-c's object API
# (bench/decode.c). Alternating rounds; the median of each is shown.
set -eu
cd "$(dirname "$0")/.."
RANKS=${RANKS:-64} EVENTS=${EVENTS:-1000000} ROUNDS=${ROUNDS:-3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
build/bench/gentrace "$d" "$RANKS" "$EVENTS"
n=$((RANKS * EVENTS))
secs() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
for i in $(seq "$ROUNDS"); do
	secs build/ddpspy report "$d" >>"$d/report.t"
	secs build/bench/decode "$d"/*.ddpspy >>"$d/decode.t"
done
/usr/bin/python3 - "$d" "$n" "$RANKS" "$EVENTS" <<'PY'
import statistics, sys
d, n, ranks, per = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(name):
    rows = [l.split() for l in open(f"{d}/{name}")]
    return statistics.median(float(r[0]) for r in rows), statistics.median(int(r[1]) for r in rows)
rt, rm = load("report.t")
dt, dm = load("decode.t")
print(f"collector: {ranks} ranks x {per} events = {n / 1e6:.0f}M events, one core, median of rounds")
print(f"  ddpspy report            {rt:6.2f} s  {n / rt / 1e6:5.1f}M events/s  max RSS {rm / 1024:6.0f} MiB")
print(f"  msgpack-c decode only    {dt:6.2f} s  {n / dt / 1e6:5.1f}M events/s  max RSS {dm / 1024:6.0f} MiB")
print(f"  budget: at least 10M events/s per core; {'met' if n / rt >= 10e6 else 'NOT met'}")
PY
