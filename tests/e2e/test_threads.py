"""Threads: exact ring accounting under overflow with the writer running, 1000 short-lived
threads, and a program that exits from a secondary thread."""
import json
import os
import time
import shutil
import subprocess
from lib import *

threads = os.path.join(APPS, "threads")
d = tmpdir("threads")

# 4 producers x 50000 events into 4 KiB rings: most are dropped, and every one is accounted for
out = os.path.join(d, "produce")
N, T = 50000, 4
p = traced([threads, "produce", str(T), str(N)], out, env={"DDPSPY_RING_KB": "4", "DDPSPY_FLUSH_MS": "5"})
ok(p.returncode == 0, "producers ran")
recs, rc, _ = dump(out)
pid = of(recs, "process")[0]["pid"]
losses = [l for l in of(recs, "loss") if l["tid"] != pid]
# each producer thread makes N stats, one thread_start and one thread_exit
written = sum(l["events"] for l in losses)
dropped = sum(l["dropped"] for l in losses)
ok(len(losses) == T, "four producer threads")
ok(dropped > 0, "the tiny rings overflowed (%d dropped)" % dropped)
ok(written + dropped == T * (N + 2), "events written %d + dropped %d == produced %d, exactly" % (written, dropped, T * (N + 2)))
end = of(recs, "end")[0]
ok(end["dropped"] == dropped and end["complete"] == 1, "the file states what was lost")


def summary(out):
    """`ddpspy dump --summary --json`: each file's threads, counts and end, without the events;
    and whether the reader got to the end of every file."""
    p = subprocess.run([DDPSPY, "dump", "--summary", "--json", out], capture_output=True, text=True, timeout=300)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return recs, p.returncode == 0 and not of(recs, "error")


# the loss record's race: 8 threads reading as fast as they can into 64 KiB rings drop all the
# time, also while the writer packs the loss record. Its count and entries must agree, the file
# must read to its end, and written + dropped must be what was produced, exactly
for ring_kb in ["64", None]:
    out = os.path.join(d, "reads-%s" % (ring_kb or "default"))
    T, N = 8, 250000
    p = traced([threads, "reads", str(T), str(N)], out, env={"DDPSPY_RING_KB": ring_kb} if ring_kb else {})
    recs, whole = summary(out)
    pid = of(recs, "process")[0]["pid"] if of(recs, "process") else -1
    losses = [l for l in of(recs, "loss") if l["tid"] != pid]
    written = sum(l["events"] for l in losses)
    dropped = sum(l["dropped"] for l in losses)
    end = (of(recs, "end") or [{}])[0]
    # each reader: N reads, its open and close, thread_start and thread_exit
    want = T * (N + 4)
    ok(p.returncode == 0 and whole and len(losses) == T and written + dropped == want
       and end.get("dropped") == dropped and end.get("complete") == 1,
       "%d threads x %d reads, %s ring: the file reads to its end, written %d + dropped %d == produced %d, "
       "exactly, and the end record says so" % (T, N, ring_kb + " KiB" if ring_kb else "default", written, dropped, want))
    if ring_kb:
        ok(dropped > 0, "the 64 KiB rings overflowed (%d dropped)" % dropped)

# one thread reading at full speed with the default ring and flush interval: the writer wakes when
# the ring is half full, so nothing is dropped (timing: a starved writer is re-tried)
def one_thread(k):
    out = os.path.join(d, "reads-one-%d" % k)
    p = traced([threads, "reads", "1", "1000000"], out)
    recs, whole = summary(out)
    end = (of(recs, "end") or [{}])[0]
    return [(p.returncode == 0 and whole and end.get("events", 0) >= 1000000 and end.get("dropped") == 0,
             "1 thread x 1M reads at the default settings: %s events, %s dropped"
             % (end.get("events"), end.get("dropped")))]


live("one fast thread", one_thread)

# a full disk: the trace directory on a 1 MiB tmpfs. The cut frame is taken back, the file reads to
# its end, and its records say how many events it did not take: written + dropped + not written ==
# produced, exactly
def full_disk():
    mnt = os.path.join(d, "tiny")
    keep = os.path.join(d, "full")
    os.makedirs(mnt)
    script = ('mount -t tmpfs -o size=1m tmpfs "$0" || exit 99; '
              'env LD_PRELOAD="$1" DDPSPY_OUT="$0/out" "$2" reads 1 400000 >/dev/null; rc=$?; '
              'cp -r "$0/out" "$3"; exit $rc')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, mnt, LIB, threads, keep],
                          capture_output=True, text=True, timeout=120), keep


if shutil.which("unshare") and os.geteuid() == 0:
    p, keep = full_disk()
    if p.returncode == 99:
        skip("a full disk", "this machine does not let root mount a tmpfs in a new mount namespace: " + p.stderr.strip())
    else:
        recs, whole = summary(keep)
        end = (of(recs, "end") or [{}])[0]
        total = end.get("events", 0) + end.get("dropped", 0) + end.get("unwritten", 0)
        ok(p.returncode == 0 and "No space left" in p.stderr, "the program ran to its end; ddpspy said why the file stopped: %s"
           % p.stderr.strip()[-200:])
        ok(whole and end.get("complete") == 1 and end.get("unwritten", 0) > 0 and total == 400000 + 4
           and end.get("write_error") == "No space left on device",
           "full disk: the file reads to its end and states %s events not written (%s); written %s + dropped %s + "
           "not written == produced %d: %d" % (end.get("unwritten"), end.get("write_error"), end.get("events"),
                                             end.get("dropped"), 400000 + 4, total))
else:
    skip("a full disk", "needs root and unshare to mount a small tmpfs")

out = os.path.join(d, "churn")
p = traced([threads, "churn", "1000"], out)
ok(p.returncode == 0, "1000 short-lived threads ran")
recs, rc, _ = dump(out)
pid = of(recs, "process")[0]["pid"]
th = [t for t in of(recs, "thread") if t["tid"] != pid]
ok(len(th) == 1000, "all 1000 threads recorded (%d)" % len(th))
ev = events(recs)
names = set(e["name"] for e in ev if e["kind"] == "thread_name")
ok(len(names) == 1000, "each with its own name")
ok(len([e for e in ev if e["kind"] == "thread_exit"]) == 1000 and of(recs, "end")[0]["dropped"] == 0,
   "each with its exit, nothing dropped")

# CPU time and run-queue delay: the writer reads every thread's schedstat at most every 100 ms and at
# the end ("sched" records). Two busy threads on one CPU: each waits for it about half the time, and
# more where other work shares that CPU: with a share o of it taken by anything else, the two split
# the rest and each waits (1 + o) / 2 of its time. o is measured beside it from /proc/stat's CPU 0
# (its busy time over the run, less the two threads'): the bound assumed an idle CPU 0, and a fresh
# clone's make test with both cores busy saw each wait 0.74 (stop 58).
def cpu0_busy_ns():
    f = open("/proc/stat").read().splitlines()
    v = [int(x) for x in next(l for l in f if l.startswith("cpu0 ")).split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) * 1e9 / os.sysconf("SC_CLK_TCK")  # (less idle and iowait)


def sched_case(k):
    out = os.path.join(d, "sched%d" % k)
    b0, w0 = cpu0_busy_ns(), time.monotonic()
    p = traced(["taskset", "-c", "0", threads, "spin", "2", "1.0"], out, timeout=60)
    b1, w1 = cpu0_busy_ns(), time.monotonic()
    recs, rc, _ = dump(out)
    sc = of(recs, "sched")
    busy = sorted({r["tid"] for r in sc if r["run_ns"] > 2e8})
    last = {t: max((r for r in sc if r["tid"] == t), key=lambda r: r["t_ns"]) for t in busy}
    mono = all(a["run_ns"] <= b["run_ns"] and a["wait_ns"] <= b["wait_ns"] and a["t_ns"] < b["t_ns"]
               for t in busy for a, b in zip([r for r in sc if r["tid"] == t], [r for r in sc if r["tid"] == t][1:]))
    shares = [round(x["wait_ns"] / (x["run_ns"] + x["wait_ns"]), 2) for x in last.values()]
    other = max(0.0, min(1.0, (b1 - b0 - sum(x["run_ns"] for x in last.values())) / ((w1 - w0) * 1e9)))
    want = (1 + other) / 2
    return [(p.returncode == 0 and len(busy) == 2 and all(r["cpus"] == 1 for r in sc) and mono and
             all(len([r for r in sc if r["tid"] == t]) >= 5 for t in busy),
             "two busy threads on one CPU: schedstat read every 100 ms, counters growing, 1 CPU allowed"),
            (len(shares) == 2 and all(abs(x - want) <= 0.15 for x in shares),
             "each waiting for the CPU %s of its time: (1 + %.2f) / 2 = %.2f expected within 0.15, %.2f of CPU 0 "
             "taken by other work" % (shares, other, want, other))]


if shutil.which("taskset"):
    live("run-queue delay", sched_case)
else:
    skip("run-queue delay", "taskset (util-linux) missing")

out = os.path.join(d, "exit")
p = traced([threads, "exit-from-thread"], out, timeout=30)
ok(p.returncode == 7, "exit(7) from a secondary thread ends the program with 7")
recs, rc, _ = dump(out)
ends = of(recs, "end")
ok(ends and ends[0]["complete"] == 1 and ends[0]["reason"] == "exit", "the file is complete")
ok(len(events(recs, "stat")) == 1, "the exiting thread's last event is in it")
cleanup(d)
done()
