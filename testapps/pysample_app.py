"""The main thread in known places for known times, for ddpspy's sampler of Python frames (the
ground truth of tests/e2e/test_pyframes.py). Prints one JSON line.

usage: pysample_app.py phases   hot() computes for 1 s, then cold() sleeps for 0.5 s: the seconds
                                each took, measured here
       pysample_app.py churn S  for S seconds the main thread makes and unmakes frames as fast as it
                                can (recursion, generators, exceptions, a class's methods): the
                                functions it ran"""
import json
import sys
import time


def hot(s):
    t, x = time.monotonic(), 0
    while time.monotonic() - t < s:
        for i in range(1000):
            x += i * i
    return x


def cold(s):
    end = time.monotonic() + s
    while time.monotonic() < end:
        time.sleep(0.01)


class Node:
    def __init__(self, n):
        self.n = n

    def depth(self):
        return 0 if self.n == 0 else 1 + Node(self.n - 1).depth()


def down(n):
    return 0 if n == 0 else 1 + down(n - 1)


def gen(n):
    for i in range(n):
        yield i


def fail(n):
    try:
        raise KeyError(n)
    except KeyError:
        return n


def churn(s):
    end = time.monotonic() + s
    while time.monotonic() < end:
        down(150)
        sum(gen(40))
        Node(60).depth()
        [fail(i) for i in range(20)]
    return ["churn", "down", "gen", "Node.__init__", "Node.depth", "fail", "churn.<locals>.<listcomp>"]


def main():
    if sys.argv[1] == "phases":
        t0 = time.monotonic()
        hot(1.0)
        t1 = time.monotonic()
        cold(0.5)
        t2 = time.monotonic()
        print(json.dumps({"hot_s": t1 - t0, "cold_s": t2 - t1}))
    else:
        print(json.dumps({"functions": churn(float(sys.argv[2])) + ["main", "<module>"]}))


if __name__ == "__main__":
    main()
