"""The halo-exchange stencil (testapps/stencil.c, the testbed of point-to-point wait states, issue
19) under ddpspy: 2 ranks, rank 0 given 10 times the cells, halos exchanged with MPI_Irecv /
MPI_Isend / MPI_Waitall (then with MPI_Sendrecv), an 8-byte residual all-reduce every 50
iterations. Checked: the
program's own ground truth (rank 1 waits in its exchange about as long as rank 0 computes more),
every point-to-point call recorded with its peer, tag and bytes as the decomposition says, and the
report's collective_volume gate: 8-byte all-reduces that take a rank's step because it waits for a
late sender are not a finding about bytes (what the report said before: "move fewer bytes")."""
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
rep = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
j = json.loads(rep.stdout) if rep.returncode == 0 else None
kinds = [f["kind"] for f in j["findings"]] if j else None
ok(j is not None and "collective_volume" not in kinds,
   "no collective_volume: 8-byte all-reduces and halos waited for are not bytes to cut (findings: %s)" % kinds)
cleanup(d)
done()
