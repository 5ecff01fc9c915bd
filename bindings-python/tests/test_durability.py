"""``Store(path, durability=..., max_delay=...)``.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import timedelta

import pytest

import blobcask
from blobcask import errors


def test_sync_is_the_default_and_commits_every_put(path):
    with blobcask.Store(path, capacity=8 << 20) as s:
        for i in range(20):
            s[f"k{i}"] = b"v"
        assert s.stats().commit_groups >= 20
    with blobcask.Store(path, capacity=8 << 20, durability="sync") as s:
        assert len(s) == 20


@pytest.mark.parametrize("max_delay", [0.3, 1, timedelta(milliseconds=300)])
def test_buffered_acknowledges_at_once_and_writes_within_max_delay(path, max_delay):
    with blobcask.Store(path, capacity=8 << 20, durability="buffered", max_delay=max_delay) as s:
        for i in range(50):
            s[f"k{i}"] = b"v" * 100
        # Acknowledged and visible, not yet written as 50 groups.
        assert len(s) == 50 and s["k49"] == b"v" * 100
        assert s.stats().commit_groups <= 1
        deadline = time.monotonic() + 3
        while s.stats().commit_groups == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.stats().commit_groups >= 1, "nothing written after max_delay"
        s["last"] = b"x"
        s.sync()  # a barrier writes the open group at once
    with blobcask.Store(path) as s:
        assert len(s) == 51 and s["last"] == b"x"


def test_close_writes_what_buffered_mode_held(path):
    with blobcask.Store(path, capacity=8 << 20, durability="buffered", max_delay=3600) as s:
        s["k"] = b"v"
    with blobcask.Store(path) as s:
        assert s["k"] == b"v"


def test_async_store_takes_the_durability_options(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(
            path, capacity=8 << 20, durability="buffered", max_delay=0.5
        ) as s:
            await asyncio.gather(*(s.put(f"k{i}", b"v") for i in range(20)))
            assert s.stats().commit_groups <= 1

    asyncio.run(main())
    with blobcask.Store(path) as s:
        assert len(s) == 20


def test_bad_durability_options_are_refused(path, tmp_path):
    bad_values = [
        ({"durability": "fast"}, errors.InvalidArgumentError),
        ({"durability": "SYNC"}, errors.InvalidArgumentError),
        ({"durability": ""}, errors.InvalidArgumentError),
        ({"durability": "buffered"}, errors.InvalidArgumentError),  # no max_delay
        ({"durability": "sync", "max_delay": 1}, errors.InvalidArgumentError),
        ({"max_delay": 1}, errors.InvalidArgumentError),  # sync by default
        ({"durability": "buffered", "max_delay": -1}, errors.InvalidArgumentError),
        ({"durability": "buffered", "max_delay": -0.5}, errors.InvalidArgumentError),
        ({"durability": "buffered", "max_delay": math.nan}, errors.InvalidArgumentError),
        ({"durability": "buffered", "max_delay": math.inf}, errors.InvalidArgumentError),
        ({"durability": "buffered", "max_delay": timedelta(seconds=-1)}, errors.InvalidArgumentError),
        ({"durability": 1}, TypeError),
        ({"durability": None}, TypeError),
        ({"durability": b"sync"}, TypeError),
        ({"durability": "buffered", "max_delay": "1"}, TypeError),
        ({"durability": "buffered", "max_delay": True}, TypeError),
        ({"durability": "buffered", "max_delay": [1]}, TypeError),
    ]
    for kwargs, error in bad_values:
        target = tmp_path / "bad.blobcask"
        with pytest.raises(error):
            blobcask.Store(str(target), capacity=8 << 20, **kwargs)
        assert not target.exists(), f"{kwargs} created a store"
    with pytest.raises(ValueError, match="max_delay"):
        blobcask.Store(path, durability="buffered")
    with pytest.raises(TypeError, match="max_delay"):
        blobcask.Store(path, durability="buffered", max_delay="1")
