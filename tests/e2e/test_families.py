"""Every wrapped family under the preload, checked through `ddpspy dump --json`: counts, bytes,
paths, descriptor classes, durations of known sleeps and waits, threads, names, stacks."""
import os
from lib import *

d = tmpdir("families")
scratch = os.path.join(d, "scratch")
os.makedirs(scratch)
out = os.path.join(d, "out")
p = traced([os.path.join(APPS, "families"), scratch], out)
ok(p.returncode == 0 and "families: done" in p.stdout,
   "the program runs unchanged under the preload (errno, results): rc=%d %s" % (p.returncode, p.stderr.strip()))
recs, rc, err = dump(out)
ok(rc == 0, "dump reads the trace")
procs = of(recs, "process")
ok(len(procs) == 1 and procs[0]["role"] == "other" and procs[0]["rank"] == -1,
   "one process, no rank (no launcher variables)")
pid = procs[0]["pid"] if procs else -1
threads = {t["tid"]: t for t in of(recs, "thread")}
main = [t for t in threads if t == pid]
ok(len(main) == 1, "the main thread is recorded")
ev = events(recs)
mine = [e for e in ev if e["tid"] == pid]
helper = [e for e in ev if e["tid"] != pid]

def one(kind, **m):
    return [e for e in mine if e["kind"] == kind and all(e.get(k) == v for k, v in m.items())]

# sleeps on the main thread: 50, 20, 10 ms and sleep(0)
sl = [e for e in one("sleep")]
reqs = sorted(e["req_ns"] for e in sl)
ok(reqs == [0, 10000000, 20000000, 50000000], "four sleeps with their requested lengths: %s" % reqs)
ok(all(e["req_ns"] <= e["dur_ns"] < e["req_ns"] + 25e6 for e in sl),
   "each sleep lasted its request (+25 ms at most): %s" % [round(ms(e["dur_ns"]), 2) for e in sl])

# reads: bytes, results and classes
r = one("read", fdclass="file")
ok(sorted((e["bytes"], e["ret"]) for e in r) == [(50, 50), (4096, 4096)],
   "read 4096 and fortified __read_chk 50 on a file: %s" % [(e["bytes"], e["ret"]) for e in r])
pr = one("pread")
ok(len(pr) == 1 and pr[0]["bytes"] == 1000 and pr[0]["ret"] == 1000 and pr[0]["offset"] == 9000
   and pr[0]["fdclass"] == "file", "pread 1000 bytes at 9000")
rv = one("readv")
ok(len(rv) == 2 and all(e["bytes"] == 300 and e["ret"] == 300 and e["iovcnt"] == 2 for e in rv),
   "readv and preadv of 2 buffers, 300 bytes")
for cls, n in (("pipe", 4), ("unix", 4), ("tcp", 4), ("device", 64)):
    x = one("read", fdclass=cls)
    ok(len(x) == 1 and x[0]["ret"] == n, "one %d-byte read from a %s" % (n, cls))

# opens and paths
data = os.path.join(scratch, "data.bin")
opens = one("open")
paths = [e["path"] for e in opens]
ok(paths.count(data) == 2, "open of %s twice (write, read)" % data)
ok(any(e["path"] == "data.bin" and e["fdclass"] == "file" for e in opens), "openat relative path recorded")
ok(any(e["path"] == scratch and e["fdclass"] == "dir" for e in opens), "a directory open is class dir")
ok(any(e["path"] == "/dev/zero" and e["fdclass"] == "device" for e in opens), "/dev/zero is a device")

# stats: stat, lstat, fstatat, statx, __xstat succeed; the missing path fails
st = one("stat")
ok(len([e for e in st if e["path"] == data and e["ret"] == 0]) == 5,
   "stat, lstat, fstatat, statx and __xstat of the file: %d" % len([e for e in st if e["path"] == data]))
ok(len([e for e in st if e["path"] == "/nonexistent/ddpspy" and e["ret"] == -1]) == 1, "the failed stat")
fs = one("fstat", fdclass="file")
ok(len(fs) == 2, "fstat and __fxstat on the file: %d" % len(fs))
cl = one("close")
ok(len(cl) >= 10 and any(e["fdclass"] == "tcp" for e in cl), "closes recorded with their class")

# blocking waits on descriptors; the zero-timeout poll is not recorded
po = one("poll")
ok(len(po) == 1 and po[0]["timeout_ms"] == 25 and po[0]["dur_ns"] >= 24e6,
   "one poll (25 ms timeout) recorded; the zero-timeout poll is not")
se = one("select")
ok(len(se) == 1 and se[0]["timeout_us"] == 15000 and se[0]["dur_ns"] >= 14e6, "select waited 15 ms")
ep = one("epoll_wait")
ok(len(ep) == 1 and ep[0]["dur_ns"] >= 9e6, "epoll_wait waited 10 ms")

# thread waits
mw = one("mutex_wait")
ok(len(mw) == 1 and mw[0]["dur_ns"] >= 10e6,
   "exactly one mutex wait (the contended one), %.1f ms" % (ms(mw[0]["dur_ns"]) if mw else -1))
ok(len(one("cond_wait")) >= 1, "the condition wait")
bw = one("barrier_wait")
ok(len(bw) == 1 and bw[0]["dur_ns"] >= 10e6, "the barrier wait (~20 ms)")
sw = one("sem_wait")
ok(len(sw) == 1 and sw[0]["dur_ns"] >= 8e6 and sw[0]["timed"] == 0, "the semaphore wait (~15 ms)")

# threads: start with parent, names
htids = set(e["tid"] for e in helper)
ok(len(htids) == 1, "one helper thread")
starts = [e for e in helper if e["kind"] == "thread_start"]
ok(len(starts) == 1 and starts[0]["parent_tid"] == pid, "the helper's start names its parent")
names = [e for e in ev if e["kind"] == "thread_name"]
ok(sorted(e["name"] for e in names) == ["fam-helper", "fam-main"], "prctl and pthread_setname_np names")
hs = [e for e in helper if e["kind"] == "sleep"]
ok(sorted(e["req_ns"] for e in hs) == [15000000, 20000000, 30000000], "the helper's three sleeps")
ok(any(e["kind"] == "thread_exit" for e in helper), "the helper's exit")

# stacks for blocking events over 1 ms
big = [e for e in sl if e["req_ns"] == 50000000][0] if sl else {}
frames = big.get("frames", [])
ok(len(frames) >= 2 and any(f.get("module", "").endswith("/families") for f in frames),
   "the 50 ms sleep has a call stack through the program: %d frames" % len(frames))
ok(not any(f.get("module", "").endswith("libddpspy.so") for f in frames), "ddpspy's own frames are left out")
ends = of(recs, "end")
ok(len(ends) == 1 and ends[0]["complete"] == 1 and ends[0]["reason"] == "exit" and ends[0]["dropped"] == 0,
   "the file ends cleanly with nothing dropped")
cleanup(d)
done()
