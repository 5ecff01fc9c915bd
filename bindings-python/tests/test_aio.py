"""blobcask.aio: calls complete on the event loop's own thread."""

import asyncio
import os

import pytest

import blobcask
from blobcask.errors import ClosedError, NotFoundError
from conftest import pattern


def thread_names() -> list[str]:
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # the thread exited meanwhile
    return names


@pytest.mark.parametrize("io_engine", ["io_uring", "portable"])
def test_concurrent_calls_resolve_with_the_right_results(path, io_engine):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(
            path, capacity=64 << 20, io_engine=io_engine
        ) as s:
            sizes = [10, 3000, 16 << 10, 200 << 10]
            infos = await asyncio.gather(
                *(s.put(f"k{i}", pattern(i, sizes[i % 4])) for i in range(32))
            )
            assert [i.size for i in infos] == [sizes[i % 4] for i in range(32)]
            got = await asyncio.gather(*(s.get(f"k{i % 32}") for i in range(64)))
            for i, blob in enumerate(got):
                assert blob == pattern(i % 32, sizes[i % 4])
            part = await s.read("k2", 5, 4099)
            assert part == pattern(2, 16 << 10)[5 : 5 + 4099]
            assert (await s.stat("k3")).size == 200 << 10
            await s.delete("k3")
            assert await s.get("k3") is None  # get: a miss is None
            with pytest.raises(NotFoundError):
                await s.read("k3")
            with pytest.raises(NotFoundError):
                await s.delete("k3")

    asyncio.run(main())
    with blobcask.Store(path) as s:
        assert s.get("k1") == pattern(1, 3000)
        assert "k3" not in s


def test_no_thread_serves_reads_and_puts(path):
    """Reads, puts, stats and deletes start no thread of their own: the
    kernel's completion reaches the loop's thread directly."""

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=64 << 20) as s:
            await s.put("warm", b"x" * 20_000)
            before = thread_names()
            for i in range(200):
                await s.put(f"p{i}", pattern(i, 16 << 10))
                assert await s.get(f"p{i}") == pattern(i, 16 << 10)
                await s.stat(f"p{i}")
            await asyncio.gather(*(s.get(f"p{i}") for i in range(200)))
            after = thread_names()
            assert len(after) <= len(before), (before, after)
            assert not [n for n in after if n.startswith("blobcask-uring")], after

    asyncio.run(main())


def test_cancelled_calls_leave_the_store_consistent(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=64 << 20) as s:
            await s.put("base", pattern(0, 50_000))
            tasks = [asyncio.ensure_future(s.put(f"c{i}", pattern(i, 30_000))) for i in range(40)]
            tasks += [asyncio.ensure_future(s.get("base")) for _ in range(40)]
            await asyncio.sleep(0)
            for t in tasks[::2]:
                t.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            assert sum(isinstance(d, asyncio.CancelledError) for d in done) >= 1
            assert await s.get("base") == pattern(0, 50_000)
            await s.put("after", b"ok")

    asyncio.run(main())
    with blobcask.Store(path) as s:
        assert s.get("after") == b"ok"
        for i in range(40):
            if f"c{i}" in s:
                assert s.get(f"c{i}") == pattern(i, 30_000)


def test_one_store_across_successive_loops_and_after_close(path):
    s = asyncio.run(blobcask.AsyncStore.open(path, capacity=32 << 20))

    async def put() -> None:
        await s.put("a", b"1")

    async def get() -> bytes:
        return bytes(await s.get("a"))

    asyncio.run(put())
    assert asyncio.run(get()) == b"1"

    async def close_then_use() -> None:
        await s.close()
        with pytest.raises(ClosedError):
            await s.get("a")

    asyncio.run(close_then_use())


def test_a_second_running_loop_is_refused(path):
    s = asyncio.run(blobcask.AsyncStore.open(path, capacity=32 << 20))
    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(s.put("a", b"1"))

        async def other() -> None:
            with pytest.raises(RuntimeError, match="another event loop"):
                await s.get("a")

        asyncio.run(other())
        assert bytes(first.run_until_complete(s.get("a"))) == b"1"
        first.run_until_complete(s.close())
    finally:
        first.close()


def test_blocking_calls_inside_a_coroutine_do_not_wait_forever(path):
    """A blocking ``Store`` call made on the loop's thread while AsyncStore
    puts are pending may join a commit group one of them leads; the engine
    keeps the loop's calls running while it waits (a hang otherwise)."""
    import threading

    outcome: list = []

    def scenario() -> None:
        async def main() -> None:
            async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
                for r in range(20):
                    # Small values go straight to the commit path.
                    pending = [asyncio.ensure_future(s.put(f"a{r}/{i}", b"v" * 50)) for i in range(8)]
                    await asyncio.sleep(0)
                    s.sync_store.put(f"b{r}", b"w" * 60)
                    s.sync_store.delete(f"b{r}")
                    s.sync_store.sync()
                    await asyncio.gather(*pending)
                assert await s.get("a19/7") == b"v" * 50

        asyncio.run(main())
        outcome.append("done")

    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(60)
    assert outcome == ["done"], "a blocking call on the loop's thread hung"


def test_close_with_reads_in_flight_settles_them(path):
    async def main() -> None:
        s = await blobcask.AsyncStore.open(path, capacity=64 << 20)
        for i in range(16):
            await s.put(f"r{i}", pattern(i, 300 << 10))
        reads = [asyncio.ensure_future(s.get(f"r{i % 16}")) for i in range(64)]
        await asyncio.sleep(0)  # every read submitted
        await s.close()
        done = await asyncio.wait_for(asyncio.gather(*reads, return_exceptions=True), 30)
        for i, r in enumerate(done):
            assert isinstance(r, ClosedError) or r == pattern(i % 16, 300 << 10), r

    asyncio.run(main())


def test_a_loop_closed_with_calls_pending_does_not_wedge_the_store(path):
    """Ctrl-C under run_until_complete, then loop.close(): the calls left
    pending (one may lead a commit group) are dropped when the store is next
    used, so later calls and close() on a new loop finish."""
    s = asyncio.run(blobcask.AsyncStore.open(path, capacity=32 << 20))
    old = asyncio.new_event_loop()

    async def start() -> None:
        for i in range(20):
            asyncio.ensure_future(s.put(f"x{i}", b"v" * 50))
        await asyncio.sleep(0)

    old.run_until_complete(start())
    old.close()  # the puts' tasks are never finished

    async def later() -> None:
        await asyncio.wait_for(s.put("after", b"ok"), 10)
        assert await asyncio.wait_for(s.get("after"), 10) == b"ok"
        await asyncio.wait_for(s.close(), 10)
        await s.close()  # twice: a no-op
        with pytest.raises(ClosedError):
            await s.sync()

    asyncio.run(later())
    with blobcask.Store(path) as st:
        assert st.get("after") == b"ok"
        for i in range(20):
            if f"x{i}" in st:
                assert st.get(f"x{i}") == b"v" * 50


def test_a_cancelled_large_put_never_lands_after_a_later_put(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=64 << 20) as s:
            for round in range(10):
                big = asyncio.ensure_future(s.put("k", b"B" * (2 << 20)))
                await asyncio.sleep(0)
                big.cancel()
                await s.put("k", b"small")
                await asyncio.sleep(0.05)  # the big write finishes meanwhile
                assert await s.get("k") == b"small", round

    asyncio.run(main())


def test_async_upload_commits_under_a_condition(path):
    async def main():
        s = await blobcask.AsyncStore.open(path, capacity=32 << 20)
        up = await s.begin_upload("k", 5000)
        await up.write_part(0, b"x" * 5000)
        first = await up.commit(if_absent=True)
        up = await s.begin_upload("k", 5000)
        await up.write_part(0, b"y" * 5000)
        with pytest.raises(blobcask.errors.AlreadyExistsError):
            await up.commit(if_absent=True)
        up = await s.begin_upload("k", 5000)
        await up.write_part(0, b"z" * 5000)
        second = await up.commit(if_version=first.version)
        assert second.version > first.version and await s.get("k") == b"z" * 5000
        await s.close()

    asyncio.run(main())


@pytest.mark.parametrize("count", [0, 5, blobcask.aio.LIST_PAGE, 2 * blobcask.aio.LIST_PAGE + 7])
def test_async_for_over_a_listing(path, count):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20, index="btree") as s:
            s.sync_store.bulk_load((f"in/{i:05}", b"v") for i in range(count))
            await s.put("out/1", b"v")
            got = [key async for key in s.list("in/")]
            assert got == [f"in/{i:05}".encode() for i in range(count)]
            assert all(type(k) is bytes for k in got)
            assert [k async for k in s.list()] == got + [b"out/1"]
            assert [k async for k in s.list(b"out/")] == [b"out/1"]
            assert [k async for k in s.list("none/")] == []
            # Every key, as `iter(store)`.
            assert [k async for k in s] == got + [b"out/1"]
            # Plain iteration still works (on the calling thread).
            assert list(s.list("in/")) == got

    asyncio.run(main())


def test_async_listing_pages_are_fetched_off_the_event_loop(path, monkeypatch):
    import threading

    fetched_on: list[int] = []
    original = blobcask.aio.AsyncKeyIterator._fetch

    def spy(self: blobcask.aio.AsyncKeyIterator) -> list[bytes]:
        fetched_on.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(blobcask.aio.AsyncKeyIterator, "_fetch", spy)

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20, index="fst") as s:
            s.sync_store.bulk_load((f"k{i:05}", b"v") for i in range(3000))
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            t = asyncio.create_task(ticker())
            n = 0
            async for _ in s.list("k"):
                n += 1
            t.cancel()
            assert n == 3000 and ticks > 0
            assert fetched_on and threading.get_ident() not in fetched_on

    asyncio.run(main())


def test_async_listing_on_the_hash_index(path, monkeypatch):
    import threading

    # The listing starts (on "hash": the pass over the tuple blocks) where
    # its pages are fetched: on the thread pool, not the event loop.
    started_on: list[int] = []
    original = blobcask.aio.AsyncKeyIterator._opened

    def spy(self: blobcask.aio.AsyncKeyIterator) -> blobcask.KeyIterator:
        started_on.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(blobcask.aio.AsyncKeyIterator, "_opened", spy)

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
            assert s.sync_store.stats()["index"] == "hash"
            for i in reversed(range(12)):
                await s.put(f"k{i:02}", b"v")
            await s.put("other", b"v")
            # By prefix, in byte order.
            assert [k async for k in s.list("k")] == [f"k{i:02}".encode() for i in range(12)]
            assert started_on and threading.get_ident() not in started_on
            # Every key works with any index.
            assert sorted([k async for k in s]) == sorted([f"k{i:02}".encode() for i in range(12)] + [b"other"])

    asyncio.run(main())


def test_async_listing_of_a_closed_store_raises_closed(path):
    async def main() -> None:
        s = await blobcask.AsyncStore.open(path, capacity=32 << 20, index="btree")
        await s.put("a", b"1")
        keys = s.list()
        await s.close()
        with pytest.raises(ClosedError):
            async for _ in keys:
                pass
        with pytest.raises(ClosedError):
            s.list()

    asyncio.run(main())


def test_async_get_returns_the_default_on_a_miss(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
            assert await s.get("missing") is None
            assert await s.get("missing", b"d") == b"d"
            with pytest.raises(NotFoundError):
                await s.read("missing")
            with pytest.raises(TypeError):
                await s.get(3)  # type: ignore[arg-type]

    asyncio.run(main())


def test_key_iterator_pages_refuse_bad_sizes(store):
    store.put("a", b"1")
    keys = iter(store)
    for n in (0, -1, 1 << 17):
        with pytest.raises((ValueError, OverflowError)):
            keys.next_page(n)
    assert keys.next_page(10) == [b"a"] and keys.next_page(10) == []
