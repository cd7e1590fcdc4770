"""Writes the fuzzer's seed inputs into DIR: one per recorded fixture (tests/fixtures/NAME/), its
trace files concatenated after a 0xff byte (keep the CRCs: the collector reads them as recorded).
usage: seeds.py DIR"""
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for name in sorted(os.listdir(root)):
    d = os.path.join(root, name)
    files = sorted(f for f in os.listdir(d) if f.endswith(".ddpspy")) if os.path.isdir(d) else []
    if not files:
        continue
    with open(os.path.join(out, name + ".bin"), "wb") as w:
        w.write(b"\xff")
        for f in files:
            with open(os.path.join(d, f), "rb") as r:
                w.write(r.read())
    n += 1
print("%d seeds in %s" % (n, out))
