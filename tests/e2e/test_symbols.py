"""Native frames by function name (format 2.13: each module's build id; collector/elfsym.c): the
testbed's straggler sleeps in sleep_ms (testapps/ddpbench/data.c, which calls nanosleep), called
from train (train.c, `sleep_ms(o->straggler_ms)`), so rank 1's sleeps must be named so, in
`ddpspy dump` and in the report's sites. A name is taken only from a file of the same build: the
program rebuilt after the run (another build id), stripped with its debug file elsewhere
(DDPSPY_DEBUG_DIR), or damaged, each gives "module+0xoffset" or the right name, never a wrong
one and never a crash. The program is a copy of build/ddpbench, so that the test can change it."""
import json
import os
import re
import shutil
import subprocess
from lib import *

d = tmpdir("symbols")
data = bench_data(d)
exe = os.path.join(d, "bin", "ddpbench")
os.makedirs(os.path.dirname(exe))
shutil.copy2(BENCH, exe)
orig = exe + ".orig"
shutil.copy2(BENCH, orig)
out = os.path.join(d, "out")
p = subprocess.run([DDPSPY, "run", "-o", out, "--"] + MPIRUN +
                   ["-np", "2", exe, "train", "--data", data, "--hidden", "128", "--steps", "10",
                    "--straggler-rank", "1", "--straggler-ms", "20"], capture_output=True, text=True, timeout=300)
ok(p.returncode == 0, "the testbed ran under ddpspy: %s" % p.stderr[-300:])


def rank_file(rank):
    for f in sorted(os.listdir(out)):
        if f.endswith(".ddpspy"):
            recs, rc, _ = dump(os.path.join(out, f))
            if any(r.get("rank") == rank for r in who(recs).values()):
                return os.path.join(out, f)
    return None


r1 = rank_file(1)


def sleep_stacks(env=None):
    """the frames of rank 1's sleep stacks (sleeps of 10 ms or more: the straggler's), as
    `ddpspy dump --json` gives them with env set"""
    q = subprocess.run([DDPSPY, "dump", "--json", r1], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    recs = [json.loads(l) for l in q.stdout.splitlines() if l.strip()]
    sl = [e for e in events(recs, "sleep") if e.get("dur_ns", 0) >= 10e6 and e.get("frames")]
    return [e["frames"] for e in sl], q.returncode


def named(frames):
    return [f.get("function") for f in frames[:2]]


def mod_offsets(frames):
    return [(os.path.basename(f.get("module", "")), f.get("offset")) for f in frames[:2]]


st, rc = sleep_stacks()
ok(rc == 0 and len(st) >= 8, "dump: rank 1's straggler sleeps have stacks (%d)" % len(st))
ok(st and all(named(f) == ["sleep_ms", "train"] for f in st),
   "dump: each sleep's stack is sleep_ms <- train, from the program's symbols: %s" % (named(st[0]) if st else None))
ok(st and all(f[0]["module"] == exe and int(f[0]["function_offset"], 16) < int(f[0]["offset"], 16) for f in st),
   "dump: the frames keep their module and offset beside the function and its offset")
base = mod_offsets(st[0]) if st else None


def sites(j):
    """every site (its function text) of rank 1's findings"""
    return [s.get("function") or "" for f in (j or {}).get("findings", []) if f.get("rank") == 1
            for s in f.get("evidence", {}).get("sites", [])]


j, _ = checked_report(out)
fs = sites(j)
ok(any(re.match(r"ddpbench\+0x[0-9a-f]+ \(sleep_ms\+0x[0-9a-f]+\)$", s) for s in fs),
   "report: a finding on rank 1 names sleep_ms as its site: %s" % fs[:3])
t = subprocess.run([DDPSPY, "report", out], capture_output=True, text=True, timeout=300).stdout
ok("(sleep_ms+0x" in t, "report text: the site's function is named")

# the program replaced by a build of its own (the same code, another build id): no names, the
# same module+offset frames as before
subprocess.run(["objcopy", "--remove-section", ".note.gnu.build-id", orig, exe], check=True)
st, rc = sleep_stacks()
ok(rc == 0 and st and all(named(f) == [None, None] for f in st) and mod_offsets(st[0]) == base,
   "a program without the recorded build id: frames as module+offset, no name: %s" % (named(st[0]) if st else None))
shutil.copy2(orig, exe)
with open(exe, "r+b") as fh:  # another build id of the same length: its bytes inverted
    blob = fh.read()
    bid = subprocess.run(["readelf", "-n", orig], capture_output=True, text=True).stdout
    hexid = re.search(r"Build ID: ([0-9a-f]+)", bid).group(1)
    at = blob.find(bytes.fromhex(hexid))
    fh.seek(at)
    fh.write(bytes(0xff ^ b for b in bytes.fromhex(hexid)))
st, rc = sleep_stacks()
ok(rc == 0 and st and all(named(f) == [None, None] for f in st),
   "a program of another build id: no name taken from it")

# stripped, its symbols in a debug file under DDPSPY_DEBUG_DIR/.build-id/xx/rest.debug
dbg = os.path.join(d, "debug", ".build-id", hexid[:2], hexid[2:] + ".debug")
os.makedirs(os.path.dirname(dbg))
subprocess.run(["objcopy", "--only-keep-debug", orig, dbg], check=True)
subprocess.run(["strip", "-o", exe, orig], check=True)
st, rc = sleep_stacks()
ok(rc == 0 and st and all(named(f) == [None, None] for f in st),
   "stripped, no debug file: module+offset (its .dynsym has neither function)")
st, rc = sleep_stacks({"DDPSPY_DEBUG_DIR": "/nonexistent:" + os.path.join(d, "debug")})
ok(rc == 0 and st and all(named(f) == ["sleep_ms", "train"] for f in st),
   "stripped, its debug file in DDPSPY_DEBUG_DIR's second directory: the names again")

# damaged copies of the right build: cut short, its section headers overwritten
size = os.path.getsize(orig)
for what, change in [("cut to 60%", lambda b: b[:int(len(b) * 0.6)]),
                     ("its section headers garbage", lambda b: b[:len(b) - 4096] + os.urandom(4096))]:
    with open(orig, "rb") as fh:
        blob = change(fh.read())
    with open(exe, "wb") as fh:
        fh.write(blob)
    st, rc = sleep_stacks()
    ok(rc == 0 and st and all(named(f) in ([None, None], ["sleep_ms", "train"]) for f in st),
       "the program's file %s: no crash, no wrong name (%s)" % (what, named(st[0]) if st else rc))

cleanup(d)
done()
