"""`ddpspy watch`: a running job followed from its growing trace files. The testbed with a straggler
that starts part-way (--straggler-from) must be named within two intervals of its first delay (the
delay's time from the trace itself), as the interval's top finding after, and in the first line
when its finished files are watched again; a job starved of input has as every interval's top
finding data_stall or, where one rank's input is slower all run, that rank as a straggler,
whichever the testbed's own times make larger, its severity within 0.15 of them; a job whose input
threads decode on its training threads' CPUs has the report's top finding on top (cpu_contention on
an idle host); one whose
rank 0 works alone before a barrier, rank0_serialization (the top finding is the report's analysis of
each interval: every kind it knows); PyTorch DDP
over gloo (collectives on several helper threads) with a straggler is counted step for step and names
it; a hung job (build/testapps/hang_mpi: rank 1 blocked in a read of a FIFO) raises the hang alarm
with the report's verdict, and --exit-on hang exits 3; watch ends by itself once every file is
complete, or with 1 when the launcher ended and no rank came; bad usage exits 2. With --prometheus,
a real Prometheus server (Debian's package) scrapes it every second during a testbed run, and its
query API returns every rank's step-time and lateness series and the straggler's severity; every
finding kind has its severity; promtool checks the exposition."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from lib import *

HANG = os.path.join(BUILD, "testapps", "hang_mpi")
if not shutil.which("mpirun") or not os.path.exists(BENCH) or not os.path.exists(HANG):
    skip("ddpspy watch", "mpirun, build/ddpbench or build/testapps/hang_mpi missing (Open MPI not installed)")
    done()

d = tmpdir("watch")
data = bench_data(d)

for argv, what in (([], "no directory"), ([d, d], "two directories"), ([d, "--exit-on", "straggler"], "--exit-on straggler"),
                   ([d, "--interval", "0"], "--interval 0")):
    p = subprocess.run([DDPSPY, "watch"] + argv, capture_output=True, text=True, timeout=30)
    ok(p.returncode == 2 and ("usage: ddpspy watch" in p.stderr or "--interval needs" in p.stderr),
       "watch with %s: exit 2, saying why: %s" % (what, p.stderr.splitlines()[:1]))

# a job whose launcher ended before any rank started (a program's path mistyped): watch says so and
# exits 1, instead of waiting for ranks for ever
out = os.path.join(d, "norank")
subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", "2", os.path.join(d, "no-such-program")],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
p = subprocess.run([DDPSPY, "watch", out, "--interval", "1"], capture_output=True, text=True, timeout=60)
ok(p.returncode == 1 and "launcher ended and no rank's file came" in p.stderr,
   "a job whose launcher ended with no rank started: watch exits 1, saying so: rc %d, %s" % (p.returncode, p.stderr[-200:]))


def watched(out, job, watch_args, timeout=120, job_out=None):
    """job (argv) under ddpspy run -o out, watched; [(seconds since the job began, line)] and watch's
    exit status; the job's process group is killed after watch ends. job_out: a file for its stdout"""
    t0 = time.time()
    jo = open(job_out, "w") if job_out else subprocess.DEVNULL
    jp = subprocess.Popen([DDPSPY, "run", "-o", out, "--"] + job, stdout=jo, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    wp = subprocess.Popen([DDPSPY, "watch", out] + watch_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = t0 + timeout
    for line in wp.stdout:
        lines.append((time.time() - t0, line.rstrip("\n")))
        if time.time() > deadline:
            wp.kill()
            break
    rc = wp.wait(timeout=30)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(jp.pid, sig)
            jp.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    if job_out:
        jo.close()
    # (ranks outliving their launcher: killed by the pid their file's name gives; the traces are judged
    # once they are still)
    for f in os.listdir(out):
        try:
            pid = int(f.rsplit("-", 1)[1].split(".")[0])
            with open("/proc/%d/cmdline" % pid, "rb") as fh:  # (still the job's: not a pid reused since)
                cmd = fh.read()
            if any(os.path.basename(a).encode() in cmd for a in (HANG, BENCH)):
                os.kill(pid, signal.SIGKILL)
        except (ValueError, IndexError, OSError):
            pass
    sizes, still, until = None, 0, time.time() + 30
    while still < 3 and time.time() < until:
        now = sorted((f, os.path.getsize(os.path.join(out, f))) for f in os.listdir(out))
        still = still + 1 if now == sizes else 0
        sizes = now
        time.sleep(0.5)
    return lines, rc, t0


# ---- a straggler from part-way (step 100 of 400): named within two intervals of its first delay. A
# straggler is last to 70% of collectives or more, the report's rule: over the whole run this one is
# last to its 300 late steps at least, 75% (from step 150 it could be 62.5%: the rank last before it
# is the one with the worse CPU, which may be either, and 72% and 73% were seen) ----
def straggler(k):
    out = os.path.join(d, "straggler%d" % k)
    shutil.rmtree(out, ignore_errors=True)
    job = MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--hidden", "128", "--steps", "400",
                    "--straggler-rank", "1", "--straggler-ms", "30", "--straggler-from", "100"]
    lines, rc, t0 = watched(out, job, ["--interval", "1"])
    recs, _, _ = dump(out)
    procs = who(recs)
    starts = {r["pid"]: r["start_real_ns"] - r["start_mono_ns"] for r in of(recs, "process")}
    sleeps = sorted(e["t_ns"] + starts[e["pid"]] for e in events(recs, "sleep")
                    if procs.get(e["pid"], {}).get("rank") == 1 and e["req_ns"] == 30000000)
    if not sleeps:
        return [(False, "the straggler's delays are in the trace (%d lines of watch)" % len(lines))]
    began = sleeps[0] / 1e9 - t0  # (the first delay, on the test's clock: seconds since the job began)
    named = [s for s, l in lines if "slowest: rank 1," in l and s >= began]
    tops = [l.split("top: ")[1].split("  ")[0] for s, l in lines if s >= began + 2.5 and "top: " in l][:-1]
    # (the finished files watched again: read whole in the first interval, every rank counted from it)
    again = subprocess.run([DDPSPY, "watch", out, "--interval", "1"], capture_output=True, text=True, timeout=60)
    first = (again.stdout.splitlines() or [""])[0]
    return [(again.returncode == 0 and "slowest: rank 1," in first and "top: straggler rank 1 " in first,
             "the finished job watched again: its first line names rank 1 the slowest and the top straggler: %s"
             % first),
            (tops and all(t.startswith("straggler rank 1 ") for t in tops),
             "and from the second interval after it on, the interval's top finding is that straggler: %s" % tops),
            (rc == 0 and lines and "every file is complete" in lines[-1][1],
             "watch ends by itself once the job's files are complete: rc %d, %s" % (rc, lines[-1:] )),
            (named and named[0] - began <= 2 + 0.5,
             "a straggler from step 100 (its first delay %.1f s into the job) named %.1f s after it, within two "
             "1-s intervals (and a little for the line's writing): %s" % (began, (named[0] - began) if named else -1,
                                                                         [l for s, l in lines if s >= began][:3]))]


live("straggler", straggler)


# ---- a data stall: every interval's top finding, its severity against the testbed's own ----
# The testbed times its training thread in loader_next (data_ms) against its step: the report's
# data_stall severity is that share (the ranks' median when each waits at least half the most's).
# (A fresh-clone run: one rank's input slower all run, a straggler at 0.44-0.65 on top: the
# testbed's own times in collectives say which of the two is larger.)
def data_stall(k):
    out = os.path.join(d, "stall%d" % k)
    shutil.rmtree(out, ignore_errors=True)
    job = MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--hidden", "128", "--steps", "300",
                    "--slow-data", "delay", "--read-delay-ms", "20"]
    lines, rc, t0 = watched(out, job, ["--interval", "1"], job_out=os.path.join(d, "stall.json"))
    with open(os.path.join(d, "stall.json")) as fh:
        truth = json.loads(fh.read().splitlines()[-1])
    x = sorted(r["data_ms"] / r["step_ms"] for r in truth["ranks"])
    want = (x[0] + x[-1]) / 2 if x[0] >= 0.5 * x[-1] else x[-1]
    # (one rank's input may be slower all run: it is then late to every collective, and what the
    # others wait for it, its lateness, is the straggler's severity: the difference between the
    # ranks' times in collectives, over the step)
    c = sorted(r["comm_ms"] / r["step_ms"] for r in truth["ranks"])
    late = c[-1] - c[0]
    truth_of = {"data_stall": want, "straggler": late}
    kinds = list(truth_of) if abs(want - late) < 0.1 else [max(truth_of, key=truth_of.get)]  # (close: either)
    tops = [l.split("top: ")[1].split("  ")[0] for s, l in lines if "top: " in l and " steps 0 " not in l]
    err = sorted(abs(float(t.split()[-1]) - truth_of[t.split()[0]]) for t in tops[:-1]  # (the last: part of one)
                 if t.split()[0] in kinds)
    got = err[len(err) // 2] if err else None
    return [(len(tops) >= 3 and len(err) >= len(tops) - 2 and got <= 0.15,
             "a data stall: the full intervals' top findings %s: the larger of what the testbed measured, its waits "
             "for input (%.2f) or one rank's lateness from them (%.2f) (%s), in all but one at most, its severity "
             "within 0.15 of it (median distance %s)" % (tops, want, late, " or ".join(kinds), got))]


live("data stall", data_stall)


# ---- CPU contention: input threads that decode on the training threads' CPUs (test_contention's
# case, where the report's severity is checked against the throughput more CPUs win back). watch's top
# finding is the report's over the interval: every full interval's (all but one at most) is the
# report's top over the same run, within 0.15 of its severity, and the finished run watched again, in
# one interval, within 0.05 of it. That is cpu_contention where the job has the host to itself; with a
# core taken by another program the ranks' turns on the one left make their compute uneven, and the
# report puts work_skew first (0.27 over cpu_contention 0.16 in one such run): watch follows it. Where
# the report puts two findings within 0.05 of each other, an interval may have either on top. The
# same job without the decode has cpu_contention on top of no interval above the report's (0 when
# none) by 0.15 ----
def top_of(l):
    return l.split("top: ")[1].split("  ")[0]


def contention(k):
    checks = []
    # (the plain job's steps are some 13 ms against the decode's 40: more of them, for 3 intervals or more)
    for name, extra in (("decode", ["--steps", "200", "--decode-us", "100"]), ("plain", ["--steps", "400"])):
        out = os.path.join(d, "%s%d" % (name, k))
        shutil.rmtree(out, ignore_errors=True)
        job = MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--hidden", "256"] + extra
        lines, rc, t0 = watched(out, job, ["--interval", "1"])
        p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or not p.stdout.startswith("{"):
            return [(False, "the %s job's report: rc %d %s" % (name, p.returncode, p.stderr[-300:]))]
        found = json.loads(p.stdout)["findings"]
        fs = [f for f in found if f["kind"] == "cpu_contention"]
        want = fs[0]["severity"] if fs else 0
        tops = [top_of(l) for s, l in lines if "top: " in l and " steps 0 " not in l][:-1]  # (the last: part of one)
        cpu = [float(t.split()[-1]) for t in tops if t.startswith("cpu_contention ")]
        again = subprocess.run([DDPSPY, "watch", out, "--interval", "1"], capture_output=True, text=True, timeout=60)
        first = top_of(again.stdout) if "top: " in again.stdout else ""
        if name == "decode":
            top = max(found, key=lambda f: f["severity"]) if found else {"kind": "-", "severity": 0}
            # (the report's top, or a finding it puts within 0.05 of the top: a tie, which an interval
            # may order either way; a busy host's run had work_skew 0.23 on top and intervals
            # alternating it with collective_volume at 0.20-0.25)
            sev = {}
            for f in found:
                sev[f["kind"]] = max(sev.get(f["kind"], 0), f["severity"])
            tied = {k for k, v in sev.items() if v >= top["severity"] - 0.05}
            same = [t for t in tops if t.split()[0] in tied and abs(float(t.split()[-1]) - sev[t.split()[0]]) <= 0.15]
            checks += [(want >= 0.1 and len(tops) >= 3 and len(same) >= len(tops) - 1,
                        "CPU contention (the report's cpu_contention over the run %.2f, its top %s %.2f, tied with it "
                        "within 0.05: %s): every full interval's top finding but one at most is one of those within "
                        "0.15 of the report's severity: %s" % (want, top["kind"], top["severity"], sorted(tied), tops)),
                       (first.split()[:1] == [top["kind"]] and abs(float(first.split()[-1]) - top["severity"]) <= 0.05,
                        "CPU contention: the finished run watched again, in one interval: the report's top %s within "
                        "0.05 of its %.2f: %s" % (top["kind"], top["severity"], first))]
        else:
            checks.append((len(tops) >= 3 and all(c <= want + 0.15 for c in cpu),
                           "no decode: cpu_contention on top of no full interval above the report's %.2f by 0.15: %s"
                           % (want, tops)))
    return checks


live("cpu contention", contention)


# ---- a kind the live reading does not judge: rank 0's host work before a barrier every step
# (rank0_serialization), found by the report's analysis of what the files gained over each interval:
# every full interval's top finding (all but one at most) is that, naming rank 0, within 0.15 of the
# report's severity over the whole run ----
def rank0(k):
    out = os.path.join(d, "rank0%d" % k)
    shutil.rmtree(out, ignore_errors=True)
    job = MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--hidden", "128", "--steps", "300",
                    "--rank0-work-ms", "20"]
    lines, rc, t0 = watched(out, job, ["--interval", "1"])
    p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or not p.stdout.startswith("{"):
        return [(False, "the rank-0 job's report: rc %d %s" % (p.returncode, p.stderr[-300:]))]
    fs = [f for f in json.loads(p.stdout)["findings"] if f["kind"] == "rank0_serialization"]
    want = fs[0]["severity"] if fs else 0
    tops = [top_of(l) for s, l in lines if "top: " in l and " steps 0 " not in l][:-1]  # (the last: part of one)
    near = [t for t in tops if t.startswith("rank0_serialization rank 0 ") and abs(float(t.split()[-1]) - want) <= 0.15]
    return [(want >= 0.3 and len(tops) >= 3 and len(near) >= len(tops) - 1,
             "rank 0's host work before a barrier: the report's rank0_serialization over the run %.2f; every full "
             "interval's top finding but one at most is that, rank 0, within 0.15: %s" % (want, tops))]


live("rank-0 serialization", rank0)


# ---- PyTorch DDP over gloo (torchrun, examples/torch/train_mlp.py): gloo runs the collectives on
# helper threads, several, each taking the next, which watch takes all, in the order they were issued.
# Rank 1 sleeps 40 ms before each step: every full interval's top finding (all but one at most) is that
# straggler, its severity within 0.15 of the sleep over the job's own step p50 (two all-reduces a step
# in flight together count it once); the finished job watched again counts the job's steps (warm-up
# included) within 2 and its step p50 within 10% of the job's ----
TRAIN = os.path.join(ROOT, "examples", "torch", "train_mlp.py")


def gloo_straggler(k):
    out = os.path.join(d, "gloo%d" % k)
    shutil.rmtree(out, ignore_errors=True)
    log = os.path.join(d, "gloo.log")
    job = [TORCHRUN, "--standalone", "--nproc_per_node=2", "--redirects", "1", "--tee", "1", TRAIN,
           "--data", os.path.join(d, "torchdata"), "--steps", "150", "--hidden", "256", "--workers", "2",
           "--straggler-delay", "40"]
    lines, rc, t0 = watched(out, job, ["--interval", "1"], timeout=240, job_out=log)
    with open(log) as fh:
        text = fh.read()
    truth = rank0_summary(text)
    if not truth:
        return [(False, "the PyTorch job ran and printed its summary: %s" % text.splitlines()[-3:])]
    want = 40 / truth["step_ms_p50"]
    tops = [top_of(l) for s, l in lines if "top: " in l and " steps 0 " not in l][:-1]
    near = [t for t in tops if t.startswith("straggler rank 1 ") and abs(float(t.split()[-1]) - want) <= 0.15]
    again = subprocess.run([DDPSPY, "watch", out, "--interval", "1"], capture_output=True, text=True, timeout=60)
    first = (again.stdout.splitlines() or [""])[0]
    steps = int(first.split(" steps ")[1].split()[0]) if " steps " in first else -1
    p50 = float(first.split("step p50 ")[1].split()[0]) if "step p50 " in first and "step p50 -" not in first else -1
    n = truth["steps"] + truth["warmup"]
    return [(len(tops) >= 3 and len(near) >= len(tops) - 1,
             "PyTorch over gloo, rank 1 sleeping 40 ms a step (%.2f of its %.1f ms): every full interval's top finding "
             "but one at most is that straggler within 0.15: %s" % (want, truth["step_ms_p50"], tops)),
            (abs(steps - n) <= 2 and abs(p50 - truth["step_ms_p50"]) <= 0.1 * truth["step_ms_p50"],
             "PyTorch over gloo, watched again: %d steps (the job's %d), step p50 %.1f ms (the job's %.1f): %s"
             % (steps, n, p50, truth["step_ms_p50"], first))]


if have_torch():
    live("gloo straggler", gloo_straggler)
else:
    skip("ddpspy watch on PyTorch", "Debian's python3-torch is not installed (/usr/bin/torchrun, torch with gloo)")

# ---- --prometheus: scraped by a real Prometheus server (Debian's), the series read back through its
# query API; the exposition checked by its promtool ----
def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def series(api, q):
    """each rank's value of query q, from Prometheus' query API"""
    st, body = get(api + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
    return {r["metric"].get("rank"): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}


def scraped(api, wport):
    """a testbed run (rank 1 10 ms late a step) watched with --prometheus: the /metrics text once both
    ranks had steps, and its checks"""
    out = os.path.join(d, "prom")
    job = MPIRUN + ["-np", "2", BENCH, "train", "--data", data, "--hidden", "128", "--steps", "600",
                    "--straggler-rank", "1", "--straggler-ms", "10"]
    jp = subprocess.Popen([DDPSPY, "run", "-o", out, "--"] + job, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wp = subprocess.Popen([DDPSPY, "watch", out, "--interval", "1", "--prometheus", "127.0.0.1:%d" % wport],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = ""
    for _ in range(100):  # (a scrape of our own, once both ranks have steps)
        time.sleep(0.2)
        try:
            text = get("http://127.0.0.1:%d/metrics" % wport)[1]
        except OSError:
            continue
        if text.count("ddpspy_step_seconds_count{") >= 2:
            break
    jp.wait(timeout=120)
    wp.wait(timeout=60)
    time.sleep(1)
    return text


PROM = shutil.which("prometheus")
if PROM:
    wport, pport = free_port(), free_port()
    cfg = os.path.join(d, "prometheus.yml")
    with open(cfg, "w") as fh:
        fh.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: ddpspy\n"
                 "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % wport)
    pp = subprocess.Popen([PROM, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                           "--web.listen-address=127.0.0.1:%d" % pport], stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(d, "prometheus.log"), "w"))
    api = "http://127.0.0.1:%d" % pport
    for _ in range(100):  # (ready in a second or two)
        try:
            if get(api + "/-/ready")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    text = scraped(api, wport)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True) \
        if shutil.which("promtool") else None
    fams = [l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")]
    ok(len(fams) >= 8 and len(set(fams)) == len(fams) == text.count("# HELP ") and (lint is None or lint.returncode == 0),
       "/metrics: one HELP and TYPE per family (%d), promtool check metrics passes: %s"
       % (len(fams), lint and (lint.stdout + lint.stderr).strip()))
    steps = series(api, "max_over_time(ddpspy_step_seconds_count[5m])")
    late = series(api, "max_over_time(ddpspy_late_seconds_total[5m])")
    ok(set(steps) == {"0", "1"} and min(steps.values()) >= 100,
       "Prometheus scraped each rank's step time (its histogram's count over the run): %s" % steps)
    ok(set(late) == {"0", "1"} and late["1"] > late["0"] and late["1"] > 1,
       "and each rank's lateness, rank 1's (10 ms a step, over 5 s in all) the most: %s" % late)
    # (every finding kind the report knows has its severity; the straggler's, read back as its median
    # over the scrapes, within 0.15 of the report's over the run)
    p = subprocess.run([DDPSPY, "report", "--fail-on", "no_such_kind", os.path.join(d, "prom")], capture_output=True,
                       text=True)
    kinds = p.stderr.split("the kinds are ")[1].split()[0:] if "the kinds are " in p.stderr else []
    kinds = [k.strip(",") for k in kinds]
    missing = [k for k in kinds if 'ddpspy_finding_severity{kind="%s"}' % k not in text]
    rep = subprocess.run([DDPSPY, "report", "--json", os.path.join(d, "prom")], capture_output=True, text=True)
    fs = [f["severity"] for f in json.loads(rep.stdout)["findings"] if f["kind"] == "straggler"] \
        if rep.stdout.startswith("{") else []
    st, body = get(api + "/api/v1/query?" + urllib.parse.urlencode(
        {"query": 'quantile_over_time(0.5, ddpspy_finding_severity{kind="straggler"}[5m])'}))
    got = [float(r["value"][1]) for r in json.loads(body)["data"]["result"]]
    ok(len(kinds) >= 15 and not missing and fs and got and abs(got[0] - fs[0]) <= 0.15,
       "every one of the report's %d finding kinds has its severity in /metrics (missing: %s); the straggler's, "
       "its median over the scrapes %s, within 0.15 of the report's over the run %s"
       % (len(kinds), missing, got, fs))
    pp.terminate()
    pp.wait(timeout=30)
else:
    skip("ddpspy watch --prometheus", "Debian's prometheus is not installed (.ci/deps --prometheus)")

# ---- a hang: the alarm with the report's verdict, and --exit-on hang ----
fifo = os.path.join(d, "input.fifo")
os.mkfifo(fifo)
out = os.path.join(d, "hang")
lines, rc, t0 = watched(out, MPIRUN + ["-np", "2", HANG, "fifo", "150", fifo],
                        ["--interval", "1", "--hang-after", "3", "--exit-on", "hang"], timeout=60)
alarm = [l for s, l in lines if " HANG: " in l]
ok(rc == 3 and alarm and "HANG: rank 0 has waited" in alarm[0] and "mpi_coll allreduce #300" in alarm[0] and
   "the job hung: rank 1 never reached allreduce #300" in alarm[0] and "read of %s (pipe)" % fifo in alarm[0],
   "a hung job: the alarm names the collective and the report's verdict; --exit-on hang exits 3: rc %d, %s"
   % (rc, alarm[:1] or lines[-2:]))
cleanup(d)
done()
