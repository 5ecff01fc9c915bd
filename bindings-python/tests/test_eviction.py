"""A cache store: ``eviction="s3fifo"`` (issue 43).

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import pytest

import blobcask
from blobcask import errors


def test_eviction_s3fifo_keeps_the_store_within_its_bound(path):
    bound = 4 << 20
    with blobcask.Store(path, capacity=2 << 20, max_capacity=bound, eviction="s3fifo") as s:
        for i in range(400):
            s.put(f"k{i}", bytes([i & 0xFF]) * 50_000)
            assert s.stats().capacity <= bound
        st = s.stats()
        assert st.evictions > 0 and st.evicted_bytes >= 50_000 * st.evictions
        assert st.objects + st.evictions == 400
        assert s.get("k399") == bytes([399 & 0xFF]) * 50_000


def test_stats_count_hits_misses_and_evictions(path):
    with blobcask.Store(path, capacity=2 << 20, eviction="s3fifo") as s:
        s.put("a", b"x" * 100)
        assert s.get("a") == b"x" * 100
        with pytest.raises(KeyError):
            s["missing"]
        st = s.stats()
        assert (st.hits, st.misses, st.evictions, st.evicted_bytes) == (1, 1, 0, 0)
        assert st["hits"] == 1 and st["evicted_bytes"] == 0


def test_a_store_that_does_not_evict_fills_up(path):
    with blobcask.Store(path, capacity=2 << 20, max_capacity=2 << 20) as s:
        with pytest.raises(errors.NoSpaceError):
            for i in range(100):
                s.put(f"k{i}", b"x" * 50_000)
        assert s.stats().evictions == 0


def test_eviction_must_be_a_known_name(path):
    with pytest.raises(TypeError):
        blobcask.Store(path, eviction=1)
    with pytest.raises(ValueError):
        blobcask.Store(path, eviction="lru")
    with pytest.raises(errors.InvalidArgumentError):
        blobcask.Store(path, eviction="S3FIFO")


async def _async_cache(path):
    s = await blobcask.AsyncStore.open(path, capacity=2 << 20, eviction="s3fifo")
    try:
        for i in range(100):
            await s.put(f"k{i}", b"y" * 40_000)
        return s.stats()
    finally:
        await s.close()


def test_async_store_takes_eviction_too(path):
    import asyncio

    assert asyncio.run(_async_cache(path)).evictions > 0


async def _async_large_puts(path):
    s = await blobcask.AsyncStore.open(path, max_capacity=16 << 20, eviction="s3fifo")
    try:
        for i in range(40):
            # 1 MiB and more: written off the loop, committed on it.
            await s.put(f"big{i}", bytes([i]) * (1 << 20))
        assert await s.get("big39") == bytes([39]) * (1 << 20)
        return s.stats()
    finally:
        await s.close()


def test_async_puts_of_a_mebibyte_evict_too(path):
    import asyncio

    st = asyncio.run(_async_large_puts(path))
    assert st.evictions > 0 and st.capacity <= 16 << 20
