"""Tests for the blobcask Python package: every call, errors, threads,
asyncio, reopen. Run after `pip install ./bindings-python`."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import blobcask
from blobcask import errors


from conftest import pattern


def test_put_get_read_stat_delete(store):
    value = pattern(1, 100_000)
    info = store.put("photos/cat.jpg", value)
    assert info.size == 100_000 and info.version > 0 and not info.inline
    assert store.get("photos/cat.jpg") == value
    assert store.get(b"photos/cat.jpg") == value  # str and bytes keys are the same key
    assert store.read("photos/cat.jpg", 5000, 10) == value[5000:5010]
    assert store.read("photos/cat.jpg", 99_990, 100) == value[99_990:]  # clipped
    assert store.read("photos/cat.jpg", 100) == value[100:]  # to the end
    st = store.stat("photos/cat.jpg")
    assert (st.size, st.version) == (100_000, info.version)
    assert abs(st.created - time.time()) < 60
    assert "ObjectInfo(size=100000" in repr(st)
    assert store.contains("photos/cat.jpg") and "photos/cat.jpg" in store
    store.delete("photos/cat.jpg")
    assert "photos/cat.jpg" not in store


def test_mapping_protocol(store):
    store["a"] = b"1"
    store[b"b"] = bytearray(b"22")
    assert len(store) == 2
    assert store["a"] == b"1" and store["b"] == b"22"
    del store["a"]
    assert len(store) == 1
    with pytest.raises(KeyError):
        store["a"]
    with pytest.raises(KeyError):
        del store["a"]


def test_values_accept_any_bytes_like(store):
    store.put("bytes", b"abc")
    store.put("bytearray", bytearray(b"abc"))
    store.put("memoryview", memoryview(b"xxabcxx")[2:5])
    array = __import__("array").array("B", b"abc")
    store.put("array", array)
    for k in ("bytes", "bytearray", "memoryview", "array"):
        assert store.get(k) == b"abc", k
    with pytest.raises(TypeError):
        store.put("text", "not bytes")
    assert store.stat("bytes").inline


def test_errors_map_to_classes(store, path):
    with pytest.raises(errors.NotFoundError) as e:
        store["missing"]
    assert isinstance(e.value, KeyError) and isinstance(e.value, blobcask.Error)
    assert "NOT_FOUND" in str(e.value)
    store.put("k", b"x" * 10)
    with pytest.raises(errors.InvalidArgumentError) as e:
        store.read("k", 11, 1)
    assert isinstance(e.value, ValueError)
    with pytest.raises(errors.InvalidArgumentError):
        store.put("", b"x")
    with pytest.raises(errors.TooLargeError):
        store.put("k" * (blobcask.MAX_KEY_LEN + 1), b"x")
    with pytest.raises(errors.TooLargeError):
        store.begin_upload("huge", 1 << 40)
    with pytest.raises(errors.LockedError):
        blobcask.Store(path)
    with pytest.raises(ValueError):
        blobcask.Store(path + ".x", index="nope")


def test_values_and_keys_of_the_wrong_type_are_refused_never_coerced(store):
    import array

    for value in (7, 2**40, [1, 2, 3], None, 1.5, {"a": 1}):
        with pytest.raises(TypeError, match="bytes-like"):
            store.put("k", value)
    with pytest.raises(TypeError, match="not str"):
        store.put("k", "text")
    with pytest.raises(TypeError, match="not str"):
        store["k"] = "text"  # type: ignore[assignment]
    for key in (3, None, [b"k"]):
        with pytest.raises(TypeError, match="bytes-like"):
            store.put(key, b"x")
        with pytest.raises(TypeError):
            store[key] = b"x"
    assert len(store) == 0, "a refused put stored something"
    # Every buffer-protocol object is taken byte for byte.
    store.put("ba", bytearray(b"abc"))
    store.put("mv", memoryview(b"xabcx")[1:4])
    store.put("arr", array.array("H", [1, 2]))
    assert store.get("ba") == b"abc" and store.get("mv") == b"abc"
    assert store.get("arr") == array.array("H", [1, 2]).tobytes()
    store.put(bytearray(b"bk"), b"v")
    assert store.get(b"bk") == b"v"


def test_conditional_puts(store):
    first = store.put("k", b"one", if_absent=True)
    with pytest.raises(errors.AlreadyExistsError) as e:
        store.put("k", b"two", if_absent=True)
    assert isinstance(e.value, FileExistsError) and e.value.code == "ALREADY_EXISTS"
    with pytest.raises(errors.VersionMismatchError):
        store.put("k", b"two", if_version=first.version + 1)
    assert store.get("k") == b"one"
    second = store.put("k", b"two", if_version=first.version)
    assert second.version > first.version and store.get("k") == b"two"
    with pytest.raises(ValueError):
        store.put("k", b"x", if_absent=True, if_version=second.version)
    with pytest.raises(TypeError):
        store.put("k", b"x", if_absent=1)
    with pytest.raises(errors.VersionMismatchError):
        store.put("missing", b"x", if_version=1)
    assert "missing" not in store

    async def racing():
        a = blobcask.AsyncStore(store)
        results = await asyncio.gather(
            *(a.put("race", bytes([i]) * 5000, if_absent=True) for i in range(8)),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        assert len(won) == 1, results
        assert all(isinstance(r, errors.AlreadyExistsError) for r in results if r not in won)

    asyncio.run(racing())


def test_foreign_file_is_corrupt(tmp_path):
    p = tmp_path / "foreign"
    p.write_bytes(b"not a store" * 200_000)
    with pytest.raises(errors.CorruptError):
        blobcask.Store(str(p))
    with pytest.raises(errors.NotFoundError):
        blobcask.Store(str(tmp_path / "missing"), create=False)


def test_create_safety_read_only_and_create_new(tmp_path, path):
    # Guards invariant 7 (core/INVARIANTS.md): a user's file is never
    # formatted, create_new never overwrites, read-only never writes.
    user = tmp_path / "user.bin"
    data = bytes(8192) + os.urandom(100_000)
    user.write_bytes(data)
    with pytest.raises(errors.CorruptError):
        blobcask.Store(str(user))
    with pytest.raises(errors.InvalidArgumentError):
        blobcask.Store(str(user), create_new=True)
    assert user.read_bytes() == data
    with blobcask.Store(path, capacity=8 << 20, create_new=True) as s:
        s.put("k", b"v" * 5000)
    before = open(path, "rb").read()
    with pytest.raises(errors.InvalidArgumentError):
        blobcask.Store(path, create_new=True)
    r1 = blobcask.Store(path, read_only=True)
    r2 = blobcask.Store(path, read_only=True)
    assert r1.get("k") == r2.get("k") == b"v" * 5000
    with pytest.raises(errors.UnsupportedError):
        r1.put("x", b"y")
    with pytest.raises(errors.LockedError):
        blobcask.Store(path)
    r1.close()
    r2.close()
    assert open(path, "rb").read() == before
    with pytest.raises(errors.NotFoundError):
        blobcask.Store(str(tmp_path / "missing"), read_only=True)
    assert not (tmp_path / "missing").exists()


def test_full_store_raises_no_space_and_recovers(path):
    # A store grows as it fills; max_capacity is what makes it full.
    with blobcask.Store(path, capacity=16 << 20, max_capacity=16 << 20) as s:
        chunk = os.urandom(1 << 20)
        stored = []
        with pytest.raises(errors.NoSpaceError):
            for i in range(100):
                s.put(f"fill/{i}", chunk)
                stored.append(f"fill/{i}")
        for k in stored[:3]:
            s.delete(k)
        s.put("after", chunk)
        assert s.get("after") == chunk


def test_closed_store_raises_closed(path):
    s = blobcask.Store(path, capacity=8 << 20)
    s.put("k", b"v")
    s.close()
    with pytest.raises(errors.ClosedError):
        s.get("k")
    with pytest.raises(errors.ClosedError):
        s.put("k", b"v")
    # Calls that answer from memory refuse a closed store too.
    with pytest.raises(errors.ClosedError):
        "k" in s
    with pytest.raises(errors.ClosedError):
        len(s)
    with pytest.raises(errors.ClosedError):
        s.stats()
    # A `with` block over a closed store does not start quietly either.
    with pytest.raises(errors.ClosedError):
        with s:
            pass


def test_paths_as_open_takes_them(path):
    # str, bytes and os.PathLike (of str or bytes) name the same store.
    import pathlib

    class BytesPath:
        def __fspath__(self) -> bytes:
            return os.fsencode(path)

    with blobcask.Store(path, capacity=8 << 20) as s:
        s.put("k", b"v")
    for p in [os.fsencode(path), pathlib.Path(path), BytesPath()]:
        with blobcask.Store(p) as s:
            assert s.get("k") == b"v"
            dest = os.fsencode(str(path) + f".copy{type(p).__name__}")
            assert s.backup(dest).objects == 1
    for bad in [3, None, ["a"], 2.5]:
        with pytest.raises(TypeError):
            blobcask.Store(bad)


def test_multipart_upload(store):
    size = 3 * blobcask.PART_ALIGN + 123
    value = pattern(7, size)
    up = store.begin_upload("up", size)
    for off in reversed(range(0, size, blobcask.PART_ALIGN)):
        up.write_part(off, value[off : off + blobcask.PART_ALIGN])
    assert "up" not in store
    info = up.commit()
    assert info.size == size and store.get("up") == value
    with pytest.raises(blobcask.ClosedError, match="already committed"):
        up.commit()
    with pytest.raises(blobcask.ClosedError, match="already committed"):
        up.write_part(0, value[:4096])

    free = store.stats()["free_bytes"]
    with store.begin_upload("aborted", 8 << 20) as up2:
        up2.write_part(0, b"\0" * 4096)
    assert store.stats()["free_bytes"] == free and "aborted" not in store

    up3 = store.begin_upload("bad", 10_000)
    with pytest.raises(errors.InvalidArgumentError):
        up3.write_part(1, b"x")
    with pytest.raises(errors.InvalidArgumentError):
        up3.commit()  # nothing written


def test_conditional_upload_commit(store):
    def upload(value):
        up = store.begin_upload("cu", len(value))
        up.write_part(0, value)
        return up

    first = upload(b"a" * 9000).commit(if_absent=True)
    free = store.stats()["free_bytes"]
    with pytest.raises(errors.AlreadyExistsError):
        upload(b"b" * 9000).commit(if_absent=True)
    with pytest.raises(errors.VersionMismatchError):
        upload(b"b" * 9000).commit(if_version=first.version + 1)
    assert store.get("cu") == b"a" * 9000
    assert store.stats()["free_bytes"] == free, "a refused commit kept space"
    up = upload(b"c" * 9000)
    with pytest.raises(ValueError):
        up.commit(if_absent=True, if_version=first.version)
    with pytest.raises(TypeError):
        up.commit(if_version="1")
    # A refused argument does not use the upload up.
    assert up.commit(if_version=first.version).version > first.version
    assert store.get("cu") == b"c" * 9000


def test_upload_parts_from_threads(store):
    size = 8 << 20
    value = os.urandom(size)
    up = store.begin_upload("threads", size)
    part = 1 << 20
    threads = [
        threading.Thread(target=up.write_part, args=(off, value[off : off + part]))
        for off in range(0, size, part)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    up.commit()
    assert store.get("threads") == value


def test_list_on_ordered_index(path):
    with blobcask.Store(path, capacity=16 << 20, index="btree") as s:
        for i in range(300):
            s.put(f"{['img', 'vid'][i % 2]}/{i:04}", b"x")
        keys = list(s.list("img/"))
        assert len(keys) == 150 and keys == sorted(keys)
        assert keys[0] == b"img/0000"
        assert len(list(s.list())) == 300
    with blobcask.Store(path, index="fst") as s:
        assert list(s.list("vid/029")) == [b"vid/0291", b"vid/0293", b"vid/0295", b"vid/0297", b"vid/0299"]


def test_list_on_a_store_made_with_default_options(path):
    # The default index is "hash": it holds no keys, yet lists by prefix,
    # in byte order, as the ordered ones do.
    with blobcask.Store(path, capacity=16 << 20) as s:
        assert s.stats()["index"] == "hash"
        for i in reversed(range(300)):
            s.put(f"{['img', 'vid'][i % 2]}/{i:04}", b"x" * i)
        del s["img/0002"]
        keys = list(s.list("img/"))
        assert keys == [f"img/{i:04}".encode() for i in range(0, 300, 2) if i != 2]
        assert list(s.list("vid/029")) == [b"vid/0291", b"vid/0293", b"vid/0295", b"vid/0297", b"vid/0299"]
        assert list(s.list()) == sorted(s.keys())
        assert list(s.list("none/")) == []
        # Pages of a listing that outlives changes: a key deleted before the
        # iteration reaches it is skipped, every other key comes once.
        it = s.list("vid/")
        assert it.next_page(10) == [f"vid/{i:04}".encode() for i in range(1, 20, 2)]
        del s["vid/0299"]
        s["vid/9999"] = b"new"
        rest = it.next_page(1000)
        assert b"vid/0299" not in rest
        assert [k for k in rest if k != b"vid/9999"] == [f"vid/{i:04}".encode() for i in range(21, 299, 2)]
    with pytest.raises(errors.ClosedError):
        s.list("img/")


def test_stats(store):
    store.put("a", b"x" * 16384)
    st = store.stats()
    assert st["objects"] == 1 and st["logical_bytes"] == 16384
    assert st["capacity"] == 64 << 20 and st["free_bytes"] < st["capacity"]
    assert st["index"] == "hash" and st["io_engine"] in ("io_uring", "portable")
    store.sync()


def test_read_cache_is_on_by_default_and_counts_hits(path):
    with blobcask.Store(path, capacity=32 << 20) as s:
        v = pattern(5, 40_000)
        s.put("hot", v)
        # Kept at the second whole read; the third is a hit.
        assert s.get("hot") == v and s.get("hot") == v and s.get("hot") == v
        c = s.stats()["cache"]
        assert (c["hits"], c["misses"], c["capacity"]) == (1, 2, 64 << 20)
        assert c["bytes"] >= 40_000
        # A hit is the store's memory: read-only through the buffer protocol.
        view = memoryview(s.get("hot"))
        assert view.readonly
        with pytest.raises(TypeError):
            view[0] = 1
    with blobcask.Store(path, cache_bytes=0) as s:
        s.get("hot")
        s.get("hot")
        assert s.stats()["cache"] == {
            "hits": 0,
            "misses": 0,
            "bytes": 0,
            "capacity": 0,
            "warmed_blocks": 0,
            "warming": False,
        }
    with pytest.raises(ValueError, match="cache_bytes"):
        blobcask.Store(path, cache_bytes=-1)
    with pytest.raises(ValueError, match="cache_bytes"):
        blobcask.Store(path, cache_bytes=2**70)
    for wrong in ("64MiB", True, 1.5, None.__class__):
        with pytest.raises(TypeError, match="cache_bytes"):
            blobcask.Store(path, cache_bytes=wrong)


def test_reopen_keeps_everything(path):
    values = {f"k{i}": pattern(i, (i * 997) % 30_000) for i in range(200)}
    with blobcask.Store(path, capacity=32 << 20) as s:
        for k, v in values.items():
            s.put(k, v)
        s.delete("k7")
    del values["k7"]
    with blobcask.Store(path) as s:
        assert len(s) == len(values)
        for k, v in values.items():
            assert s.get(k) == v


def test_gil_is_released_so_threads_overlap(store):
    # Each thread does durable puts (a device sync each); with the GIL held
    # they could only run one at a time. Count how many calls were inside the
    # engine at once.
    inside = 0
    peak = 0
    lock = threading.Lock()
    stop = time.monotonic() + 1.0

    def worker(n: int) -> None:
        nonlocal inside, peak
        i = 0
        while time.monotonic() < stop:
            with lock:
                inside += 1
                peak = max(peak, inside)
            store.put(f"t{n}/{i % 50}", b"v" * 8192)
            with lock:
                inside -= 1
            i += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The counter is only a proxy; the real evidence is that commits were
    # grouped, which needs several puts waiting in the engine at once.
    groups = store.stats()["commit_groups"]
    puts = store.stats()["user_bytes_written"] // 8192
    assert peak > 1
    assert groups < puts, f"{puts} puts in {groups} groups: puts never overlapped"


def test_asyncio_api(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20, index="btree") as s:
            info = await s.put("a", b"hello")
            assert info.size == 5
            assert await s.get("a") == b"hello"
            assert await s.read("a", 1, 3) == b"ell"
            assert (await s.stat("a")).version == info.version
            assert "a" in s and s.contains("a") and len(s) == 1
            # Many concurrent awaits do not block the loop and all complete.
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)

            t = asyncio.create_task(ticker())
            await asyncio.gather(*(s.put(f"c/{i}", os.urandom(20_000)) for i in range(64)))
            t.cancel()
            assert ticks > 0
            assert len(list(s.list("c/"))) == 64
            up = await s.begin_upload("up", 5000)
            await asyncio.gather(up.write_part(4096, b"b" * 904), up.write_part(0, b"a" * 4096))
            await up.commit()
            assert await s.get("up") == b"a" * 4096 + b"b" * 904
            await s.delete("a")
            assert await s.get("a") is None
            with pytest.raises(errors.NotFoundError):
                await s.read("a")
            await s.sync()
            assert s.stats()["objects"] == 65

    asyncio.run(main())


def test_damaged_bytes_are_refused_never_served(path):
    """Invariant 5: one flipped byte in an object's data is CorruptError on
    every read path (blocking, range, asyncio), never wrong bytes."""
    data = os.urandom(200_000)
    with blobcask.Store(path, capacity=16 << 20) as s:
        s.put("k", data)
    raw = bytearray(open(path, "rb").read())
    at = raw.find(data[100_000:100_064])
    assert at >= 0
    raw[at] ^= 0x01
    with open(path, "wb") as f:
        f.write(raw)
    with blobcask.Store(path) as s:
        assert s.stats()["recovery"]["clean"] is True
        with pytest.raises(errors.CorruptError) as e:
            s.get("k")
        assert "offset 98304" in str(e.value)
        with pytest.raises(errors.CorruptError):
            s.read("k", 100_000, 10)
        # Blocks that are intact still read.
        assert s.read("k", 0, 100) == data[:100]

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path) as s:
            with pytest.raises(errors.CorruptError):
                await s.get("k")

    asyncio.run(main())


def test_write_part_checks_the_clients_crc32c(store):
    """A part sent with its CRC32C is checked before anything is written."""
    part = os.urandom(4096)
    assert blobcask.crc32c(b"123456789") == 0xE3069283  # the CRC32C check value
    up = store.begin_upload("u", 8192)
    with pytest.raises(errors.InvalidArgumentError, match="CRC32C"):
        up.write_part(0, part, crc32c=blobcask.crc32c(part) ^ 1)
    up.write_part(0, part, crc32c=blobcask.crc32c(part))
    up.write_part(4096, part)
    up.commit()
    assert store.get("u") == part + part
    with pytest.raises(TypeError):
        store.begin_upload("v", 4096).write_part(0, part, crc32c="nope")


def _open_or_hang(path, **options):
    """The exception opening `path` raised, or None when it opened; fails
    the test when the open had not returned after 20 s (a hang)."""
    done = []

    def attempt():
        try:
            blobcask.Store(path, **options).close()
            done.append(None)
        except Exception as e:  # noqa: BLE001 - handed back to the test
            done.append(e)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(20)
    assert done, f"opening {path!r} with {options} hangs"
    return done[0]


def test_a_fifo_or_a_dangling_link_is_refused_at_once(tmp_path):
    # A FIFO blocked a read-only open forever: refused by its kind.
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    for options in ({"read_only": True}, {}):
        e = _open_or_hang(fifo, **options)
        assert isinstance(e, errors.InvalidArgumentError), repr(e)
        assert "FIFO" in str(e)
    # A dangling symbolic link: NotFound naming its target.
    link, gone = tmp_path / "link", tmp_path / "gone"
    link.symlink_to(gone)
    for options in ({"read_only": True}, {}):
        e = _open_or_hang(str(link), **options)
        assert isinstance(e, errors.NotFoundError), repr(e)
        assert "dangling symbolic link" in str(e) and str(gone) in str(e)
    assert not gone.exists()


def test_the_documented_default_inline_threshold_is_the_real_one(path):
    # The stub said 512 where the engine's default is 1024.
    import re
    from pathlib import Path

    stub = (Path(blobcask.__file__).parent / "_native.pyi").read_text()
    said = re.search(r'new one gets ``"hash"``, (\d+) bytes', stub)
    assert said, "the stub names the default inline threshold"
    n = int(said.group(1))
    with blobcask.Store(path, capacity=8 << 20) as s:
        assert s.put("at", b"x" * n).inline
        assert not s.put("above", b"x" * (n + 1)).inline
