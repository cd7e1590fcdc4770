"""Threads: exact ring accounting under overflow with the writer running, 1000 short-lived
threads, and a program that exits from a secondary thread."""
import os
from lib import *

threads = os.path.join(APPS, "threads")
d = tmpdir("threads")

# 4 producers x 50000 events into 4 KiB rings: most are dropped, and every one is accounted for
out = os.path.join(d, "produce")
N, T = 50000, 4
p = traced([threads, "produce", str(T), str(N)], out, env={"DDPSPY_RING_KB": "4", "DDPSPY_FLUSH_MS": "5"})
ok(p.returncode == 0, "producers ran")
recs, rc, _ = dump(out)
pid = of(recs, "process")[0]["pid"]
losses = [l for l in of(recs, "loss") if l["tid"] != pid]
# each producer thread makes N stats, one thread_start and one thread_exit
written = sum(l["events"] for l in losses)
dropped = sum(l["dropped"] for l in losses)
ok(len(losses) == T, "four producer threads")
ok(dropped > 0, "the tiny rings overflowed (%d dropped)" % dropped)
ok(written + dropped == T * (N + 2), "events written %d + dropped %d == produced %d, exactly" % (written, dropped, T * (N + 2)))
end = of(recs, "end")[0]
ok(end["dropped"] == dropped and end["complete"] == 1, "the file states what was lost")

out = os.path.join(d, "churn")
p = traced([threads, "churn", "1000"], out)
ok(p.returncode == 0, "1000 short-lived threads ran")
recs, rc, _ = dump(out)
pid = of(recs, "process")[0]["pid"]
th = [t for t in of(recs, "thread") if t["tid"] != pid]
ok(len(th) == 1000, "all 1000 threads recorded (%d)" % len(th))
ev = events(recs)
names = set(e["name"] for e in ev if e["kind"] == "thread_name")
ok(len(names) == 1000, "each with its own name")
ok(len([e for e in ev if e["kind"] == "thread_exit"]) == 1000 and of(recs, "end")[0]["dropped"] == 0,
   "each with its exit, nothing dropped")

out = os.path.join(d, "exit")
p = traced([threads, "exit-from-thread"], out, timeout=30)
ok(p.returncode == 7, "exit(7) from a secondary thread ends the program with 7")
recs, rc, _ = dump(out)
ends = of(recs, "end")
ok(ends and ends[0]["complete"] == 1 and ends[0]["reason"] == "exit", "the file is complete")
ok(len(events(recs, "stat")) == 1, "the exiting thread's last event is in it")
cleanup(d)
done()
