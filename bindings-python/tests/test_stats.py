"""``Store.stats()``: a typed ``Stats``, still readable as ``stats()[name]``.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import asyncio
import time

import pytest

import blobcask
from blobcask import errors

# What the untyped stats() dict held: every key still answers.
DICT_KEYS = {
    "objects",
    "logical_bytes",
    "allocated_bytes",
    "metadata_bytes",
    "free_bytes",
    "capacity",
    "device_bytes_written",
    "user_bytes_written",
    "commit_groups",
    "space_amplification",
    "io_engine",
    "direct_io",
    "index",
    "cache",
    "recovery",
}


def test_stats_is_typed(store):
    st = store.stats()
    assert isinstance(st, blobcask.Stats)
    assert (st.objects, st.logical_bytes, st.allocated_bytes) == (0, 0, 0)
    assert st.space_amplification is None and st.write_amplification is None
    assert st.capacity == 64 << 20 and 0 < st.free_bytes <= st.capacity
    assert 0 < st.largest_free_piece <= st.free_bytes
    assert st.max_capacity is None
    assert st.index == "hash" and st.io_engine in ("io_uring", "portable")
    assert st.direct_io in (True, False) and st.metadata_bytes > 0
    assert isinstance(st.cache, blobcask.CacheStats)
    assert (st.cache.hits, st.cache.misses, st.cache.capacity) == (0, 0, 64 << 20)
    assert isinstance(st.recovery, blobcask.RecoveryReport)
    assert st.recovery.repaired == () and st.recovery.details == ()
    assert st.recovery.rolled_back_groups == st.recovery.rolled_back_objects == 0
    assert repr(st).startswith("Stats(objects=0") and "index='hash'" in repr(st)
    assert repr(st.cache).startswith("CacheStats(") and repr(st.recovery).startswith(
        "RecoveryReport("
    )


def test_stats_reflect_the_store(path):
    with blobcask.Store(path, capacity=16 << 20, max_capacity=32 << 20, index="btree") as s:
        s.put("a", b"x" * 16384)
        st = s.stats()
        assert (st.objects, st.logical_bytes) == (1, 16384)
        assert st.allocated_bytes >= 16384 and st.commit_groups >= 1
        assert st.space_amplification is not None and st.space_amplification > 1
        assert st.write_amplification is not None and st.write_amplification >= 1
        assert st.user_bytes_written == 16384 and st.device_bytes_written > 16384
        assert st.max_capacity == 32 << 20 and st.index == "btree"
    with blobcask.Store(path) as s:
        assert s.stats().recovery.clean is True


def test_stats_are_a_snapshot_and_read_only(store):
    st = store.stats()
    store.put("k", b"v")
    assert st.objects == 0 and store.stats().objects == 1
    with pytest.raises(AttributeError):
        st.objects = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        st.cache.hits = 5  # type: ignore[misc]


def test_indexing_by_name_still_works(store):
    store.put("a", b"x" * 16384)
    st = store.stats()
    for name in DICT_KEYS - {"cache", "recovery"}:
        assert st[name] == getattr(st, name), name
    assert st["cache"] == {
        "hits": 0,
        "misses": 0,
        "bytes": st.cache.bytes,
        "capacity": 64 << 20,
        "warmed_blocks": 0,
        "warming": False,
    }
    assert st["cache"]["capacity"] == st.cache.capacity
    assert st["recovery"]["clean"] == st.recovery.clean
    assert st["recovery"]["details"] == []
    assert st["largest_free_piece"] == st.largest_free_piece  # new figures too
    d = st.as_dict()
    assert set(d) >= DICT_KEYS and d["capacity"] == st.capacity
    assert d["cache"] == st.cache.as_dict() and d["recovery"] == st.recovery.as_dict()
    with pytest.raises(KeyError):
        st["no_such_figure"]
    with pytest.raises(TypeError):
        st[0]  # type: ignore[index]


def test_async_stats_and_a_closed_store(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=8 << 20) as s:
            await s.put("k", b"v")
            assert isinstance(s.stats(), blobcask.Stats) and s.stats().objects == 1

    asyncio.run(main())
    s = blobcask.Store(path)
    s.close()
    with pytest.raises(errors.ClosedError):
        s.stats()


def test_small_objects_are_cache_hits_after_a_reopen(path):
    values = {f"k/{i:05}": bytes([i % 251]) * 100 for i in range(2000)}
    with blobcask.Store(path, capacity=64 << 20) as s:
        s.bulk_load(values.items())
    with blobcask.Store(path) as s:
        deadline = time.monotonic() + 60
        while s.stats().cache.warming:
            assert time.monotonic() < deadline, s.stats().cache
            time.sleep(0.005)
        warm = s.stats().cache
        assert warm.warmed_blocks > 0
        for k, v in values.items():
            assert s[k] == v
        after = s.stats().cache
        assert (after.hits - warm.hits, after.misses - warm.misses) == (2000, 0)
    with blobcask.Store(path, warm_up=False) as s:
        assert (s.stats().cache.warmed_blocks, s.stats().cache.warming) == (0, False)


def test_cache_options_are_checked_never_coerced(path):
    with blobcask.Store(path, cache_fraction=0.01) as s:
        assert 0 < s.stats().cache.capacity
    for bad in ("0.5", True, None.__class__, [0.5]):
        with pytest.raises(TypeError, match="cache_fraction must be a float"):
            blobcask.Store(path, cache_fraction=bad)
    for bad in (0.0, -1, 1.5, float("nan"), float("inf")):
        with pytest.raises(errors.InvalidArgumentError, match="cache_fraction"):
            blobcask.Store(path, cache_fraction=bad)
    with pytest.raises(errors.InvalidArgumentError, match="not both"):
        blobcask.Store(path, cache_bytes=1 << 20, cache_fraction=0.5)
    with pytest.raises(TypeError):
        blobcask.Store(path, warm_up=1)
