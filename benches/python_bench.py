"""Python binding costs: awaited get vs blocking get, event-loop stalls,
and threads in parallel.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install ./bindings-python
    /tmp/v/bin/python benches/python_bench.py [DIR]

Reports, in one run: medians of per-call latency for a 16 KiB get (the
blocking call and the same call awaited through AsyncStore); the longest
event-loop stall while three 48 MiB AsyncStore gets are awaited (a ticker
coroutine sleeps 1 ms at a time and records the longest gap between its
wake-ups; the same for the blocking get run in an executor, which copies
into bytes under the GIL, for comparison); gets per second from 1 and 8
threads.
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

store = blobcask.Store(PATH, capacity=512 << 20)
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

# Event-loop stalls: three 48 MiB gets awaited at once, while a ticker
# coroutine measures the longest gap between its 1 ms sleeps.
BIG, ROUNDS = 48 << 20, 5
big_keys = [f"big/{i}" for i in range(3)]
for k in big_keys:
    store.put(k, os.urandom(BIG))


async def longest_stall(fetch):
    worst = 0.0
    running = True

    async def ticker():
        nonlocal worst
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    worst = 0.0
    for _ in range(ROUNDS):
        got = await asyncio.gather(*(fetch(k) for k in big_keys))
        assert all(len(g) == BIG for g in got)
        del got
        await asyncio.sleep(0.005)
    running = False
    await t
    return worst * 1e3


async def stalls():
    a = blobcask.AsyncStore(store)
    loop = asyncio.get_running_loop()
    blob = await longest_stall(a.get)
    copied = await longest_stall(lambda k: loop.run_in_executor(None, store.get, k))
    return blob, copied


blob_stall, bytes_stall = asyncio.run(stalls())
print(f"longest event-loop stall (1 ms ticker) during 3 x 48 MiB gets, worst of {ROUNDS} rounds: "
      f"AsyncStore.get (Blob) {blob_stall:.1f} ms, Store.get in an executor (bytes copy) {bytes_stall:.1f} ms")

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
