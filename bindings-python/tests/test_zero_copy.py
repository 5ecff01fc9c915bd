"""Zero-copy reads (``get_blob``/``read_blob`` through the buffer protocol,
with numpy) and ``Store.read_into`` into a caller's buffer.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import array
import mmap

import pytest

import blobcask
from blobcask import errors
from conftest import pattern

# Inline (up to the 1024-byte default threshold), one block, and several blocks.
SIZES = [5, 1024, 4096, 100_000]


@pytest.mark.parametrize("size", SIZES)
def test_numpy_reads_a_blob_in_place(store, size):
    np = pytest.importorskip("numpy")
    value = pattern(size, size)
    store.put("k", value)
    blob = store.get_blob("k")
    a = np.frombuffer(blob, dtype=np.uint8)
    b = np.frombuffer(blob, dtype=np.uint8)
    assert a.tobytes() == value
    # Both arrays sit on the Blob's own memory (the engine's buffer): no
    # copy was made for either, and the memory is read-only.
    assert a.ctypes.data == b.ctypes.data
    assert np.shares_memory(a, b)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1
    # The array keeps the Blob (and its buffer) alive on its own.
    del blob
    assert a.tobytes() == value


def test_a_blob_range_is_a_view_of_the_same_buffer(store):
    np = pytest.importorskip("numpy")
    value = pattern(1, 100_000)
    store.put("k", value)
    blob = store.get_blob("k")
    whole = np.frombuffer(blob, dtype=np.uint8)
    part = np.frombuffer(blob[1000:2000], dtype=np.uint8)
    assert part.ctypes.data == whole.ctypes.data + 1000
    assert part.tobytes() == value[1000:2000]
    floats = np.frombuffer(store.read_blob("k", 0, 800), dtype="<f8")
    assert floats.shape == (100,) and floats.tobytes() == value[:800]


def test_memoryview_and_bytes_of_a_blob(store):
    value = pattern(2, 70_000)
    store.put("k", value)
    blob = store.get_blob("k")
    view = memoryview(blob)
    assert view.readonly and view.obj is blob and view.nbytes == len(value)
    assert bytes(blob) == value and type(bytes(blob)) is bytes


@pytest.mark.parametrize("size", SIZES)
def test_read_into_fills_a_bytearray(store, size):
    value = pattern(size, size)
    store.put("k", value)
    buf = bytearray(size)
    assert store.read_into("k", buf) == size
    assert buf == value
    # A larger buffer: filled up to the object's end, the rest untouched.
    big = bytearray(b"\xee" * (size + 10))
    assert store.read_into("k", big) == size
    assert big[:size] == value and big[size:] == b"\xee" * 10


def test_read_into_reads_a_range_from_offset(store):
    value = pattern(3, 100_000)
    store.put("k", value)
    buf = bytearray(1000)
    assert store.read_into("k", buf, 5000) == 1000 and buf == value[5000:6000]
    assert store.read_into("k", buf, offset=99_500) == 500
    assert buf[:500] == value[99_500:]
    assert store.read_into("k", buf, 100_000) == 0  # at the end: nothing
    # Chunked reading of a whole object into one reused buffer.
    out, offset = bytearray(), 0
    while n := store.read_into("k", buf, offset):
        out += buf[:n]
        offset += n
    assert out == value


def test_read_into_with_a_length(store):
    value = pattern(4, 10_000)
    store.put("k", value)
    buf = bytearray(b"\xee" * 100)
    assert store.read_into("k", buf, 10, 40) == 40
    assert buf[:40] == value[10:50] and buf[40:] == b"\xee" * 60
    assert store.read_into("k", buf, 9_990, 100) == 10  # clipped at the end
    assert store.read_into("k", buf, length=0) == 0
    with pytest.raises(ValueError, match="too small"):
        store.read_into("k", buf, 0, 101)


def test_read_into_any_writable_buffer(store):
    np = pytest.importorskip("numpy")
    value = pattern(5, 8000)
    store.put("k", value)
    # A memoryview of part of a bytearray writes into that part only.
    backing = bytearray(b"\0" * 30)
    assert store.read_into("k", memoryview(backing)[10:20]) == 10
    assert backing == b"\0" * 10 + value[:10] + b"\0" * 10
    # array.array of any item type: filled byte for byte.
    doubles = array.array("d", [0.0] * 1000)
    assert store.read_into("k", doubles) == 8000
    assert doubles.tobytes() == value
    # numpy arrays, of any dtype.
    floats = np.zeros(2000, dtype=np.float32)
    assert store.read_into("k", floats) == 8000
    assert floats.tobytes() == value
    assert np.array_equal(floats, np.frombuffer(value, dtype=np.float32), equal_nan=True)
    # An anonymous mmap.
    with mmap.mmap(-1, 4096) as m:
        assert store.read_into("k", m, 100) == 4096
        assert m[:] == value[100:4196]


def test_read_into_refuses_buffers_it_cannot_write(store):
    store.put("k", b"x" * 100)
    refused = [
        b"\0" * 100,  # read-only
        memoryview(b"\0" * 100),
        memoryview(bytearray(100)).toreadonly(),
        store.get_blob("k"),
        memoryview(bytearray(200))[::2],  # not C-contiguous
        "text",
        None,
        100,
        [0] * 100,
    ]
    for buffer in refused:
        with pytest.raises(TypeError):
            store.read_into("k", buffer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read-only"):
        store.read_into("k", b"\0" * 100)
    with pytest.raises(TypeError, match="C-contiguous"):
        store.read_into("k", memoryview(bytearray(200))[::2])


def test_read_into_refuses_bad_positions_and_keys_without_writing(store):
    value = pattern(6, 1000)
    store.put("k", value)
    buf = bytearray(b"\xee" * 50)
    with pytest.raises(errors.InvalidArgumentError):
        store.read_into("k", buf, 1001)  # past the end
    with pytest.raises(errors.NotFoundError):
        store.read_into("missing", buf)
    with pytest.raises(errors.NotFoundError):
        store.read_into("missing", bytearray())
    for bad in ("1", 1.0, True, None.__class__):
        with pytest.raises(TypeError):
            store.read_into("k", buf, bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.read_into("k", buf, 0, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.read_into("k", buf, -1)
    with pytest.raises(ValueError):
        store.read_into("k", buf, 0, -1)
    for key in (3, None, [b"k"]):
        with pytest.raises(TypeError):
            store.read_into(key, buf)  # type: ignore[arg-type]
    assert buf == b"\xee" * 50, "a refused read_into wrote into the buffer"


def test_a_buffer_being_read_into_cannot_be_resized(store):
    """The export held during the call keeps a bytearray's memory in place;
    after it, the bytearray is free again."""
    store.put("k", b"y" * 10)
    buf = bytearray(10)
    store.read_into("k", buf)
    buf.extend(b"more")  # no export left behind
    assert buf == b"y" * 10 + b"more"


def test_read_into_a_closed_store_raises_closed(path):
    s = blobcask.Store(path, capacity=8 << 20)
    s.put("k", b"v")
    s.close()
    with pytest.raises(errors.ClosedError):
        s.read_into("k", bytearray(1))
