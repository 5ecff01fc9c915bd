"""Compaction: ``Store.compact`` / ``AsyncStore.compact`` slide objects
down the store so that free space left in small holes joins up again."""

from __future__ import annotations

import asyncio
import threading

import pytest

import blobcask
from blobcask import errors

from conftest import pattern

MiB = 1 << 20
SIZE = 8 * MiB  # fixed: capacity == max_capacity, so the store cannot grow
VALUE = 4096


def fragment(s: blobcask.Store) -> dict[str, bytes]:
    """Fills `s` with 4 KiB values until it is full, then deletes every
    other one (some of those kept have a long ttl); returns what it holds."""
    kept = {}
    with pytest.raises(errors.NoSpaceError):
        for i in range(SIZE // VALUE):
            key, value = f"obj/{i:05}", pattern(i, VALUE)
            s.put(key, value, ttl=3600 if i % 4 == 1 else None)
            kept[key] = value
    for i, key in enumerate(list(kept)):
        if i % 2 == 0:
            s.delete(key)
            del kept[key]
    assert len(kept) > 500, len(kept)
    return kept


def test_compact_joins_free_space_and_keeps_every_object(path):
    with blobcask.Store(path, capacity=SIZE, max_capacity=SIZE) as s:
        kept = fragment(s)
        before = {k: s.stat(k) for k in kept}
        report = s.compact()
        assert isinstance(report, blobcask.CompactReport)
        assert report.moved > 0, report
        assert report.bytes_moved >= report.moved * VALUE, report
        assert report.largest_free_after > report.largest_free_before, report
        assert 0 <= report.elapsed < 600
        r = repr(report)
        assert r.startswith("CompactReport(") and f"moved={report.moved}," in r
        for k, v in kept.items():
            assert s.get(k) == v, k
            after = s.stat(k)
            # Moved objects keep their version, commit time and expiry.
            assert (after.version, after.created, after.expires) == (
                before[k].version,
                before[k].created,
                before[k].expires,
            ), k
        # The joined space takes an object larger than any hole was.
        big = pattern(99, report.largest_free_after // 2)
        s.put("big", big)
        assert s.get("big") == big
    with blobcask.Store(path) as s:
        assert len(s) == len(kept) + 1
        for k in list(kept)[::17]:
            assert s.get(k) == kept[k], k


def test_compact_releases_the_gil(path):
    with blobcask.Store(path, capacity=SIZE, max_capacity=SIZE) as s:
        fragment(s)
        done = threading.Event()
        ticks = 0

        def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1

        t = threading.Thread(target=ticker)
        t.start()
        try:
            while ticks == 0:
                pass  # the ticker is running
            start = ticks
            report = s.compact()
            during = ticks - start
        finally:
            done.set()
            t.join()
        assert report.moved > 0
        assert during > 100, f"other threads were blocked ({during} ticks)"


def test_compact_of_an_empty_store_and_its_errors(path, tmp_path):
    s = blobcask.Store(path, capacity=SIZE)
    report = s.compact()
    assert (report.moved, report.bytes_moved) == (0, 0)
    s.put("k", b"v")
    s.close()
    with pytest.raises(errors.ClosedError):
        s.compact()
    with blobcask.Store(path, read_only=True) as ro:
        with pytest.raises(errors.UnsupportedError):
            ro.compact()


def test_async_compact(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=SIZE, max_capacity=SIZE) as s:
            kept = fragment(s.sync_store)

            # The loop keeps running while compact does.
            ticks = 0
            done = False

            async def ticker() -> None:
                nonlocal ticks
                while not done:
                    ticks += 1
                    await asyncio.sleep(0)

            ticking = asyncio.ensure_future(ticker())
            report = await s.compact()
            done = True
            await ticking
            assert isinstance(report, blobcask.CompactReport)
            assert report.moved > 0, report
            assert ticks > 1, f"the event loop was blocked ({ticks} ticks)"
            got = await asyncio.gather(*(s.get(k) for k in kept))
            for (k, v), blob in zip(kept.items(), got):
                assert blob == v, k
        with pytest.raises(errors.ClosedError):
            await s.compact()

    asyncio.run(main())
