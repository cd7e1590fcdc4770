"""Processes: fork without exec (DataLoader-style workers) record into their own files tagged
with the parent's rank and pid; exec completes the old image's file and starts a new one;
_exit still leaves a complete file."""
import os
import shutil
from lib import *

forker = os.path.join(APPS, "forker")
d = tmpdir("process")
out = os.path.join(d, "fork")
p = traced([forker, "fork", "4"], out, env={"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
ok(p.returncode == 0, "fork test program ran")
recs, rc, _ = dump(out)
procs = of(recs, "process")
parent = [x for x in procs if x["role"] == "rank"]
workers = [x for x in procs if x["role"] == "worker"]
ok(len(parent) == 1 and parent[0]["rank"] == 3 and parent[0]["world_size"] == 4 and parent[0]["local_rank"] == 1,
   "the parent is rank 3 of 4 (torchrun variables)")
ppid = parent[0]["pid"] if parent else -2
ok(len(workers) == 4 and all(w["parent_rank"] == 3 and w["parent_pid"] == ppid and w["rank"] == -1 for w in workers),
   "four workers, each tagged parent rank 3 and the parent's pid")
ok(len(set(x["file"] for x in procs)) == 5 and all(os.path.basename(w["file"]).startswith("w00003-") for w in workers),
   "one file per process, workers named after their rank")
for w in workers:
    ev = events(recs, file=w["file"])
    st = [e for e in ev if e["kind"] == "stat"]
    ends = of(recs, "end", file=w["file"])
    ok(len(st) == 10 and all(e["path"] == "/nonexistent/ddpspy-child" for e in st)
       and ends and ends[0]["reason"] == "_exit",
       "worker %d: its 10 events, none of the parent's, file completed at _exit" % w["pid"])
pev = events(recs, file=parent[0]["file"]) if parent else []
ok(len([e for e in pev if e["kind"] == "stat"]) == 2, "the parent's file has only the parent's 2 events")

out = os.path.join(d, "fork-unranked")
p = traced([forker, "fork", "1"], out)
recs, rc, _ = dump(out)
procs = of(recs, "process")
kids = [x for x in procs if any(x["ppid"] == y["pid"] for y in procs)]
ok(len(procs) == 2 and len(kids) == 1 and kids[0]["role"] == "other" and kids[0]["parent_pid"] == kids[0]["ppid"]
   and all(y["parent_pid"] == -1 for y in procs if y is not kids[0]),
   "a fork child of a process with no rank still names its parent")

out = os.path.join(d, "exec")
p = traced([forker, "exec"], out)
ok(p.returncode == 0, "exec test program ran")
recs, rc, _ = dump(out)
procs = of(recs, "process")
ok(len(procs) == 2 and procs[0]["pid"] == procs[1]["pid"] and procs[0]["file"] != procs[1]["file"],
   "exec keeps the pid and starts a second file: %s" % [os.path.basename(x["file"]) for x in procs])
before = [x for x in procs if "exec" in x["cmdline"]]
after = [x for x in procs if "after-exec" in x["cmdline"]]
ok(before and after, "one file per image")
if before and after:
    e1 = of(recs, "end", file=before[0]["file"])
    ok(e1 and e1[0]["reason"] == "exec" and e1[0]["complete"] == 1, "the old image's file ends with exec")
    ok([e["path"] for e in events(recs, "stat", file=before[0]["file"])] == ["/nonexistent/ddpspy-before-exec"],
       "the old image's event is in the old file")
    ok([e["path"] for e in events(recs, "stat", file=after[0]["file"])] == ["/nonexistent/ddpspy-after-exec"],
       "the new image's event is in the new file")
out = os.path.join(d, "closeall")
p = traced([forker, "closeall"], out)
ok(p.returncode == 0, "a program that closes every descriptor runs")
recs, rc, _ = dump(out)
paths = [e["path"] for e in events(recs, "stat")]
ok(paths == ["/nonexistent/ddpspy-before-closeall", "/nonexistent/ddpspy-after-closeall"]
   and of(recs, "end")[0]["complete"] == 1,
   "its trace file survives and stays complete: %s" % paths)
# the trace descriptor's number taken away by close_range (the wrapper skips it), by the raw
# syscall (the writer finds another file at that number and reopens its own by path) or by dup2
# onto it (the wrapper moves the trace file first): the program's own file must be exactly what
# it wrote, and the trace keeps every event
for how in ["closerange", "rawclose", "dup2"]:
    plain = os.path.join(d, "fdgame-%s-plain.txt" % how)
    mine = os.path.join(d, "fdgame-%s-traced.txt" % how)
    out = os.path.join(d, "fdgame-" + how)
    p0 = subprocess.run([forker, "fdgame", how, plain], capture_output=True, text=True, timeout=60)
    p = traced([forker, "fdgame", how, mine], out, timeout=60)
    same = p0.returncode == 0 and p.returncode == 0 and open(plain, "rb").read() == open(mine, "rb").read()
    ok(same and os.path.getsize(mine) > 1000,
       "fdgame %s: the program's own file is byte-identical with and without the preload (%s)"
       % (how, p.stderr.strip()[-200:]))
    recs, rc, _ = dump(out)
    st = [e["path"] for e in events(recs, "stat")]
    ends = of(recs, "end")
    ok(rc == 0 and st.count("/nonexistent/ddpspy-during-fdgame") == 40 and len(ends) == 1
       and ends[0]["complete"] == 1 and ends[0]["dropped"] == 0,
       "fdgame %s: the trace has all 40 events after the game and ends complete" % how)
# every thread's CPU time is read from /proc ten times a second, a file each, in a descriptor table
# of ddpspy's own: the program's table never sees a descriptor of ours come and go, so a number it
# just closed is the one its next open gets, and a dup2 onto the next number never fails with EBUSY
# nor has its file closed under it (in a shared table all three happened within 1.5 s)
out = os.path.join(d, "fdlowest")
p = traced([forker, "fdlowest", "1.5"], out, timeout=60)
recs, rc, _ = dump(out)
ok(p.returncode == 0 and " 0 reopened elsewhere, 0 dup2 EBUSY, 0 dup2 targets lost" in p.stdout,
   "1.5 s of close-then-open and dup2 onto the next number while ddpspy reads /proc: every open gets the "
   "number just closed, every dup2 succeeds and keeps its file (%s)" % (p.stdout.strip() or p.stderr.strip()[-200:]))
sc = of(recs, "sched")
per = {}
for r in sc:
    per.setdefault(r["t_ns"], set()).add(r["tid"])
ok(len(per) >= 12 and max(len(v) for v in per.values()) >= 11 and not of(recs, "end")[0]["sched_error"],
   "meanwhile the threads' CPU time was read: %d samples, up to %d threads (main, 8 blocking, the writer, "
   "the reader)" % (len(per), max([len(v) for v in per.values()] or [0])))
# a process that may not make a descriptor table of its own (a seccomp profile that refuses
# unshare, as Docker's default does) reads no CPU time, runs as before, and its file and the
# report say why
out = os.path.join(d, "noshare")
p = traced([forker, "noshare", forker, "fdlowest", "0.5"], out, env={"RANK": "0", "WORLD_SIZE": "1"}, timeout=60)
recs, rc, _ = dump(out)
ends = of(recs, "end")  # (one: the image before the exec recorded nothing, so it has no file)
ok(p.returncode == 0 and " 0 reopened elsewhere" in p.stdout and len(ends) == 1 and not of(recs, "sched")
   and ends[0]["sched_error"] == "unshare(CLONE_FILES): Operation not permitted",
   "under a seccomp filter that refuses unshare: the program runs, its file has no CPU time and says why (%s)"
   % [e["sched_error"] for e in ends])
rp = subprocess.run([DDPSPY, "report", "--json", out], capture_output=True, text=True, timeout=120)
warns = json.loads(rp.stdout)["job"]["warnings"] if rp.returncode == 0 else []
ok(any(w.startswith("CPU contention was not measured on 1 of 1 ranks (rank 0: unshare(CLONE_FILES): "
                    "Operation not permitted)") for w in warns), "the report warns that CPU contention was not measured")
# fork while other threads unwind their stacks: glibc's fork leaves the loader's write lock as it
# was, so a child forked mid-unwind must not inherit it held (mpirun's children hung in exec)
out = os.path.join(d, "forkunwind")
try:
    p = traced([forker, "forkunwind", "200"], out, timeout=120)
    ok(p.returncode == 0 and "200 of 200" in p.stdout,
       "200 forks while two threads unwind: every child walks the loaded objects and execs (%s)" % p.stdout.strip())
except subprocess.TimeoutExpired:
    ok(False, "200 forks while two threads unwind: a child hung (the loader's lock was copied held)")
recs, rc, _ = dump(out)
main = [x for x in of(recs, "process") if x["cmdline"][:2] == ["forker", "forkunwind"] or x["cmdline"][1:2] == ["forkunwind"]]
stacks = [e for e in events(recs, "sleep") if e.get("stack")]
ok(len(stacks) > 100, "and the blocked threads' sleeps still carry call stacks: %d" % len(stacks))
# children find their descriptors as their parent set them: shells redirecting onto 0-3 started
# by posix_spawn, vfork, system(), and a fork child's dup2 onto 1 and 2 (make stress: thousands).
# The writer thread loaded libunwind in the program's table: the loader's descriptor was a shell's
# to dup2 onto, and the loader then closed the shell's file (6% of these failed, 31% of one shape)
out = os.path.join(d, "spawns")
p = traced([forker, "spawns", "400"], out, timeout=180)
ok(p.returncode == 0 and '"failed": 0' in p.stdout,
   "400 children started 4 ways, each shell's redirects intact: %s %s" % (p.stdout.strip(), p.stderr.strip()[-200:]))
shutil.rmtree(out, ignore_errors=True)
cleanup(d)
done()
