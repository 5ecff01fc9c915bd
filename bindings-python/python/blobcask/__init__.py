"""blobcask: an embedded blob store.

Millions of objects in one preallocated file, an in-memory key index, direct
I/O, and any byte range of any object in one device read::

    import blobcask

    with blobcask.Store("media.blobcask", capacity=1 << 30) as store:
        store["thumbs/cat.jpg"] = jpeg_bytes
        head = store.read("thumbs/cat.jpg", 0, 4096)

Every call that does I/O releases the GIL. ``AsyncStore`` offers the same
calls as coroutines for asyncio.

A ``Store`` is a ``collections.abc.MutableMapping`` of keys to ``bytes``:
``store[key]``, ``store.get(key, default)``, ``in``, ``len``, iteration
over every key (as ``bytes``), ``keys()``/``items()``/``values()``,
``pop``, ``popitem``, ``setdefault``, ``update``, ``clear``.

``Store.get`` and ``Store.read`` return ``bytes`` (a copy of what the engine
read); ``Store.get_blob``, ``Store.read_blob`` and the reads of
``AsyncStore`` return a ``Blob``: the engine's buffer itself, read-only,
usable wherever a bytes-like object is (``memoryview(blob)``,
``hashlib.sha256(blob)``, ``f.write(blob)``, ``blob == b"..."``), with no
copy whatever its size. ``bytes(blob)`` makes the copy when one is wanted.
``Store.read_into`` fills a caller's writable buffer instead.
"""

from __future__ import annotations

from ._native import (
    MAX_KEY_LEN,
    MAX_TTL,
    PART_ALIGN,
    Batch,
    Blob,
    KeyIterator,
    Upload,
    crc32c,
)
from ._records import (
    BackupReport,
    CacheStats,
    CompactReport,
    LoadReport,
    ObjectInfo,
    RecoveryReport,
    Stats,
    UploadInfo,
)
from ._store import Store
from .aio import AsyncBatch, AsyncKeyIterator, AsyncStore, AsyncUpload
from .errors import (
    AlreadyExistsError,
    ClosedError,
    CorruptError,
    Error,
    InvalidArgumentError,
    IOError,
    LockedError,
    NoSpaceError,
    NotFoundError,
    PathNotFoundError,
    TooLargeError,
    UnsupportedError,
    VersionMismatchError,
)

__all__ = [
    "crc32c",
    "Store",
    "AsyncStore",
    "Upload",
    "AsyncBatch",
    "AsyncUpload",
    "Batch",
    "UploadInfo",
    "Blob",
    "ObjectInfo",
    "BackupReport",
    "CompactReport",
    "KeyIterator",
    "AsyncKeyIterator",
    "LoadReport",
    "Stats",
    "CacheStats",
    "RecoveryReport",
    "MAX_KEY_LEN",
    "MAX_TTL",
    "PART_ALIGN",
    "Error",
    "NotFoundError",
    "PathNotFoundError",
    "InvalidArgumentError",
    "TooLargeError",
    "NoSpaceError",
    "CorruptError",
    "IOError",
    "LockedError",
    "UnsupportedError",
    "AlreadyExistsError",
    "VersionMismatchError",
    "ClosedError",
]
