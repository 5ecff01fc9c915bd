"""Capacity and growth: a store starts small and grows as it fills, up to
``max_capacity``; ``grow()`` grows it at once; the index kind, inline
threshold and ``max_capacity`` are stored in the store and used at reopen."""

from __future__ import annotations

import asyncio
import os

import pytest

import blobcask
from blobcask import errors

from conftest import pattern

MiB = 1 << 20


def fill(s: blobcask.Store, prefix: str, count: int, size: int = MiB) -> list[str]:
    """Puts `count` values of `size` bytes; returns their keys."""
    keys = []
    for i in range(count):
        key = f"{prefix}/{i}"
        s.put(key, pattern(i, size))
        keys.append(key)
    return keys


def fill_until_no_space(s: blobcask.Store, prefix: str, limit: int = 200) -> list[str]:
    """Puts 1 MiB values until the store raises NoSpaceError (which it must
    within `limit` puts); returns the keys stored."""
    keys = []
    with pytest.raises(errors.NoSpaceError):
        for i in range(limit):
            s.put(f"{prefix}/{i}", pattern(i, MiB))
            keys.append(f"{prefix}/{i}")
    return keys


def test_a_new_store_starts_at_16_mib_and_grows_as_it_fills(path):
    with blobcask.Store(path) as s:
        assert s.stats()["capacity"] == 16 * MiB
        assert os.path.getsize(path) == 16 * MiB
        keys = fill(s, "big", 40)
        capacity = s.stats()["capacity"]
        assert capacity >= 40 * MiB, capacity
        assert os.path.getsize(path) >= capacity
        for i, k in enumerate(keys):
            assert s.get(k) == pattern(i, MiB), k
    # Reopened without options: the grown size and every object are there.
    with blobcask.Store(path) as s:
        assert s.stats()["capacity"] == capacity
        assert len(s) == 40
        assert s.get("big/39") == pattern(39, MiB)


def test_max_capacity_limits_growth_and_is_stored(path):
    with blobcask.Store(path, max_capacity=32 * MiB) as s:
        stored = fill_until_no_space(s, "a")
        assert 16 < len(stored) < 32
        assert s.stats()["capacity"] <= 32 * MiB
        # What was acknowledged before the refusal is all there.
        assert s.get(stored[-1]) == pattern(len(stored) - 1, MiB)
    assert os.path.getsize(path) <= 32 * MiB
    # Reopened with no options, the stored limit still holds.
    with blobcask.Store(path) as s:
        with pytest.raises(errors.NoSpaceError):
            s.put("one-more", pattern(0, 4 * MiB))
        with pytest.raises(errors.InvalidArgumentError, match="max_capacity"):
            s.grow(64 * MiB)
        assert s.stats()["capacity"] <= 32 * MiB
        assert len(s) == len(stored)
    # A new limit at a read-write open replaces the stored one...
    with blobcask.Store(path, max_capacity=64 * MiB) as s:
        s.put("one-more", pattern(0, 4 * MiB))
        more = fill_until_no_space(s, "b")
        assert more, "the raised limit let nothing more in"
        assert 32 * MiB < s.stats()["capacity"] <= 64 * MiB
    # ...and is the one stored.
    with blobcask.Store(path) as s:
        with pytest.raises(errors.InvalidArgumentError, match="max_capacity"):
            s.grow(128 * MiB)
    # 2**64 - 1 lifts the limit, for good.
    with blobcask.Store(path, max_capacity=2**64 - 1) as s:
        s.grow(96 * MiB)
    with blobcask.Store(path) as s:
        s.grow(100 * MiB)
        assert s.stats()["capacity"] == 100 * MiB


def test_max_capacity_of_the_wrong_type_is_refused_and_nothing_is_created(tmp_path):
    path = tmp_path / "typed.blobcask"
    for bad in ("32M", 1.5, True, b"1", [1]):
        with pytest.raises(TypeError, match="max_capacity must be an int"):
            blobcask.Store(path, max_capacity=bad)
    with pytest.raises(ValueError, match="max_capacity"):
        blobcask.Store(path, max_capacity=-1)
    with pytest.raises(ValueError, match="max_capacity"):
        blobcask.Store(path, max_capacity=2**64)
    # Below the smallest store, or below the capacity asked for.
    with pytest.raises(errors.InvalidArgumentError):
        blobcask.Store(path, max_capacity=4096)
    with pytest.raises(errors.InvalidArgumentError):
        blobcask.Store(path, capacity=64 * MiB, max_capacity=32 * MiB)
    assert not path.exists()


def test_grow_larger_works_and_smaller_raises(path):
    with blobcask.Store(path) as s:
        s.put("k", b"v" * 10_000)
        s.grow(64 * MiB)
        assert s.stats()["capacity"] == 64 * MiB
        assert os.path.getsize(path) == 64 * MiB
        s.grow(64 * MiB)  # its own size: nothing to do
        s.grow(64 * MiB + 4095)  # rounded down to 4 KiB: the same
        assert s.stats()["capacity"] == 64 * MiB
        with pytest.raises(errors.InvalidArgumentError, match="never shrinks"):
            s.grow(32 * MiB)
        assert s.stats()["capacity"] == 64 * MiB
        for bad in ("128M", 1e9, True, None):
            with pytest.raises(TypeError, match="capacity must be an int"):
                s.grow(bad)
        with pytest.raises(ValueError):
            s.grow(-1)
        # The grown space is usable at once, without further growth.
        fill(s, "x", 40)
        assert s.stats()["capacity"] == 64 * MiB
        assert s.get("k") == b"v" * 10_000
    with pytest.raises(errors.ClosedError):
        s.grow(128 * MiB)
    # A read-only store never grows.
    with blobcask.Store(path, read_only=True) as r:
        with pytest.raises(errors.UnsupportedError):
            r.grow(128 * MiB)
    assert os.path.getsize(path) == 64 * MiB


def test_capacity_at_reopen_grows_and_smaller_is_refused(path):
    with blobcask.Store(path) as s:
        s.put("k", b"v")
    with blobcask.Store(path, capacity=48 * MiB) as s:
        assert s.stats()["capacity"] == 48 * MiB
    with pytest.raises(errors.InvalidArgumentError, match="never shrinks"):
        blobcask.Store(path, capacity=32 * MiB)
    with blobcask.Store(path) as s:
        assert s.stats()["capacity"] == 48 * MiB and s.get("k") == b"v"


def test_index_kind_chosen_at_creation_is_used_at_reopen(tmp_path):
    path = tmp_path / "ordered.blobcask"
    with blobcask.Store(path, index="btree") as s:
        for i in range(20):
            s.put(f"k/{i:02}", b"x")
    # No index given: the stored kind, so listing works.
    with blobcask.Store(path) as s:
        assert s.stats()["index"] == "btree"
        assert list(s.list("k/1")) == [f"k/{i}".encode() for i in range(10, 20)]
    # A read-only open's explicit kind is for itself only...
    with blobcask.Store(path, index="hash", read_only=True) as s:
        assert s.stats()["index"] == "hash"
        assert list(s.list("k/1")) == [f"k/{i}".encode() for i in range(10, 20)]
    with blobcask.Store(path) as s:
        assert s.stats()["index"] == "btree"
    # ...a read-write open's replaces the stored one.
    with blobcask.Store(path, index="fst") as s:
        assert s.stats()["index"] == "fst"
    with blobcask.Store(path) as s:
        assert s.stats()["index"] == "fst"
        assert len(list(s.list("k/"))) == 20
    # A store created without one is on the hash index, and stays there.
    plain = tmp_path / "plain.blobcask"
    blobcask.Store(plain).close()
    with blobcask.Store(plain) as s:
        assert s.stats()["index"] == "hash"
        assert list(s.list("")) == []


def test_inline_threshold_is_stored(path):
    with blobcask.Store(path, inline_threshold=0) as s:
        assert not s.put("a", b"small").inline
    with blobcask.Store(path) as s:
        assert not s.put("b", b"small").inline
    with blobcask.Store(path, inline_threshold=100) as s:
        assert s.put("c", b"small").inline
    with blobcask.Store(path) as s:
        assert s.put("d", b"small").inline
        assert not s.stat("a").inline  # objects keep where they are


def test_async_store_max_capacity_and_grow(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, max_capacity=64 * MiB) as s:
            assert s.stats()["capacity"] == 16 * MiB
            await s.grow(48 * MiB)
            assert s.stats()["capacity"] == 48 * MiB
            with pytest.raises(errors.InvalidArgumentError):
                await s.grow(32 * MiB)
            with pytest.raises(errors.InvalidArgumentError, match="max_capacity"):
                await s.grow(128 * MiB)
            with pytest.raises(TypeError):
                await s.grow("64M")
            await asyncio.gather(*(s.put(f"p/{i}", pattern(i, MiB)) for i in range(40)))
            assert s.stats()["capacity"] == 48 * MiB
            with pytest.raises(errors.NoSpaceError):
                for i in range(40):
                    await s.put(f"q/{i}", pattern(i, MiB))
            assert s.stats()["capacity"] == 64 * MiB
        with pytest.raises(TypeError):
            await blobcask.AsyncStore.open(path + ".x", max_capacity="64M")

    asyncio.run(main())
