#!/usr/bin/env bash
# make bench, collector part: `ddpspy report` on 256 synthetic rank files of 200k events each
# (bench/gentrace.c), on 1 and on 2 threads (-j) and spread over 2 processes under mpirun (--mpi, 1
# thread each), next to merely decoding the same files
# (bench/decode.c), and on the same number of events with the training thread reading its samples
# itself (gentrace ... sync: every event is on the training thread, which the split needs call by
# call: the worst shape). The worst shape once more with what a job of 4,096 ranks keeps
# (DDPSPY_REPORT_PREFIX=2048, DDPSPY_REPORT_SAMPLE=512: every rank's steps found from all of its
# calls while its file is read, which keeps the split's input for the sampled steps). The same
# limits on as many
# events in longer files, 32 ranks of 1.6M, whose sample is a smaller part of each (4% of the steps,
# 34% at 200k; 0.7% for 10M events).
# Alternating rounds; the median of each is shown, with peak memory. Then the report's peak memory
# on 8 ranks of 2M and of 8M events each: a trace four times as long must not take more. Then a GPU
# job on the simulated device (where `make sim` built it): the testbed's GPU mode on 4 ranks, 300
# steps of 18,000 kernels, every kernel and its launch recorded by CUPTI, on 1 and 2 threads. Last,
# a projection to 4,096 ranks x 10M events from the rates and memory measured. And `ddpspy watch`:
# following the 256 files whole, and following 16 files as they are written (bench/watch_live.py).
set -eu
cd "$(dirname "$0")/.."
RANKS=${RANKS:-256} EVENTS=${EVENTS:-200000} ROUNDS=${ROUNDS:-3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/async" "$d/sync" "$d/len1" "$d/len4" "$d/long"
build/bench/gentrace "$d/async" "$RANKS" "$EVENTS"
build/bench/gentrace "$d/sync" "$RANKS" "$EVENTS" sync
build/bench/gentrace "$d/long" $((RANKS / 8)) $((EVENTS * 8)) sync
n=$((RANKS * EVENTS))
secs() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
MPIRUN="mpirun --oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)"
mpi() { if command -v mpirun >/dev/null; then $MPIRUN -np 2 /usr/bin/time -f "%e %M" build/ddpspy report --mpi -j 1 "$@" 2>&1 >/dev/null | grep -E '^[0-9.]+ [0-9]+$' | sort -n | tail -n 1; fi; }
for i in $(seq "$ROUNDS"); do
	secs build/ddpspy report -j 1 "$d/async" >>"$d/async1.t"
	secs build/ddpspy report -j 2 "$d/async" >>"$d/async2.t"
	mpi "$d/async" >>"$d/asyncm.t"
	secs build/bench/decode "$d"/async/*.ddpspy >>"$d/decode.t"
	secs build/ddpspy report -j 1 "$d/sync" >>"$d/sync1.t"
	secs build/ddpspy report -j 2 "$d/sync" >>"$d/sync2.t"
	mpi "$d/sync" >>"$d/syncm.t"
	DDPSPY_REPORT_PREFIX=2048 DDPSPY_REPORT_SAMPLE=512 secs build/ddpspy report -j 1 "$d/sync" >>"$d/cap1.t"
	DDPSPY_REPORT_PREFIX=2048 DDPSPY_REPORT_SAMPLE=512 secs build/ddpspy report -j 2 "$d/sync" >>"$d/cap2.t"
	DDPSPY_REPORT_PREFIX=2048 DDPSPY_REPORT_SAMPLE=512 secs build/ddpspy report -j 1 "$d/long" >>"$d/long1.t"
	DDPSPY_REPORT_PREFIX=2048 DDPSPY_REPORT_SAMPLE=512 secs build/ddpspy report -j 2 "$d/long" >>"$d/long2.t"
	# (watch follows every file from its start on one thread and ends once all are complete: one
	# interval, whose analysis is the report's of the whole files; its CPU time said by watch)
	/usr/bin/time -f "%e %M" -o "$d/w.time" build/ddpspy watch --interval 86400 "$d/async" |
		sed -n 's/.*analyses took \([0-9.]*\) s.*/\1/p' >"$d/w.an"
	echo "$(tail -n 1 "$d/w.time") $(cat "$d/w.an")" >>"$d/watch.t"
done
rm -rf "$d/async" "$d/sync" "$d/long"
# (watch following a job as it writes: 16 ranks of 1M events copied in at 1M and at 4M events a second)
mkdir "$d/live"
build/bench/gentrace "$d/live" 16 1000000 >/dev/null
for r in 1000000 4000000; do
	/usr/bin/python3 bench/watch_live.py "$d/live" "$d/live$r" "$r" 16000000 >"$d/live$r.txt"
	rm -rf "$d/live$r"
done
rm -rf "$d/live"
build/bench/gentrace "$d/len1" 8 2000000
build/bench/gentrace "$d/len4" 8 8000000
secs build/ddpspy report -j 1 "$d/len1" >"$d/len1.t"
secs build/ddpspy report -j 1 "$d/len4" >"$d/len4.t"
rm -rf "$d/len1" "$d/len4"
if [ -e build/libddpbench_gpu.so ] && [ -e build/simgpu/libcupti.so.13 ] && command -v mpirun >/dev/null; then
	build/ddpbench gen-data "$d/data" --samples 2048 --sequences 2048 >/dev/null
	LD_LIBRARY_PATH=build/simgpu SIMGPU_KERNELS=ddpbench_=arg SIMGPU_MOVE_BYTES=0 build/ddpspy run -o "$d/gpu" -- \
		$MPIRUN -np 4 build/ddpbench train --data "$d/data" --gpu --steps 300 --gpu-ms 20 --gpu-kernels 2000 >/dev/null
	build/ddpspy report --json "$d/gpu" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["job"]["events"])' >"$d/gpu.n"
	for i in $(seq "$ROUNDS"); do
		secs build/ddpspy report -j 1 "$d/gpu" >>"$d/gpu1.t"
		secs build/ddpspy report -j 2 "$d/gpu" >>"$d/gpu2.t"
		mpi "$d/gpu" >>"$d/gpum.t"
	done
fi
/usr/bin/python3 - "$d" "$n" "$RANKS" "$EVENTS" <<'PY'
import statistics, sys
d, n, ranks, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(name):
    rows = [l.split() for l in open(f"{d}/{name}")]
    return statistics.median(float(r[0]) for r in rows), statistics.median(int(r[1]) for r in rows)
print(f"collector: {ranks} ranks x {per} events = {n / 1e6:.1f}M events, median of rounds")
print(f"  {'':34} {'-j 1':>8} {'-j 2':>8}  {'scaling':>7}  {'events/s per core (-j 1, -j 2)':>30}  max RSS (-j 1, -j 2)")
rate = {}
for name, label in (("async", "report, input thread"), ("sync", "report, sync loader (worst shape)"),
                    ("cap", "worst shape, 4,096-rank limits"), ("long", "  the same, 32 ranks x 1.6M events")):
    (t1, m1), (t2, m2) = load(f"{name}1.t"), load(f"{name}2.t")
    rate[name] = (n / t1, n / t2 / 2, t1 / (2 * t2))
    print(f"  {label:34} {t1:7.2f}s {t2:7.2f}s  {t1 / (2 * t2):7.2f}  {n / t1 / 1e6:13.1f}M {n / t2 / 2e6:13.1f}M"
          f"  {m1 / 1024:6.0f} MiB {m2 / 1024:6.0f} MiB")
dt, dm = load("decode.t")
print(f"  {'msgpack-c decode only':34} {dt:7.2f}s {'':8}  {'':7}  {n / dt / 1e6:13.1f}M {'':14}  {dm / 1024:6.0f} MiB")
worst = min(r[0] for r in rate.values())
print(f"  budget: at least 20M events/s per core in the worst shape; {'met' if worst >= 20e6 else 'NOT met'} "
      f"({worst / 1e6:.1f}M); 2-thread scaling at least 0.85: "
      f"{'met' if min(r[2] for r in rate.values()) >= 0.85 else 'NOT met'}")
for name, label in (("async", "input thread"), ("sync", "worst shape")):
    try:
        (tm, mm), (t1, _) = load(f"{name}m.t"), load(f"{name}1.t")
        print(f"  --mpi, 2 processes of 1 thread, {label:13} {tm:7.2f}s  against -j 1: {t1 / tm:.2f}x, max RSS of "
              f"a process {mm / 1024:.0f} MiB (each holds every record)")
    except (OSError, ValueError, statistics.StatisticsError):
        print("  --mpi: not measured (mpirun missing)")
wt, wm = load("watch.t")
wa = statistics.median(float(l.split()[2]) for l in open(f"{d}/watch.t") if len(l.split()) > 2)
print(f"ddpspy watch, following the {ranks} files from their start on one thread: {wt:.2f} s in all, "
      f"{n / wt / 1e6:.1f}M events/s (budget: 1M events/s on one core, {'met' if n / wt >= 1e6 else 'NOT met'}), "
      f"max RSS {wm / 1024:.0f} MiB; of it the interval's analysis (the report's, of all {n / 1e6:.1f}M events "
      f"here: one interval) {wa:.2f} s, the following {wt - wa:.2f} s ({n / max(wt - wa, 1e-3) / 1e6:.1f}M events/s)")
for r in (1000000, 4000000):
    print("  " + open(f"{d}/live{r}.txt").read().strip())
l1, m1 = load("len1.t")
l4, m4 = load("len4.t")
print(f"collector memory against trace length, 8 ranks, -j 1: 2M events each {m1 / 1024:.0f} MiB ({l1:.2f} s), "
      f"8M events each {m4 / 1024:.0f} MiB ({l4:.2f} s)")
try:
    (g1, gm1), (g2, gm2) = load("gpu1.t"), load("gpu2.t")
    gn = int(open(f"{d}/gpu.n").read())
    print(f"GPU job, simulated device, 4 ranks x 300 steps x 18,000 kernels ({gn / 1e6:.1f}M events): -j 1 {g1:.2f} s, "
          f"-j 2 {g2:.2f} s, scaling {g1 / (2 * g2):.2f}, events/s per core {gn / g1 / 1e6:.1f}M and {gn / g2 / 2e6:.1f}M, "
          f"max RSS {gm1 / 1024:.0f} and {gm2 / 1024:.0f} MiB")
    try:
        gmt, gmm = load("gpum.t")
        print(f"  --mpi, 2 processes of 1 thread: {gmt:.2f} s, against -j 1: {g1 / gmt:.2f}x, max RSS of a process "
              f"{gmm / 1024:.0f} MiB (each holds its own ranks' device work)")
    except (OSError, ValueError, statistics.StatisticsError):
        print("  --mpi: not measured (mpirun missing, or its runs failed)")
except (OSError, ValueError, statistics.StatisticsError):
    print("GPU job: not measured (the simulated device, build/libddpbench_gpu.so or mpirun missing)")
# 4,096 ranks x 10M events: the worst shape at the limits a job that size gets. From its times on
# 1 and 2 threads, the part that ran on every thread (P: t1 = S + P, t2 = S + P / 2) and the part
# that did not (S: clocks, steps, the critical path and the findings, over what each rank keeps,
# which those limits cap whatever the length); P grows with the events, S with the ranks. Memory:
# per rank as measured at those limits.
ev = 4096 * 10e6
(t1, mc), (t2, _) = load("cap1.t"), load("cap2.t")
P = max(2 * (t1 - t2), 0)
S = max(t1 - P, 0)
Sx, Px = S * 4096 / ranks, P * ev / n
mem = 4096 * mc / ranks / 1024 / 1024
print(f"projection, 4,096 ranks x 10M events ({ev / 1e9:.0f}G events, worst shape; here {S:.2f} s of {t1:.2f} s "
      f"ran on one thread): " + ", ".join(f"{c} cores {(Sx + Px / c) / 60:.1f} min" for c in (1, 32, 64, 128))
      + f"; memory about {mem:.1f} GiB in one process (4,096 x {mc / ranks:.0f} KiB per rank at those limits)")
PY
