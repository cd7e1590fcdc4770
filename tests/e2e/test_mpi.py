"""An MPI program under `ddpspy run -- mpirun -np 2 --oversubscribe`: ranks identified, the
launcher not mistaken for a rank, every collective with its bytes, root, communicator and a
sequence number that matches across ranks, nonblocking calls tied to their wait; the synchronous,
buffered and ready sends, MPI_Waitany, Waitsome, Testany, Testsome naming the request they
completed, MPI_Probe's wait, MPI_Scan, Exscan and Alltoallw, persistent requests started by
MPI_Start and MPI_Startall."""
import json
import os
import shutil
from lib import *

app = os.path.join(APPS, "mpi_app")
if not shutil.which("mpirun") or not os.path.exists(app):
    skip("MPI end-to-end", "mpirun or build/testapps/mpi_app missing (Open MPI not installed)")
    done()
d = tmpdir("mpi")
out = os.path.join(d, "out")
cmd = [DDPSPY, "run", "-o", out, "--", "mpirun", "--oversubscribe", "-np", "2"]
if os.geteuid() == 0:
    cmd.insert(cmd.index("-np"), "--allow-run-as-root")
p = subprocess.run(cmd + [app], capture_output=True, text=True, timeout=180)
ok(p.returncode == 0 and "done on 2 ranks" in p.stdout, "mpirun under ddpspy run: rc=%d %s" % (p.returncode, p.stderr[-300:]))
recs, rc, err = dump(out)
procs = of(recs, "process")
ranks = sorted(x["rank"] for x in procs if x["role"] == "rank")
ok(ranks == [0, 1], "exactly two rank processes: %s" % ranks)
ok(all(x["world_size"] == 2 and x["rank_source"] == "ompi" for x in procs if x["role"] == "rank"),
   "world size 2 from Open MPI's environment")
launchers = [x for x in procs if x["role"] == "launcher"]
ok(any(x["cmdline"][0] == "mpirun" for x in launchers) and all(x["rank"] == -1 for x in launchers),
   "mpirun is recorded as a launcher with no rank")
names = [os.path.basename(x["file"]) for x in procs]
ok(len(set(names)) == len(names) and all(n.startswith(("r0000", "launcher-")) for n in names),
   "file names are unique and say rank or launcher: %s" % names)
by_rank = {}
for x in procs:
    if x["role"] == "rank":
        by_rank[x["rank"]] = events(recs, file=x["file"])
for r, ev in sorted(by_rank.items()):
    init = [e for e in ev if e["kind"] == "mpi_init"]
    ok(len(init) == 1 and init[0]["rank"] == r and init[0]["size"] == 2, "rank %d: MPI_Init says rank %d of 2" % (r, r))
    ar = [e for e in ev if e["kind"] == "mpi_coll" and e["op"] == "allreduce"]
    ok(len(ar) == 5 and all(e["bytes"] == 1048576 and e["comm"] == 0 for e in ar),
       "rank %d: five 1 MiB allreduces on world" % r)
    bc = [e for e in ev if e["kind"] == "mpi_coll" and e["op"] == "broadcast"]
    ok(len(bc) == 1 and bc[0]["bytes"] == 4096 and bc[0]["root"] == 0, "rank %d: 4 KiB broadcast from root 0" % r)
    ag = [e for e in ev if e["kind"] == "mpi_coll" and e["op"] == "allgather"]
    ok(len(ag) == 1 and ag[0]["bytes"] == 8 * 4 * 2, "rank %d: allgather of 8 ints from each of 2 ranks" % r)
    ic = [e for e in ev if e["kind"] == "mpi_icoll"]
    wt = [e for e in ev if e["kind"] == "mpi_wait" and e["op"] == "wait"][:1]  # (rank 1 has another, later)
    ok(len(ic) == 1 and ic[0]["bytes"] == 65536 and len(wt) == 1 and wt[0]["request"] == ic[0]["request"]
       and ic[0]["request"] != 0, "rank %d: Iallreduce 64 KiB and the Wait on its request" % r)
    pp = sorted((e["op"], e["peer"], e["bytes"], e["tag"]) for e in ev if e["kind"] == "mpi_p2p" and e["tag"] == 7)
    ok(pp == [("recv", 1 - r, 1000, 7), ("send", 1 - r, 1000, 7)], "rank %d: send and recv of 1000 bytes: %s" % (r, pp))
    sc = [(e["op"], e["bytes"]) for e in ev if e["kind"] == "mpi_coll" and e["op"] in ("scan", "exscan", "alltoallw")]
    ok(sc == [("scan", 4), ("exscan", 4), ("alltoallw", 16)],
       "rank %d: MPI_Scan, MPI_Exscan of one int, MPI_Alltoallw of 2 ints to each rank: %s" % (r, sc))
    # the partner exchanges: rank 0 sends (Ssend, Bsend, Rsend: sends), rank 1 receives
    p2 = {e["tag"]: e for e in ev if e["kind"] == "mpi_p2p" and 11 <= e["tag"] <= 13}
    want = {11: 2000, 12: 1500, 13: 500}
    ok(sorted(p2) == [11, 12, 13] and all(p2[t]["op"] == ("send" if r == 0 else "recv") and p2[t]["bytes"] == b and
                                         p2[t]["peer"] == 1 - r for t, b in want.items()),
       "rank %d: MPI_Ssend, MPI_Bsend, MPI_Rsend recorded as sends (rank 0), their receives (rank 1): %s"
       % (r, {t: (e["op"], e["bytes"]) for t, e in p2.items()}))
    # each completion call names a request of its exchange; together they complete both
    for tag, op in ((14, "waitany"), (15, "waitsome"), (16, "testany"), (17, "testsome")):
        posts = {e["request"]: e["op"] for e in ev if e["kind"] == "mpi_p2p" and e["tag"] == tag}
        i = max(k for k, e in enumerate(ev) if e["kind"] == "mpi_p2p" and e["tag"] == tag) if posts else 0
        named = [e["request"] for e in ev[i + 1:i + 3] if e["kind"] == "mpi_wait" and e["op"] == op and e["count"] == 1]
        # Waitsome and Testsome may complete both at once, and name the first
        ok(len(posts) == 2 and sorted(posts.values()) == ["recv", "send"] and
           (set(named) == set(posts) if op.endswith("any") else named and set(named) <= set(posts)),
           "rank %d: MPI_%s completions name the requests of the Irecv and %s they completed (%s of %s)"
           % (r, op.capitalize(), "Issend" if tag == 14 else "Isend", [hex(x) for x in named], [hex(x) for x in posts]))
    # persistent requests: each start recorded as the Irecv and Isend it begins, with the persistent
    # request (the same each time), and completed by the Waitall that names the first
    ps = [(e["op"], e["bytes"], e["peer"], e["request"]) for e in ev if e["kind"] == "mpi_p2p" and e["tag"] == 19]
    reqs = sorted({x[3] for x in ps})
    i19 = [k for k, e in enumerate(ev) if e["kind"] == "mpi_p2p" and e["tag"] == 19]
    wa = [ev[k + 1] for k in i19[1::2] if k + 1 < len(ev)]
    ok(len(ps) == 6 and [x[0] for x in ps] == ["recv", "send"] * 3 and all(x[1] == 64 and x[2] == 1 - r for x in ps) and
       len(reqs) == 2 and 0 not in reqs and len(wa) == 3 and
       all(w["kind"] == "mpi_wait" and w["op"] == "waitall" and w["request"] == ps[0][3] for w in wa),
       "rank %d: MPI_Recv_init and MPI_Send_init started 3 times (MPI_Startall, MPI_Start): each start a receive and "
       "a send of 64 bytes with the persistent request, each pair completed by a Waitall naming it: %s"
       % (r, [(x[0], x[1], hex(x[3])) for x in ps]))
    # receives from MPI_ANY_SOURCE: each status event names the source that its receive's completion did
    st = sorted((e["tag"], e["source"]) for e in ev if e["kind"] == "mpi_status")
    w21 = [e["request"] for e in ev if e["kind"] == "mpi_p2p" and e["tag"] == 21 and e["op"] == "recv"]
    s21 = [e["request"] for e in ev if e["kind"] == "mpi_status" and e["tag"] == 21]
    ok(st == [(20, 1 - r), (21, 1 - r)] and w21 and s21 == w21,
       "rank %d: an mpi_status event for each receive posted with MPI_ANY_SOURCE, naming its source: %s" % (r, st))
    pr = [e for e in ev if e["kind"] == "mpi_wait" and e["op"] == "probe"]
    ok((r == 0 and not pr) or (r == 1 and len(pr) == 1 and pr[0]["dur_ns"] > 15e6),
       "rank %d: %s" % (r, "sends the probed message" if r == 0 else
                        "MPI_Probe waits for rank 0's message, sent after 20 ms (%.1f ms)" % (ms(pr[0]["dur_ns"]) if pr else -1)))
    ok(len([e for e in ev if e["kind"] == "mpi_finalize"]) == 1, "rank %d: MPI_Finalize" % r)
seqs = [sorted((e["seq"], e["op"]) for e in ev if e["kind"] in ("mpi_coll", "mpi_icoll")) for _, ev in sorted(by_rank.items())]
ok(len(seqs) == 2 and seqs[0] == seqs[1] and [s for s, _ in seqs[0]] == list(range(len(seqs[0]))),
   "collective sequence numbers run 0..%d and match across ranks" % (len(seqs[0]) - 1 if seqs else -1))
b0 = [e for e in by_rank.get(0, []) if e["kind"] == "mpi_coll" and e["op"] == "barrier"]
b1 = [e for e in by_rank.get(1, []) if e["kind"] == "mpi_coll" and e["op"] == "barrier"]
ok(b0 and b1 and b1[0]["dur_ns"] > 20e6 and b0[0]["dur_ns"] < b1[0]["dur_ns"],
   "rank 1 waits at the barrier for rank 0's 30 ms sleep (%.1f ms vs %.1f ms)" %
   (ms(b1[0]["dur_ns"]) if b1 else -1, ms(b0[0]["dur_ns"]) if b0 else -1))
s0 = [e for e in by_rank.get(0, []) if e["kind"] == "sleep"]
ok(any(e["req_ns"] == 30000000 for e in s0), "rank 0's 30 ms sleep is recorded")
ok(all(e["complete"] == 1 for e in of(recs, "end")), "every file is complete")
# the report: the tag-21 receive numbered by its status; the tag-20 one not (a receive naming the
# source with its tag came before its status), nor that receive
rep = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
ws = [w for w in json.loads(rep.stdout)["job"]["warnings"] if "MPI_ANY_SOURCE" in w] if rep.returncode == 0 else None
ok(ws is not None and len(ws) == 2 and all(": 1 nonblocking receives" in w and " and 1 later receives" in w for w in ws),
   "the report: on each rank one wildcard receive not resolved (a receive that it could have taken the message of "
   "came before its status) and that receive not matched, the other resolved: %s" % (ws[:1],))
cleanup(d)
done()
