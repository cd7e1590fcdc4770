#!/usr/bin/env bash
# make bench, collector part: `ddpspy report` on 64 synthetic rank files of 1M events each
# (bench/gentrace.c), next to merely decoding the same files with msgpack-c's object API
# (bench/decode.c), and on the same number of events with the training thread reading its samples
# itself (gentrace ... sync: every event is on the thread the report reads twice). Alternating
# rounds; the median of each is shown. Then the report's peak memory on 8 ranks of 2M and of 8M
# events each: a trace four times as long must not take more (once more than 8192 steps per rank
# are in it, the report keeps a sample of them).
set -eu
cd "$(dirname "$0")/.."
RANKS=${RANKS:-64} EVENTS=${EVENTS:-1000000} ROUNDS=${ROUNDS:-3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/async" "$d/sync" "$d/len1" "$d/len4"
build/bench/gentrace "$d/async" "$RANKS" "$EVENTS"
build/bench/gentrace "$d/sync" "$RANKS" "$EVENTS" sync
n=$((RANKS * EVENTS))
secs() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
for i in $(seq "$ROUNDS"); do
	secs build/ddpspy report "$d/async" >>"$d/report.t"
	secs build/bench/decode "$d"/async/*.ddpspy >>"$d/decode.t"
	secs build/ddpspy report "$d/sync" >>"$d/sync.t"
done
rm -rf "$d/async" "$d/sync"
build/bench/gentrace "$d/len1" 8 2000000
build/bench/gentrace "$d/len4" 8 8000000
secs build/ddpspy report "$d/len1" >"$d/len1.t"
secs build/ddpspy report "$d/len4" >"$d/len4.t"
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
l1, m1 = load("len1.t")
l4, m4 = load("len4.t")
print(f"collector memory against trace length, 8 ranks: 2M events each {m1 / 1024:.0f} MiB ({l1:.2f} s), "
      f"8M events each {m4 / 1024:.0f} MiB ({l4:.2f} s)")
PY
