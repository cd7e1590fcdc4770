"""Blocking calls from many shapes of Python code, each with the frames CPython itself gives for it
(the ground truth of tests/e2e/test_pyframes.py): before every time.sleep, on the same line, the
thread's frames are taken from sys._getframe (file, the line in progress, qualified name,
innermost first, at most 24, the frames not started yet left out as f_back leaves them out).
Prints one JSON line: {"sleeps": [{"tid": native thread id, "frames": [[file, line, name],
...]}, ...]} in each thread's order.

usage: pyframes_app.py [--churn SECONDS]   (--churn: threads that recurse, raise and run generators
                                            throughout, and the blocking calls repeated meanwhile)"""
import asyncio
import json
import sys
import threading
import time

SLEEPS = []
LOCK = threading.Lock()
DEPTH = 24


def here():
    """the caller's frames as CPython gives them"""
    f, out = sys._getframe(1), []
    while f is not None and len(out) < DEPTH:
        out.append([f.f_code.co_filename, f.f_lineno, f.f_code.co_qualname])
        f = f.f_back
    with LOCK:
        SLEEPS.append({"tid": threading.get_native_id(), "frames": out})


def block(s=0.003):
    here(); time.sleep(s)  # noqa: E702 (one line: the frames are this line's)


class Trainer:
    def step(self):
        self.log_metrics()

    def log_metrics(self):
        block()

    class Inner:
        @staticmethod
        def deep():
            block()


def gen(n):
    for i in range(n):
        block()
        yield i


def outer():
    def inner():
        block()
    inner()


def handler():
    try:
        raise ValueError("x")
    except ValueError:
        block()
    finally:
        block()


def recurse(n):
    if n == 0:
        block()
    else:
        recurse(n - 1)


def größe():
    block()


async def coro():
    block()
    await asyncio.sleep(0)
    block()


def keyed(x):
    block()
    return x


class Built:
    block()


def shapes():
    Trainer().step()
    Trainer.Inner.deep()
    list(gen(2))
    outer()
    handler()
    recurse(60)
    größe()
    (lambda: block())()
    asyncio.run(coro())
    sorted([2, 1], key=keyed)
    t = threading.Thread(target=Trainer().step, name="worker")
    t.start()
    t.join()


def churn(stop):
    """frames made and unmade as fast as one thread can: recursion, generators, exceptions"""
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    def g():
        for i in range(50):
            yield i
    while not stop.is_set():
        down(200)
        sum(g())
        try:
            {}["missing"]
        except KeyError:
            pass


def main():
    churn_s = float(sys.argv[sys.argv.index("--churn") + 1]) if "--churn" in sys.argv else 0
    stop = threading.Event()
    churners = [threading.Thread(target=churn, args=(stop,)) for _ in range(2 if churn_s else 0)]
    for c in churners:
        c.start()
    end = time.monotonic() + churn_s
    shapes()
    while time.monotonic() < end:
        shapes()
    stop.set()
    for c in churners:
        c.join()
    print(json.dumps({"sleeps": SLEEPS}))


if __name__ == "__main__":
    main()
