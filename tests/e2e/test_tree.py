"""The tracked tree holds source, docs and small fixtures, never generated data: a data set or a
pile of traces committed by accident makes every clone heavier and the tree too big to send to a
GPU machine (it happened once: 8,196 files, 69 MB under data/). Read from `git ls-files`; skipped,
saying so, outside a git checkout."""
import os
import subprocess
from lib import *

p = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True)
if p.returncode != 0 or not os.path.isdir(os.path.join(ROOT, ".git")):
    skip("the tracked tree", "not a git checkout (%s)" % p.stderr.decode(errors="replace").strip()[:100])
    done()
files = [f for f in p.stdout.decode().split("\0") if f]
ok(0 < len(files) <= 1000, "%d tracked files, at most 1,000" % len(files))
sizes = {f: os.path.getsize(os.path.join(ROOT, f)) for f in files if os.path.isfile(os.path.join(ROOT, f))}
big = sorted((s, f) for f, s in sizes.items() if s > 2 << 20 and not f.startswith("docs/"))
ok(not big, "no tracked file over 2 MiB outside docs/: %s" % big[:3])
# what .gitignore says is generated must not be tracked either (a trace outside tests/fixtures/,
# a data set, build output)
p = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--ignored", "--exclude-standard"],
                   capture_output=True)
ignored = [f for f in p.stdout.decode().split("\0") if f]
ok(p.returncode == 0 and not ignored, "no tracked file is one .gitignore calls generated: %s" % ignored[:5])
# recorded traces are fixtures, documented and small: tens of KB per process file
fx = {f: s for f, s in sizes.items() if f.endswith(".ddpspy")}
ok(all(f.startswith("tests/fixtures/") for f in fx), "traces are tracked only as tests/fixtures/: %s"
   % [f for f in fx if not f.startswith("tests/fixtures/")][:3])
ok(all(s <= 256 << 10 for s in fx.values()) and sum(fx.values()) <= 8 << 20,
   "fixture traces: %d files, %d KiB in all, the largest %d KiB (at most 256 KiB each, 8 MiB in all)"
   % (len(fx), sum(fx.values()) >> 10, max(fx.values() or [0]) >> 10))
done()
