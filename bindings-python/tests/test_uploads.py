"""Uploads in progress: Store.list_uploads, Store.abort_upload, Upload.id."""

import asyncio
import gc
import threading
import time

import pytest

import blobcask
from blobcask import errors
from conftest import pattern

ALIGN = blobcask.PART_ALIGN


def test_list_shows_key_size_and_progress(store):
    assert store.list_uploads() == []
    before = time.time()
    size = 3 * ALIGN + 123
    value = pattern(1, size)
    up = store.begin_upload("videos/a.mp4", size)
    after = time.time()

    [info] = store.list_uploads()
    assert isinstance(info, blobcask.UploadInfo)
    assert info.id == up.id and isinstance(info.id, int) and info.id > 0
    assert info.key == b"videos/a.mp4" and isinstance(info.key, bytes)
    assert info.size == size and info.written == 0
    assert before - 1 <= info.started <= after + 1
    r = repr(info)
    assert r.startswith("UploadInfo(") and "b'videos/a.mp4'" in r and f"size={size}" in r

    # `written` counts the parts written, in whatever order they come.
    up.write_part(2 * ALIGN, value[2 * ALIGN : 3 * ALIGN])
    assert store.list_uploads()[0].written == ALIGN
    up.write_part(0, value[:ALIGN])
    assert store.list_uploads()[0].written == 2 * ALIGN
    up.write_part(ALIGN, value[ALIGN : 2 * ALIGN])
    assert store.list_uploads()[0].written == 3 * ALIGN
    up.write_part(3 * ALIGN, value[3 * ALIGN :])  # the short last part
    assert store.list_uploads()[0].written == size
    # A listing is a snapshot: the info taken earlier does not change.
    assert info.written == 0

    up.commit()
    assert store.list_uploads() == [] and store.get("videos/a.mp4") == value
    assert up.id == info.id  # still readable once committed


def test_upload_info_is_read_only(store):
    up = store.begin_upload("k", 5000)
    [info] = store.list_uploads()
    for field in ("id", "key", "size", "written", "started"):
        with pytest.raises(AttributeError):
            setattr(info, field, 1)
    with pytest.raises(AttributeError):
        up.id = 5
    up.abort()


def test_list_is_oldest_first_and_ended_uploads_leave_it(store):
    ups = [store.begin_upload(f"u{i}", 2 * ALIGN) for i in range(4)]
    ids = [u.id for u in ups]
    assert len(set(ids)) == 4
    assert [i.id for i in store.list_uploads()] == sorted(ids) == ids
    assert [i.key for i in store.list_uploads()] == [b"u0", b"u1", b"u2", b"u3"]

    ups[0].write_part(0, b"\1" * 2 * ALIGN)
    ups[0].commit()  # committed
    ups[1].abort()  # aborted through its handle
    store.abort_upload(ids[2])  # aborted from the store
    assert [i.id for i in store.list_uploads()] == [ids[3]]
    del ups[3]  # dropped
    gc.collect()
    assert store.list_uploads() == []
    # Ended uploads cannot be aborted by id.
    for i in ids:
        with pytest.raises(errors.NotFoundError):
            store.abort_upload(i)


def test_abort_from_the_store_closes_the_handle_and_frees_space(store):
    free = store.stats()["free_bytes"]
    size = 8 << 20
    up = store.begin_upload("big", size)
    up.write_part(0, b"\0" * ALIGN)
    assert store.stats()["free_bytes"] < free

    store.abort_upload(up.id)
    assert store.stats()["free_bytes"] == free
    assert store.list_uploads() == []
    with pytest.raises(errors.ClosedError, match="aborted"):
        up.write_part(ALIGN, b"\0" * ALIGN)
    with pytest.raises(errors.ClosedError, match="aborted"):
        up.commit()
    assert "big" not in store
    with pytest.raises(errors.NotFoundError):
        store.abort_upload(up.id)  # already aborted
    up.abort()  # the handle's own abort is then a no-op
    assert store.stats()["free_bytes"] == free


def test_abort_while_parts_are_being_written(store):
    free = store.stats()["free_bytes"]
    size, part = 32 << 20, 1 << 20
    up = store.begin_upload("racing", size)
    data = b"\7" * part
    outcomes = []
    start = threading.Barrier(5)

    def writer(first):
        start.wait()
        for off in range(first * part, size, 4 * part):
            try:
                up.write_part(off, data)
                outcomes.append("ok")
            except errors.ClosedError:
                outcomes.append("closed")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    start.wait()
    # Abort once some parts have landed, while others are in flight.
    deadline = time.monotonic() + 30
    while store.list_uploads()[0].written < 2 * part and time.monotonic() < deadline:
        time.sleep(0.0005)
    store.abort_upload(up.id)
    for t in threads:
        t.join()
    assert len(outcomes) == size // part and set(outcomes) <= {"ok", "closed"}
    assert outcomes.count("ok") >= 2 and "closed" in outcomes
    with pytest.raises(errors.ClosedError):
        up.commit()
    # Once the parts in flight have finished, all the space is back.
    assert store.stats()["free_bytes"] == free
    assert "racing" not in store


def test_abort_upload_arguments(store):
    with pytest.raises(errors.NotFoundError):
        store.abort_upload(12345)
    with pytest.raises(KeyError):  # NotFoundError is a KeyError too
        store.abort_upload(0)
    up = store.begin_upload("k", 5000)
    for bad in ("1", 1.0, True, None, b"\1"):
        with pytest.raises(TypeError):
            store.abort_upload(bad)
    with pytest.raises(ValueError):
        store.abort_upload(-1)
    with pytest.raises(ValueError):
        store.abort_upload(1 << 64)
    assert [i.id for i in store.list_uploads()] == [up.id]  # untouched
    up.abort()


def test_closed_store_refuses_list_and_abort(path):
    s = blobcask.Store(path, capacity=16 << 20)
    up = s.begin_upload("k", 5000)
    s.close()
    with pytest.raises(errors.ClosedError):
        s.list_uploads()
    with pytest.raises(errors.ClosedError):
        s.abort_upload(up.id)
    with pytest.raises(errors.ClosedError):
        up.write_part(0, b"x" * 5000)


def test_uploads_are_gone_at_reopen_with_their_space(path):
    with blobcask.Store(path, capacity=16 << 20) as s:
        free = s.stats()["free_bytes"]
        up = s.begin_upload("unfinished", 4 << 20)
        up.write_part(0, b"\1" * ALIGN)
        assert s.stats()["free_bytes"] < free
    # Closed with the upload still open (the handle is alive): at the next
    # open it is not listed, its key has no object and its space is free.
    with blobcask.Store(path) as s:
        assert s.list_uploads() == []
        assert "unfinished" not in s
        assert s.stats()["free_bytes"] == free
    del up


def test_async_store_lists_and_aborts(path):
    async def main():
        async with await blobcask.AsyncStore.open(path, capacity=16 << 20) as s:
            free = s.stats()["free_bytes"]
            up = await s.begin_upload("a", 2 * ALIGN)
            await up.write_part(0, b"\1" * ALIGN)
            [info] = s.list_uploads()
            assert (info.id, info.key, info.size, info.written) == (up.id, b"a", 2 * ALIGN, ALIGN)
            s.abort_upload(up.id)
            assert s.list_uploads() == []
            assert s.stats()["free_bytes"] == free
            with pytest.raises(errors.ClosedError):
                await up.write_part(ALIGN, b"\1" * ALIGN)
            with pytest.raises(errors.ClosedError):
                await up.commit()
            with pytest.raises(errors.NotFoundError):
                s.abort_upload(up.id)
            with pytest.raises(TypeError):
                s.abort_upload("1")

    asyncio.run(main())


def test_an_ended_upload_does_not_keep_the_store_open(tmp_path):
    path = str(tmp_path / "s.blobcask")
    s = blobcask.Store(path, capacity=16 << 20)
    up = s.begin_upload("k", 10)
    up.write_part(0, b"x" * 10)
    up.commit()
    del s  # no close(): the last reference releases the lock
    again = blobcask.Store(path)
    assert again["k"] == b"x" * 10
    with pytest.raises(errors.ClosedError, match="already committed"):
        up.commit()
    up.abort()  # a no-op once ended
    again.close()
