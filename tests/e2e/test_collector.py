"""The collector on synthetic traces whose split is known exactly (bench/gentrace: 40 ms steps, the
training thread reading its 128 samples itself, three Iallreduces and a Waitall): the shares it
computes, and its memory, which must not grow with the length of the trace. The training thread's
events are summed into runs between its kept collectives (or read a second time) instead of being
kept; a rank's collectives beyond the first few
thousand (DDPSPY_REPORT_PREFIX, a test-only limit) are read again too, and those of a sample of
steps kept (DDPSPY_REPORT_SAMPLE steps at most, test-only too), so a trace four times as long adds
nothing once the sample is full."""
import json
import os
import shutil
import subprocess
from lib import *

GEN = os.path.join(ROOT, "build", "bench", "gentrace")
if not os.path.exists(GEN):
    skip("the collector on synthetic traces", "build/bench/gentrace missing (make build/bench/gentrace)")
    done()

d = tmpdir("collector")


def measured(path, jobs=1, **env):
    """Runs the report as a child of its own so its peak memory is its own; on one thread unless
    told (how memory grows with the trace is one thread's; more threads read more files at once)."""
    code = ("import json, resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr,\n"
            "                  'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, DDPSPY, "report", "--json", "-j", str(jobs), path],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, **env))
    r = json.loads(p.stdout)
    return json.loads(r["out"]) if r["rc"] == 0 else None, r["rss"], r["err"]


runs, sampled = {}, {}
for n in (200000, 800000):
    out = os.path.join(d, "sync%d" % n)
    os.mkdir(out)
    subprocess.run([GEN, out, "2", str(n), "sync"], check=True)
    runs[n] = measured(out)
    sampled[n] = measured(out, DDPSPY_REPORT_PREFIX="256", DDPSPY_REPORT_SAMPLE="256")
# 200k events are about 1,500 steps of four collectives, all kept while loading; with only 256 kept,
# the steps are found again from the whole trace, streamed, which must give the same report
streamed = measured(os.path.join(d, "sync200000"), DDPSPY_REPORT_PREFIX="256")[0]
ok(streamed is not None and streamed == runs[200000][0], "the steps found again from the streamed calls give "
   "the report that keeping every call gives")

# a long trace's steps are found while its files are read (one reading: steps.c), the split taking
# the training thread from the sampled blocks the sweep kept; with the sample holding every step,
# the report is the one the whole trace gives read as a short one (every call kept: the default
# limits, for 2 ranks); also when the training thread read so much before its first step
# (gentrace ... warmup) that its runs were given up: the sweep then reads its prefix again
lim = {"DDPSPY_REPORT_PREFIX": "256", "DDPSPY_REPORT_SAMPLE": "100000"}
out = os.path.join(d, "warmup")
os.mkdir(out)
subprocess.run([GEN, out, "2", "200000", "warmup"], check=True)
for path, what in ((os.path.join(d, "sync800000"), "steps from the first call"),
                   (out, "20,000 reads before the first step")):
    one = [subprocess.run([DDPSPY, "report", "--json", path], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, DDPSPY_REPORT_SWEEPS="1", **e))
           for e in (lim, {})]
    ok("steps swept while read: 2 of 2 ranks" in one[0].stderr and "swept" not in one[1].stderr
       and one[0].stdout == one[1].stdout and one[0].stdout.startswith("{"),
       "one reading (%s): both ranks' steps found while their files are read, the report the same as the "
       "whole trace's read as a short one (%s)" % (what, [p.stderr.strip()[-80:] for p in one]))

j, rss_small, err = runs[200000]
if ok(j is not None, "report of 2 ranks x 200k events (rc=0) %s" % err[-300:]):
    # per step of 40 ms: 128 preads of 1.5 us, 2 us apart (data: the calls, and the 127 loop gaps
    # of 0.5 us between them), 3 Iallreduce starts of 50 us and a Waitall of 2 ms less 1 us per rank
    # (comms), the rest compute
    r0 = j["ranks"][0]
    want = {"data": (128 * 1.5e-3 + 127 * 0.5e-3) / 40, "comms": (3 * 0.05 + 2.0) / 40}
    got = {k: r0["shares"][k] for k in want}
    ok(all(abs(got[k] - want[k]) < 2e-4 for k in want) and abs(r0["step_p50_ms"] - 40) < 0.01,
       "rank 0's split from the runs of its events: %s, step %.3f ms (exactly: %s, 40 ms)"
       % (got, r0["step_p50_ms"], {k: round(v, 5) for k, v in want.items()}))
    pats = [f for f in j["findings"] if f["kind"] == "data_stall"]
    ok(not pats and j["verdict"]["bound"] == "compute", "compute-bound, no data stall at 0.5%% data: %s"
       % [(f["kind"], f["severity"]) for f in j["findings"]])

j4, rss_big, err = runs[800000]
if ok(j4 is not None, "report of 2 ranks x 800k events (rc=0) %s" % err[-300:]):
    a, b = j4["ranks"][0]["shares"], j["ranks"][0]["shares"]
    ok(all(abs(a[k] - b[k]) < 2e-4 for k in a) and j4["job"]["steps_analyzed"] > 3 * j["job"]["steps_analyzed"],
       "four times the trace, the same split: %s, %d against %d steps"
       % (j4["ranks"][0]["shares"], j4["job"]["steps_analyzed"], j["job"]["steps_analyzed"]))
    # keeping the training thread's events would take 64 bytes each (struct ev since format 2.4's
    # point-to-point fields; 48 before): 2 x 600k more events, 73 MiB. Four times the events here
    # are four times the steps, whose collectives and splits the analysis keeps (about 300 bytes a
    # collective instance), and the file's reading window fills (4 MiB, given back behind it): the
    # peak grows, by 7.4-7.5 MB, but by far less than the events would take
    kept = 2 * 600000 * 64 / 1024
    grown = rss_big - rss_small
    ok(grown < kept, "peak memory %d KiB at 200k events per rank, %d KiB at 800k (four times the steps): grew %d "
       "KiB, less than the %d KiB that keeping the training thread's events would add" % (rss_small, rss_big,
                                                                                         grown, kept))

    # a second thread reads the other rank's file at the same time: its mapped window of the file
    # (trace.c: 4 MiB, up to twice that while it moves on) and what it keeps, not more
    j2, rss2, err = measured(os.path.join(d, "sync800000"), jobs=2)
    ok(j2 == j4 and rss2 - rss_big < 8192, "on 2 threads the same report, and peak memory %d KiB: %d KiB more than "
       "on one, within a second reading window (8 MiB)" % (rss2, rss2 - rss_big))

# the same steps with four times the events (2048 reads a step instead of 512; both files past the
# 4 MiB reading window): memory does not grow with events
dense = {}
for n, mode in ((800000, "dense"), (3200000, "dense4")):
    out = os.path.join(d, mode)
    os.mkdir(out)
    subprocess.run([GEN, out, "2", str(n), mode], check=True)
    dense[mode] = measured(out)
(jd, rss_d, _), (jd4, rss_d4, _) = dense["dense"], dense["dense4"]
kept = 2 * 2400000 * 64 / 1024
ok(jd and jd4 and abs(jd["job"]["steps_detected"] - jd4["job"]["steps_detected"]) <= 10 and rss_d4 - rss_d < 0.1 * kept,
   "the same %s steps with 800k and 3.2M events per rank: peak memory %d and %d KiB, grew %d KiB, under a tenth "
   "of the %d KiB that keeping the training thread's events would add" % (
       jd and jd["job"]["steps_detected"], rss_d, rss_d4, rss_d4 - rss_d, kept))

# a sample of 256 steps: the same split, and memory that no longer grows with the trace
(js, rs_small, err), (js4, rs_big, err4) = sampled[200000], sampled[800000]
if ok(js is not None and js4 is not None, "reports from a sample of 256 steps (rc=0) %s %s" % (err[-200:], err4[-200:])):
    a, b = js4["ranks"][0]["shares"], j["ranks"][0]["shares"]
    n4 = js4["job"]
    ok(all(abs(a[k] - b[k]) < 2e-4 for k in a) and n4["steps_sampled"] <= 256 < n4["steps_analyzed"]
       and any("sample of %d" % n4["steps_sampled"] in w for w in n4["warnings"]),
       "the sampled split is the whole one's: %s from %d of %d steps, and a warning says so"
       % (a, n4["steps_sampled"], n4["steps_analyzed"]))
    ok(rs_big - rs_small < 1024, "peak memory with the sample: %d KiB at 200k events per rank, %d KiB at 800k "
       "(without it %d and %d)" % (rs_small, rs_big, rss_small, rss_big))

if shutil.which("valgrind"):
    p, why = under_valgrind(["report", os.path.join(d, "sync200000")], DDPSPY_REPORT_PREFIX="256",
                            DDPSPY_REPORT_SAMPLE="64")
    ok(p.returncode == 0, "valgrind: no memory error or leak while the sample is thinned (rc=%d)%s" % (p.returncode, why))

# No pattern at all (gentrace ... irregular: every all-reduce of another size): 20 equal time windows;
# streamed, windows of about 64 calls (a sample of them can then bound memory), the same shares
out = os.path.join(d, "irregular")
os.mkdir(out)
subprocess.run([GEN, out, "2", "100000", "irregular"], check=True)
jw = measured(out)[0]
jws, _, err = measured(out, DDPSPY_REPORT_PREFIX="256")
if ok(jw is not None and jws is not None, "reports of a run without a pattern (rc=0) %s" % err[-300:]):
    calls = 4 * 100000 // 133
    a, b = jw["verdict"]["shares"], jws["verdict"]["shares"]
    ok(jw["job"]["step_source"] == jws["job"]["step_source"] == "windows" and jw["job"]["steps_detected"] == 20
       and abs(jws["job"]["steps_detected"] - calls / 64) <= 2 and all(abs(a[k] - b[k]) < 0.005 for k in a),
       "irregular collectives: %d windows, %d streamed (about %d calls / 64), shares %s and %s"
       % (jw["job"]["steps_detected"], jws["job"]["steps_detected"], calls, a, b))
if shutil.which("valgrind"):
    p, why = under_valgrind(["report", out], DDPSPY_REPORT_PREFIX="64", DDPSPY_REPORT_SAMPLE="64")
    ok(p.returncode == 0, "valgrind: no memory error or leak in streamed windows (rc=%d)%s" % (p.returncode, why))

# Ranks that never talk (gentrace ... apart: each rank's all-reduces on a communicator of its own):
# nothing checks their clocks against each other, and the report says so rather than claim a residual
out = os.path.join(d, "apart")
os.mkdir(out)
subprocess.run([GEN, out, "2", "2000", "apart"], check=True)
ja = measured(out)[0]
ok(ja is not None and ja["job"]["clock"] == {"method": "realtime", "max_offset_us": None}
   and any(w.startswith("nothing in this trace checks the ranks' clocks against each other") for w in ja["job"]["warnings"]),
   "ranks that never talk: clock %s, residual unknown and a warning says so" % (ja and ja["job"]["clock"]))

# PyTorch-shaped steps (gentrace ... gloo SEED): two all-reduces of unknown size per step on a
# helper thread, the pause before the first varying from step to step (sd 30 ms). Every all-reduce
# looks like every other, so the step is the period at which the long pause recurs; chance made a
# multiple of it (4 or 6 calls) look as good on 7 of the first 30 seeds before the period was chosen
# by an analysis of variance. Each seed must give 150 ms steps, and the main thread's wait split
# into comms (an all-reduce runs) and host (none does) as generated.
bad = []
for seed in range(1, 16):
    out = os.path.join(d, "gloo%d" % seed)
    os.mkdir(out)
    g = subprocess.run([GEN, out, "2", "120", "gloo", str(seed)], check=True, capture_output=True, text=True)
    truth = json.loads(g.stdout)
    r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=60)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        bad.append((seed, "rc=%d %s" % (r.returncode, r.stderr[-200:])))
        continue
    n = j["job"]["steps_analyzed"]
    want = {k: sum(truth[k + "_ms"][-n:]) / (150 * n) if n else 0 for k in ("comms", "host")}
    for r0 in j["ranks"]:
        got = {k: r0["shares"][k] for k in want}
        if n < truth["steps"] - 4 or abs(r0["step_p50_ms"] - 150) > 0.01 or any(abs(got[k] - want[k]) > 1e-3 for k in want):
            bad.append((seed, r0["rank"], n, r0["step_p50_ms"], got, {k: round(v, 4) for k, v in want.items()}))
ok(not bad, "steps of look-alike gloo calls on 15 seeds: 150 ms each, at least %d of 40 analysed, the waits "
   "split as generated (seed, rank, steps, p50, got, want): %s" % (40 - 4, bad))

# A long PyTorch-shaped run, 20,000 steps whose waits vary step to step: with 2 ranks the report keeps
# 8192 steps at most, so its per-step figures come from a sample, which must stand for the whole:
# the shares within 0.005 of the generated ones over all analysed steps. (Its 40,000 calls would
# all be kept while loading at this world size, 65,536 per thread; 2048 make it take the long way.)
out = os.path.join(d, "gloolong")
os.mkdir(out)
g = subprocess.run([GEN, out, "2", "60000", "gloo", "3"], check=True, capture_output=True, text=True)
truth = json.loads(g.stdout)
jl, rss_l, err = measured(out, DDPSPY_REPORT_PREFIX="2048")
if ok(jl is not None, "report of 20,000 gloo steps (rc=0) %s" % err[-300:]):
    n = jl["job"]["steps_analyzed"]
    want = {k: sum(truth[k + "_ms"][-n:]) / (150 * n) for k in ("comms", "host")}
    got = [{k: r["shares"][k] for k in want} for r in jl["ranks"]]
    ok(n >= truth["steps"] - 4 and jl["job"]["steps_sampled"] <= 8192 and
       all(abs(x[k] - want[k]) < 0.005 for x in got for k in want) and jl["step"]["p50_ms"] == 150,
       "%d steps, %d sampled: shares %s against %s generated, step p50 %.3f ms"
       % (n, jl["job"]["steps_sampled"], got, {k: round(v, 4) for k, v in want.items()}, jl["step"]["p50_ms"]))

# data_stall's files (gentrace ... stall): each rank's DataLoader worker reads its samples from
# /data/train (16 ms per step) and imports modules from a __pycache__ (four times the bytes, in a
# twentieth of the time): what the trainer waits for is the data directory, named first
out = os.path.join(d, "stall")
os.mkdir(out)
subprocess.run([GEN, out, "2", "200", "stall"], check=True)
j = measured(out)[0]
f = [x for x in j["findings"] if x["kind"] == "data_stall"] if j else []
files = f[0]["evidence"]["files"] if f else []
ok(j is not None and j["verdict"]["bound"] == "data" and len(files) == 2 and files[0]["dir"] == "/data/train"
   and abs(files[0]["ms_per_step"] - 16.0) < 0.1 and files[1]["bytes_per_step"] > files[0]["bytes_per_step"],
   "data_stall names the directory the worker spends its time reading first, not the one it reads the most "
   "bytes from: %s" % files)

# the streamed path (steps found again from every call, a sample kept) on several threads: the same
same_reports([os.path.join(d, "sync200000"), os.path.join(d, "sync800000"), os.path.join(d, "irregular")],
             "the generated traces, steps found again streamed, a sample", DDPSPY_REPORT_PREFIX="256",
             DDPSPY_REPORT_SAMPLE="64")

# one rank with every call kept while loading, one with more: the steps are found again streamed
# for both, and the first rank's runs (the calls between its kept ones, summed) give way to a
# second reading, which must come to what two second readings give
out = os.path.join(d, "mixed")
os.mkdir(out)
for n, r in ((200000, 0), (800000, 1)):
    f = [x for x in os.listdir(os.path.join(d, "sync%d" % n)) if x.startswith("r%05d-" % r)][0]
    shutil.copy(os.path.join(d, "sync%d" % n, f), out)
jm = measured(out, DDPSPY_REPORT_PREFIX="10000")[0]
ok(jm is not None and jm["job"]["steps_analyzed"] > 1000, "a rank with every call kept beside one with more: "
   "reported (%s steps)" % (jm["job"]["steps_analyzed"] if jm else None))
same_reports([out], "a rank with every call kept beside one with more", DDPSPY_REPORT_PREFIX="10000")
# (not compared as a long trace by cleanup: its ranks come from two runs, one with four times the
# steps of the other, and a long reading averages a rank's read bytes over all of its own steps,
# a whole one over the steps the ranks share, whose span ends while the longer rank still reads)
shutil.rmtree(out)

# --mpi: more processes than files (one reads none), and a process that sees none of the files (a
# mount namespace of its own with an empty directory over the trace directory: a host that does not
# share it): the same report, and a warning that names the process and its host
if shutil.which("mpirun"):
    sync = os.path.join(d, "sync200000")
    one = subprocess.run([DDPSPY, "report", "--json", "-j", "1", sync], capture_output=True, text=True, timeout=300)
    three = subprocess.run(MPIRUN + ["-np", "3", DDPSPY, "report", "--json", "--mpi", sync], capture_output=True,
                           text=True, timeout=300)
    ok(one.returncode == three.returncode == 0 and one.stdout == three.stdout,
       "--mpi on 3 processes for 2 files: the same report (rc %d, %d)" % (one.returncode, three.returncode))
    # a directory named relative to process 0's, and process 1 started elsewhere (another host's
    # working directory): it opens the files by process 0's absolute path
    rel = MPIRUN + ["-np", "1", DDPSPY, "report", "--json", "--mpi", "sync200000", ":", "-np", "1", "--wdir", "/",
                    DDPSPY, "report", "--json", "--mpi", "sync200000"]
    p = subprocess.run(rel, capture_output=True, text=True, timeout=300, cwd=d)
    one_rel = subprocess.run([DDPSPY, "report", "--json", "-j", "1", "sync200000"], capture_output=True, text=True,
                             timeout=300, cwd=d)
    ok(p.returncode == 0 and p.stdout == one_rel.stdout and "--mpi:" not in p.stdout,
       "--mpi with a relative directory and a process started in another directory: the same report (%s)"
       % p.stderr[-300:])
    if os.geteuid() == 0 and shutil.which("unshare"):
        blind = MPIRUN + ["-np", "1", DDPSPY, "report", "--json", "--mpi", sync, ":", "-np", "1", "unshare", "-m",
                          "sh", "-c", "mount -t tmpfs none %s && exec %s report --json --mpi %s" % (sync, DDPSPY, sync)]
        p = subprocess.run(blind, capture_output=True, text=True, timeout=300)
        j1, jb = json.loads(one.stdout), json.loads(p.stdout) if p.returncode == 0 else None
        warn = [w for w in (jb or {}).get("job", {}).get("warnings", []) if w.startswith("--mpi:")]
        if jb:
            jb["job"]["warnings"] = [w for w in jb["job"]["warnings"] if not w.startswith("--mpi:")]
        ok(jb == j1 and warn == ["--mpi: 2 of 2 files are not visible to process 1 (host %s): the other processes "
                                 "read them" % os.uname().nodename],
           "--mpi with a process that cannot see the files: the others read them, the report says so (%s)"
           % (warn or p.stderr[-300:]))
        # the same as a long trace, whose steps are found again from every call: each rank's by the
        # process that splits it (before, every process read every file again for them, and this
        # run waited forever)
        long_env = dict(os.environ, DDPSPY_REPORT_PREFIX="256", DDPSPY_REPORT_SAMPLE="256")
        one_l = subprocess.run([DDPSPY, "report", "--json", "-j", "1", sync], capture_output=True, text=True,
                               timeout=300, env=long_env)
        try:
            p = subprocess.run(blind, capture_output=True, text=True, timeout=120, env=long_env)
            jb = json.loads(p.stdout) if p.returncode == 0 else None
        except subprocess.TimeoutExpired:
            jb, p = None, None
        if jb:
            jb["job"]["warnings"] = [w for w in jb["job"]["warnings"] if not w.startswith("--mpi:")]
        j1l = json.loads(one_l.stdout) if one_l.returncode == 0 else {}
        ok(jb is not None and jb == j1l and j1l["job"]["steps_sampled"] < j1l["job"]["steps_analyzed"],
           "--mpi with a process that cannot see the files, as a long trace (a sample of %s steps): the report of "
           "one process (%s)" % (j1l.get("job", {}).get("steps_sampled"), "timed out" if p is None else p.stderr[-300:]))
    else:
        skip("--mpi with a process that cannot see the files", "needs root and unshare(1) for a mount namespace")
else:
    skip("--mpi", "mpirun missing (Open MPI not installed)")

# The progress line: on a terminal (here a pseudo-terminal, and the test-only
# DDPSPY_REPORT_PROGRESS_S=0 that shows it from the first file on instead of after a second),
# files or ranks done, events, rate and time left for each phase; nothing when stderr is not one


def stderr_on_tty(argv, env):
    import pty
    m, s = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=s, env=dict(os.environ, **env))
    os.close(s)
    p.stdout.read()
    p.wait(timeout=300)
    err = b""
    while True:
        try:
            b = os.read(m, 65536)
        except OSError:  # (EIO once the child's end is closed)
            break
        if not b:
            break
        err += b
    os.close(m)
    return p.returncode, err.decode(errors="replace")


sync = os.path.join(d, "sync800000")
rc, err = stderr_on_tty([DDPSPY, "report", "-j", "2", sync], {"DDPSPY_REPORT_PROGRESS_S": "0"})
lines = [x for x in err.replace("\x1b[K", "").split("\r") if x.strip()]
ok(rc == 0 and any(x.startswith("ddpspy report: read files 1 of 2, ") for x in lines)
   and any(x.startswith("ddpspy report: split ranks ") for x in lines)
   and all(" events/s, about " in x and x.endswith(" s left") for x in lines) and err.endswith("\r\x1b[K"),
   "a terminal gets the progress line (files or ranks, events, rate, time left), cleared at the end: %r"
   % lines[:3])
p = subprocess.run([DDPSPY, "report", "-j", "2", sync], capture_output=True, text=True, timeout=300,
                   env=dict(os.environ, DDPSPY_REPORT_PROGRESS_S="0"))
ok(p.returncode == 0 and p.stderr == "", "stderr not a terminal: no progress line (%r)" % p.stderr[:200])

cleanup(d)
done()
