"""Configuration and the CLI: bad values warn and fall back, DDPSPY_DISABLE, an unwritable
output directory, `ddpspy run` exit status, and the library's exported symbols."""
import os
import re
import shutil
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

# trace files are the user's alone: 0600 in a 0700 directory ddpspy made, unless DDPSPY_FILE_MODE
# says otherwise (a group-readable 0640 makes 0750 directories)
for mode, fmode, dmode in [(None, 0o600, 0o700), ("640", 0o640, 0o750)]:
    out = os.path.join(d, "mode-%s" % (mode or "default"), "sub")
    old = os.umask(0o022)
    p = traced([threads, "produce", "1", "10"], out, env={"DDPSPY_FILE_MODE": mode} if mode else {})
    os.umask(old)
    files = [os.path.join(out, f) for f in os.listdir(out)] if os.path.isdir(out) else []
    got = ([oct(os.stat(f).st_mode & 0o777) for f in files], oct(os.stat(out).st_mode & 0o777) if files else None,
           oct(os.stat(os.path.dirname(out)).st_mode & 0o777) if files else None)
    ok(len(files) == 1 and got == ([oct(fmode)], oct(dmode), oct(dmode)),
       "DDPSPY_FILE_MODE=%s: the trace file %s, the directories made for it %s: %s" % (mode, oct(fmode), oct(dmode), got))

# secure execution: a setuid-root program run by an unprivileged user who set DDPSPY_OUT. The
# loader preloads only a setuid library from a system directory then, so the test puts one there
# through an overlay in a private mount namespace; the library must be loaded, and do nothing
sec = os.path.join(d, "secure")
os.makedirs(os.path.join(sec, "upper"))
os.makedirs(os.path.join(sec, "work"))
os.chmod(d, 0o755)
os.chmod(sec, 0o755)
if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv"):
    prog = os.path.join(sec, "forker-suid")
    shutil.copy(os.path.join(APPS, "forker"), prog)
    os.chmod(prog, 0o4755)
    shutil.copy(LIB, os.path.join(sec, "upper", "libddpspy.so"))
    os.chmod(os.path.join(sec, "upper", "libddpspy.so"), 0o4755)
    evil = os.path.join(sec, "evil", "sub")
    libdir = "/usr/lib/x86_64-linux-gnu"
    script = ('mount -t overlay overlay -o lowerdir=%s,upperdir=%s/upper,workdir=%s/work %s || exit 99; '
              'setpriv --reuid=65534 --regid=65534 --clear-groups env LD_PRELOAD=libddpspy.so DDPSPY_OUT=%s '
              'DDPSPY_LOG=1 %s spin & pid=$!; sleep 0.5; grep -c libddpspy /proc/$pid/maps; kill $pid; wait $pid; '
              'exit 0' % (libdir, sec, sec, libdir, evil, prog))
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    if p.returncode == 99:
        skip("secure execution", "no overlay mount in a private mount namespace here: " + p.stderr.strip())
    else:
        loaded = p.stdout.split()[-1:] != ["0"] and "spinning" in p.stdout
        ok(loaded and not os.path.exists(os.path.join(sec, "evil")) and "ddpspy" not in p.stderr,
           "a setuid program run by nobody with ddpspy preloaded: the library is loaded (%s), records nothing, "
           "creates nothing, says nothing" % p.stdout.strip().replace("\n", " "))
else:
    skip("secure execution", "needs root, unshare and setpriv")

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
# every command's options through one parser (collector/cli.c): an unknown option and a bad value
# said the same way by each, exit 2; -h on stdout, exit 0; a value's alias (-j, --jobs) alike
fx = os.path.join(ROOT, "tests", "fixtures", "healthy")
for cmd, bad, value in (("report", ["--skip", "x"], "--skip needs a whole number >= 0, not 'x'"),
                        ("view", ["--max-events", "0"], "--max-events needs a whole number >= 1, not '0'"),
                        ("compare", ["--skip", "-1"], "--skip needs a whole number >= 0, not '-1'"),
                        ("dump", None, None), ("run", None, None)):
    u = subprocess.run([DDPSPY, cmd, "--bogus", fx], capture_output=True, text=True)
    h = subprocess.run([DDPSPY, cmd, "-h"], capture_output=True, text=True)
    v = subprocess.run([DDPSPY, cmd] + bad + [fx, fx], capture_output=True, text=True) if bad else None
    ok(u.returncode == 2 and ("ddpspy %s: unknown option or missing value: --bogus" % cmd) in u.stderr and "usage" in u.stderr
       and h.returncode == 0 and h.stdout.startswith("usage") and
       (v is None or (v.returncode == 2 and ("ddpspy %s: %s" % (cmd, value)) in v.stderr)),
       "ddpspy %s: an unknown option, -h%s, each said as every command says it (%s | %s)"
       % (cmd, " and a bad value" if bad else "", u.stderr.strip().splitlines()[0][:80] if u.stderr else "",
          v.stderr.strip()[:80] if v else ""))
j = [subprocess.run([DDPSPY, "report", o, "5000", fx], capture_output=True, text=True) for o in ("-j", "--jobs")]
ok(all(x.returncode == 2 and "-j needs a whole number of threads from 1 to 4096, not '5000'" in x.stderr for x in j),
   "report -j and --jobs are one option: %s" % [x.stderr.strip()[:80] for x in j])
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
for tool, inc in (("gen_mpi.py", "mpi_wrappers.inc"), ("gen_io.py", "io_wrappers.inc")):
    gen = subprocess.run(["python3", os.path.join(ROOT, "tools", tool)], capture_output=True, text=True).stdout
    ok(gen == open(os.path.join(ROOT, "preload", inc)).read(), "preload/%s is current (make gen)" % inc)
# dump --json writes an event's arguments beside its own keys: a name of both would be written twice
fmt = open(os.path.join(ROOT, "common", "format.h")).read()
kinds = re.findall(r'X\(EV_\w+, "(\w+)",\s*"([\w,]*)"', fmt)
own = {"type", "file", "pid", "rank", "tid", "kind", "t_ns", "dur_ns", "stack", "frames"}
legacy = {("mpi_init", "rank"), ("thread_name", "tid")}  # 1.0 kinds: their argument wins (the last key)
clash = [(k, a) for k, args in kinds for a in args.split(",") if a in own and (k, a) not in legacy]
ok(len(kinds) > 30 and not clash, "no event argument is named as dump's own keys (%d kinds; clashes: %s)" % (len(kinds), clash))
cleanup(d)
done()
