"""Configuration and the CLI: bad values warn and fall back, DDPSPY_DISABLE, an unwritable
output directory, `ddpspy run` exit status, and the library's exported symbols."""
import os
import subprocess
from lib import *

threads = os.path.join(APPS, "threads")
d = tmpdir("config")
out = os.path.join(d, "bad")
p = traced([threads, "produce", "1", "10"], out, env={"DDPSPY_RING_KB": "lots", "DDPSPY_FLUSH_MS": "0"})
ok(p.returncode == 0 and '"produced": 10' in p.stdout, "bad values never stop the program")
ok(p.stderr.count("DDPSPY_RING_KB=lots") == 1 and p.stderr.count("DDPSPY_FLUSH_MS=0") == 1,
   "one warning per bad value: %s" % p.stderr.strip())
recs, rc, _ = dump(out)
pr = of(recs, "process")
ok(pr and pr[0]["ring_kb"] == 4096 and pr[0]["flush_ms"] == 100, "and the defaults are used")

out = os.path.join(d, "off")
p = traced([threads, "produce", "1", "10"], out, env={"DDPSPY_DISABLE": "1"})
ok(p.returncode == 0 and not os.path.exists(out), "DDPSPY_DISABLE=1: no trace, program unchanged")

p = traced([threads, "produce", "1", "10"], "/proc/ddpspy-cannot-write")
ok(p.returncode == 0 and '"produced": 10' in p.stdout and p.stderr.count("untraced") == 1,
   "an unwritable output directory: one line on stderr, the program runs untraced: %s" % p.stderr.strip())

out = os.path.join(d, "run")
p = subprocess.run([DDPSPY, "run", "-o", out, "--", "sh", "-c", "cat /etc/hostname >/dev/null; exit 3"],
                   capture_output=True, text=True)
ok(p.returncode == 3, "ddpspy run returns the command's exit status (%d)" % p.returncode)
recs, rc, _ = dump(out)
ok(any(e.get("path") == "/etc/hostname" for e in events(recs, "open")), "and traced it into -o DIR")
p = subprocess.run([DDPSPY, "run", "-o", out, "--", "sh", "-c", "kill -9 $$"], capture_output=True, text=True)
ok(p.returncode == 137, "a command killed by SIGKILL gives 128+9")
p = subprocess.run([DDPSPY, "run"], capture_output=True, text=True)
ok(p.returncode == 2 and "usage" in p.stderr, "ddpspy run without a command: usage, exit 2")
p = subprocess.run([DDPSPY, "frobnicate"], capture_output=True, text=True)
ok(p.returncode == 2 and "unknown command" in p.stderr, "an unknown command: exit 2")

# exports: only interposed functions and the public API, nothing of ddpspy's internals; no link-time MPI data
nm = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True).stdout
names = [l.split()[-1] for l in nm.splitlines() if len(l.split()) == 3]
public = {"ddpspy_mark", "ddpspy_step_begin", "ddpspy_step_end"}  # include/ddpspy.h
internal = [n for n in names if n.startswith(("dsp_", "ring_", "ddpspy_", "msgpack_", "urcu")) and n not in public]
ok(names and not internal and public <= set(names),
   "libddpspy.so exports only the wrappers and the public step markers (%d symbols; internal: %s)" % (len(names), internal))
und = subprocess.run(["nm", "-D", "--undefined-only", LIB], capture_output=True, text=True).stdout
ok("ompi_" not in und and "unw_" not in und and "MPI_" not in und,
   "no undefined MPI or libunwind references: loads in any program")
ldd = subprocess.run(["ldd", LIB], capture_output=True, text=True).stdout
ok("libunwind" not in ldd, "libunwind is not linked (its _Unwind_* would override the program's)")
gen = subprocess.run(["python3", os.path.join(ROOT, "tools", "gen_mpi.py")], capture_output=True, text=True).stdout
ok(gen == open(os.path.join(ROOT, "preload", "mpi_wrappers.inc")).read(), "preload/mpi_wrappers.inc is current (make gen)")
cleanup(d)
done()
