"""gloo collectives in a library loaded RTLD_LOCAL (as PyTorch loads libgloo): the wrappers find
the real functions, record each call with a sequence number and the bytes of the buffers made for
it, and let gloo's exceptions through."""
import os
from lib import *

d = tmpdir("gloo")
out = os.path.join(d, "out")
p = traced([os.path.join(APPS, "gloo_host"), os.path.join(APPS, "libglooplugin.so"), "5"], out,
           env={"DDPSPY_LOG": "1"})
ok(p.returncode == 0 and '"calls": 9' in p.stdout,
   "every call reached the real library, and its exception reached the caller: %s %s" % (p.stdout.strip(), p.stderr.strip()[-200:]))
ok("outside the global scope" in p.stderr, "the real functions were found outside the global scope")
recs, rc, _ = dump(out)
g = events(recs, "gloo_coll")
ar = [e for e in g if e["op"] == "allreduce"]
ok(len(ar) == 6 and [e["seq"] for e in ar] == list(range(6)), "six allreduces, seq 0..5")
ok([e["threw"] for e in ar] == [0, 0, 0, 0, 0, 1], "the last one is marked as having thrown")
ok(len([e for e in g if e["op"] == "barrier"]) == 1 and len([e for e in g if e["op"] == "broadcast"]) == 1,
   "one barrier, one broadcast")
ok(all(e["dur_ns"] >= 1.9e6 for e in g), "each lasted the library's 2 ms")
# the plugin's buffers (testapps/glooplugin.cc); gloo's own scratch buffers inside each collective,
# and the 1 MiB buffer sent point to point before the barrier, count for none
ok([e["bytes"] for e in ar] == [4096 * (i + 1) for i in range(5)] + [-1],
   "each allreduce has its buffer's bytes; the one made without a buffer -1 (unknown): %s" % [e["bytes"] for e in ar])
by = {e["op"]: e["bytes"] for e in g if e["op"] != "allreduce"}
ok(by == {"barrier": 0, "broadcast": 1000, "gather": 300}, "a barrier moves 0 bytes, a broadcast whose "
   "input is its output 1000, a gather of 100 bytes a rank over 3 ranks 300: %s" % by)
cleanup(d)
done()
