#!/usr/bin/env bash
# make bench: the preload's per-call overhead, measured as a side-by-side difference in one run,
# then its cost on the testbed's training step (bench/side_by_side.py).
# Rounds alternate between the plain program and the same program under libddpspy.so, so drift
# on a noisy machine hits both alike; each figure is the median over rounds of the median burst.
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in mt st; do
	for i in $(seq "$ROUNDS"); do
		build/bench/overhead $mode >>"$out/plain.$mode"
		LD_PRELOAD=$PWD/build/libddpspy.so DDPSPY_OUT=$out/trace build/bench/overhead $mode >>"$out/traced.$mode"
		rm -rf "$out/trace"
		# (the same without the calls in flight's bookkeeping: its cost is the difference)
		LD_PRELOAD=$PWD/build/bench/libddpspy-nocall.so DDPSPY_OUT=$out/trace build/bench/overhead $mode \
			>>"$out/nocall.$mode"
		rm -rf "$out/trace"
	done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def load(name):
    rows = [json.loads(l) for l in open(f"{d}/{name}")]
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}
print("ddpspy overhead per intercepted call (ns, median of rounds; lower is better)")
print(f"{'call':<34}{'plain':>9}{'ddpspy':>9}{'extra':>9}{'of which in flight':>20}")
labels = {"sem_wait_ns": "sem_wait, posted (no syscall)", "read_ns": "read(/dev/null, 0)",
          "fstat_ns": "fstat(/dev/null)", "mutex_ns": "mutex lock+unlock, uncontended"}
for mode, title in (("mt", "multi-threaded program (every training process)"),
                    ("st", "single-threaded program")):
    p, t, n = load("plain." + mode), load("traced." + mode), load("nocall." + mode)
    print(f"-- {title}")
    for k, label in labels.items():
        print(f"{label:<34}{p[k]:>9.1f}{t[k]:>9.1f}{t[k]-p[k]:>+9.1f}{t[k]-n[k]:>+20.1f}")
mt_p, mt_t = load("plain.mt"), load("traced.mt")
extra = mt_t["sem_wait_ns"] - mt_p["sem_wait_ns"]
print(f"budget: a recorded call that does not block costs at most 40 ns more; "
      f"measured {extra:.1f} ns ({'met' if extra <= 40 else 'NOT met'})")
print("(of which in flight: the same calls under a build of the preload without the calls in flight's "
      "bookkeeping, build/bench/libddpspy-nocall.so, side by side; sem_wait and read publish themselves, "
      "fstat and an uncontended mutex do not)")
PY
# GPU capture's cost to the host, on the simulated device (skipped, saying so, without it)
echo
/usr/bin/python3 bench/gpu.py
# the preload's cost on a whole training step: the testbed, plain and traced side by side
if [ -x build/ddpbench ] && command -v mpirun >/dev/null; then
	echo
	/usr/bin/python3 bench/side_by_side.py
else
	echo "ddpbench side by side: skipped (build/ddpbench or mpirun missing)"
fi
# what a trace costs on disk, and the writer's rate
if [ -x build/ddpbench ] && command -v mpirun >/dev/null; then
	echo
	/usr/bin/python3 bench/capture.py
fi
# a blocking call's stack with its Python frames and without (skipped without CPython 3.11)
echo
/usr/bin/python3 bench/pyframes.py
echo
/usr/bin/python3 bench/cpusample.py
# ... and on a healthy PyTorch DDP trainer (skipped, saying so, without Debian's PyTorch)
echo
/usr/bin/python3 bench/torch_side_by_side.py
