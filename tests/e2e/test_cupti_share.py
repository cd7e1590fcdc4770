"""CUPTI shared with another client (cupti/share.c), on the simulated device: gpu_app kineto is a
second CUPTI client in the shape of torch.profiler's Kineto (it links libcupti, so a preloaded
library's definitions come first; it profiles 20 kernels between 5 before and 6 after, on its own
clock, with cudaGetDevice's records turned off). Its ground truth is the same program run without
ddpspy: with ddpspy in front it must get exactly those records, in its own buffers and clock, while
ddpspy's file holds every kernel of the run and nothing the client asked for beyond ddpspy's own
choice; its callbacks must reach it, and its cuptiFinalize (from a callback, as Kineto's teardown)
must not end ddpspy's capture. Its CUDA call kinds (runtime, driver) get copies of the calls ddpspy
records and turn nothing more on in CUPTI: on an H200 torch.profiler's driver kind so passed on
stopped every API record of the process, which the simulated CUPTI models (docs/gpu.md), so that
ddpspy's own launch calls after the window are the check; the file says the client's were limited; a client that subscribes before cuInit
starts ddpspy first; a client that asks for system thread ids (cuptiSetThreadIdType, as XLA's
profiler does) gets them while ddpspy's file keeps CUPTI's default ids, those of the threads ddpspy
knows, one whose pthread_t a later thread took included, and a count of those it could not name; a
client that flushes with the deprecated cuptiActivityFlush or turns its kinds on with
cuptiActivityEnableAndDump gets what it gets alone, as does one that asks for external correlation
but no CUDA call kind (no external id records of ddpspy's calls), and one that stops while work
still runs, as an on-demand trace does (its window's records come to it, ddpspy's record of the
running kernel untimed and counted); and a holder that calls libcupti through its
own handle (as nsys's injection does) keeps CUPTI, ddpspy saying who holds it."""
import json
import os
import shutil
import subprocess
from lib import *
from schema import report_errors

need_sim("CUPTI shared with another client", "cupti.h", "cupti/share.c")

ENV = {"LD_LIBRARY_PATH": SIMDIR, "SIMGPU_KERNELS": "spin=2000,tick=1000,hold=arg"}
APP = os.path.join(APPS, "gpu_app")
d = tmpdir("cupti-share")
# what the client's summary must say the same with ddpspy as without (docs/gpu.md, "Sharing CUPTI")
SAME = ("subscribe", "timestamp", "enabled", "kernels", "ticks", "spins", "inside", "api", "getdevice", "memcpy", "ext",
        "ext7", "sync", "launch_corr_ok", "dropped", "after", "finalized", "callbacks", "tid_type", "tid_system",
        "tid_default")


def summary(p):
    try:
        return json.loads(p.stdout.splitlines()[-1])
    except (ValueError, IndexError):
        return {"rc": p.returncode, "err": p.stderr[-300:]}


def alone(extra=None):
    p = subprocess.run([APP, "kineto"], env=dict(os.environ, **ENV, **(extra or {})), capture_output=True, text=True,
                       timeout=60)
    return summary(p)


def under(name, extra=None, mode="kineto"):
    out = os.path.join(d, name)
    shutil.rmtree(out, ignore_errors=True)
    p = traced([APP, mode], out, env=dict(ENV, **(extra or {})))
    recs, rc, err = dump(out)
    return summary(p), recs


def gpu_events(recs, kind):
    return [r for r in of(recs, "gpu_event") if r["kind"] == kind]


def info(recs):
    g = of(recs, "gpu")
    return g[-1] if g else {}


def foreign_ids(recs):
    """CUPTI's thread ids in ddpspy's API records that are no thread's default id (the low 32 bits
    of its pthread_t, which the file's thread records carry)"""
    known = {int(t["pthread"], 16) & 0xffffffff for t in of(recs, "thread") if t.get("pthread")}
    return sorted(set(e.get("thread") for e in gpu_events(recs, "cuda_api")) - known)


truth = alone()
ok(truth.get("subscribe") == 0 and truth["kernels"] == 20 and truth["ticks"] == 20 and truth["spins"] == 0
   and truth["inside"] == 20 and truth["getdevice"] == 0 and truth["ext7"] == 20 and truth["after"] == 0,
   "alone, the client gets the 20 kernels of its window, each inside it on its clock, no cudaGetDevice record, "
   "its external ids, nothing after it: %s" % truth)

# ("callbacks": its subscriber gets the window's launches through the callback API, ddpspy's
# subscriber passing them on, and it tears down as Kineto does, cuptiFinalize from a call's exit)
# ("warmup": a torch.profiler schedule's warm-up, whose kernels still run when the client's forced
# flush throws its records away: ddpspy keeps theirs, and the client gets none of them, as alone)
host = None  # the main thread's own events (the wrappers' copies and synchronizes) in the first case
for case, extra in (("shared", {}), ("finalize", {"GPU_APP_FINALIZE": "1"}), ("early", {"GPU_APP_EARLY": "1"}),
                    ("callbacks", {"GPU_APP_CALLBACK": "1", "GPU_APP_FINALIZE": "1"}), ("warmup", {"GPU_APP_WARMUP": "1"}),
                    ("system-tids", {"GPU_APP_TID": "1"}), ("old-flush", {"GPU_APP_OLDFLUSH": "1"}),
                    ("enable-and-dump", {"GPU_APP_DUMP": "1"}), ("device-kinds", {"GPU_APP_KINDS": "device"}),
                    ("no-sync", {"GPU_APP_NOSYNC": "1"})):
    want = alone(extra) if extra else truth
    got, recs = under(case, extra)
    diff = {k: (want.get(k), got.get(k)) for k in SAME if want.get(k) != got.get(k)}
    ok(got.get("subscribe") == 0 and not diff,
       "%s: with ddpspy in front the client gets what it gets alone (%d kernels, %d runtime calls, %d external ids "
       "on its own clock): %s" % (case, got.get("kernels", -1), got.get("api", -1), got.get("ext7", -1),
                                  diff or "the same"))
    kern = gpu_events(recs, "gpu_kernel")
    names = sorted(set(k["kname"] for k in kern))
    g = info(recs)
    # ("no-sync": the client stops while a kernel runs, as an on-demand trace does: its forced flush
    # at its session's end is passed on, and hands ddpspy that kernel untimed, counted; a default
    # flush would have kept back the buffer of its window's records, and it got nothing)
    nosync = int(case == "no-sync")
    n = 31 + 5 * (case == "warmup")
    nl = len([e for e in gpu_events(recs, "cuda_api") if "aunch" in e.get("fn", "")])
    ok(len(kern) == n and nl == n + nosync and sum("tick" in k["kname"] for k in kern) == 20 and g.get("state") == "on"
       and g.get("untimed", 0) == nosync,
       "%s: ddpspy's own file holds every kernel of the run, timed, the client's window and the %d outside it, and "
       "every launch call (%d): %d %s (untimed %s)" % (case, n - 20, nl, len(kern), names, g.get("untimed")))
    api = [e.get("fn", "") for e in gpu_events(recs, "cuda_api")]
    ext = gpu_events(recs, "gpu_extcorr")
    ok(not [f for f in api if f.startswith("cudaGetDevice") or f.startswith("cudaStreamCreate")] and not ext,
       "%s: and nothing the client asked for beyond ddpspy's choice (no cudaGetDevice records, none of its "
       "external ids): %d calls, %d external correlations" % (case, len(api), len(ext)))
    ok(api and not foreign_ids(recs) and g.get("client_tid_unknown") == 0,
       "%s: ddpspy's %d API records name their thread by CUPTI's default id throughout, whatever the client "
       "asked for (ids of no thread: %s; client records left unnamed: %s)"
       % (case, len(api), foreign_ids(recs), g.get("client_tid_unknown")))
    total = sum(got.get(k, 0) for k in ("kernels", "api", "ext", "memcpy", "sync"))
    if case == "warmup":  # (and the warm-up's calls and external ids, handed to it and thrown away at its flush)
        total = g.get("client_records") if g.get("client_records", 0) >= total else -1
    total += nosync  # (the kernel still running, handed to it untimed, which it leaves out as alone)
    # ("device-kinds": no CUDA call kind, so none limited; alone CUPTI makes no external id record of a
    # call whose record it does not make, so none of ddpspy's launches' reach it)
    limited = "" if case == "device-kinds" else "runtime,driver"
    ok(g.get("client") == "unnamed" and g.get("client_records") == total and g.get("client_dropped") == 0
       and g.get("foreign") == 0 and g.get("client_api_limited") == limited,
       "%s: the file names the client it shared CUPTI with, the %d records handed to it, and that its CUDA call "
       "records were those ddpspy records: %s" % (case, total, {k: g.get(k) for k in (
           "client", "client_records", "client_dropped", "foreign", "client_api_limited")}))
    # (before, a client's first call starting ddpspy's capture left cuInit's call into it holding
    # ddpspy's guard: the main thread recorded nothing more for the rest of the run)
    events = len([e for e in of(recs, "event") if e.get("kind", "").startswith("cuda_")])
    host = host if host is not None else events
    ok(events == host and host > 0,
       "%s: ddpspy records the program's own CUDA calls (copies, synchronizes) as in the first case: %d events, "
       "against %d" % (case, events, host))
    if case == "early":
        ok(g.get("why", "").startswith("started at another CUPTI client's first call (cuptiSubscribe)"),
           "early: a client that subscribes before cuInit starts ddpspy's capture first: %s" % g.get("why"))

# a client that asked for system thread ids, with 5 more kernels from a second thread: one that
# ddpspy saw start, whose pthread_t the next thread took before the client's records came (named
# by the system id it had when it made them), or one started through libc's own pthread_create,
# which ddpspy never knew (left with CUPTI's default id, and counted)
for case, mode in (("reused-pthread", "3"), ("unseen-thread", "2")):
    want = alone({"GPU_APP_TID": mode})
    got, recs = under(case, {"GPU_APP_TID": mode})
    g = info(recs)
    diff = {k: (want.get(k), got.get(k)) for k in SAME + ("helper_system", "helper_default")
            if want.get(k) != got.get(k)}
    kern = gpu_events(recs, "gpu_kernel")
    if mode == "3":
        ok(want.get("helper_system") == 5 and want.get("reused") == got.get("reused") == 1 and not diff
           and g.get("client_tid_unknown") == 0,
           "%s: the client gets its 27 runtime records each with its thread's system id, as alone, the helper's "
           "5 under the id it had though a later thread took its pthread_t (taken: %s): %s"
           % (case, got.get("reused"), diff or "the same"))
    else:
        expect = {k: v for k, v in diff.items() if k not in ("helper_system", "helper_default")}
        ok(want.get("helper_system") == 5 and got.get("helper_default") == 5 and got.get("helper_system") == 0
           and not expect and g.get("client_tid_unknown") == 5,
           "%s: the client gets every record it gets alone; the unseen thread's 5 with CUPTI's default id, "
           "counted in the file (client_tid_unknown %s); the rest the same: %s"
           % (case, g.get("client_tid_unknown"), expect or "the same"))
    ok(len(kern) == 36 and g.get("state") == "on" and set(foreign_ids(recs)) <= {got.get("helper_pthread")},
       "%s: ddpspy's file holds all 36 kernels (%d), its API records under CUPTI's default ids (of no thread it "
       "knew: %s; the helper's: %s)" % (case, len(kern), foreign_ids(recs), got.get("helper_pthread")))

# the report's coverage says it: the rank's GPU figures from CUPTI, shared with the client
out = os.path.join(d, "report")
shutil.rmtree(out, ignore_errors=True)
traced([APP, "kineto"], out, env=dict(ENV, RANK="0", WORLD_SIZE="1"))
r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
j = json.loads(r.stdout) if r.stdout.startswith("{") else {}
t = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120).stdout
line = next((x for x in t.splitlines() if x.startswith("coverage: ")), "")
ok([(c["gpu"], c.get("client"), c.get("client_calls_limited")) for c in j.get("coverage", [])] ==
   [("cupti-shared", "unnamed", "runtime,driver")] and not report_errors(j) and
   line == "coverage: rank 0 CUPTI, shared with another client (unnamed; of the CUDA calls it gets only those "
   "ddpspy records)",
   "the report's coverage: rank 0's GPU figures from CUPTI shared with the client: %s; %s" % (j.get("coverage"), line))

# a holder that reached CUPTI through its own handle before cuInit (nsys's injection does): it keeps
# CUPTI and all its records; ddpspy records host events and says who holds it
p = subprocess.run([APP, "cupti"], env=dict(os.environ, **ENV), capture_output=True, text=True, timeout=60)
alone_holder = summary(p)
holder, recs = under("holder", mode="cupti")
g = info(recs)
ok(holder.get("kernels") == alone_holder.get("kernels") == 4 and holder.get("api") == alone_holder.get("api")
   and g.get("state") == "taken" and not gpu_events(recs, "gpu_kernel"),
   "a holder through its own handle keeps CUPTI (%s kernels, as alone: %s); ddpspy's file: %s, %s"
   % (holder.get("kernels"), alone_holder.get("kernels"), g.get("state"), g.get("why", "")[:90]))

# a tracer that loads libcupti by its own handle after ddpspy started (share.c cannot stand in front
# of it) and registers its activity callbacks without a subscriber: CUPTI has one set of them, so
# the buffers ddpspy had handed out complete into the tracer's callback, which frees them as its
# own. Before, that free() of a pointer into one of ddpspy's blocks aborted the program.
p = subprocess.run([APP, "cupti"], env=dict(os.environ, **ENV, GPU_APP_LATE="1"), capture_output=True, text=True,
                   timeout=60)
late_alone = summary(p)
out = os.path.join(d, "late-handle")
shutil.rmtree(out, ignore_errors=True)
p = traced([APP, "cupti"], out, env=dict(ENV, GPU_APP_LATE="1", RANK="0", WORLD_SIZE="1"))
late = summary(p)
recs, rc, err = dump(out)
ends = of(recs, "end")
ok(p.returncode == 0 and late_alone.get("kernels") == 4 and late.get("kernels", 0) >= 4 and
   ends and ends[-1].get("reason") == "exit",
   "a tracer through its own handle that takes CUPTI's callbacks after ddpspy started: the program runs to its end "
   "(rc %s, %s), the tracer gets its %s kernels (alone %s) and whatever ddpspy's buffers held; ddpspy's file ends "
   "whole: %s" % (p.returncode, p.stderr.strip()[-80:] or "nothing on stderr", late.get("kernels"),
                  late_alone.get("kernels"), ends[-1].get("reason") if ends else None))
# the report says CUPTI's records stopped: every CUDA copy call has a CUPTI record of its call, and
# the program's copies after the takeover (a set, two copies) have none; the first shared run's
# report, whose records all came, says nothing of it
r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
jl = json.loads(r.stdout) if r.stdout.startswith("{") else {}
cov = jl.get("coverage") or [{}]
warned = [w for w in jl.get("job", {}).get("warnings", []) if "CUPTI's records stopped" in w]
t = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120).stdout
line = next((x for x in t.splitlines() if x.startswith("coverage: ")), "")
ok(cov[0].get("cupti_stopped", {}).get("copies_after", 0) >= 2 and len(warned) == 1 and "none of its records came"
   in line and not report_errors(jl) and not [c for c in j.get("coverage", []) if "cupti_stopped" in c],
   "the report says CUPTI's records stopped: %s; %s; %s (the shared run's report: %s)"
   % (cov[0].get("cupti_stopped"), warned, line, [c.get("cupti_stopped") for c in j.get("coverage", [])]))
# the same tracer 2.2 s after the first kernel, whose record ddpspy's writer collected meanwhile (it
# asks CUPTI once a second): the records stop some 1 to 2.2 s before the program's last copy
out = os.path.join(d, "late-handle-2")
shutil.rmtree(out, ignore_errors=True)
p = traced([APP, "cupti"], out, env=dict(ENV, GPU_APP_LATE="2", RANK="0", WORLD_SIZE="1"))
r = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
jl = json.loads(r.stdout) if r.stdout.startswith("{") else {}
stop = (jl.get("coverage") or [{}])[0].get("cupti_stopped", {})
t = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=120).stdout
line = next((x for x in t.splitlines() if x.startswith("coverage: ")), "")
ok(p.returncode == 0 and stop.get("copies_after", 0) >= 2 and 1.0 <= (stop.get("seconds_before_last_copy") or 0) < 10
   and "CUPTI until" in line and not report_errors(jl),
   "a tracer that takes the callbacks 2.2 s after the first kernel: the report says ddpspy's records stop a second "
   "or more before the last copy: %s; %s" % (stop, line))
done()
