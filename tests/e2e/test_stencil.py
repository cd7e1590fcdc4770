"""The halo-exchange stencil (testapps/stencil.c, the testbed of point-to-point wait states, issue
19) under ddpspy: 2 ranks, rank 0 given 10 times the cells, halos exchanged with MPI_Irecv /
MPI_Isend / MPI_Waitall (then with MPI_Sendrecv), an 8-byte residual all-reduce every 50
iterations. Checked: the
program's own ground truth (rank 1 waits in its exchange about as long as rank 0 computes more),
every point-to-point call recorded with its peer, tag and bytes as the decomposition says, and the
report's collective_volume gate: 8-byte all-reduces that take a rank's step because it waits for a
late sender are not a finding about bytes (what the report said before: "move fewer bytes").

Then the wait states (collector/p2p.c), judged against the program's ground truth: on 2 and 4 ranks,
one rank given 2x and 10x the cells, halos exchanged nonblocking (Irecv first, so the waits are
late-sender waits; on 2 ranks also completed one at a time by MPI_Waitany, with an all-reduce of
each iteration overlapping the exchange, and with persistent requests started by MPI_Startall) and, on 2 ranks, blocking: the steps are the iterations, found from the
point-to-point calls (step_source p2p, one step per iteration, not the 3 giant steps the rare
all-reduce gives); the straggler is the heavy rank, for its compute, its peers' waits point-to-point
wait states; the verdict is compute; its severity is within 0.1 of the part of the step the
light ranks lose (their own figures); no collective_volume; balanced runs name no straggler. The
same analysis comes out when the steps are found again from every call streamed (the long-trace
path). Wildcard receives (MPI_ANY_SOURCE), blocking and nonblocking (resolved by the status of the
wait that completed them), give the same analysis. A small block whose blocking halos all look alike,
an all-reduce ending each iteration, is stepped by its iterations too (by the all-reduces where
the messages give no pattern), never by time windows."""
import json
import os
import shutil
from lib import *

app = os.path.join(APPS, "stencil")
if not shutil.which("mpirun") or not os.path.exists(app):
    skip("the stencil", "mpirun or build/testapps/stencil missing (Open MPI not installed)")
    done()
d = tmpdir("stencil")
out = os.path.join(d, "out")
ITERS, NX, NY = 200, 512, 512
p = subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN + ["-np", "2", app, "--iters", str(ITERS), "--nx", str(NX),
                   "--ny", str(NY), "--heavy-rank", "0", "--heavy-factor", "10", "--reduce-every", "50", "--nonblocking"],
                   capture_output=True, text=True, timeout=300)
truth = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
ok(truth is not None, "the stencil runs on 2 ranks under ddpspy and prints its ground truth: %s" % p.stderr[-300:])
if truth:
    r0, r1 = truth["ranks"]
    ok(r0["cells"] == 10 * r1["cells"] and r0["compute_ms"] > 4 * r1["compute_ms"] and
       r1["comm_ms"] > 0.5 * (r0["compute_ms"] - r1["compute_ms"]),
       "ground truth: rank 0 computes %.2f ms per iteration, rank 1 %.2f ms and waits %.2f ms in its exchange"
       % (r0["compute_ms"], r1["compute_ms"], r1["comm_ms"]))
recs, rc, err = dump(out)
files = {x["rank"]: x["file"] for x in of(recs, "process") if x["role"] == "rank"}
for r in (0, 1):
    ev = events(recs, file=files.get(r))
    cm = {e["comm"]: e for e in ev if e["kind"] == "mpi_comm"}
    grid = [e for e in ev if e["kind"] == "mpi_p2p"][:1]
    ok(grid and grid[0]["comm"] in cm and cm[grid[0]["comm"]]["comm_rank"] == r and cm[grid[0]["comm"]]["comm_size"] == 2
       and 0 in cm and cm[0]["comm_rank"] == r,
       "rank %d: an mpi_comm event for each communicator it used, with its rank in it (the Cartesian grid's: %s; "
       "world's: %s)" % (r, grid and cm.get(grid[0]["comm"]), cm.get(0)))
    sends = [e for e in ev if e["kind"] == "mpi_p2p" and e["op"] == "send"]
    recvs = [e for e in ev if e["kind"] == "mpi_p2p" and e["op"] == "recv"]
    waits = [e for e in ev if e["kind"] == "mpi_wait" and e["op"] == "waitall"]
    # a 2 x 1 grid: each rank has one neighbour, the other rank, above or below; the row halos carry
    # NX doubles, the column halos (to MPI_PROC_NULL) NY
    real = [e for e in sends + recvs if e["peer"] == 1 - r]
    ok(len(sends) == 4 * ITERS and len(recvs) == 4 * ITERS and len(waits) == ITERS and len(real) == 2 * ITERS and
       all(e["bytes"] == 8 * NX and e["comm"] == real[0]["comm"] for e in real),
       "rank %d: every Isend and Irecv (%d, %d) with its peer and %d bytes to the other rank, a Waitall per "
       "iteration (%d)" % (r, len(sends), len(recvs), 8 * NX, len(waits)))
# the blocking variant: each exchange is one MPI_Sendrecv, both its peers recorded
bout = os.path.join(d, "blocking")
p = subprocess.run([DDPSPY, "run", "-o", bout, "--"] + MPIRUN + ["-np", "2", app, "--iters", "50", "--nx", str(NX), "--ny",
                   str(NY), "--heavy-rank", "0", "--heavy-factor", "10"], capture_output=True, text=True, timeout=300)
brecs, rc, err = dump(bout)
bfiles = {x["rank"]: x["file"] for x in of(brecs, "process") if x["role"] == "rank"}
for r in (0, 1):
    sr = [e for e in events(brecs, file=bfiles.get(r)) if e["kind"] == "mpi_p2p"]
    real = [e for e in sr if e["peer"] == 1 - r or e["rpeer"] == 1 - r]
    ok(p.returncode == 0 and len(sr) == 4 * 50 and all(e["op"] == "sendrecv" for e in sr) and len(real) == 2 * 50 and
       all(e["bytes"] == 8 * NX and e["rbytes"] == 8 * NX and e["rtag"] == e["tag"] for e in real),
       "rank %d, blocking: every MPI_Sendrecv (%d) with its send's and its receive's peer, tag and bytes" % (r, len(sr)))
# point-to-point calls only: the messages align the clocks (a receive returns after its send started)
brep = subprocess.run([DDPSPY, "report", "--json", bout], capture_output=True, text=True, timeout=120)
bj = json.loads(brep.stdout) if brep.returncode == 0 else None
ok(bj is not None and bj["job"]["clock"]["method"] == "message-causality" and bj["job"]["clock"]["max_offset_us"] is not None
   and not any("clocks" in w for w in bj["job"]["warnings"]),
   "blocking stencil, no collective: clock %s, from its messages" % (bj["job"]["clock"] if bj else None))
rep = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
j = json.loads(rep.stdout) if rep.returncode == 0 else None
kinds = [f["kind"] for f in j["findings"]] if j else None
ok(j is not None and "collective_volume" not in kinds,
   "no collective_volume: 8-byte all-reduces and halos waited for are not bytes to cut (findings: %s)" % kinds)


def report(path, env=None):
    p = subprocess.run([DDPSPY, "report", "--json", path], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    return json.loads(p.stdout) if p.returncode == 0 and p.stdout.startswith("{") else None


# a small block, blocking halos and an all-reduce ending every iteration: the exchange's calls all
# look alike and its pause hides behind the all-reduce, so the messages may give no pattern; the
# steps are then the all-reduces', one per iteration, never time windows (2 runs of 3 were windows)
for k in range(3):
    sout = os.path.join(d, "small%d" % k)
    p = subprocess.run([DDPSPY, "run", "-o", sout, "--"] + MPIRUN + ["-np", "2", app, "--iters", "100", "--reduce-every",
                       "1"], capture_output=True, text=True, timeout=300)
    sj = report(sout) if p.returncode == 0 else None
    sjob = sj["job"] if sj else {}
    ok(sj and sjob["step_source"] in ("p2p", "collectives") and 98 <= sjob["steps_detected"] <= 100 and
       not any("time windows" in w for w in sjob["warnings"]),
       "small blocking stencil, an all-reduce each iteration (run %d of 3): 100 iterations, %s steps from %s%s"
       % (k + 1, sjob.get("steps_detected"), sjob.get("step_source"),
          "".join("; " + w for w in sjob.get("warnings", []) if "windows" in w)))


def judge(name, path, truth, heavy, iters, states=("late_sender",)):
    """The report of a stencil run against its ground truth: (passed, message) pairs, or why it could
    not be judged (lib.live)."""
    j = report(path)
    if not j or not truth:
        return [(False, "%s: no report or no ground truth" % name)]
    checks = judged(name, j, truth, heavy, iters, states)
    # a machine another job keeps busy deschedules a rank for milliseconds at a time: an imbalance
    # may drown in it, and the report says so itself
    if isinstance(checks, str):
        return checks
    why = busy_host(checks, j)
    return "%s: %s" % (name, why) if isinstance(why, str) else checks


def judged(name, j, truth, heavy, iters, states):
    fs = [f for f in j["findings"] if f["kind"] == "straggler"]
    kinds = [(f["kind"], f["rank"], round(f["severity"], 2)) for f in j["findings"]]
    job = j["job"]
    checks = [(job["step_source"] == "p2p" and job["steps_detected"] >= iters - 2,
               "%s: steps from the point-to-point calls, one per iteration (%s, %d of %d iterations)"
               % (name, job["step_source"], job["steps_detected"], iters))]
    checks.append(("collective_volume" not in [k for k, _, _ in kinds], "%s: no collective_volume (%s)" % (name, kinds)))
    tr = truth["ranks"]

    def loss(h):
        # what the others lose to rank h: their exchange (waits included) beyond h's own, of the step
        step = tr[h]["compute_ms"] + tr[h]["comm_ms"]
        others = [r["comm_ms"] for r in tr if r["rank"] != h]
        return sum(others) / len(others) / step - tr[h]["comm_ms"] / step, step

    if heavy is None:
        # balanced by its cells; on a small shared machine one rank may still compute longer every
        # iteration (a busier core: the program's own figures show it): a straggler is then right if
        # it names that rank and costs what the figures say; above 15% it must be found
        slow = max(tr, key=lambda r: r["compute_ms"])["rank"]
        lost, _ = loss(slow)
        if lost <= 0.15:
            checks.append((not fs or (fs[0]["rank"] == slow and abs(fs[0]["severity"] - lost) <= 0.1),
                           "%s, balanced: no straggler, or the rank that computes longest by the program's own "
                           "figures at what they say it costs (findings %s; compute per rank %s, rank %d costs %.2f)"
                           % (name, kinds, [r["compute_ms"] for r in tr], slow, lost)))
            return checks
        heavy = slow
        name += " (rank %d computes longest by its own figures)" % heavy
    lost, step = loss(heavy)
    light = [r for r in tr if r["rank"] != heavy]
    if not 0 <= lost < 1:  # (medians of the parts no longer add up: the program was descheduled at random)
        return "%s: not judged, the program's own figures do not add up (a light rank's exchange %s ms, the heavy " \
               "rank's step %.2f ms)" % (name, [r["comm_ms"] for r in light], step)
    f = fs[0] if fs else None
    ev = f["evidence"] if f else {}
    checks.append((f is not None and f["rank"] == heavy and ev.get("cause") == "compute" and ev.get("wait_state") in states,
                   "%s: the straggler is rank %d, for its compute, its peers in %s waits (%s)"
                   % (name, heavy, "/".join(states), f and (f["rank"], ev.get("cause"), ev.get("wait_state"), ev.get("op")))))
    checks.append((j["verdict"]["bound"] == "compute", "%s: the verdict is compute (%s, %s)"
                   % (name, j["verdict"]["bound"], j["verdict"]["shares"])))
    checks.append((f is not None and abs(f["severity"] - lost) <= 0.1,
                   "%s: severity %.2f within 0.1 of the step the light ranks lose waiting (%.2f: their exchange %s ms "
                   "of a %.2f ms step)" % (name, f["severity"] if f else -1, lost, [r["comm_ms"] for r in light], step)))
    waits = [r["p2p_wait_share"] for r in j["ranks"] if r["rank"] != heavy]
    hw, hx = j["ranks"][heavy]["p2p_wait_share"], tr[heavy]["comm_ms"] / step
    checks.append((min(waits) > 0.5 * lost and hw <= hx + 0.05,
                   "%s: the light ranks wait point to point %s of their step (they lose %.2f), the heavy rank %.3f "
                   "(its whole exchange: %.3f)" % (name, waits, lost, hw, hx)))
    return checks


def stencil(name, np_, iters, nx, ny, heavy, factor, nonblocking, wildcard=False, extra=()):
    o = os.path.join(d, name)
    shutil.rmtree(o, ignore_errors=True)
    args = ["-np", str(np_), app, "--iters", str(iters), "--nx", str(nx), "--ny", str(ny)]
    if heavy is not None:
        args += ["--heavy-rank", str(heavy), "--heavy-factor", str(factor)]
    if nonblocking:
        args.append("--nonblocking")
    if wildcard:
        args.append("--wildcard")
    args += list(extra)
    p = subprocess.run([DDPSPY, "run", "-o", o, "--"] + MPIRUN + args, capture_output=True, text=True, timeout=300)
    t = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
    return o, t


# judged, each a run of its own: blocks of 2M cells (2 ms an iteration, 20 ms the heavy rank's),
# so that a busy machine's descheduling (a few ms at a time) does not drown the imbalance
live("stencil 2 ranks, 10x, nonblocking", lambda k: judge("2 ranks, rank 0 10x, nonblocking",
                                                          *stencil("nb2", 2, 100, 2048, 1024, 0, 10, True), heavy=0, iters=100))
# the receives completed one at a time by MPI_Waitany (each wait names the request it completed),
# and every iteration the previous residual's MPI_Iallreduce posted before the exchange and waited
# for after the update: the light rank's waits are in its Waitany calls, for a late sender, not
# for the all-reduce still pending then (its post was a late rank's too: counted once, as the
# messages it waited for); the all-reduce's waits, a few us after it was done, align no clocks
live("stencil 2 ranks, 10x, Waitany, overlapped all-reduce",
     lambda k: judge("2 ranks, rank 0 10x, MPI_Waitany, MPI_Iallreduce overlapped",
                     *stencil("wa2", 2, 100, 2048, 1024, 0, 10, True,
                              extra=("--waitany", "--overlap-reduce", "--reduce-every", "1")), heavy=0, iters=100))
# persistent requests (MPI_Recv_init, MPI_Send_init) started every iteration by MPI_Startall: each
# start recorded as the Irecv or Isend it begins, so the same analysis as with those
live("stencil 2 ranks, 10x, persistent", lambda k: judge("2 ranks, rank 0 10x, persistent requests",
                                                         *stencil("pe2", 2, 100, 2048, 1024, 0, 10, True,
                                                                  extra=("--persistent",)), heavy=0, iters=100))
# blocking: rank 1 first sends to rank 0 (a rendezvous: 16 KiB over shared memory, past Open MPI's
# eager limit: a late receiver), then receives from it (a late sender)
live("stencil 2 ranks, 10x, blocking", lambda k: judge("2 ranks, rank 0 10x, blocking",
                                                       *stencil("bl2", 2, 60, 2048, 1024, 0, 10, False), heavy=0, iters=60,
                                                       states=("late_sender", "late_receiver")))
def with_judged(checks, judged_):
    """checks and the judge's; the judge's reason when it could not judge and the rest passed (for
    live: not judged, run again), else that reason as a miss"""
    if isinstance(judged_, str):
        return judged_ if all(c for c, _ in checks) else checks + [(False, judged_)]
    return checks + judged_


# wildcard receives (MPI_ANY_SOURCE): blocking ones are recorded with the source their status
# names, so the same analysis comes out; every Sendrecv's receive from the other rank names it
def wildcard_blocking(k):
    o, t = stencil("wild-bl2", 2, 60, 2048, 1024, 0, 10, False, wildcard=True)
    recs = dump(o)[0]
    fl = {x["rank"]: x["file"] for x in of(recs, "process") if x["role"] == "rank"}
    rp = {r: sorted({e["rpeer"] for e in events(recs, file=fl.get(r)) if e["kind"] == "mpi_p2p" and e["op"] == "sendrecv"})
          for r in (0, 1)}
    checks = judge("2 ranks, rank 0 10x, blocking, MPI_ANY_SOURCE", o, t, heavy=0, iters=60,
                   states=("late_sender", "late_receiver"))
    return with_judged([(rp == {0: [-2, 1], 1: [-2, 0]}, "MPI_ANY_SOURCE, blocking: each rank's receives from the "
                         "other name it, as their status did (receive peers %s; -2: MPI_PROC_NULL)" % rp)], checks)


live("stencil 2 ranks, 10x, blocking, wildcard", wildcard_blocking)
# nonblocking: the source of a receive posted with MPI_ANY_SOURCE is in the status of the wait that
# completes it, which writes it down (an mpi_status event): numbered then, the receive is matched like
# one naming its source, and so are the receives after it (every other iteration's here), with the
# same analysis; the long-trace path, every call streamed again, numbers them alike
def wildcard_nonblocking(k):
    o, t = stencil("wild-nb2", 2, 60, 2048, 1024, 0, 10, True, wildcard=True)
    recs = dump(o)[0]
    fl = {x["rank"]: x["file"] for x in of(recs, "process") if x["role"] == "rank"}
    st = {r: sorted({(e["source"], e["tag"]) for e in events(recs, file=fl.get(r)) if e["kind"] == "mpi_status"})
          for r in (0, 1)}
    n = {r: len([e for e in events(recs, file=fl.get(r)) if e["kind"] == "mpi_status"]) for r in (0, 1)}
    j = report(o)
    ws = [w for w in (j or {"job": {"warnings": []}})["job"]["warnings"] if "MPI_ANY_SOURCE" in w]
    checks = [(st == {0: [(1, 1)], 1: [(0, 0)]} and n == {0: 30, 1: 30} and not ws,
               "MPI_ANY_SOURCE, nonblocking, every other iteration: 30 status events a rank naming the other rank "
               "(rank 0 receives tag 1 from below, rank 1 tag 0 from above: %s, %s), no warning (%s)" % (st, n, ws[:1]))]
    diff = streamed_differences(o, prefix=40)
    checks.append((not diff, "MPI_ANY_SOURCE, nonblocking: the same report from every call streamed: %s" % diff))
    return with_judged(checks, judge("2 ranks, rank 0 10x, nonblocking, MPI_ANY_SOURCE", o, t, heavy=0, iters=60))


live("stencil 2 ranks, 10x, nonblocking, wildcard", wildcard_nonblocking)
# the long-trace path: the same from every call streamed
diff = streamed_differences(out, prefix=200)
ok(not diff, "2 ranks, nonblocking: the report is the same when the steps are found again from every call streamed: %s"
   % diff)
# more ranks, less imbalance, none: a 2 x 2 grid, the heavy rank at the far corner from rank 0 (its
# waits reach rank 0 through ranks 1 and 2: charged to rank 3, the root)
# (a 2x imbalance on blocks of 8M cells, 20 ms and 40 ms an iteration: a busy 2-core machine
# deschedules a rank for a few ms at a time, which a 2x gap of a fraction of a ms does not survive)
for np_, heavy, factor, nx, ny, it in ((2, 1, 2, 4096, 2048, 40), (2, None, 1, NX, NY, 200), (4, 3, 10, 1024, 512, 200),
                                       (4, 3, 2, 4096, 2048, 40), (4, None, 1, 1024, 512, 200)):
    name = "%d ranks, %s" % (np_, "rank %d %dx" % (heavy, factor) if heavy is not None else "balanced")
    live("stencil " + name, lambda k: judge(name + ", nonblocking",
                                            *stencil("r%d-%s-%d" % (np_, heavy, factor), np_, it, nx, ny, heavy, factor, True),
                                            heavy=heavy, iters=it))
cleanup(d)
done()
