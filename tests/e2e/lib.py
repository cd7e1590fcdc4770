"""Helpers for the end-to-end tests: run programs under the preload, read `ddpspy dump --json`,
and report TAP lines that tests/run.sh counts. Run from the repository root."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
LIB = os.path.join(BUILD, "libddpspy.so")
DDPSPY = os.path.join(BUILD, "ddpspy")
APPS = os.path.join(BUILD, "testapps")
BENCH = os.path.join(BUILD, "ddpbench")
# Open MPI as root needs --allow-run-as-root; more ranks than cores need --oversubscribe
MPIRUN = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])

_n = 0
_failed = 0


def ok(cond, what):
    global _n, _failed
    _n += 1
    if not cond:
        _failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (_n, what), flush=True)
    return cond


def skip(what, why):
    global _n
    _n += 1
    print("ok %d - %s # SKIP %s" % (_n, what, why), flush=True)


def spread(xs):
    """A robust standard deviation of repeated measurements: 1.4826 x their median absolute deviation."""
    if len(xs) < 2:
        return 0.0
    m = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - m) for x in xs)


def margin(want, rel, *samples):
    """The margin for comparing a live median with want: the stated relative tolerance, plus twice
    the standard error of each median compared, from the spread this run measured (so a noisy run
    is judged within its own noise, a quiet one within rel alone)."""
    return rel * abs(want) + sum(2 * spread(xs) / len(xs) ** 0.5 for xs in samples if xs)


_reruns = 0


def live(name, attempt, tries=3):
    """A live comparison (a real job on this machine, its report against the job's own figures),
    run again where it missed: attempt(k) runs it once and returns its checks as (passed, message)
    pairs. A live miss is first taken as inconclusive (this machine's noise: another process, a
    slow phase of the VM), printed as a '# rerun' line that tests/run.sh counts, and the case is run
    again, up to tries times; only the last attempt's checks are reported, so a real fault fails
    every attempt and is reported failing. attempt may instead return a string: the run could not
    judge anything (the report itself says another job held the machine's CPUs), rerun the same
    way, and a skip with that reason when the last attempt could not either. Returns the last
    attempt's checks ([] after such a skip)."""
    global _reruns
    for k in range(tries):
        got = attempt(k)
        if isinstance(got, str):
            checks, missed = [], [got]
        else:
            checks = [(bool(c), m) for c, m in got]
            missed = [m for c, m in checks if not c]
        if not missed or k == tries - 1:
            break
        _reruns += 1
        print("# rerun %s (attempt %d of %d): missed: %s" % (name, k + 2, tries, missed[0][:400].replace("\n", " ")),
              flush=True)
    if isinstance(got, str):
        skip(name, got + " (%d attempts)" % tries)
        return []
    for c, m in checks:
        ok(c, m + (" [attempt %d of %d]" % (k + 1, tries) if k else ""))
    return checks


def busy_host(checks, *reports):
    """checks as they are, unless one missed while a report says another job held the host's CPUs
    that its training threads waited for ("the host was shared", or a cpu_contention finding whose
    evidence has processes outside the job holding a quarter of a CPU or more: with 4 ranks on 2
    cores the job's own ranks hold more than the outsider, and the warning, meant for users, stays
    silent): the miss then says nothing of the analysis; why the case could not be judged, for live"""
    shared = [w for j in reports if j for w in j.get("job", {}).get("warnings", []) if w.startswith("the host was shared")]
    for j in reports:
        for f in (j or {}).get("findings", []):
            held = f["evidence"].get("cpus_held", {}).get("outside_job", 0) if f["kind"] == "cpu_contention" else 0
            if held >= 0.25:
                shared.append("processes outside the job held %.2f of %s's CPUs (cpu_contention, rank %s)"
                              % (held, f["evidence"].get("host"), f["rank"]))
    if shared and not all(c for c, _ in checks):
        return "not judged, the host was busy with other work: " + shared[0]
    return checks


TORCHRUN = "/usr/bin/torchrun"


def have_torch():
    """whether Debian's PyTorch with gloo is here (/usr/bin/torchrun, and torch for /usr/bin/python3:
    `python3` on the PATH may be another interpreter)"""
    return os.path.exists(TORCHRUN) and subprocess.run(
        ["/usr/bin/python3", "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
        capture_output=True).returncode == 0


def done():
    if _reruns:
        print("# reruns: %d" % _reruns, flush=True)
    print("1..%d" % _n, flush=True)
    sys.exit(1 if _failed else 0)


CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
SIMDIR = os.path.join(BUILD, "simgpu")


def need_sim(what, header, built):
    """Ends the test with one skip, saying why, unless CUDA's `header` is in CUDA_HOME (so `built`,
    what it compiles, is built) and `make sim` built the simulated device and gpu_app."""
    if not os.path.exists(os.path.join(CUDA, "include", header)):
        skip(what, "no CUDA headers in %s (set CUDA_HOME): %s is not built" % (CUDA, built))
        done()
    if not os.path.exists(os.path.join(APPS, "gpu_app")) or not os.path.exists(os.path.join(SIMDIR, "libcupti.so.13")):
        skip(what, "make sim did not build the simulated device and gpu_app (no nvcc in %s/bin?)" % CUDA)
        done()


# the testbed's GPU mode on the simulated device: its kernels last their first argument, and its
# copies' bytes need not move (it never reads them), so that this machine's memory bandwidth, shared
# by the ranks, is not in the model
SIM_TESTBED = {"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "ddpbench_=arg", "SIMGPU_MOVE_BYTES": "0"}


def need_testbed_gpu(what):
    """Ends the test with one skip, saying why, unless the testbed's GPU mode can run here: the
    simulated device, mpirun, build/ddpbench and build/libddpbench_gpu.so."""
    need_sim(what, "nccl.h", "the testbed's GPU mode")
    if not shutil.which("mpirun") or not os.path.exists(BENCH) or not os.path.exists(
            os.path.join(BUILD, "libddpbench_gpu.so")):
        skip(what, "mpirun, build/ddpbench or build/libddpbench_gpu.so missing (Open MPI or nvcc absent)")
        done()


def report_json(out, timeout=300):
    """`ddpspy report --json out`, parsed; None, saying why, when it is not JSON or breaks the
    contract (schema.py)"""
    from schema import report_errors
    p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=timeout)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        print("# report of %s: rc=%d %s" % (out, p.returncode, p.stderr[-500:]))
        return None
    errs = report_errors(j)
    if errs:
        print("# %s: the report breaks the contract: %s" % (out, errs[:3]))
        return None
    return j


def tmpdir(name):
    d = tempfile.mkdtemp(prefix="ddpspy-%s-" % name)
    return d


def bench_data(d, sequences=4096):
    """the testbed's dataset made under d (ddpbench gen-data, 2048 samples); its path"""
    data = os.path.join(d, "data")
    subprocess.run([BENCH, "gen-data", data, "--samples", "2048", "--sequences", str(sequences)], check=True,
                   stdout=subprocess.DEVNULL)
    return data


def traced(argv, out, env=None, timeout=120, **kw):
    """Runs argv with the preload writing to out; returns the CompletedProcess."""
    e = dict(os.environ)
    e.update({"LD_PRELOAD": LIB, "DDPSPY_OUT": out})
    if env:
        e.update(env)
    return subprocess.run(argv, env=e, timeout=timeout, capture_output=True, text=True, **kw)


def testbed(out, data, args, np=2, env=None, timeout=600):
    """build/ddpbench train on np ranks, reading data, under `ddpspy run -o out` (emptied first: a
    re-run's files must not join the last run's): (its JSON summary, out), or (None, out) after
    printing why it failed."""
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", str(np), BENCH, "train", "--data", data] + args,
                       capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        print("# %s failed: %s" % (os.path.basename(out), p.stderr[-800:].replace("\n", "\n# ")))
        return None, out
    return json.loads(p.stdout.splitlines()[-1]), out


def rank0_summary(stdout):
    """The JSON summary a torchrun job's rank 0 printed last (--tee 1 prefixes its lines with
    "[default0]:"), or None. torchrun's tee threads write each rank's lines to one stdout, and a
    line has come through with another's text after rank 0's object (CI, 2026-11-28: "Extra data"
    at its 166th character): the object is read off the front of the line, and what trails it is
    printed as a note."""
    dec = json.JSONDecoder()
    for l in reversed(stdout.splitlines()):
        l = l.split(":", 1)[1] if l.startswith("[default0]:") else l
        if not l.startswith("{"):
            continue
        try:
            obj, end = dec.raw_decode(l)
        except ValueError:
            continue
        if l[end:].strip():
            print("# rank 0's summary came with text after it: %r" % l[end:][:200])
        return obj
    return None


def checked_report(out, *extra):
    """`ddpspy report --json out extra...`: (its JSON, the CompletedProcess), the contract checked
    as one test; (None, the process) when it gave no JSON, saying why"""
    from schema import report_errors
    p = subprocess.run([DDPSPY, "report", "--json", out] + list(extra), capture_output=True, text=True, timeout=300)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        print("# report of %s: rc=%d %s" % (out, p.returncode, p.stderr[-500:]))
        return None, p
    errs = report_errors(j)
    ok(not errs, "%s: the report follows the contract%s" % (os.path.basename(out), (": %s" % errs[:3]) if errs else ""))
    return j, p


def dump(path):
    """Parses `ddpspy dump --json path` into (records, returncode, stderr)."""
    p = subprocess.run([DDPSPY, "dump", "--json", path], capture_output=True, text=True, timeout=300)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return recs, p.returncode, p.stderr


def of(recs, type_, **match):
    return [r for r in recs if r.get("type") == type_ and all(r.get(k) == v for k, v in match.items())]


def who(recs):
    """each process (by pid) as its file last said: its process record, updated by its identity
    records (a rank learnt after the file began: MPI's world, a communicator, a process group)"""
    out = {}
    for r in recs:
        if r.get("type") == "process":
            out[r["pid"]] = dict(r)
        elif r.get("type") == "identity" and r.get("pid") in out:
            out[r["pid"]].update({k: v for k, v in r.items() if k not in ("type", "file")})
    return out


def events(recs, kind=None, **match):
    return [r for r in of(recs, "event", **match) if kind is None or r["kind"] == kind]


def sleep_line(path, fn, call="sleep"):
    """the line of the time.sleep call (or of another method call) in the Python file path's
    function fn: where a site or a sample of it must point"""
    import ast
    f = next(n for n in ast.walk(ast.parse(open(path).read())) if isinstance(n, ast.FunctionDef) and n.name == fn)
    return next(n.lineno for n in ast.walk(f) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == call)


def ms(ns):
    return ns / 1e6


def trace_dirs(d):
    """every directory under d (d itself included) that holds trace files"""
    return sorted(r for r, _, files in os.walk(d) if any(f.endswith(".ddpspy") for f in files))


def without_mpirun(err):
    """stderr without mpirun's own notices (blocks between lines of dashes: a process that exited
    with a non-zero status)"""
    keep, inside = [], False
    for line in err.splitlines(keepends=True):
        if line.startswith(b"-----"):
            inside = not inside
        elif not inside:
            keep.append(line)
    return b"".join(keep)


def same_reports(dirs, what, **env):
    """One check: `ddpspy report --json` says the same, byte for byte (its output, its messages and
    its exit status), whether it reads and splits the ranks' files on 1 thread, on 2, or spread over
    2 processes under mpirun (--mpi; where Open MPI is installed) (issue 21: neither changes the
    report); env: the test-only limits, e.g. DDPSPY_REPORT_PREFIX to have the steps found again
    from every call streamed."""
    diff = []
    mpi = shutil.which("mpirun") is not None
    for t in dirs:
        runs = [([DDPSPY, "report", "--json", "-j", j, t], {}) for j in ("1", "2")]
        if mpi:
            runs.append((MPIRUN + ["-np", "2", DDPSPY, "report", "--json", "--mpi", t], {}))
        try:
            out = [subprocess.run(r, capture_output=True, timeout=300, env=dict(os.environ, **env, **e))
                   for r, e in runs]
        except subprocess.TimeoutExpired as e:
            diff.append("%s (%s timed out)" % (t, " ".join(e.cmd[-3:])))
            continue
        if len({(p.returncode, p.stdout, without_mpirun(p.stderr)) for p in out}) > 1:
            diff.append(t)
    return ok(not diff, "%s: the report is the same with -j 1, -j 2%s on "
              "all %d trace directories%s%s" % (what, " and --mpi on 2 processes" if mpi else "", len(dirs),
                                                " (%s)" % env if env else "",
                 (": not on %s" % diff[:3]) if diff else ""))


# A long trace's prefix: the synchronizing calls a thread keeps while loading before its steps are
# found again from every call, streamed (docs/report.md, Limits; by the job's size, 2048 at least).
# 32 makes most test traces long and still holds a few steps of each pattern (a prefix that shows
# no pattern gives other steps: what the real limit's size is for). The sample is made to hold
# every step and the clocks' spread every call, so that the long reading's figures come from the
# steps, and its clocks from the calls, the whole one's do (thinned, the clocks differ by design:
# test_clocks' 6,000-iteration halo exchange, a residual of 6.4 us against 9.6). Steps by
# point-to-point calls take 2048, the real limit's least: each rank's own pattern is found in its
# prefix alone, after a halo exchange's start-up, and where its calls all look alike, from their
# gaps, which fewer calls do not settle on a busy host (stencil-one-host, 15 calls an iteration:
# at 32 no pattern; test_clocks' 4-rank exchange of 4 ranks on 2 cores: at 128 one rank's period
# taken as 8 for its 4 calls, and in one CI run at 512 no pattern, time windows).
LONG = {"DDPSPY_REPORT_PREFIX": "32", "DDPSPY_REPORT_SAMPLE": "1000000", "DDPSPY_REPORT_SPREAD": "1000000"}
LONG_P2P = dict(LONG, DDPSPY_REPORT_PREFIX="2048")


def same_as_long(dirs, what):
    """One check: reported as a long trace (LONG: its steps found from every call streamed, begun
    while its files are read where the job allows, the split from the sampled blocks the sweep
    kept, or the training threads read again; the clocks from the prefix and the spread beyond),
    every trace gives the report it gives read whole, byte for byte (output, messages, exit
    status). This replaced comparing the long reading made three ways (test-only knobs forcing
    the sweep after loading and a second reading of the training threads): it checks the long
    path against the short one, and showed the clocks losing the instance and the message that
    straddled the prefix's end, a job's longest step taken from one rank's, a GPU rank's
    collectives counted within its device's step bounds instead of its host's, a halo exchange's
    period taken one short on a short list, point-to-point waits matched beyond the analysed
    steps, and the kept calls' ends left on their file's clock under drift."""
    diff, left = [], 0
    for t in dirs:
        run = [DDPSPY, "report", "--json", "-j", "1", t]
        try:
            out = [subprocess.run(run, capture_output=True, timeout=300)]
            if b'"step_source":"windows"' in out[0].stdout:
                left += 1  # (a long trace has a window per 64 calls, not 20: by design)
                continue
            p2p = b'"step_source":"p2p"' in out[0].stdout
            out.append(subprocess.run(run, capture_output=True, timeout=300,
                                      env=dict(os.environ, **(LONG_P2P if p2p else LONG))))
            if b'"step_source":"windows"' in out[1].stdout and not p2p:
                # a step of more than 10 calls (a sharded job's: each layer's all-gathers and
                # reduce-scatter) repeats less than three times in 32 calls: read with 128
                out[1] = subprocess.run(run, capture_output=True, timeout=300,
                                        env=dict(os.environ, **dict(LONG, DDPSPY_REPORT_PREFIX="128")))
        except subprocess.TimeoutExpired:
            diff.append("%s (timed out)" % t)
            continue
        if len({(p.returncode, p.stdout, p.stderr) for p in out}) > 1:
            diff.append(t)
    return ok(not diff, "%s as long traces %s (2048 where the steps are by point-to-point calls, 128 where 32 "
              "calls hold too few steps to find them by): the same "
              "report as read whole, byte for byte, on all %d trace directories but %d whose steps are time "
              "windows%s" % (what, LONG, len(dirs), left, (": not on %s" % diff[:3]) if diff else ""))


def cleanup(d):
    """Removes a test's directory, unless one of its checks failed: then its traces are kept for a
    look, and the path is printed (timing-sensitive failures rarely come twice). First, every trace
    the test made is reported on 1 and on 2 threads (same_reports), and as long traces
    (same_as_long)."""
    dirs = trace_dirs(d)
    if dirs:
        same_reports(dirs, os.path.basename(sys.argv[0])[:-3])
        same_as_long(dirs, os.path.basename(sys.argv[0])[:-3])
    keep = os.environ.get("DDPSPY_TEST_KEEP")
    if keep:  # every test's traces, for comparing reports across a change (docs/testing.md)
        dst = os.path.join(keep, "%s-%s" % (os.path.basename(sys.argv[0])[:-3], os.path.basename(d)))
        shutil.copytree(d, dst, symlinks=True, ignore_dangling_symlinks=True, dirs_exist_ok=True)
    if _failed:
        print("# a check failed: its traces are kept in %s" % d, flush=True)
    else:
        shutil.rmtree(d, ignore_errors=True)


def streamed_differences(out, prefix=64):
    """What differs between the report of out and the one made with only `prefix` synchronizing
    calls kept per thread while loading (test-only DDPSPY_REPORT_PREFIX): the steps are then found
    again from every call, streamed, which must come to the same analysis. The clock is aligned
    from the kept calls only, so waits may move by microseconds: shares and severities are
    compared to 0.005, the rest exactly."""
    def rep(env):
        p = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, **env))
        return json.loads(p.stdout) if p.stdout.startswith("{") else None

    a, b = rep({}), rep({"DDPSPY_REPORT_PREFIX": str(prefix)})
    if a is None or b is None:
        return ["no report"]
    diff = []
    for k in ("steps_detected", "steps_analyzed", "steps_sampled", "step_source"):
        if a["job"][k] != b["job"][k]:
            diff.append((k, a["job"][k], b["job"][k]))
    if a["verdict"]["bound"] != b["verdict"]["bound"]:
        diff.append(("bound", a["verdict"]["bound"], b["verdict"]["bound"]))
    pairs = [("verdict", a["verdict"]["shares"], b["verdict"]["shares"])]
    pairs += [("rank %d" % x["rank"], x["shares"], y["shares"]) for x, y in zip(a["ranks"], b["ranks"])]
    for what, x, y in pairs:
        if any(abs(x[c] - y[c]) > 0.005 for c in x):
            diff.append((what, x, y))
    fa = [(f["kind"], f["rank"], f["severity"]) for f in a["findings"]]
    fb = [(f["kind"], f["rank"], f["severity"]) for f in b["findings"]]
    if len(fa) != len(fb) or any(x[:2] != y[:2] or abs(x[2] - y[2]) > 0.005 for x, y in zip(fa, fb)):
        diff.append(("findings", fa, fb))
    return diff


def under_valgrind(args, **env):
    """`ddpspy ARGS` under valgrind, failing on memory errors and definite leaks: the completed
    process, and what valgrind said when it failed ("" when it did not), for a check's message."""
    p = subprocess.run(["valgrind", "-q", "--error-exitcode=9", "--leak-check=full", "--errors-for-leak-kinds=definite",
                        DDPSPY] + args, capture_output=True, text=True, timeout=600, env=dict(os.environ, **env))
    return p, (": " + p.stderr[-600:].replace("\n", " | ")) if p.returncode else ""
