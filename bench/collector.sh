#!/usr/bin/env bash
# make bench, collector part: `ddpspy report` on 64 synthetic rank files of 1M events each
# (bench/gentrace.c), next to merely decoding the same files with msgpack-c's object API
# (bench/decode.c), and on the same number of events with the training thread reading its samples
# itself (gentrace ... sync: every event is on the thread the report reads twice). Alternating
# rounds; the median of each is shown.
set -eu
cd "$(dirname "$0")/.."
RANKS=${RANKS:-64} EVENTS=${EVENTS:-1000000} ROUNDS=${ROUNDS:-3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/async" "$d/sync"
build/bench/gentrace "$d/async" "$RANKS" "$EVENTS"
build/bench/gentrace "$d/sync" "$RANKS" "$EVENTS" sync
n=$((RANKS * EVENTS))
secs() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
for i in $(seq "$ROUNDS"); do
	secs build/ddpspy report "$d/async" >>"$d/report.t"
	secs build/bench/decode "$d"/async/*.ddpspy >>"$d/decode.t"
	secs build/ddpspy report "$d/sync" >>"$d/sync.t"
done
/usr/bin/python3 - "$d" "$n" "$RANKS" "$EVENTS" <<'PY'
import statistics, sys
d, n, ranks, per = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(name):
    rows = [l.split() for l in open(f"{d}/{name}")]
    return statistics.median(float(r[0]) for r in rows), statistics.median(int(r[1]) for r in rows)
rt, rm = load("report.t")
dt, dm = load("decode.t")
st, sm = load("sync.t")
print(f"collector: {ranks} ranks x {per} events = {n / 1e6:.0f}M events, one core, median of rounds")
print(f"  ddpspy report            {rt:6.2f} s  {n / rt / 1e6:5.1f}M events/s  max RSS {rm / 1024:6.0f} MiB")
print(f"  msgpack-c decode only    {dt:6.2f} s  {n / dt / 1e6:5.1f}M events/s  max RSS {dm / 1024:6.0f} MiB")
print(f"  report, sync loader      {st:6.2f} s  {n / st / 1e6:5.1f}M events/s  max RSS {sm / 1024:6.0f} MiB")
print(f"  budget: at least 10M events/s per core; {'met' if n / max(rt, st) >= 10e6 else 'NOT met'}")
PY
