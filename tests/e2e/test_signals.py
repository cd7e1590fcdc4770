"""Signals and damage: SIGKILL leaves a file readable up to the last flush; SIGTERM at its
default action completes the file first; truncated and corrupt files dump what is readable and
name the offset where reading stopped; nothing readable exits 2."""
import os
import signal
import subprocess
import time
from lib import *

forker = os.path.join(APPS, "forker")
d = tmpdir("signals")

def spin(out):
    e = dict(os.environ, LD_PRELOAD=LIB, DDPSPY_OUT=out, DDPSPY_FLUSH_MS="50")
    p = subprocess.Popen([forker, "spin"], env=e, stdout=subprocess.PIPE, text=True)
    p.stdout.readline()  # "spinning": it is recording
    time.sleep(0.6)
    return p

out = os.path.join(d, "kill")
p = spin(out)
p.send_signal(signal.SIGKILL)
p.wait()
recs, rc, err = dump(out)
n = len(events(recs, "stat"))
ok(rc == 0 and n > 100, "after SIGKILL the file dumps with its events up to the last flush (%d)" % n)
ends = of(recs, "end")
ok(ends and ends[0]["complete"] == 0, "and says it is incomplete")

out = os.path.join(d, "term")
p = spin(out)
p.send_signal(signal.SIGTERM)
p.wait()
ok(p.returncode == -signal.SIGTERM, "SIGTERM still ends the program by SIGTERM (%d)" % p.returncode)
recs, rc, err = dump(out)
ends = of(recs, "end")
ok(rc == 0 and ends and ends[0]["complete"] == 1 and ends[0]["reason"] == "signal 15",
   "the file was completed before the default action: %s" % (ends[0].get("reason") if ends else None))

out = os.path.join(d, "segv")
p = traced([forker, "segv"], out)
ok(p.returncode == -signal.SIGSEGV, "a crash still dies of SIGSEGV (%d)" % p.returncode)
crecs, rc, err = dump(out)
ends = of(crecs, "end")
ok(ends and ends[0]["reason"] == "signal 11" and len(events(crecs, "stat")) == 1,
   "and its file is complete up to the crash: %s" % (ends[0].get("reason") if ends else None))

# damage: cut the SIGTERM file in the middle of its last frame, then corrupt a copy
f = of(recs, "process")[0]["file"]
data = open(f, "rb").read()
cut = os.path.join(d, "cut")
os.makedirs(cut)
with open(os.path.join(cut, "x.ddpspy"), "wb") as o:
    o.write(data[:len(data) - 7])
recs, rc, err = dump(cut)
errs = of(recs, "error")
ok(rc == 0 and events(recs) and errs and errs[0]["offset"] < len(data) - 7,
   "a truncated file dumps its events and names where it stopped (byte %s)" % (errs[0]["offset"] if errs else None))
ok("stopped at byte" in err and "x.ddpspy" in err, "and says so on stderr: %s" % err.strip())
p = subprocess.run([DDPSPY, "dump", cut], capture_output=True, text=True)
ok(p.returncode == 0 and "stat" in p.stdout, "the text dump does too")
bad = os.path.join(d, "bad")
os.makedirs(bad)
with open(os.path.join(bad, "y.ddpspy"), "wb") as o:
    o.write(b"garbage, not a trace" * 10)
p = subprocess.run([DDPSPY, "dump", bad], capture_output=True, text=True)
ok(p.returncode == 2 and "nothing readable" in p.stderr, "nothing readable: exit 2 with a reason")
p = subprocess.run([DDPSPY, "dump", os.path.join(d, "missing")], capture_output=True, text=True)
ok(p.returncode == 2 and "cannot read" in p.stderr, "a missing directory: exit 2")
cleanup(d)
done()
