"""Python binding costs: awaited get vs blocking get, event-loop stalls,
and threads in parallel.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install ./bindings-python
    /tmp/v/bin/python benches/python_bench.py [DIR]

Reports, in one run: medians of per-call latency for a 16 KiB get (the
blocking call and the same call awaited through AsyncStore, interleaved);
the longest event-loop stall while three 48 MiB AsyncStore gets are awaited
(a ticker coroutine sleeps 1 ms at a time and records the longest gap
between its wake-ups; the same for the blocking get run in an executor,
which copies into bytes under the GIL, and for three `dd iflag=direct`
processes reading as many bytes, the machine's floor); 64 concurrent
awaited gets against py-lmdb through `asyncio.to_thread` (when `lmdb` is
installed); warm 16 KiB and 1 MiB gets (blobcask read-cache hits), with a copy and
without, against py-lmdb's copying and zero-copy gets; gets per second from 1 and 8 threads.
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


async def get_medians():
    """Blocking and awaited 16 KiB gets, interleaved sample by sample so
    both see the same device (its latency drifts over seconds here)."""
    a = blobcask.AsyncStore(store)
    blocking, awaited = [], []
    for _ in range(SAMPLES):
        k = random.choice(keys)
        t = time.perf_counter()
        store.get(k)
        blocking.append(time.perf_counter() - t)
        k = random.choice(keys)
        t = time.perf_counter()
        await a.get(k)
        awaited.append(time.perf_counter() - t)
    return statistics.median(blocking) * 1e6, statistics.median(awaited) * 1e6


blocking, awaited = asyncio.run(get_medians())
print(f"16 KiB get, median of {SAMPLES}, interleaved: blocking {blocking:.1f} us, awaited {awaited:.1f} us "
      f"({awaited / blocking:.2f} x blocking)")

# Event-loop stalls: three 48 MiB gets awaited at once, while a ticker
# coroutine measures the longest gap between its 1 ms sleeps.
BIG, ROUNDS = 48 << 20, 5
big_keys = [f"big/{i}" for i in range(3)]
for k in big_keys:
    store.put(k, os.urandom(BIG))


async def longest_stall_during(work):
    """The longest gap, in ms, between the wake-ups of a coroutine that
    sleeps 1 ms at a time while `work()` is awaited."""
    worst, running = 0.0, True

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
    await work()
    running = False
    await t
    return worst * 1e3


async def longest_stall(fetch):
    async def rounds():
        for _ in range(ROUNDS):
            got = await asyncio.gather(*(fetch(k) for k in big_keys))
            assert all(len(g) == BIG for g in got)
            del got
            await asyncio.sleep(0.005)

    return await longest_stall_during(rounds)


async def stalls():
    a = blobcask.AsyncStore(store)
    loop = asyncio.get_running_loop()
    blob = await longest_stall(a.get)
    copied = await longest_stall(lambda k: loop.run_in_executor(None, store.get, k))
    return blob, copied


async def dd_stall():
    """The floor: the same ticker while three `dd iflag=direct` processes
    read as many bytes from the same file, ROUNDS times (no blobcask in this
    process). One shell, started before the ticker, runs them all: forking
    from this process inside the window would stall the loop itself."""
    rounds = "; ".join(
        "(" + " & ".join(
            f"dd if={PATH} of=/dev/null bs={BIG} count=1 skip={i} iflag=direct 2>/dev/null"
            for i in range(3)) + "; wait)"
        for _ in range(ROUNDS))
    sh = await asyncio.create_subprocess_shell(
        f"read go; {rounds}", stdin=asyncio.subprocess.PIPE)

    async def run_dd():
        sh.stdin.write(b"go\n")
        await sh.stdin.drain()
        await sh.wait()

    return await longest_stall_during(run_dd)


blob_stall, bytes_stall = asyncio.run(stalls())
floor = asyncio.run(dd_stall())
print(f"longest event-loop stall (1 ms ticker) during 3 x 48 MiB gets, worst of {ROUNDS} rounds: "
      f"AsyncStore.get (Blob) {blob_stall:.1f} ms, Store.get in an executor (bytes copy) {bytes_stall:.1f} ms, "
      f"3 dd iflag=direct processes reading as much of the file {floor:.1f} ms")


async def concurrent_gets(get, rounds=100, width=64):
    t = time.perf_counter()
    for _ in range(rounds):
        await asyncio.gather(*(get(random.choice(keys)) for _ in range(width)))
    return rounds * width / (time.perf_counter() - t)


async def versus_lmdb():
    """64 awaited gets at a time: AsyncStore against py-lmdb (the same keys
    and values, page cache warm) through asyncio.to_thread."""
    try:
        import lmdb
    except ImportError:
        return None
    env = lmdb.open(os.path.join(DIR, "py-bench.lmdb"), map_size=1 << 30)
    with env.begin(write=True) as txn:
        for k in keys:
            txn.put(k.encode(), payload)

    def lmdb_get(k):
        with env.begin(buffers=False) as txn:
            return txn.get(k.encode())

    a = blobcask.AsyncStore(store)
    cache = store.stats()["cache"]
    ours = await concurrent_gets(a.get)
    after = store.stats()["cache"]
    hits = after["hits"] - cache["hits"]
    gets = hits + after["misses"] - cache["misses"]
    theirs = await concurrent_gets(lambda k: asyncio.to_thread(lmdb_get, k))
    env.close()
    return ours, theirs, hits, gets


vs = asyncio.run(versus_lmdb())
if vs is None:
    print("64 concurrent awaited gets vs py-lmdb: skipped (pip install lmdb)")
else:
    print(f"64 concurrent awaited 16 KiB gets/s: AsyncStore {vs[0]:.0f}, "
          f"py-lmdb through asyncio.to_thread {vs[1]:.0f} ({vs[0] / vs[1]:.2f} x); "
          f"{vs[2]} of {vs[3]} blobcask gets were cache hits")

def warm_versus_lmdb(size):
    """Warm gets of `size`-byte values, one call at a time, interleaved
    sample by sample: blobcask from its read cache (the hot set read twice
    first, so every timed get is a hit), as a copy (`get`: bytes) and
    without one (`get_blob`: the engine's buffer), against py-lmdb's
    copying get (`buffers=False`) and its zero-copy get (`buffers=True`),
    page cache warm."""
    try:
        import lmdb
    except ImportError:
        return None
    value = os.urandom(size)
    hot = [f"warm{size}/{i:04}" for i in range(min(256, (16 << 20) // size))]
    for k in hot:
        store.put(k, value)
    env = lmdb.open(os.path.join(DIR, f"py-warm-{size}.lmdb"), map_size=1 << 30)
    with env.begin(write=True) as txn:
        for k in hot:
            txn.put(k.encode(), value)
    for _ in range(2):
        for k in hot:
            store.get(k)
    hits = store.stats()["cache"]["hits"]
    samples = SAMPLES if size <= 64 << 10 else SAMPLES // 6
    ours, ours_view, copying, zero_copy = [], [], [], []
    for _ in range(samples):
        k = random.choice(hot)
        kb = k.encode()
        t = time.perf_counter()
        store.get(k)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.get_blob(k)
        ours_view.append(time.perf_counter() - t)
        t = time.perf_counter()
        with env.begin(buffers=False) as txn:
            txn.get(kb)
        copying.append(time.perf_counter() - t)
        t = time.perf_counter()
        with env.begin(buffers=True) as txn:
            txn.get(kb)
        zero_copy.append(time.perf_counter() - t)
    served = store.stats()["cache"]["hits"] - hits
    env.close()
    med = lambda xs: statistics.median(xs) * 1e6
    return med(ours), med(ours_view), med(copying), med(zero_copy), served, 2 * samples


for size in (16 << 10, 1 << 20):
    warm = warm_versus_lmdb(size)
    label = f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
    if warm is None:
        print(f"warm {label} get vs py-lmdb: skipped (pip install lmdb)")
        continue
    ours, view, copying, zero_copy, served, gets = warm
    print(f"warm {label} get p50: blobcask get (copy) {ours:.2f} us, py-lmdb get "
          f"{copying:.2f} us ({ours / copying:.2f} x); blobcask get_blob (no copy) "
          f"{view:.2f} us, py-lmdb buffers=True {zero_copy:.2f} us "
          f"({view / zero_copy:.2f} x); {served} of {gets} blobcask gets were cache hits")

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
