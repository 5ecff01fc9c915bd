"""Store.backup and AsyncStore.backup: a copy that opens with every object."""

import asyncio
import os
import threading

import pytest

import blobcask
from blobcask import errors
from conftest import pattern


def fill(store: blobcask.Store) -> dict[str, bytes]:
    """Inline, one-block, multi-block, multi-MiB and empty values; one key
    deleted and one overwritten. Returns what the store holds."""
    values = {f"obj/{i}": pattern(i, (i * 7919) % 70_000) for i in range(60)}
    values["tiny"] = b"abc"
    values["empty"] = b""
    values["large"] = pattern(99, (5 << 20) + 123)
    for k, v in values.items():
        store.put(k, v)
    store.delete("obj/3")
    del values["obj/3"]
    store.put("obj/4", b"replaced")
    values["obj/4"] = b"replaced"
    return values


def assert_holds(dest, values: dict[str, bytes]) -> None:
    """The store at `dest` opens and holds exactly `values`."""
    with blobcask.Store(dest) as copy:
        assert len(copy) == len(values)
        assert copy.stats()["logical_bytes"] == sum(map(len, values.values()))
        for k, v in values.items():
            assert copy.get(k) == v, k
        assert "obj/3" not in copy


def test_backup_makes_a_copy_that_opens_with_every_object(store, tmp_path):
    values = fill(store)
    dest = str(tmp_path / "copy.blobcask")
    report = store.backup(dest)
    assert isinstance(report, blobcask.BackupReport)
    assert report.path == dest
    assert report.objects == len(values)
    assert report.bytes == sum(map(len, values.values()))
    assert report.elapsed > 0
    assert report.bytes_per_sec == pytest.approx(report.bytes / report.elapsed)
    assert repr(report).startswith(f"BackupReport(path={dest!r}, objects={len(values)}, ")
    # The source goes on; a write after the backup is not in the copy.
    store.put("after", b"later")
    assert store.get("obj/0") == values["obj/0"]
    assert_holds(dest, values)
    assert sorted(os.listdir(tmp_path)) == ["copy.blobcask", "store.blobcask"], (
        "a temporary file was left beside the copy"
    )


def test_backup_takes_a_path_like_destination(store, tmp_path):
    values = fill(store)

    class Custom(os.PathLike):
        def __fspath__(self) -> str:
            return str(tmp_path / "custom.blobcask")

    report = store.backup(tmp_path / "pathlib.blobcask")
    assert report.path == str(tmp_path / "pathlib.blobcask")
    assert store.backup(Custom()).objects == len(values)
    assert_holds(tmp_path / "pathlib.blobcask", values)
    assert_holds(Custom(), values)


def test_an_existing_destination_is_refused_and_left_untouched(store, path, tmp_path):
    fill(store)
    taken = tmp_path / "precious.txt"
    taken.write_bytes(b"do not touch")
    with pytest.raises(errors.AlreadyExistsError):
        store.backup(str(taken))
    assert taken.read_bytes() == b"do not touch"
    # Also a FileExistsError, as for any file that is in the way.
    with pytest.raises(FileExistsError):
        store.backup(taken)
    assert taken.read_bytes() == b"do not touch"
    # The store's own file, and an earlier copy, are never replaced either.
    before = os.stat(path)
    with pytest.raises(errors.AlreadyExistsError):
        store.backup(path)
    assert os.stat(path).st_size == before.st_size
    store.backup(tmp_path / "copy")
    copy_bytes = (tmp_path / "copy").read_bytes()
    store.put("new", b"x")
    with pytest.raises(errors.AlreadyExistsError):
        store.backup(tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == copy_bytes
    # A dangling symlink is in the way too.
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(errors.AlreadyExistsError):
        store.backup(tmp_path / "link")
    assert not (tmp_path / "nowhere").exists()


def test_other_bad_destinations(store, tmp_path):
    with pytest.raises(errors.NotFoundError):
        store.backup(tmp_path / "no-such-dir" / "copy")
    assert not (tmp_path / "no-such-dir").exists()
    with pytest.raises(errors.InvalidArgumentError):
        store.backup("/")


def test_a_destination_of_the_wrong_type_is_a_type_error(store, tmp_path):
    # (bytes paths, as open() takes them, are accepted: test_store.py,
    # test_paths_as_open_takes_them)
    before = sorted(os.listdir(tmp_path))
    for wrong in (42, None, 1.5, [str(tmp_path / "x")]):
        with pytest.raises(TypeError):
            store.backup(wrong)
        # Store() accepts (and refuses) the same types.
        with pytest.raises(TypeError):
            blobcask.Store(wrong)
    with pytest.raises(TypeError):
        store.backup()
    # A NUL byte names no file, as open() says too.
    for nul in (b"a\0b", "a\0b"):
        with pytest.raises(ValueError, match="null byte"):
            store.backup(nul)
        with pytest.raises(ValueError, match="null byte"):
            blobcask.Store(nul)
    assert sorted(os.listdir(tmp_path)) == before, "a refused call wrote something"


def test_backup_after_close_raises_closed(path, tmp_path):
    s = blobcask.Store(path, capacity=16 << 20)
    s.put("k", b"v")
    s.close()
    with pytest.raises(errors.ClosedError):
        s.backup(tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_backup_runs_while_other_threads_write(path, tmp_path):
    """The copy holds every object committed before the call; writers go
    on meanwhile (and nothing they write breaks the copy)."""
    with blobcask.Store(path, capacity=64 << 20) as s:
        values = fill(s)
        stop = threading.Event()
        written = []

        def writer() -> None:
            i = 0
            while not stop.is_set():
                s.put(f"w/{i}", pattern(i, 5000))
                written.append(i)
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        try:
            report = s.backup(tmp_path / "copy")
        finally:
            stop.set()
            t.join()
        assert written, "the writer never ran"
    with blobcask.Store(tmp_path / "copy") as copy:
        assert len(copy) == report.objects >= len(values)
        for k, v in values.items():
            assert copy.get(k) == v, k
        for i in range(report.objects - len(values)):
            assert copy.get(f"w/{i}") == pattern(i, 5000)


def test_async_backup(path, tmp_path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=64 << 20) as s:
            values = fill(s.sync_store)
            values.update({f"big/{i}": pattern(200 + i, 4 << 20) for i in range(6)})
            await asyncio.gather(*(s.put(f"big/{i}", values[f"big/{i}"]) for i in range(6)))

            # The loop keeps running while the backup does.
            ticks = 0
            done = False

            async def ticker() -> None:
                nonlocal ticks
                while not done:
                    ticks += 1
                    await asyncio.sleep(0)

            ticking = asyncio.ensure_future(ticker())
            report = await s.backup(str(tmp_path / "copy"))
            done = True
            await ticking
            assert ticks > 5, f"the event loop was blocked ({ticks} ticks)"
            assert isinstance(report, blobcask.BackupReport)
            assert (report.objects, report.bytes) == (
                len(values),
                sum(map(len, values.values())),
            )
            # Other calls go on after it, and errors arrive as for Store.
            await s.put("after", b"x")
            with pytest.raises(errors.AlreadyExistsError):
                await s.backup(tmp_path / "copy")
            with pytest.raises(TypeError):
                await s.backup(42)  # type: ignore[arg-type]
        with pytest.raises(errors.ClosedError):
            await s.backup(tmp_path / "later")
        assert_holds(tmp_path / "copy", values)
        assert not (tmp_path / "later").exists()

    asyncio.run(main())


def test_backup_reports_progress_like_bulk_load(store, tmp_path):
    # Enough bytes that the copy takes several 0.25 s intervals here;
    # 20 MiB objects go through the large-object path, chunk by chunk.
    big = pattern(7, 20 << 20)
    store.bulk_load((f"big/{i}", big) for i in range(12))
    store.bulk_load((f"small/{i}", pattern(i, 3000)) for i in range(2000))
    total = (12 + 2000, 12 * len(big) + 2000 * 3000)
    calls: list[tuple[int, int]] = []
    threads: set[int] = set()

    def progress(objects: int, nbytes: int) -> None:
        calls.append((objects, nbytes))
        threads.add(threading.get_ident())

    report = store.backup(str(tmp_path / "copy.blobcask"), progress=progress)
    assert (report.objects, report.bytes) == total
    assert calls[-1] == total, "the last call has the totals"
    assert calls == sorted(calls), "progress went backwards"
    assert all(o <= total[0] and b <= total[1] for o, b in calls)
    assert threads == {threading.get_ident()}, "progress ran on another thread"
    assert len(calls) <= report.elapsed / 0.25 + 2, calls
    if report.elapsed >= 0.6:
        assert len(calls) >= 2, f"no progress before the end of a {report.elapsed:.2f} s backup"
        assert calls[0] < total


def test_backup_progress_must_be_callable(store, tmp_path):
    dest = tmp_path / "copy.blobcask"
    with pytest.raises(TypeError, match="progress must be callable"):
        store.backup(str(dest), progress=5)  # type: ignore[arg-type]
    assert not dest.exists()


def test_an_exception_from_backup_progress_is_raised_after_the_copy(store, tmp_path):
    values = fill(store)
    dest = str(tmp_path / "copy.blobcask")

    def angry(objects: int, nbytes: int) -> None:
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        store.backup(dest, progress=angry)  # raised by the final call at least
    assert_holds(dest, values)


def test_async_backup_reports_progress_on_the_loop_thread(path, tmp_path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path) as s:
            await s.put("a", b"1")
            await s.put("b", pattern(3, 100_000))
            calls: list[tuple[int, int]] = []
            loop_thread = threading.get_ident()

            def progress(objects: int, nbytes: int) -> None:
                assert threading.get_ident() == loop_thread
                calls.append((objects, nbytes))

            report = await s.backup(str(tmp_path / "copy.blobcask"), progress=progress)
            await asyncio.sleep(0)  # the final call is scheduled on the loop
            assert calls and calls[-1] == (report.objects, report.bytes) == (2, 100_001)
            with pytest.raises(TypeError, match="progress must be callable"):
                await s.backup(str(tmp_path / "other"), progress="no")  # type: ignore[arg-type]

    asyncio.run(main())
