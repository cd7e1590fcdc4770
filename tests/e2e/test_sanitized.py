"""The collector and the preload built with AddressSanitizer and UBSan (build/asan/, `make
sanitized`): the unit tests, every input that ever broke the collector (tests/fuzz/crashes/) and
the fixtures replayed through `dump` and `report` with their output checked, and a few live runs
under the sanitized preload. Any sanitizer report fails."""
import glob
import os
import subprocess
import tempfile
from lib import *

ASAN = os.path.join(BUILD, "asan")
SAN_ENV = {"ASAN_OPTIONS": "abort_on_error=0:exitcode=86", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def reported(text):
    return any(s in text for s in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"))


def run(argv, **kw):
    env = dict(os.environ, **SAN_ENV)
    env.update(kw.pop("env", {}))
    return subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 300), env=env, **kw)


missing = [p for p in ("ddpspy", "fuzz_replay", "libddpspy.so") if not os.path.exists(os.path.join(ASAN, p))]
if missing:
    skip("sanitized builds", "build/asan/%s missing (make sanitized)" % missing[0])
    done()

for t in sorted(glob.glob(os.path.join(ASAN, "tests", "test_*"))):
    p = run([t])
    ok(p.returncode == 0 and "not ok" not in p.stdout and not reported(p.stderr),
       "%s under ASan+UBSan: %s" % (os.path.basename(t), (p.stdout.strip().splitlines() or ["no output"])[-1]
                                    + (" " + p.stderr[-300:] if p.returncode else "")))

# the collector: every input that ever broke it, and the fixtures, through dump and report (text
# and JSON, the output checked: valid JSON and UTF-8, no NaN, no raw control character)
seeds = tempfile.mkdtemp(prefix="ddpspy-seeds-")
subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "fuzz", "seeds.py"), seeds], check=True,
               capture_output=True)
crashes = os.path.join(ROOT, "tests", "fuzz", "crashes")
p = run([os.path.join(ASAN, "fuzz_replay"), crashes, seeds], timeout=600)
n = len(os.listdir(crashes)) + len(os.listdir(seeds))
ok(p.returncode == 0 and ("%d inputs replayed" % n) in p.stdout and not reported(p.stderr),
   "%d inputs that broke the collector once and %d fixtures: no crash, no sanitizer report, valid output%s"
   % (len(os.listdir(crashes)), len(os.listdir(seeds)), (": " + p.stderr[-600:]) if p.returncode else ""))
subprocess.run(["rm", "-rf", seeds])

# the sanitized collector says what the plain one says
fx = os.path.join(ROOT, "tests", "fixtures", "straggler-delay")
a = run([os.path.join(ASAN, "ddpspy"), "report", "--json", fx])
b = subprocess.run([DDPSPY, "report", "--json", fx], capture_output=True, text=True)
ok(a.returncode == 0 and a.stdout == b.stdout and not reported(a.stderr),
   "report of the recorded straggler: the sanitized collector's output is the plain one's, byte for byte")

# the views (docs/viewer.md) of every fixture: no report, the plain collector's bytes
vd = tempfile.mkdtemp(prefix="ddpspy-views-")
bad = []
for fxd in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "*", ""))):
    if not glob.glob(fxd + "*.ddpspy"):
        continue
    outs = []
    for tag, exe in (("asan", os.path.join(ASAN, "ddpspy")), ("plain", DDPSPY)):
        v = run([exe, "view", fxd, "-o", os.path.join(vd, tag + ".json")])
        h = run([exe, "report", fxd, "--html", os.path.join(vd, tag + ".html")])
        outs.append((v, h))
    a_, b_ = outs
    same = all(open(os.path.join(vd, "asan" + x), "rb").read() == open(os.path.join(vd, "plain" + x), "rb").read()
               for x in (".json", ".html") if os.path.exists(os.path.join(vd, "plain" + x)))
    if reported(a_[0].stderr + a_[1].stderr) or a_[0].returncode != b_[0].returncode or not same:
        bad.append(os.path.basename(fxd.rstrip("/")))
ok(not bad, "view and report --html of every fixture under ASan+UBSan: no report, the plain output byte for byte %s" % bad)
subprocess.run(["rm", "-rf", vd])

# the preload: libasan first (a sanitized library preloaded into a plain program needs its runtime
# ahead of it). Leak checking is off there: the writer's buffers and the registry live as long as
# the process by design.
libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
d = tmpdir("sanitized")
pre = {"LD_PRELOAD": libasan + ":" + os.path.join(ASAN, "libddpspy.so"), "ASAN_OPTIONS": "detect_leaks=0:exitcode=86"}
cases = [
    ("produce", [os.path.join(APPS, "threads"), "produce", "4", "20000"], {"DDPSPY_RING_KB": "16"}),
    ("reads", [os.path.join(APPS, "threads"), "reads", "8", "20000"], {"DDPSPY_RING_KB": "64"}),
    ("churn", [os.path.join(APPS, "threads"), "churn", "200"], {}),
    # (no fork: GCC 12's ASan does not lock its allocator around fork, so a child forked while the
    # parent's writer thread starts, which ASan's thread hooks allocate for, can inherit the lock
    # held and hang in ASan itself; the fork path runs in test_process without sanitizers)
    ("exec", [os.path.join(APPS, "forker"), "exec"], {}),
    ("fdgame", [os.path.join(APPS, "forker"), "fdgame", "dup2", os.path.join(d, "fdgame.txt")], {}),
]
# GPU capture on the simulated device (CUPTI's buffers, the string table, NCCL, NVTX), where built
sim = os.path.join(BUILD, "simgpu")
if os.path.exists(os.path.join(APPS, "gpu_app")) and os.path.exists(os.path.join(sim, "libcupti.so.13")):
    cases.append(("cupti", [os.path.join(APPS, "gpu_app"), "timeline"],
                  {"LD_LIBRARY_PATH": sim, "SIMGPU_KERNELS": "spin=5000,tick=2000"}))
    # (CUPTI shared with a client in Kineto's shape: its records copied into its buffers, cupti/share.c)
    cases.append(("cupti-shared", [os.path.join(APPS, "gpu_app"), "kineto"],
                  {"LD_LIBRARY_PATH": sim, "SIMGPU_KERNELS": "spin=2000,tick=1000", "GPU_APP_FINALIZE": "1",
                   "GPU_APP_CALLBACK": "1"}))
    # (one that subscribes before cuInit, asks for system thread ids, with a second thread whose
    # pthread_t the next one takes, and flushes and enables by the other calls)
    cases.append(("cupti-shared-tids", [os.path.join(APPS, "gpu_app"), "kineto"],
                  {"LD_LIBRARY_PATH": sim, "SIMGPU_KERNELS": "spin=2000,tick=1000", "GPU_APP_EARLY": "1",
                   "GPU_APP_TID": "3", "GPU_APP_OLDFLUSH": "1", "GPU_APP_DUMP": "1"}))
if os.path.exists(os.path.join(APPS, "nccl_app")):
    cases.append(("nccl", [os.path.join(APPS, "nccl_app"), "0", "1", os.path.join(d, "nccl.id"), "3"],
                  {"LD_LIBRARY_PATH": sim}))
if os.path.exists(os.path.join(APPS, "nvtx_app")):
    cases.append(("nvtx", [os.path.join(APPS, "nvtx_app"), "3"], {}))
for name, argv, env in cases:
    out = os.path.join(d, name)
    env = dict(pre, DDPSPY_OUT=out, **env)
    p = run(argv, env=env, timeout=120)
    q = subprocess.run([DDPSPY, "dump", "--summary", "--json", out], capture_output=True, text=True)
    ends = [x for x in (json.loads(l) for l in q.stdout.splitlines() if l.strip()) if x["type"] == "end"]
    ok(p.returncode == 0 and not reported(p.stderr) and ends and all(e["complete"] == 1 for e in ends),
       "%s under the sanitized preload: no report, %d complete file(s)%s"
       % (name, len(ends), (": " + p.stderr[-600:]) if p.returncode or reported(p.stderr) else ""))
cleanup(d)
done()
