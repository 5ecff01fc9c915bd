"""Tests for ``blobcask.Blob``: read results handed over without a copy.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import array
import asyncio
import ctypes
import gc
import hashlib
import os
import pickle

import pytest

import blobcask


from conftest import pattern


# Sizes on both sides of the inline threshold (1024 by default): an inline
# value is shared with the in-memory index, a heap value is a device buffer.
SIZES = [0, 5, 1024, 4096, 100_000, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_blob_equals_the_stored_bytes(store, size):
    value = pattern(size, size)
    store.put("k", value)
    blob = store.get_blob("k")
    assert isinstance(blob, blobcask.Blob)
    assert len(blob) == size
    assert blob == value and value == blob and not (blob != value)
    assert blob == bytearray(value) and blob == memoryview(value)
    assert blob == store.get_blob("k")
    assert blob != value + b"x" and blob != b"x" + value[1:]
    assert blob != value.decode("latin-1")  # a str is not bytes-like
    assert hash(blob) == hash(value)
    assert {value: 1}[blob] == 1
    assert hashlib.sha256(blob).digest() == hashlib.sha256(value).digest()
    # The blocking get still returns bytes.
    assert type(store.get("k")) is bytes and store.get("k") == value


def test_read_blob_is_the_range(store):
    value = pattern(3, 100_000)
    store.put("k", value)
    assert store.read_blob("k", 5000, 10) == value[5000:5010]
    assert store.read_blob("k", 99_990, 100) == value[99_990:]  # clipped
    assert store.read_blob("k", 100) == value[100:]
    assert store.read_blob("k") == value
    with pytest.raises(blobcask.InvalidArgumentError):
        store.read_blob("k", 100_001, 1)
    with pytest.raises(blobcask.NotFoundError):
        store.get_blob("missing")


def test_memoryview_is_read_only_and_the_right_length(store):
    value = pattern(7, 70_000)
    store.put("k", value)
    blob = store.get_blob("k")
    m = memoryview(blob)
    assert m.readonly and m.format == "B" and m.ndim == 1 and m.c_contiguous
    assert m.nbytes == len(m) == len(value)
    assert m.tobytes() == value
    assert m[10:20] == value[10:20]
    with pytest.raises(TypeError):
        m[0] = 1
    with pytest.raises(TypeError):
        m[0:2] = b"ab"
    # A writable export is refused outright (ctypes asks for one).
    with pytest.raises((TypeError, BufferError)):
        ctypes.c_char.from_buffer(blob)
    # Still the original bytes after the attempts.
    assert store.get("k") == value and blob == value


def test_bytes_of_a_blob_is_a_copy(store):
    value = pattern(9, 10_000)
    store.put("k", value)
    blob = store.get_blob("k")
    copy = bytes(blob)
    assert type(copy) is bytes and copy == value
    # Changing a bytearray made from the copy changes neither.
    mutable = bytearray(copy)
    mutable[0] ^= 0xFF
    assert bytes(blob) == value and blob == value
    assert pickle.loads(pickle.dumps(blob)) == value


def test_blob_survives_overwrite_delete_and_close(path):
    big, small = pattern(1, 300_000), pattern(2, 100)
    s = blobcask.Store(path, capacity=64 << 20)
    s.put("big", big)
    s.put("small", small)
    b_big, b_small = s.get_blob("big"), s.get_blob("small")
    view = memoryview(s.read_blob("big", 1000, 5000))
    # Overwrite: the old bytes stay in the Blob; the store has the new ones.
    s.put("big", pattern(3, 300_000))
    s.put("small", pattern(4, 100))
    assert b_big == big and b_small == small
    # Delete and write more objects, so freed space gets reused.
    s.delete("big")
    s.delete("small")
    for i in range(40):
        s.put(f"fill/{i}", os.urandom(300_000))
    assert b_big == big and b_small == small
    s.close()
    del s
    gc.collect()
    assert b_big == big and b_small == small
    assert view.tobytes() == big[1000:6000]
    assert hash(b_big) == hash(big)


def test_slicing_and_decoding(store):
    value = "héllo wörld".encode()
    store.put("k", value)
    blob = store.get_blob("k")
    assert blob[0] == value[0] and blob[-1] == value[-1]
    assert isinstance(blob[1:5], blobcask.Blob) and blob[1:5] == value[1:5]
    assert blob[::2] == value[::2] and blob[5:2] == b""
    assert list(blob) == list(value)
    with pytest.raises(IndexError):
        blob[len(value)]
    assert blob.decode() == "héllo wörld"
    assert "wörld" in repr(store.get_blob("k").decode())
    assert repr(blob).startswith("Blob(b'h")
    assert blob == array.array("B", value)


def test_blob_is_accepted_as_a_value_and_a_key(store):
    value = pattern(5, 50_000)
    store.put("k", value)
    blob = store.get_blob("k")
    store.put("copy", blob)
    assert store.get("copy") == value
    store.put(store.get_blob("k")[:10], b"v")
    assert store.get(value[:10]) == b"v"
    assert blobcask.crc32c(blob) == blobcask.crc32c(value)


def test_asyncio_reads_are_blobs(path):
    value = pattern(6, 2 << 20)

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
            await s.put("k", value)
            got = await s.get("k")
            assert isinstance(got, blobcask.Blob) and got == value
            part = await s.read("k", 1 << 20, 100)
            assert isinstance(part, blobcask.Blob) and part == value[1 << 20 : (1 << 20) + 100]
            await s.delete("k")
            assert got == value and memoryview(got).nbytes == len(value)

    asyncio.run(main())
