"""Hung jobs: calls in flight in the trace (format 2.9's "inflight" records) and the report's hang
verdict, on MPI jobs that hang on purpose (build/testapps/hang_mpi): a rank blocked in a read of a
FIFO nobody writes while the others wait in the next all-reduce; a rank computing forever; a rank
frozen (SIGSTOP) whose file ends there; two ranks each in MPI_Recv from the other; and jobs that do
not hang. Each report is made twice, while the job hangs (its files still growing) and after it
was killed, and must name the right rank and what it was doing."""
import json
import os
import shutil
import signal
import subprocess
import time
from lib import *

APP = os.path.join(BUILD, "testapps", "hang_mpi")
if not shutil.which("mpirun") or not os.path.exists(APP):
    skip("hang verdicts on MPI", "mpirun or build/testapps/hang_mpi missing (Open MPI not installed)")
    done()

d = tmpdir("hang")
HANG_S = 6  # how long each job hangs before its report: 3 times the verdict's least (2 s)


report = checked_report


def hang_of(j):
    h = [f for f in j["findings"] if f["kind"] == "hang"] if j else []
    return h[0] if h else None


def by_rank(f):
    return {r["rank"]: r for r in f["evidence"]["ranks"]} if f else {}


def report_once_hung(out, stream, procs):
    """the report of out once stream (a job's output) said "hanging" and the job hung HANG_S more;
    None when it ended first. Then procs are killed: their process groups (SIGTERM, then SIGKILL)
    where they lead one, else themselves"""
    hanging = any("hanging" in line for line in stream)
    if hanging:
        time.sleep(HANG_S)
    j = report(out)[0] if hanging else None
    for q in procs:
        lead = os.getpgid(q.pid) == q.pid
        os.killpg(q.pid, signal.SIGTERM) if lead else q.kill()
        try:
            q.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(q.pid, signal.SIGKILL)
            q.wait(timeout=20)
    return j


def hung_job(name, mode, steps=150, extra=(), before_kill=None):
    """hang_mpi MODE under ddpspy: (the report while it hangs, the report after it was killed, the
    trace directory); before_kill(out) runs first, then the job's process group gets SIGTERM (and
    SIGKILL a second later)"""
    out = os.path.join(d, name)
    p = subprocess.Popen([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", "2", APP, mode, str(steps)] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    line = p.stdout.readline()
    hanging = line.strip() == "hanging"
    if hanging:
        time.sleep(HANG_S)
    during = report(out)[0] if hanging else None
    if before_kill:
        before_kill(out)
        time.sleep(0.5)
    os.killpg(p.pid, signal.SIGTERM)
    time.sleep(1)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)
    time.sleep(0.5)  # (orphaned ranks finishing their files)
    return during, report(out)[0], out


# ---- a rank blocked in a read of a FIFO: the case ----
fifo = os.path.join(d, "input.fifo")
os.mkfifo(fifo)
during, after, out = hung_job("fifo", "fifo", extra=[fifo])
for when, j in (("while it hangs", during), ("after it was killed", after)):
    f = hang_of(j)
    ranks = by_rank(f)
    ok(f is not None and f["rank"] == 1 and f["severity"] == 1 and j["findings"][0] is f,
       "FIFO, %s: the first finding is a hang naming rank 1: %s" % (when, f and f["title"]))
    ok(f is not None and f["evidence"]["collective"] == {"kind": "mpi_coll", "comm": 0, "seq": 300, "op": "allreduce"}
       and f["evidence"]["missing"] == 1 and f["evidence"]["waiting"] == 1,
       "FIFO, %s: the collective is all-reduce #300 (step 150's first) on MPI's world, 1 rank in it, 1 missing: %s"
       % (when, f and f["evidence"]["collective"]))
    r1, r0 = ranks.get(1, {}), ranks.get(0, {})
    ok(r1.get("state") == "missing" and "read of %s (pipe)" % fifo in (r1.get("call") or "") and
       "hang_mpi+0x" in (r1.get("call") or "") and r1.get("last_completed") == 299 and HANG_S - 1 < r1["for_s"] < 60,
       "FIFO, %s: rank 1 is missing, in a read of the FIFO (a pipe) at its call site, for %s s, after #299: %s"
       % (when, r1.get("for_s"), r1.get("call")))
    # (main reads the FIFO: above it the C library's start, then the program's _start)
    cs = r1.get("callers") or []
    ok(len(cs) >= 2 and cs[0].startswith("libc.so.6+0x") and cs[-1].startswith("hang_mpi+0x"),
       "FIFO, %s: rank 1's stack above its call site, read while it was blocked: %s" % (when, cs))
    ok(r0.get("state") == "waiting" and "allreduce #300" in (r0.get("call") or "") and r0.get("last_completed") == 299,
       "FIFO, %s: rank 0 waits in it: %s" % (when, r0.get("call")))
    ok(j is not None and j["verdict"]["summary"].startswith("the job hung: rank 1 never reached allreduce #300"),
       "FIFO, %s: the summary says so first: %s" % (when, j and j["verdict"]["summary"]))
p = subprocess.run([DDPSPY, "report", out, "--fail-on", "hang"], capture_output=True, text=True, timeout=120)
ok(p.returncode == 3 and "the job hung" in p.stdout, "--fail-on hang exits 3 on it: %d" % p.returncode)
recs, rc, err = dump(out)
procs = who(recs)
fl = [r for r in of(recs, "inflight") if procs.get(r["pid"], {}).get("rank") == 1 and r["kind"] == "read"]
ok(fl and fl[0]["wait_path"] == fifo and fl[0]["wait_fdclass"] == "pipe" and fl[0]["bytes"] == 1 and fl[0]["ret"] == -1
   and fl[0]["in_flight_ns"] >= 1e9 and fl[0]["end"] is False and fl[0]["frames"][0]["module"].endswith("hang_mpi"),
   "dump: rank 1's read in flight, recorded once it was 1 s old: %s" % (fl[:1],))
fl = [r for r in of(recs, "inflight") if procs.get(r["pid"], {}).get("rank") == 0 and r["kind"] == "mpi_coll"]
ok(fl and fl[0]["op"] == "allreduce" and fl[0]["seq"] == 300 and fl[0]["bytes"] == 4096 and fl[0]["comm"] == 0,
   "dump: rank 0's all-reduce #300 in flight, with its bytes: %s" % (fl[:1],))

# the timeline: after the steps it shows, the hang, each rank's call that never returned drawn until
# its file's last look at it
vj = os.path.join(d, "fifo.json")
p = subprocess.run([DDPSPY, "view", out, "-o", vj], capture_output=True, text=True, timeout=120)
view = json.load(open(vj)) if p.returncode == 0 else {"traceEvents": [], "otherData": {}}
fl = [e for e in view["traceEvents"] if e.get("args", {}).get("in_flight")]
rd = [e for e in fl if e["name"] == "read (in flight)" and e["args"].get("path") == fifo]
ar = [e for e in fl if e["name"] == "allreduce (in flight)" and e["args"].get("seq") == 300]
ok(p.returncode == 0 and view["otherData"].get("steps_shown", "").endswith("the hang") and rd and ar and
   rd[0]["pid"] != ar[0]["pid"] and all(e["dur"] >= (HANG_S - 1) * 1e6 for e in rd + ar),
   "ddpspy view of the FIFO hang: a window for the hang after the steps shown, rank 1's read of the FIFO and rank 0's "
   "all-reduce #300 drawn in flight for %s us: %s" % ([round(e["dur"]) for e in rd + ar], view["otherData"].get("steps_shown")))

# ---- a rank blocked in open() of a FIFO for reading (no writer ever opens it): the path it was
# given, and what that path names, since there is no descriptor yet ----
ofifo = os.path.join(d, "open.fifo")
os.mkfifo(ofifo)
during, after, out = hung_job("open", "open", extra=[ofifo])
for when, j in (("while it hangs", during), ("after it was killed", after)):
    f = hang_of(j)
    r1 = by_rank(f).get(1, {})
    ok(f is not None and f["rank"] == 1 and r1.get("state") == "missing" and
       "open of %s (pipe)" % ofifo in (r1.get("call") or "") and "hang_mpi+0x" in (r1.get("call") or ""),
       "open of a FIFO, %s: rank 1 is missing, in open() of that path (a pipe), at its call site: %s"
       % (when, r1.get("call")))

# ---- a rank computing forever: no call in flight ----
during, after, out = hung_job("spin", "spin")
for when, j in (("while it hangs", during), ("after it was killed", after)):
    f = hang_of(j)
    r1 = by_rank(f).get(1, {})
    ok(f is not None and f["rank"] == 1 and r1.get("state") == "computing" and r1.get("call") is None,
       "a rank computing, %s: named, computing, no call in flight: %s" % (when, f and f["title"]))

# ---- a rank stopped (SIGSTOP), then killed: its file ends there, the others' go on ----
def kill_rank1(out):
    """rank 1 killed (SIGKILL) by its pid, from its file's name, before the rest"""
    for name in os.listdir(out):
        if name.startswith("r00001-"):
            os.kill(int(name.rsplit("-", 1)[1].split(".")[0]), signal.SIGKILL)


during, after, out = hung_job("stop", "stop", before_kill=kill_rank1)
for when, j in (("while it hangs", during), ("after it was killed", after)):
    f = hang_of(j)
    r1 = by_rank(f).get(1, {})
    ok(f is not None and f["rank"] == 1 and r1.get("state") == "gone" and r1.get("call") is None and
       "its file stops" in f["title"], "a rank stopped, %s: its file stops early: %s" % (when, f and f["title"]))

# ---- two ranks each in MPI_Recv from the other ----
during, after, out = hung_job("deadlock", "deadlock")
for when, j in (("while it hangs", during), ("after it was killed", after)):
    f = hang_of(j)
    ranks = by_rank(f)
    ok(f is not None and f["rank"] == 0 and f["evidence"]["pattern"] == "deadlock" and f["evidence"]["chain"] == [0, 1]
       and all(ranks.get(r, {}).get("state") == "deadlocked" and "recv peer %d tag 7" % (r ^ 1) in ranks[r]["call"]
               for r in (0, 1)),
       "point-to-point deadlock, %s: ranks 0 and 1 each in MPI_Recv from the other: %s" % (when, f and f["title"]))

# ---- PyTorch over gloo: rank 1 blocked before its all-reduce, rank 0's gloo thread in it ----
if have_torch():
    out = os.path.join(d, "gloo")
    gfifo = os.path.join(d, "gloo.fifo")
    os.mkfifo(gfifo)
    p = subprocess.Popen([DDPSPY, "run", "-o", out, "--", TORCHRUN, "--standalone", "--nproc_per_node=2", "--redirects",
                          "1", "--tee", "1", os.path.join(ROOT, "testapps", "hang_gloo.py"), "50", gfifo],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    f = hang_of(report_once_hung(out, p.stdout, [p]))
    ranks = by_rank(f)
    r1, r0 = ranks.get(1, {}), ranks.get(0, {})
    ok(f is not None and f["rank"] == 1 and f["evidence"]["collective"]["kind"] == "gloo_coll" and
       f["evidence"]["collective"]["op"] == "allreduce" and f["evidence"]["collective"]["seq"] == 50 and
       r1.get("state") == "missing" and "read of %s (pipe)" % gfifo in (r1.get("call") or "") and
       r0.get("state") == "waiting" and "gloo_coll allreduce #50" in (r0.get("call") or ""),
       "gloo (PyTorch): a hang naming rank 1 in its read of the FIFO, rank 0's all-reduce #50 waiting: %s / %s / %s"
       % (f and f["title"], r1.get("call"), r0.get("call")))
    # its stack above the read, read by the writer from the blocked thread's frames: the interpreter
    # that called os.read (Debian's python3.11 links libpython statically: its frames are python3.11's)
    cs = r1.get("callers") or []
    ok(len(cs) >= 3 and any("python3" in c for c in cs),
       "gloo (PyTorch): rank 1's callers above the read, the interpreter's frames among them: %s" % cs)
else:
    skip("a gloo hang", "Debian's python3-torch is not installed (/usr/bin/torchrun, torch with gloo)")

# ---- NCCL on the simulated device: rank 1 blocked before its all-reduce; rank 0 enqueued it and
# waits for its stream, whose kernel waits for rank 1's (the stand-in's kernels start together) ----
NAPP = os.path.join(BUILD, "testapps", "nccl_app")
if os.path.exists(NAPP):
    out = os.path.join(d, "nccl")
    os.makedirs(out)
    nfifo = os.path.join(d, "nccl.fifo")
    os.mkfifo(nfifo)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, LD_LIBRARY_PATH=SIMDIR, NCCL_APP_HANG=nfifo,
               SIMGPU_KERNELS="forward=2000,backward=3000")
    ps = [subprocess.Popen([NAPP, str(r), "2", os.path.join(out, "id"), "20"], env=dict(env, RANK=str(r), WORLD_SIZE="2"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for r in range(2)]
    f = hang_of(report_once_hung(out, ps[0].stderr, ps))
    ranks = by_rank(f)
    r1, r0 = ranks.get(1, {}), ranks.get(0, {})
    ok(f is not None and f["rank"] == 1 and f["evidence"]["collective"]["kind"] == "nccl_coll" and
       f["evidence"]["collective"]["op"] == "allreduce" and f["evidence"]["collective"]["seq"] == 20 and
       r1.get("state") == "missing" and r1.get("last_called") == 19 and "read of %s (pipe)" % nfifo in (r1.get("call") or "")
       and r0.get("state") == "waiting" and r0.get("last_called") == 20 and (r0.get("call") or "").startswith("cuda_sync"),
       "NCCL (simulated device): a hang naming rank 1 in its read, rank 0 waiting for its stream after enqueueing "
       "all-reduce #20: %s / %s / %s" % (f and f["title"], r1, r0))
    # (an NCCL collective completes on the device: #19 the last whose kernels ended, on both ranks)
    ok(r1.get("last_completed") == 19 and r0.get("last_completed") == 19,
       "NCCL (simulated device): each rank's last completed all-reduce is #19, from its kernels' ends: %s, %s"
       % (r1.get("last_completed"), r0.get("last_completed")))
else:
    skip("an NCCL hang", "make sim did not build nccl_app")

# ---- jobs that do not hang ----
for mode, what in (("none", "a job that ends"), ("exit", "a rank that leaves without MPI_Finalize (Open MPI ends the job)")):
    out = os.path.join(d, mode)
    subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", "2", APP, mode, "150"], capture_output=True,
                   timeout=120)
    j = report(out)[0]
    ok(j is not None and hang_of(j) is None, "%s: no hang: %s" % (what, j and [x["kind"] for x in j["findings"]]))
# calls in flight off: none recorded, and no hang is made up from their absence
out = os.path.join(d, "off")
traced(MPIRUN + ["-np", "2", APP, "none", "50"], out, env={"DDPSPY_INFLIGHT_MS": "-1"})
recs, rc, err = dump(out)
ok(rc == 0 and not of(recs, "inflight"), "DDPSPY_INFLIGHT_MS=-1: no call in flight recorded")
cleanup(d)
done()
