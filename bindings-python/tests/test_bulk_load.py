"""``Store.bulk_load`` and ``AsyncStore.bulk_load``.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Iterator

import pytest

import blobcask
from blobcask import errors
from conftest import pattern


def items(n: int, size: int = 100) -> Iterator[tuple[str, bytes]]:
    for i in range(n):
        yield f"k/{i:06}", pattern(i, size)


def test_loads_a_generator_and_reports(store):
    report = store.bulk_load(items(3000, 700))
    assert isinstance(report, blobcask.LoadReport)
    assert (report.objects, report.bytes) == (3000, 3000 * 700)
    assert report.groups >= 1 and report.elapsed > 0
    assert report.objects_per_sec > 0 and report.bytes_per_sec > 0
    assert "LoadReport(objects=3000" in repr(report)
    assert len(store) == 3000
    for i in (0, 1234, 2999):
        assert store[f"k/{i:06}"] == pattern(i, 700)


def test_loads_lists_dict_items_and_any_bytes_like(store):
    values = {"a": b"1", b"b": bytearray(b"22"), "c": memoryview(b"xx333")[2:], "big": pattern(9, 200_000)}
    store.bulk_load(list(values.items()))
    store.bulk_load({"d": b"4"}.items())
    store.bulk_load([["e", b"5"]])  # a list of two is a pair too
    assert dict(store) == {
        b"a": b"1",
        b"b": b"22",
        b"c": b"333",
        b"big": pattern(9, 200_000),
        b"d": b"4",
        b"e": b"5",
    }


def test_replaces_existing_keys(store):
    store["k"] = b"old"
    store.bulk_load([("k", b"new")])
    assert store["k"] == b"new" and len(store) == 1


def test_an_empty_load(store):
    report = store.bulk_load([])
    assert (report.objects, report.bytes) == (0, 0)


def test_progress_is_called_with_counts_at_most_four_times_a_second(store):
    calls: list[tuple[int, int]] = []

    def slow() -> Iterator[tuple[str, bytes]]:
        for i in range(2000):
            if i % 256 == 0:
                time.sleep(0.06)
            yield f"k{i}", b"v" * 10

    start = time.monotonic()
    report = store.bulk_load(slow(), progress=lambda o, b: calls.append((o, b)))
    elapsed = time.monotonic() - start
    assert calls[-1] == (report.objects, report.bytes) == (2000, 20_000)
    assert len(calls) >= 2, "no progress before the end"
    assert len(calls) <= elapsed / 0.25 + 2, calls
    assert calls == sorted(calls), "progress went backwards"
    assert all(b == 10 * o for o, b in calls)


def test_values_that_are_not_bytes_like_are_refused_never_coerced(store):
    for value in ("text", 7, None, [1, 2], 1.5, {"a": 1}):
        with pytest.raises(TypeError):
            store.bulk_load([("bad", value)])
        assert "bad" not in store
    with pytest.raises(TypeError, match="not str"):
        store.bulk_load([("bad", "text")])


def test_keys_and_items_of_the_wrong_shape_are_refused(store):
    for bad in (
        [(3, b"v")],
        [(None, b"v")],
        [("a", b"v", b"extra")],
        [("a",)],
        [b"ab"],  # two bytes, not a pair
        ["ab"],
        [{"a": b"v"}],
        [None],
    ):
        with pytest.raises(TypeError):
            store.bulk_load(bad)  # type: ignore[arg-type]
    for not_iterable in (5, None, object()):
        with pytest.raises(TypeError):
            store.bulk_load(not_iterable)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress must be callable"):
        store.bulk_load([("a", b"v")], progress=5)  # type: ignore[arg-type]
    assert len(store) == 0


def test_a_refused_item_stops_the_load_after_a_prefix(store):
    def source() -> Iterator[Any]:
        yield from items(10)
        yield ("bad", "not bytes")
        yield from (("after", b"x"),)

    with pytest.raises(TypeError) as e:
        store.bulk_load(source())
    assert "10 objects before it were loaded" in " ".join(getattr(e.value, "__notes__", []))
    assert sorted(store) == sorted(f"k/{i:06}".encode() for i in range(10))
    assert "bad" not in store and "after" not in store


def test_an_error_from_the_iterable_or_progress_propagates(store):
    def failing() -> Iterator[tuple[str, bytes]]:
        yield "a", b"1"
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        store.bulk_load(failing())
    assert store["a"] == b"1"

    def angry(objects: int, nbytes: int) -> None:
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        store.bulk_load([("b", b"2")], progress=angry)  # raised by the final call


def test_store_errors_are_raised_with_their_class(store, path):
    with pytest.raises(errors.InvalidArgumentError):
        store.bulk_load([("", b"empty key")])
    with pytest.raises(errors.TooLargeError):
        store.bulk_load([("k" * (blobcask.MAX_KEY_LEN + 1), b"v")])
    store.close()
    with pytest.raises(errors.ClosedError):
        store.bulk_load([("a", b"1")])


def test_a_read_only_store_refuses_a_load(path):
    with blobcask.Store(path, capacity=8 << 20) as s:
        s["k"] = b"v"
    with blobcask.Store(path, read_only=True) as r:
        with pytest.raises(errors.UnsupportedError):
            r.bulk_load([("a", b"1")])


def test_a_load_survives_reopen(path):
    with blobcask.Store(path, capacity=32 << 20) as s:
        s.bulk_load(items(500, 5000))
    with blobcask.Store(path) as s:
        assert len(s) == 500 and s["k/000499"] == pattern(499, 5000)


def test_other_threads_run_during_a_load(store):
    """The load runs without the GIL (it takes it back only to pull items)."""
    ticks = 0
    stop = threading.Event()

    def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.0005)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        store.bulk_load([(f"k{i}", b"v" * 100_000) for i in range(300)])
    finally:
        stop.set()
        t.join()
    assert ticks > 0


def test_async_bulk_load_reports_progress_on_the_loop_thread(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
            loop_thread = threading.get_ident()
            calls: list[tuple[int, int, int]] = []

            def progress(objects: int, nbytes: int) -> None:
                calls.append((objects, nbytes, threading.get_ident()))

            report = await s.bulk_load(items(1000, 50), progress=progress)
            assert report.objects == 1000 and len(s) == 1000
            assert calls and calls[-1][:2] == (1000, 50_000)
            assert {c[2] for c in calls} == {loop_thread}
            assert await s.get("k/000007") == pattern(7, 50)
            with pytest.raises(TypeError):
                await s.bulk_load([("bad", "text")])
            with pytest.raises(TypeError):
                await s.bulk_load([("a", b"1")], progress="no")  # type: ignore[arg-type]

    asyncio.run(main())


def test_the_items_and_progress_may_use_stores_this_one_included(store, tmp_path):
    """The iterable and `progress` run on the caller's thread outside the
    load (which runs on a thread of its own): they may read another store,
    as when copying one store into another, and write this one."""
    with blobcask.Store(str(tmp_path / "source"), capacity=32 << 20) as source:
        source.bulk_load(items(3000, 300))
        calls = 0

        def progress(objects: int, nbytes: int) -> None:
            nonlocal calls
            calls += 1
            store.put(f"progress/{calls}", str(objects).encode())
            store.stat(f"progress/{calls}")

        def slowly() -> Iterator[tuple[bytes, bytes]]:
            for i, (key, value) in enumerate(source.items()):
                if i % 1000 == 0:
                    time.sleep(0.3)  # progress gets called meanwhile
                    store[f"from-items/{i}"] = b"x"
                yield key, value

        report = store.bulk_load(slowly(), progress=progress)
        assert report.objects == 3000 and calls >= 2
        assert all(store[k] == v for k, v in source.items())
        assert store[f"progress/{calls}"] == b"3000"
        assert store["from-items/2000"] == b"x"
