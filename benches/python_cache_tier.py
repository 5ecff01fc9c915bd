"""pandas.read_parquet of one Parquet file on S3 (a moto server on
127.0.0.1, its own process), through the blobcask cache tier
(``blobcache::s3://``) and without it.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install ./bindings-python \\
        -r bindings-python/tests/requirements.txt
    /tmp/v/bin/python benches/python_cache_tier.py [--mb 30] [--rounds 5] [--dir DIR]

Each round runs every way of reading the file in turn, one read each:

* ``first (cold cache)``: a new, empty cache store, ``expiry=600``;
* ``second, expiry``: the same file system again (every piece cached and
  confirmed: S3 is not asked anything);
* ``second, check=always``: the same store, ``check="always"`` (one HEAD
  per open, then the cached pieces);
* ``second after restart``: the store closed and opened again, ``expiry``;
* ``second after restart, always``: closed and opened again, ``check="always"``;
* ``local blobcask``: the same file in a local store through ``blobcask://``;
* ``straight from moto``: s3fs, no cache.

Prints the median of the rounds for each (and every round's figure), the
file's size and the cache's counts. The frame is the same every run
(seeded), so its Parquet bytes are too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import fsspec
import numpy as np
import pandas as pd
import s3fs

from blobcask.fsspec import BlobcaskFileSystem
from blobcask.fsspec_cache import BlobcacheFileSystem

KEY = "bench/sales.parquet"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return server, endpoint
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("moto_server did not start")


def frame(mb: int) -> pd.DataFrame:
    """About ``mb`` MB of Parquet: random numbers compress little."""
    rng = np.random.default_rng(43)
    rows = mb * (1 << 20) // 24
    return pd.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "units": rng.integers(0, 1 << 40, rows),
            "price": rng.random(rows),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=30, help="size of the frame's data (MB)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=None, help="directory for the stores (ext4)")
    args = parser.parse_args()
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(name, None)
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
    )
    work = tempfile.mkdtemp(prefix="cache-tier-", dir=args.dir)
    server, endpoint = start_moto()
    try:
        run(args, work, endpoint)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: str, endpoint: str) -> None:
    s3opts = {"endpoint_url": endpoint}
    s3 = s3fs.S3FileSystem(**s3opts, skip_instance_cache=True)
    s3.mkdir("bench")
    expected = frame(args.mb)
    expected.to_parquet(f"s3://{KEY}", storage_options=s3opts)
    size = s3.size(KEY)
    local_store = os.path.join(work, "local.blobcask")
    local = BlobcaskFileSystem(path=local_store)
    local.pipe_file(KEY, s3.cat_file(KEY))
    cache_store = os.path.join(work, "cache.blobcask")
    url = f"blobcache::s3://{KEY}"

    def cache_options(**blobcache: Any) -> dict[str, Any]:
        return {"blobcache": {"store": cache_store, **blobcache}, "s3": s3opts}

    def read(url: str, options: dict[str, Any]) -> pd.DataFrame:
        return pd.read_parquet(url, storage_options=options)

    def close_cache() -> None:
        for fs in list(BlobcacheFileSystem._cache.values()):
            fs.close()

    stats: dict[str, dict[str, int]] = {}

    def through_cache(name: str, **blobcache: Any) -> Callable[[], pd.DataFrame]:
        def go() -> pd.DataFrame:
            # The instance pandas will use (fsspec caches it): its counts
            # before and after the read.
            fs, _ = fsspec.core.url_to_fs(url, **cache_options(**blobcache))
            before = fs.cache_stats()
            df = read(url, cache_options(**blobcache))
            stats[name] = {k: v - before[k] for k, v in fs.cache_stats().items()}
            return df

        return go

    def first() -> pd.DataFrame:
        close_cache()
        if os.path.exists(cache_store):
            os.remove(cache_store)
        return through_cache("first (cold cache)", expiry=600)()

    def restart(name: str, **blobcache: Any) -> Callable[[], pd.DataFrame]:
        inner = through_cache(name, **blobcache)

        def go() -> pd.DataFrame:
            close_cache()  # timed with the read: the store opens again
            return inner()

        return go

    ways: list[tuple[str, Callable[[], pd.DataFrame]]] = [
        ("first (cold cache)", first),
        ("second, expiry", through_cache("second, expiry", expiry=600)),
        ("second, check=always", through_cache("second, check=always", check="always")),
        ("second after restart", restart("second after restart", expiry=600)),
        ("second after restart, always", restart("second after restart, always", check="always")),
        ("local blobcask (blobcask://)", lambda: read(f"blobcask://{KEY}", {"path": local_store})),
        ("straight from moto (s3fs)", lambda: read(f"s3://{KEY}", s3opts)),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in ways}
    for _ in range(args.rounds):
        for name, go in ways:
            t0 = time.perf_counter()
            df = go()
            times[name].append(time.perf_counter() - t0)
            assert df.equals(expected), name
    close_cache()
    local.close()

    print(f"file: {size / 1e6:.1f} MB Parquet ({len(expected):,} rows), {args.rounds} rounds")
    base = statistics.median(times["straight from moto (s3fs)"])
    local_median = statistics.median(times["local blobcask (blobcask://)"])
    print()
    print("| read | median (ms) | × straight from moto | × local blobcask | rounds (ms) |")
    print("|---|---|---|---|---|")
    for name, _ in ways:
        m = statistics.median(times[name])
        rounds = ", ".join(f"{t * 1e3:.0f}" for t in times[name])
        print(f"| {name} | {m * 1e3:.0f} | {m / base:.3f} | {m / local_median:.2f} | {rounds} |")
    print()
    for name, counts in stats.items():
        print(f"cache_stats of the last round's '{name}': {counts}")


if __name__ == "__main__":
    main()
