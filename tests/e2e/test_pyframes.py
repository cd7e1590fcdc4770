"""Python frames on blocking events (issue 43; preload/pyframes.c): a thread that blocks in Python
code gets, beside its native stack, the frames CPython itself gives (file, line, qualified name,
innermost first, at most 24), read without the GIL through a path that fails instead of faulting.
Ground truth: testapps/pyframes_app.py takes sys._getframe's frames on the line of each of its
sleeps; testapps/fakepy builds CPython 3.11's objects by hand, whole or with one fault each, and
says what must be read of them (all, part, or nothing); a program with no Python has none."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from lib import *

d = tmpdir("pyframes")
APP = os.path.join(ROOT, "testapps", "pyframes_app.py")
PY = "/usr/bin/python3"


def sleeps_by_thread(recs):
    """each thread's sleep events, in time order"""
    out = {}
    for e in sorted(events(recs, "sleep"), key=lambda e: e["t_ns"]):
        out.setdefault(e["tid"], []).append(e)
    return out


def frames_of(e):
    return [[f["file"], f["line"], f["function"]] for f in e.get("python", [])]


def against_truth(recs, truth):
    """the sleeps whose frames differ from CPython's (by thread, in order): [(want, got)]"""
    got, wrong = sleeps_by_thread(recs), []
    want = {}
    for s in truth["sleeps"]:
        want.setdefault(s["tid"], []).append(s["frames"])
    for tid, ws in want.items():
        es = got.get(tid, [])
        for i, w in enumerate(ws):
            g = frames_of(es[i]) if i < len(es) else None
            if g != w:
                wrong.append((w, g))
        if len(es) != len(ws):
            wrong.append(("%d sleeps" % len(ws), "%d recorded" % len(es)))
    return wrong


def lines_in(path):
    try:
        return sum(1 for _ in open(path, encoding="utf-8", errors="replace"))
    except OSError:
        return -1


def real_line(file, line):
    """file has a line `line`: a file's own, or a frozen module's (\"<frozen importlib._bootstrap>\")
    in its source where that is installed (getpath's is not), or one of the names CPython gives code
    compiled from a string (\"<string>\": namedtuple's, dataclasses'): then any line from 1"""
    m = re.fullmatch(r"<frozen ([\w.]+)>", file)
    if not m:
        return 1 <= line <= (1 << 30 if re.fullmatch(r"<[\w .-]+>", file) else lines_in(file))
    try:
        spec = importlib.util.find_spec(m.group(1))
    except (ImportError, ValueError):
        spec = None
    src = spec.origin if spec and spec.origin and spec.origin.endswith(".py") else None
    return 1 <= line <= (lines_in(src) if src else 1 << 30)


def end_of(recs):
    e = of(recs, "end")
    return e[0] if e else {}


if not os.path.exists(PY) or sys.version_info[:2] != (3, 11):
    skip("Python frames of Debian's CPython 3.11", "%s is not CPython 3.11" % PY)
else:
    # (every blocking call with its stack, DDPSPY_STACK_US=0: a 3 ms sleep may block for less, as
    # CPython's release of the GIL waits for another thread to take it first when one asked)
    out = os.path.join(d, "shapes")
    p = traced([PY, APP], out, env={"DDPSPY_STACK_US": "0"})
    truth = json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {"sleeps": []}
    recs = dump(out)[0]
    wrong = against_truth(recs, truth)
    names = sorted({f[2] for s in truth["sleeps"] for f in s["frames"][:2]})
    ok(p.returncode == 0 and len(truth["sleeps"]) >= 16 and not wrong,
       "every sleep's Python frames are CPython's own (%d sleeps on %d threads: methods, nested classes, "
       "generators, closures, handlers, a lambda, a coroutine, a C function's callback, a class body, a "
       "non-ASCII name): %s" % (len(truth["sleeps"]), len({s["tid"] for s in truth["sleeps"]}),
                                wrong[:2] or names))
    deep = [len(frames_of(e)) for es in sleeps_by_thread(recs).values() for e in es]
    ok(max(deep or [0]) == 24, "a 60-deep recursion keeps its innermost 24 frames: %s" % max(deep or [0]))
    end = end_of(recs)
    ok(str(end.get("python", "")).startswith("3.11.") and end.get("python_why") is None,
       "the file names the CPython it read (%s) and that its frames were read (%s)"
       % (end.get("python"), end.get("python_why")))
    text = subprocess.run([DDPSPY, "dump", out], capture_output=True, text=True).stdout
    line = next((l for l in text.splitlines() if "Trainer.log_metrics" in l), "")
    ok("py block (%s:32) <-Trainer.log_metrics (%s:40)" % (APP, APP) in line and "python: CPython 3.11" in text,
       "ddpspy dump shows an event's Python frames before its native ones: %s" % line.strip()[:200])

    # frames made and unmade by two other threads all along (deep recursion, generators,
    # exceptions) while the blocking calls repeat: nothing but the truth, and every file and line real
    out = os.path.join(d, "churn")
    p = traced([PY, APP, "--churn", "3"], out, env={"DDPSPY_STACK_US": "0"}, timeout=180)
    truth = json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {"sleeps": []}
    recs = dump(out)[0]
    wrong = against_truth(recs, truth)
    bad, seen = [], 0
    for e in events(recs):
        for f in e.get("python", []):
            seen += 1
            if not real_line(f["file"], f["line"]):
                bad.append((f["file"], f["line"]))
    ok(p.returncode == 0 and len(truth["sleeps"]) > 16 and not wrong and not bad and seen,
       "while other threads churn frames: %d sleeps, each with CPython's frames (%s), and every one of the "
       "%d frames recorded is a real file's line (%s)" % (len(truth["sleeps"]), wrong[:1] or "all", seen, bad[:3]))

# CPython 3.11's objects built by hand (testapps/fakepy): what is whole is read, exactly
FAKE = os.path.join(APPS, "fakepy")
out = os.path.join(d, "crafted")
p = traced([FAKE, "crafted", "20"], out)
recs = dump(out)[0]
want = json.loads(p.stdout)["frames"] if p.returncode == 0 else None
got = [frames_of(e) for e in events(recs, "sleep")]
ok(want and len(got) == 20 and all(g == want for g in got),
   "a hand-built thread state of two frames, a frame not started yet between them, and a location table "
   "of every entry form: each sleep reads %s: %s" % (want, [g for g in got if g != want][:2] or "all of them"))

# one fault in it per sleep: a fault in the innermost frame leaves no frames, one in its caller the
# innermost alone, a frame that is its own caller none at all; a random location table may give any
# line, never anything else; the program runs to its end
out = os.path.join(d, "broken")
p = traced([FAKE, "broken", "40"], out)
recs = dump(out)[0]
faults = json.loads(p.stdout)["faults"] if p.returncode == 0 else []
got = [frames_of(e) for e in events(recs, "sleep")]
inner = ["/fake/model.py", 12, "Model.forward"]
miss = []
for (fault, where), g in zip(faults, got):
    if fault == 9:
        good = [f[0] for f in g] == ["/fake/model.py", "/fake/train.py"][:len(g)] and len(g) >= 1
    elif fault == 8:
        good = g == []
    else:
        good = g == ([] if where == "inner" else [inner])
    if not good:
        miss.append((fault, where, g))
ok(p.returncode == 0 and len(faults) == 40 and len(got) == 40 and not miss,
   "40 faults (types, lengths, control bytes, unmapped objects, random bytes, a loop, a random location table): "
   "what checks out is read and the rest left out: %s" % (miss[:3] or "every one"))

for mode, what in (("unmapped", "a thread state in unmapped memory"), ("none", "no thread state yet")):
    out = os.path.join(d, mode)
    p = traced([FAKE, mode, "10"], out)
    recs = dump(out)[0]
    got = [frames_of(e) for e in events(recs, "sleep")]
    ok(p.returncode == 0 and len(got) == 10 and not any(got), "%s: the 10 sleeps recorded, none with Python frames: %s"
       % (what, got[:2]))

out = os.path.join(d, "v312")
p = traced([os.path.join(APPS, "fakepy312"), "crafted", "5"], out)
recs = dump(out)[0]
end = end_of(recs)
ok(p.returncode == 0 and end.get("python") == "3.12.2" and "3.12" in (end.get("python_why") or "")
   and not any(frames_of(e) for e in events(recs)),
   "a CPython whose layout ddpspy does not know: no frames, and the file says why: %s" % end.get("python_why"))

out = os.path.join(d, "native")
p = traced(["/bin/sleep", "0.05"], out)
recs = dump(out)[0]
end, sl = end_of(recs), events(recs, "sleep")
ok(p.returncode == 0 and end and end.get("python") is None and sl and sl[0].get("frames")
   and not any(frames_of(e) for e in events(recs)),
   "a program with no Python (sleep 0.05): its native stack, no Python frames and no python record (%s)"
   % end.get("python"))

cleanup(d)
done()
