"""Small objects right after a restart, from Python: each key's first get
in a fresh process, blobcask (read cache warmed after open) against py-lmdb.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install ./bindings-python lmdb
    /tmp/v/bin/python benches/python_reopen.py [--n 1000000] [--dir DIR] [--json FILE]

N objects of 100 B under 22-byte keys are bulk loaded into a blobcask store
and an LMDB environment (when `lmdb` is installed), both closed. Then a fresh
process opens each and reads 20,000 random keys once each (every key's first
read since the open), timing every call:

* blobcask is opened with `cache_fraction=0.25` and its default warm-up:
  the process waits until `stats().cache.warming` is false (the time is
  reported), then reads;
* LMDB's pages stay in the page cache (what a process restart leaves; a
  machine restart would drop them).

Reports the p50s, the warm-up time and the share of blobcask's reads the
cache served. With --json, appends figure records (`py.get.after_reopen`,
`py.warm_up.after_reopen`) for benches/results.py, the LMDB p50 as the
baseline of the first.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import blobcask

SAMPLES = 20_000
VALUE = 100


def key(i: int) -> bytes:
    return b"obj/%018d" % i


def value(i: int) -> bytes:
    return (i.to_bytes(8, "little") * 13)[:VALUE]


def timed_gets(get: Callable[[bytes], Any], picks: list[int]) -> list[float]:
    """Each pick's get, timed alone; every value checked."""
    times = []
    for i in picks:
        k = key(i)
        t = time.perf_counter()
        v = get(k)
        times.append(time.perf_counter() - t)
        assert v == value(i), i
    return times


def child(engine: str, path: str, n: int) -> None:
    rng = random.Random(7)
    picks = rng.sample(range(n), min(SAMPLES, n))
    out: dict[str, float] = {}
    if engine == "blobcask":
        t = time.perf_counter()
        store = blobcask.Store(path, cache_fraction=0.25)
        out["open_s"] = time.perf_counter() - t
        while store.stats().cache.warming:
            time.sleep(0.001)
        out["warm_up_s"] = time.perf_counter() - t
        before = store.stats().cache
        times = timed_gets(store.get, picks)
        after = store.stats().cache
        reads = (after.hits - before.hits) + (after.misses - before.misses)
        out["hit_share"] = (after.hits - before.hits) / max(reads, 1)
        store.close()
    else:
        import lmdb

        t = time.perf_counter()
        env = lmdb.open(path, readonly=True, lock=False, map_size=1 << 36)
        out["open_s"] = time.perf_counter() - t
        with env.begin() as txn:
            times = timed_gets(txn.get, picks)
        env.close()
    out["p50_us"] = statistics.median(times) * 1e6
    print(json.dumps(out))


def run_child(engine: str, path: str, n: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", engine, "--path", path, "--n", str(n)]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    parsed: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])
    return parsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dir", default="target/bench-reopen")
    ap.add_argument("--json")
    ap.add_argument("--child")
    ap.add_argument("--path")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.path, args.n)
        return
    n = args.n
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    started = datetime.datetime.now(datetime.timezone.utc)
    path = os.path.join(args.dir, "store.blobcask")
    t = time.perf_counter()
    with blobcask.Store(path) as s:
        s.bulk_load((key(i), value(i)) for i in range(n))
    load = time.perf_counter() - t
    ours = run_child("blobcask", path, n)
    print(
        f"blobcask: {n} objects loaded in {load:.1f} s; reopened: open {ours['open_s'] * 1e3:.1f} ms, "
        f"warm-up done at {ours['warm_up_s'] * 1e3:.1f} ms, first gets p50 {ours['p50_us']:.2f} µs, "
        f"{ours['hit_share'] * 100:.1f} % from the cache"
    )
    theirs = None
    try:
        import lmdb
    except ImportError:
        print("py-lmdb not installed: no baseline")
    else:
        lpath = os.path.join(args.dir, "lmdb")
        env = lmdb.open(lpath, map_size=1 << 36, sync=False)
        for start in range(0, n, 100_000):
            with env.begin(write=True) as txn:
                for i in range(start, min(n, start + 100_000)):
                    txn.put(key(i), value(i))
        env.sync(True)
        env.close()
        theirs = run_child("lmdb", lpath, n)
        print(f"py-lmdb: open {theirs['open_s'] * 1e3:.1f} ms, first gets p50 {theirs['p50_us']:.2f} µs")
    shutil.rmtree(args.dir, ignore_errors=True)
    if args.json:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = None
        command = "python benches/python_reopen.py " + " ".join(
            a for a in sys.argv[1:] if a is not None
        )

        def record(fid: str, label: str, v: float, unit: str, base: float | None, base_of: str | None) -> dict:
            return {
                "figure": fid,
                "label": label,
                "value": round(v, 3),
                "unit": unit,
                "baseline": None if base is None else round(base, 3),
                "baseline_of": base_of,
                "ratio": None if base is None else round(v / base, 3),
                "phase": "python",
                "engine": None,
                "runtime": None,
                "date": started.date().isoformat(),
                "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "commit": commit,
                "command": command,
                "quick": False,
                "source": "bench",
            }

        with open(args.json, "a") as f:
            for r in (
                record(
                    "py.get.after_reopen",
                    f"Python get p50, each key's first read after a reopen, {n} objects of 100 B "
                    f"(cache_fraction 0.25, warmed; {ours['hit_share'] * 100:.1f} % cache hits)",
                    ours["p50_us"],
                    "µs",
                    theirs["p50_us"] if theirs else None,
                    "py-lmdb get of the same keys in a fresh process, page cache warm, same run" if theirs else None,
                ),
                record(
                    "py.warm_up.after_reopen",
                    f"open until the read cache's warm-up is done, {n} objects of 100 B",
                    ours["warm_up_s"] * 1e3,
                    "ms",
                    None,
                    None,
                ),
            ):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
