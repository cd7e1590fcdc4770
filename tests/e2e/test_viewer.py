"""The viewer (docs/viewer.md): `ddpspy view` (Chrome Trace Event JSON) and `ddpspy report --html`,
judged on stored traces with known ground truth (tests/fixtures: a 4-rank testbed job whose rank 2
sleeps 40 ms before each batch; the GPU testbed's straggler on the simulated device) and on a trace
made here whose thread name, path and host are hostile. What ddpspy writes is checked twice: here,
against the trace (processes, threads, slices, flows and where they point), and by software nobody
here wrote, Debian's Chromium driven headless by playwright-core (tests/viewer/browser.mjs): its own
DevTools Performance panel loads the JSON and its trace model must hold the same processes, thread
names, slices and flows, and refuse a damaged file; the HTML report opens with no request, no script,
one bar per rank, the straggler marked and every finding, and its screenshot is judged by its size
and colours."""
import glob
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from lib import *

FX = os.path.join(ROOT, "tests", "fixtures")
STRAGGLER = os.path.join(FX, "straggler-4ranks")
GPU = os.path.join(FX, "gpu-straggler")
OUT = os.path.join(BUILD, "viewer")
NODE_MODULES = os.path.join(BUILD, "node", "node_modules", "playwright-core")
CHROMIUM = os.environ.get("DDPSPY_CHROMIUM", "/usr/lib/chromium/chromium")


def view(*args, timeout=300):
    return subprocess.run([DDPSPY, "view"] + list(args), capture_output=True, text=True, timeout=timeout)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def browser_missing():
    """Why the browser checks cannot run here, or None (.ci/deps --browser installs what they need)."""
    if not shutil.which("node"):
        return "node is not installed (.ci/deps --browser)"
    if not os.path.exists(NODE_MODULES):
        return "playwright-core is not installed in build/node (.ci/deps --browser)"
    if not os.access(CHROMIUM, os.X_OK):
        return "Debian's chromium is not installed at %s (.ci/deps --browser)" % CHROMIUM
    return None


def browser(mode, path, png=None):
    args = ["node", os.path.join(ROOT, "tests", "viewer", "browser.mjs"), mode, path] + ([png] if png else [])
    last = None
    for _ in range(2):  # (one more try when Chromium itself fails to start on a loaded machine)
        p = subprocess.run(args, capture_output=True, text=True, timeout=240)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode == 0 and lines:
            return json.loads(lines[-1])
        last = (p.returncode, p.stderr[-800:])
    raise RuntimeError("browser.mjs %s %s failed: %s" % (mode, path, last))


class Trace:
    """A view's events, indexed as a viewer indexes them."""

    def __init__(self, doc):
        self.doc = doc
        self.ev = doc["traceEvents"]
        self.meta = [e for e in self.ev if e["ph"] == "M"]
        self.procs = {e["pid"]: e["args"]["name"] for e in self.meta if e["name"] == "process_name"}
        self.sort = {e["pid"]: e["args"]["sort_index"] for e in self.meta if e["name"] == "process_sort_index"}
        self.threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in self.meta if e["name"] == "thread_name"}
        self.slices = [e for e in self.ev if e["ph"] == "X"]
        self.starts = [e for e in self.ev if e["ph"] == "s"]
        self.ends = [e for e in self.ev if e["ph"] == "f"]
        self.rank_of = {pid: int(n.split()[1]) for pid, n in self.procs.items() if n.startswith("rank ")}
        self.by_key = {}
        for e in self.slices:
            self.by_key.setdefault((e["pid"], e["tid"], e["ts"], e.get("cat")), e)

    def entries(self):
        """slices per (pid, tid): what DevTools keeps as a thread's entries (instants it reads but
        does not draw on a thread's track)"""
        n = {}
        for e in self.ev:
            if e["ph"] == "X":
                n[(e["pid"], e["tid"])] = n.get((e["pid"], e["tid"]), 0) + 1
        return n


def check_flows(t, what):
    """every flow has its start and end, each at the start of a slice of the same category on its
    thread; returns [(from rank, to rank)]"""
    ends = {e["id"]: e for e in t.ends}
    bad, pairs = [], []
    for s in t.starts:
        f = ends.get(s["id"])
        if not f or f.get("bp") != "e" or f["cat"] != s["cat"]:
            bad.append(("unpaired", s["id"]))
            continue
        a = t.by_key.get((s["pid"], s["tid"], s["ts"], s["cat"]))
        b = t.by_key.get((f["pid"], f["tid"], f["ts"], f["cat"]))
        if not a or not b or a["name"] != b["name"]:
            bad.append(("unbound", s["id"]))
            continue
        if b["ts"] >= a["ts"]:
            bad.append(("not waiting", s["id"]))
        pairs.append((t.rank_of[s["pid"]], t.rank_of[f["pid"]]))
    ok(t.starts and len(t.starts) == len(t.ends) and not bad,
       "%s: %d flows, each from the last rank's collective slice to a slice of the same collective on a rank "
       "that arrived earlier (bound by pid, tid, ts, cat) %s" % (what, len(t.starts), bad[:3]))
    return pairs


def devtools_checks(t, path, what, png=None):
    d = browser("devtools", path, png)
    ok(d.get("loaded"), "%s: Chromium's DevTools loads it (%s)" % (what, {k: d[k] for k in d if k != "procs"} if not d.get("loaded") else "ok"))
    if not d.get("loaded"):
        return d
    names = {p["pid"]: p["name"] for p in d["procs"]}
    ok(names == t.procs, "%s: DevTools' processes and their names are the trace's: %s" % (what, sorted(names.values())))
    ok(d["raw"] == len(t.ev), "%s: DevTools read every event: %s of %d" % (what, d["raw"], len(t.ev)))
    mine = t.entries()
    theirs = {(p["pid"], th["tid"]): th for p in d["procs"] for th in p["threads"]}
    wrong = [k for k, n in mine.items() if k not in theirs or theirs[k]["entries"] != n]
    ok(not wrong, "%s: DevTools holds every thread's slices, %d in %d threads %s" %
       (what, sum(mine.values()), len(mine), [(k, mine[k], theirs.get(k, {}).get("entries")) for k in wrong[:3]]))
    named = [k for k in theirs if k in t.threads and theirs[k]["name"] != t.threads[k]]
    ok(not named and all(k in theirs or k not in mine for k in t.threads),
       "%s: DevTools names the threads as the trace does %s" % (what, named[:3]))
    ok(len(d["flows"]) == len(t.starts), "%s: DevTools joins %d flows (the trace has %d)" %
       (what, len(d["flows"]), len(t.starts)))
    return d


def png_size_colours(path):
    """(width, height, {colour: pixels}) of an 8-bit RGB(A) non-interlaced PNG, as Chromium writes them"""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and not inter, (depth, ctype, inter)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    counts = {}
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 2 == 0:  # (every other row is enough to count colours)
            for x in range(0, stride, bpp * 2):
                k = bytes(line[x:x + 3])
                counts[k] = counts.get(k, 0) + 1
        prev = line
    return w, h, counts


def hostile_trace(d):
    """A rank whose thread name, file path and host are HTML, quotes and bytes that are not UTF-8."""
    script = r'''
import ctypes, os, socket, sys, time
d = sys.argv[1].encode()
libc = ctypes.CDLL(None)
libc.pthread_self.restype = ctypes.c_ulong
libc.pthread_setname_np(ctypes.c_ulong(libc.pthread_self()), b'<script>x"&\xff')
p = d + b'/<b>"q\'&\xff<i>.bin'
with open(p, "wb") as f:
    f.write(b"x" * 65536)
for _ in range(20):
    fd = os.open(p, os.O_RDONLY)
    os.read(fd, 65536)
    os.close(fd)
    time.sleep(0.002)
'''
    os.makedirs(d + "/data", exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=d + "/trace", RANK="0", WORLD_SIZE="1")
    host = b'<i>h"&\xff</i>'
    # a UTS namespace of its own, for a hostile host name (the program traced from its exec on);
    # without one only the thread and path are hostile
    wrap = ("import os, socket, sys; socket.sethostname(%r); "
            "os.execve(sys.argv[1], sys.argv[1:], dict(os.environ, LD_PRELOAD=%r))" % (host, LIB))
    plain = dict(env)
    del plain["LD_PRELOAD"]
    p = subprocess.run(["unshare", "--uts", "/usr/bin/python3", "-c", wrap, "/usr/bin/python3", "-c", script, d + "/data"],
                       env=plain, capture_output=True, timeout=60)
    if p.returncode != 0:
        subprocess.run(["/usr/bin/python3", "-c", script, d + "/data"], env=env, check=True, capture_output=True, timeout=60)
        return False
    return True


def main():
    os.makedirs(OUT, exist_ok=True)
    missing = browser_missing()
    truth = json.load(open(os.path.join(STRAGGLER, "truth.json")))
    late = int(truth["recorded"]["args"][truth["recorded"]["args"].index("--straggler-rank") + 1])

    # ---- the straggler: the default view ----
    tj = os.path.join(OUT, "straggler.json")
    p = view(STRAGGLER, "-o", tj)
    ok(p.returncode == 0 and "wrote" in p.stderr, "view writes the straggler's trace: %s" % p.stderr.strip()[:300])
    t = Trace(load(tj))
    ranks = sorted(t.rank_of.values())
    ok(ranks == list(range(truth["world_size"])), "one process per rank: %s" % ranks)
    ok(all(t.sort.get(pid) == r for pid, r in t.rank_of.items()), "process_sort_index is the rank")
    other = t.doc["otherData"]
    ok(other["events"] == len(t.ev) - len(t.meta) and other["left_out"] == 0,
       "otherData counts the events written (%d) and none left out" % other["events"])
    ts = [e["ts"] for e in t.ev if "ts" in e]
    ok(min(ts) >= 0 and all(re.fullmatch(r"-?\d+(\.\d{1,3})?", repr(x)) for x in ts[:2000]),
       "times in microseconds from the job's start, to the nanosecond")
    train = {pid: tid for (pid, tid), n in t.threads.items() if n.endswith("(training thread)")}
    ok(sorted(train) == sorted(t.rank_of), "each rank's training thread is named as such")
    workers = [n for n in t.threads.values() if "-in" in n]
    ok(len(workers) >= 2 * len(ranks), "the input threads are under their rank: %d" % len(workers))
    ok(any(e["name"] == "pread" and e["args"].get("path", "").startswith("/") and "bytes" in e["args"] for e in t.slices),
       "reads carry their path and bytes")
    colls = [e for e in t.slices if e.get("cat") == "comms" and "seq" in e["args"]]
    ok(colls and all("comm" in e["args"] and "bytes" in e["args"] and e["args"]["op"] for e in colls),
       "collectives carry their op, comm, seq and bytes: %d" % len(colls))
    # steps shown: the slowest 3 and 2 typical, each a slice on every rank's steps track
    steps = {}
    for e in t.slices:
        if e.get("cat") == "step":
            steps.setdefault(e["name"], []).append(e)
    ok(len(steps) == 5 and all(len(v) == len(ranks) for v in steps.values()),
       "5 steps shown on every rank's steps track: %s" % sorted(steps))
    rep = json.loads(subprocess.run([DDPSPY, "report", "--json", STRAGGLER], capture_output=True, text=True).stdout)
    longest = max(max(e["dur"] for e in v) for v in steps.values()) / 1e3
    ok(abs(longest - rep["step"]["max_ms"]) < 0.15 * rep["step"]["max_ms"],
       "the slowest step is shown: %.1f ms (report's max %.1f ms)" % (longest, rep["step"]["max_ms"]))
    pairs = check_flows(t, "straggler")
    ok(pairs and all(a == late for a, b in pairs) and {b for a, b in pairs} == set(ranks) - {late},
       "every flow starts at rank %d (the straggler) and reaches each other rank: %s" % (late, sorted(set(pairs))))
    crit = [e for e in t.slices if e.get("cat") == "critical"]
    on_late = sum(e["dur"] for e in crit if e["name"] == "rank %d" % late)
    ok(crit and on_late > 0.7 * sum(e["dur"] for e in crit),
       "the critical path runs through rank %d %.0f%% of the time" % (late, 100 * on_late / max(1, sum(e["dur"] for e in crit))))
    marks = [e for e in t.ev if e["ph"] == "i" and e.get("cat") == "finding"]
    ok(any(e["args"]["kind"] == "straggler" and t.rank_of.get(e["pid"]) == late for e in marks),
       "the straggler finding is marked on rank %d's steps track" % late)
    rate = [e for e in t.ev if e["ph"] == "C" and e["name"] == "input read"]
    ok(rate and max(e["args"]["MB/s"] for e in rate) > 0, "an input-read counter per rank: %d samples" % len(rate))

    # ---- bounds and bad input ----
    tb = os.path.join(OUT, "steps.json")
    p = view(STRAGGLER, "-o", tb, "--steps", "5-6", "--ranks", "1,3")
    tt = Trace(load(tb)) if p.returncode == 0 else None
    ok(tt and sorted(tt.rank_of.values()) == [1, 3] and
       sorted({e["name"] for e in tt.slices if e.get("cat") == "step"}) == ["step 5", "step 6"],
       "--steps 5-6 --ranks 1,3: those steps of those ranks (%s)" % p.stderr.strip()[:200])
    if tt:
        ok(not tt.starts or all(tt.rank_of.get(s["pid"]) in (1, 3) for s in tt.starts + tt.ends),
           "flows only between the ranks shown")
    tm = os.path.join(OUT, "max.json")
    p = view(STRAGGLER, "-o", tm, "--max-events", "400")
    tx = Trace(load(tm)) if p.returncode == 0 else None
    def sync(e):
        return e["args"].get("call") in ("mpi_coll", "mpi_icoll", "mpi_wait", "gloo_coll", "nccl_coll", "step")
    calls = len([e for e in tx.slices if e.get("cat") in ("data", "comms", "host", "compute") and not sync(e)]) if tx else -1
    ok(tx and 0 < calls <= 400 and tx.doc["otherData"]["left_out"] > 0 and "left out" in p.stderr,
       "--max-events 400: %d calls other than collectives written, %s left out, and it says so" %
       (calls, tx and tx.doc["otherData"]["left_out"]))
    if tx:
        ok(len([e for e in tx.slices if sync(e)]) == len([e for e in t.slices if sync(e)]) and len(tx.starts) == len(t.starts),
           "... every collective and wait still shown, and every flow")
    for args, want in [(["--steps", "9-2"], "--steps needs"), (["--steps", "900"], "no analysed step"),
                       (["--ranks", "7"], "none of the --ranks"), (["--ranks", "x"], "--ranks needs"),
                       (["--max-events", "0"], "--max-events needs"), (["-o", "/nonexistent/dir/x.json"], "cannot write"),
                       (["--bogus"], "unknown option")]:
        o = ["-o", os.path.join(OUT, "bad.json")] if "-o" not in args else []
        p = view(STRAGGLER, *(o + args))
        ok(p.returncode == 2 and want in p.stderr, "view %s: exit 2, '%s' (%s)" %
           (" ".join(args), want, (p.stderr.strip().splitlines() or [""])[0][:160]))
    p = view(os.path.join(OUT, "no-such-dir"), "-o", os.path.join(OUT, "bad.json"))
    ok(p.returncode == 2 and "no readable rank" in p.stderr, "view of a missing directory: exit 2 (%s)" % p.stderr.strip()[:120])
    p = view(os.path.join(FX, "damaged"), "-o", os.path.join(OUT, "damaged.json"))
    ok(p.returncode == 0 and "damaged" in p.stderr and load(os.path.join(OUT, "damaged.json"))["traceEvents"],
       "a damaged trace file: its readable part viewed, with a warning")

    # ---- input workers (DataLoader worker processes: files of their own) under their rank ----
    gen = os.path.join(BUILD, "bench", "gentrace")
    if os.path.exists(gen):
        sd = tmpdir("viewer-stall")
        subprocess.run([gen, sd, "2", "20000", "stall"], check=True, capture_output=True)
        sj = os.path.join(OUT, "stall.json")
        p = view(sd, "-o", sj)
        st = Trace(load(sj)) if p.returncode == 0 else None
        wk = {k: n for k, n in st.threads.items() if n.startswith("worker ")} if st else {}
        ok(st and sorted(st.rank_of.values()) == [0, 1] and len(wk) == 2 and {k[0] for k in wk} == set(st.rank_of) and
           all(any(e["pid"] == k[0] and e["tid"] == k[1] and e["args"].get("path", "").startswith("/data/train/")
                   for e in st.slices) for k in wk),
           "each rank's input worker process is a thread of its rank, its reads with their path: %s" % sorted(wk.values()))
        cleanup(sd)
        # a job of 100 ranks: a bar each, the timelines bounded
        bd = tmpdir("viewer-wide")
        subprocess.run([gen, bd, "100", "3000"], check=True, capture_output=True)
        bh = os.path.join(OUT, "wide.html")
        p = subprocess.run([DDPSPY, "report", bd, "--html", bh], capture_output=True, text=True, timeout=120)
        page = open(bh, encoding="utf-8").read() if p.returncode == 0 else ""
        lanes = [int(x) for x in re.findall(r'<figure class="timeline"[^>]*>', page) and
                 [len(re.findall(r'<g class="lane', f)) for f in page.split('<figure class="timeline"')[1:]]]
        ok(page.count('class="rank-bar') == 100 and lanes and max(lanes) <= 48 and "of the 100 ranks drawn" in page,
           "100 ranks: a bar each, and timelines of at most 48 lanes that say so: %s" % lanes)
        cleanup(bd)
    else:
        skip("input workers under their rank", "build/bench/gentrace missing")
        skip("100 ranks in the HTML report", "build/bench/gentrace missing")

    # ---- NVTX ranges (testapps/nvtx_app: an epoch of 2 step ranges and marks, a start/end range ended
    # on another thread, a domain's push/pop ranges; 2 steps, fewer than the 3 a range needs to mark
    # the steps: its steps are windows, and the view is of the whole run) ----
    nvapp = os.path.join(APPS, "nvtx_app")
    tn = os.path.join(OUT, "nvtx.json")
    if os.path.exists(nvapp):
        nd = tmpdir("viewer-nvtx")
        traced([nvapp, "2"], nd + "/trace", env={"RANK": "0", "WORLD_SIZE": "1"})
        p = view(nd + "/trace", "-o", tn, "--skip", "0", "--steps", "0-1000")
        nt = Trace(load(tn)) if p.returncode == 0 else None
        nv = [e for e in nt.ev if e.get("cat") == "nvtx"] if nt else []
        sl = {}
        for e in nv:
            if e["ph"] == "X":
                sl.setdefault(e["name"], []).append(e)
        steps_ = sl.get("step", [])
        ep = (sl.get("epoch") or [None])[0]
        ab = [e for e in nv if e["ph"] in "be" and e["name"] == "checkpoint"]
        ok(len(steps_) == 2 and all(e["dur"] >= 2000 for e in steps_) and ep and
           all(ep["ts"] <= e["ts"] and e["ts"] + e["dur"] <= ep["ts"] + ep["dur"] for e in steps_) and
           [e["args"]["domain"] for e in sl.get("forward", []) + sl.get("backward", [])] == [1, 1] and
           len([e for e in nv if e["ph"] == "i" and e["name"] == "step done"]) == 2,
           "NVTX push/pop ranges as slices of their thread (2 steps of 2 ms in the epoch, a domain's forward "
           "and backward), marks as instants: %s" % sorted((k, len(v)) for k, v in sl.items()))
        ok([e["ph"] for e in ab] == ["b", "e"] and ab[0]["id2"] == ab[1]["id2"] and ab[0]["tid"] != ab[1]["tid"]
           and ab[1]["ts"] > ab[0]["ts"], "a start/end range ended on another thread as an async pair: %s" %
           [(e["ph"], e["tid"], e.get("id2")) for e in ab])
        cleanup(nd)
    else:
        skip("NVTX ranges in the view", "build/testapps/nvtx_app missing (no NVTX headers in CUDA_HOME)")
        nt = None

    # ---- gzip ----
    tg = os.path.join(OUT, "straggler.json.gz")
    p = view(STRAGGLER, "-o", tg)
    with open(tg, "rb") as f:
        magic = f.read(2)
    ok(p.returncode == 0 and magic == b"\x1f\x8b" and load(tg)["traceEvents"] == t.ev,
       "-o NAME.gz: gzip, the same events")

    # ---- GPU: streams as tracks of their rank, flows between NCCL kernels ----
    tgpu = os.path.join(OUT, "gpu.json")
    p = view(GPU, "-o", tgpu)
    g = Trace(load(tgpu))
    streams = [n for n in g.threads.values() if n.startswith("GPU ")]
    ok(p.returncode == 0 and len(streams) >= 2 * len(g.rank_of), "GPU streams are tracks of their rank: %s" % streams)
    kern = [e for e in g.slices if e.get("cat") == "gpu"]
    ok(any(e["args"]["work"] == "nccl" and "seq" in e["args"] and "Kernel" in e["name"] for e in kern) and
       any(e["args"]["work"] == "kernel" for e in kern), "kernels carry their names, NCCL ones their collective")
    gpairs = check_flows(g, "gpu")
    gtruth = json.load(open(os.path.join(GPU, "truth.json")))
    args = gtruth["recorded"]["args"]
    glate = int(args[args.index("--straggler-rank") + 1]) if "--straggler-rank" in args else None
    ok(glate is not None and gpairs and sum(a == glate for a, b in gpairs) >= 0.8 * len(gpairs),
       "GPU flows start at the straggler's NCCL kernels (rank %s): %s" % (glate, sorted(set(gpairs))))
    ok(any(n.startswith("critical path (NCCL") for n in g.threads.values()), "the GPU job's critical path from NCCL kernels")

    # ---- point-to-point: a flow from the late sender's send to each call that waited for it ----
    app = os.path.join(APPS, "stencil")
    if shutil.which("mpirun") and os.path.exists(app):
        sd = tmpdir("viewer-stencil")
        p = subprocess.run([DDPSPY, "run", "-o", sd + "/trace", "--"] + MPIRUN + ["-np", "2", app, "--iters", "60", "--nx",
                           "2048", "--ny", "1024", "--heavy-rank", "1", "--heavy-factor", "10", "--nonblocking"],
                           capture_output=True, text=True, timeout=300)
        tp = os.path.join(OUT, "stencil.json")
        q = view(sd + "/trace", "-o", tp)
        pt = Trace(load(tp)) if p.returncode == 0 and q.returncode == 0 else None
        bad, pairs = [], []
        for st in (pt.starts if pt else []):
            f = [e for e in pt.ends if e["id"] == st["id"]]
            a = [e for e in pt.slices if (e["pid"], e["tid"], e["ts"]) == (st["pid"], st["tid"], st["ts"])]
            b = [e for e in pt.slices if f and (e["pid"], e["tid"], e["ts"]) == (f[0]["pid"], f[0]["tid"], f[0]["ts"])]
            if not f or f[0].get("bp") != "e" or not a or not b:
                bad.append(st["id"])
                continue
            pairs.append((pt.rank_of[st["pid"]], pt.rank_of[f[0]["pid"]], a[0]["name"], b[0]["name"], st["name"]))
        p2p = [x for x in pairs if "(late " in x[4]]  # (the rare all-reduce's flows are collectives')
        # every flow from a send slice to the slice that waited for it, named after its sender; most
        # from heavy rank 1 to rank 0 (a live run: rank 1 may once wait for rank 0, as in the GPU
        # flows above, and the view then shows it)
        ok(pt is not None and p2p and not bad and all("late sender" in x[4] and x[2] == "send" and x[0] != x[1] and
                                                      "rank %d" % x[0] in x[4] for x in p2p)
           and sum(x[:2] == (1, 0) for x in p2p) >= 0.8 * len(p2p),
           "the stencil's view: %d point-to-point flows, each from a send slice to a slice of its peer that waited "
           "for it (late sender), at least 80%% from heavy rank 1 to rank 0: %s %s %s"
           % (len(p2p), sorted(set(x[2:4] for x in p2p))[:3], bad[:3], sorted(set((x[0], x[1], x[4]) for x in p2p))[:4]))
        if not missing and pt is not None:
            devtools_checks(pt, tp, "the stencil's view")
        cleanup(sd)
    else:
        skip("point-to-point flows", "mpirun or build/testapps/stencil missing")

    # ---- the HTML report ----
    hp = os.path.join(OUT, "report.html")
    p = subprocess.run([DDPSPY, "report", STRAGGLER, "--html", hp], capture_output=True, text=True, timeout=120)
    html = open(hp, encoding="utf-8").read() if p.returncode == 0 else ""
    ok(p.returncode == 0 and p.stdout.startswith("verdict:") and "wrote" in p.stderr,
       "report --html writes the file and still prints the report")
    ok("<script" not in html and "default-src 'none'" in html and not re.search(r"(src|href)=", html),
       "self-contained: no script, a CSP of default-src 'none', nothing linked")
    p = subprocess.run([DDPSPY, "report", STRAGGLER, "--html", "/nonexistent/x.html"], capture_output=True, text=True)
    ok(p.returncode == 2 and "cannot write" in p.stderr, "report --html to an unwritable path: exit 2")

    # ---- hostile names ----
    hd = tmpdir("viewer-hostile")
    real_host = hostile_trace(hd)
    th = os.path.join(OUT, "hostile.json")
    p = view(hd + "/trace", "-o", th, "--skip", "0", "--steps", "0-1000")
    raw = open(th, "rb").read() if p.returncode == 0 else b""
    try:
        raw.decode("utf-8")
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        doc = None
    ht = Trace(doc) if doc else None
    ok(ht and any(n.startswith('<script>x"&\ufffd') for n in ht.threads.values()) and
       any('<b>"q\'&\ufffd<i>.bin' in e["args"].get("path", "") for e in ht.slices),
       "hostile thread name and path: valid UTF-8 JSON, the names kept (bytes not UTF-8 as U+FFFD)")
    hh = os.path.join(OUT, "hostile.html")
    subprocess.run([DDPSPY, "report", hd + "/trace", "--html", hh], capture_output=True, timeout=60)
    hs = open(hh, encoding="utf-8").read() if os.path.exists(hh) else ""
    ok(hs and "<script>" not in hs and "&lt;script&gt;x&quot;&amp;\ufffd" in hs and "<i>" not in hs,
       "hostile names in the HTML: escaped, never markup")
    if real_host:
        ok("&lt;i&gt;h&quot;&amp;\ufffd&lt;/i&gt;" in hs, "a hostile host name escaped in the HTML")
    else:
        skip("a hostile host name", "unshare --uts is not permitted here")

    # ---- in Chromium ----
    if missing:
        for what in ["DevTools loads the straggler's view", "DevTools loads the .gz view", "DevTools refuses a damaged file",
                     "DevTools loads the GPU view", "DevTools loads the hostile view", "the HTML report in Chromium",
                     "the hostile HTML report in Chromium"]:
            skip(what, missing)
        cleanup(hd)
        return done()
    devtools_checks(t, tj, "straggler in DevTools", os.path.join(OUT, "devtools.png"))
    dg = browser("devtools", tg)
    ok(dg.get("loaded") and len(dg["flows"]) == len(t.starts), "DevTools loads the .gz view with the same flows")
    bad = os.path.join(OUT, "damaged-view.json")
    with open(bad, "wb") as f:
        f.write(open(tj, "rb").read()[: os.path.getsize(tj) // 2])
    db = browser("devtools", bad)
    ok(not db.get("loaded"), "DevTools refuses a damaged (cut) file: %s" % db)
    dgpu = devtools_checks(g, tgpu, "GPU in DevTools")
    if nt:
        devtools_checks(nt, tn, "NVTX in DevTools")
    dh = browser("devtools", th)
    ok(dh.get("loaded") and any(th_["name"] and th_["name"].startswith("<script>") for pr in dh["procs"] for th_ in pr["threads"]),
       "DevTools loads the hostile view, the thread name as text")

    png = os.path.join(OUT, "report.png")
    h = browser("page", hp, png)
    ok(h["requests"] == [] and h["scripts"] == 0 and h["handlers"] == 0 and h["dialogs"] == 0 and not h["violations"],
       "the HTML report makes no request, has no script or handler: %s" % {k: h[k] for k in ("requests", "scripts", "violations")})
    ok(h["csp"] and "default-src 'none'" in h["csp"], "its Content-Security-Policy is in force: %s" % h["csp"])
    bars = h["bars"]
    ok(sorted(b["rank"] for b in bars) == ranks, "one bar per rank: %s" % [b["rank"] for b in bars])
    ok([b["rank"] for b in bars if b["late"]] == [late] and "straggler" in [b for b in bars if b["late"]][0]["text"],
       "the straggler's bar, rank %d, is marked" % late)
    ok(h["timelines"] and all(tl["late"] == late and [l["rank"] for l in tl["lanes"] if l["late"]] == [late] and tl["waits"] > 0
                              for tl in h["timelines"]),
       "each timeline marks rank %d late and shows the others' waits: %s" % (late, [(tl["first"], tl["late"], tl["waits"]) for tl in h["timelines"]]))
    want = [(f["kind"], f["rank"] if f["rank"] is not None else -1, len(f["advice"])) for f in rep["findings"]]
    got = [(f["kind"], f["rank"], f["advice"]) for f in h["findings"]]
    ok(got == want and all(f["evidence"] > 0 for f in h["findings"]), "every finding with its evidence and advice: %s" % got)
    ok(rep["verdict"]["summary"] in h["verdict"], "the verdict is the report's")
    w, hgt, colours = png_size_colours(png)
    red = sum(n for c, n in colours.items() if c[0] > 200 and c[1] < 90 and c[2] < 90)
    green = sum(n for c, n in colours.items() if c[1] > 150 and c[0] < 120 and c[2] < 120)
    ok(w == 1280 and hgt > 1200 and red > 2000 and green > 500,
       "the screenshot (%s): %dx%d, %d red (waits) and %d green (compute) pixels sampled" % (png, w, hgt, red, green))
    hh2 = browser("page", hh, os.path.join(OUT, "hostile.png"))
    ok(hh2["scripts"] == 0 and hh2["requests"] == [] and '<script>x"&\ufffd' in hh2["body"],
       "the hostile report in Chromium: the thread name is text, no script, no request")
    cleanup(hd)
    done()


if __name__ == "__main__":
    main()
