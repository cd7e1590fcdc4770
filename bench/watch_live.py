"""make bench, collector part: `ddpspy watch` following a job that writes RATE events a second.
Finished trace files (bench/gentrace.c's, made by bench/collector.sh) are copied into a fresh
directory a slice of bytes at a time, ten times a second, at the rate asked (slices cut frames at
any byte, as a writer's flush may be seen half-written), while watch --interval 1 follows them.
Reported: watch's CPU time against the copy's wall time (the share of one core it needs to keep
up), the part of it its intervals' analyses took, and how long after the last byte it ended.
usage: watch_live.py SRC_DIR DST_DIR RATE EVENTS (EVENTS: how many the files hold in all)"""
import os
import subprocess
import sys
import time

src, dst, rate, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
files = sorted(f for f in os.listdir(src) if f.endswith(".ddpspy"))
data = {f: open(os.path.join(src, f), "rb").read() for f in files}
total = sum(len(b) for b in data.values())
per_event = total / n
os.makedirs(dst, exist_ok=True)
out = {f: open(os.path.join(dst, f), "wb") for f in files}
watch = subprocess.Popen(["/usr/bin/time", "-f", "%U %S %e", "build/ddpspy", "watch", dst, "--interval", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
bytes_per_s = rate * per_event
t0 = time.time()
done = {f: 0 for f in files}
while any(done[f] < len(data[f]) for f in files):
    time.sleep(0.1)
    want = int((time.time() - t0) * bytes_per_s)  # (bytes of the job so far, spread over its files)
    for f in files:
        upto = min(len(data[f]), want * len(data[f]) // total + 1)
        if upto > done[f]:
            out[f].write(data[f][done[f]:upto])
            out[f].flush()
            done[f] = upto
copied = time.time() - t0
for o in out.values():
    o.close()
so, se = watch.communicate(timeout=600)
ended = time.time() - t0
user, sys_s, wall = (float(x) for x in se.strip().splitlines()[-1].split())
an = float(so.split("analyses took ")[1].split()[0]) if "analyses took " in so else float("nan")
lines = sum(1 for l in so.splitlines() if " steps " in l)
print(f"ddpspy watch following a job writing {rate / 1e6:.1f}M events/s ({len(files)} files, copied in {copied:.1f} s): "
      f"CPU {user + sys_s:.2f} s, {(user + sys_s) / copied:.0%} of one core (its {lines} intervals' analyses {an:.2f} s); "
      f"ended {ended - copied:.1f} s after the last byte")
