"""blobcask: an embedded blob store.

Millions of objects in one preallocated file, an in-memory key index, direct
I/O, and any byte range of any object in one device read::

    import blobcask

    with blobcask.Store("media.blobcask", capacity=1 << 30) as store:
        store["thumbs/cat.jpg"] = jpeg_bytes
        head = store.read("thumbs/cat.jpg", 0, 4096)

Every call that does I/O releases the GIL. ``AsyncStore`` offers the same
calls as coroutines for asyncio.
"""

from __future__ import annotations

from ._native import MAX_KEY_LEN, PART_ALIGN, KeyIterator, ObjectInfo, Store, Upload, crc32c
from .aio import AsyncStore, AsyncUpload
from .errors import (
    ClosedError,
    CorruptError,
    Error,
    InvalidArgumentError,
    IOError,
    LockedError,
    NoSpaceError,
    NotFoundError,
    TooLargeError,
    UnsupportedError,
)

__all__ = [
    "crc32c",
    "Store",
    "AsyncStore",
    "Upload",
    "AsyncUpload",
    "ObjectInfo",
    "KeyIterator",
    "MAX_KEY_LEN",
    "PART_ALIGN",
    "Error",
    "NotFoundError",
    "InvalidArgumentError",
    "TooLargeError",
    "NoSpaceError",
    "CorruptError",
    "IOError",
    "LockedError",
    "UnsupportedError",
    "ClosedError",
]
