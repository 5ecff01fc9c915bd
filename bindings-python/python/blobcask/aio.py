"""asyncio API: the same calls as ``Store``, as coroutines.

Reads, puts, stats and deletes run on the extension's own worker threads
(without the GIL) and resolve an asyncio future through
``call_soon_threadsafe``: one hand-off each way, nothing on the event loop.
The rarer calls (open, uploads, sync, close) use a thread pool.

Reads resolve to a ``Blob`` (the engine's buffer, read-only, no copy), so
the event loop never waits for a copy, whatever the object's size. Use it
as any bytes-like object; ``bytes(blob)`` copies when ``bytes`` is needed.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

from ._native import Blob, KeyIterator, ObjectInfo, Store, Upload

Key = Union[str, bytes, bytearray, memoryview, Blob]
T = TypeVar("T")

__all__ = ["AsyncStore", "AsyncUpload"]


class AsyncStore:
    """An open store for asyncio code.

    Construct with ``await AsyncStore.open(path, **options)`` (the options
    of ``Store``), use as ``async with``. ``workers`` bounds how many calls
    run on the device at once.
    """

    def __init__(self, store: Store, workers: int = 16) -> None:
        self._store = store
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="blobcask")

    @classmethod
    async def open(cls, path: Any, *, workers: int = 16, **options: Any) -> "AsyncStore":
        """Opens (creating when missing) the store at ``path``."""
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(None, functools.partial(Store, path, **options))
        return cls(store, workers)

    @property
    def sync_store(self) -> Store:
        """The blocking ``Store`` sharing this engine."""
        return self._store

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def _native(self, method: Callable[..., None], *args: Any) -> "asyncio.Future[Any]":
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def done(error: Optional[BaseException], value: Any) -> None:
            # Runs on an extension worker thread, with the GIL.
            loop.call_soon_threadsafe(_resolve, fut, error, value)

        method(*args, done)
        return fut

    async def put(self, key: Key, value: Any) -> ObjectInfo:
        """Stores ``value`` under ``key``; durable when awaited."""
        return await self._native(self._store._put_cb, key, value)

    async def get(self, key: Key) -> Blob:
        """The whole object, as a ``Blob`` (no copy)."""
        return await self._native(self._store._read_cb, key, 0, None)

    async def read(self, key: Key, offset: int = 0, length: Optional[int] = None) -> Blob:
        """``length`` bytes from ``offset``, clipped at the end, as a ``Blob``
        (no copy)."""
        return await self._native(self._store._read_cb, key, offset, length)

    async def stat(self, key: Key) -> ObjectInfo:
        """Size, version and commit time."""
        return await self._native(self._store._stat_cb, key)

    async def delete(self, key: Key) -> None:
        """Deletes ``key``; durable when awaited."""
        await self._native(self._store._delete_cb, key)

    def contains(self, key: Key) -> bool:
        """Whether ``key`` has an object (memory only, no I/O)."""
        return self._store.contains(key)

    def __contains__(self, key: Key) -> bool:
        return self._store.contains(key)

    def __len__(self) -> int:
        return len(self._store)

    def list(self, prefix: Optional[Key] = None) -> KeyIterator:
        """Keys starting with ``prefix`` (memory only, no I/O)."""
        return self._store.list(prefix)

    async def begin_upload(self, key: Key, size: int) -> "AsyncUpload":
        """Starts a multipart upload of exactly ``size`` bytes."""
        up = await self._run(self._store.begin_upload, key, size)
        return AsyncUpload(self, up)

    def stats(self) -> dict:
        """Space and content figures."""
        return self._store.stats()

    async def sync(self) -> None:
        """Barrier: everything acknowledged before is durable."""
        await self._run(self._store.sync)

    async def close(self) -> None:
        """Closes the store and its thread pool."""
        await self._run(self._store.close)
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _resolve(fut: "asyncio.Future[Any]", error: Optional[BaseException], value: Any) -> None:
    if fut.cancelled():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


class AsyncUpload:
    """A multipart upload for asyncio code; parts may be awaited concurrently."""

    def __init__(self, store: AsyncStore, upload: Upload) -> None:
        self._store = store
        self._upload = upload

    async def write_part(self, offset: int, data: Any, crc32c: int | None = None) -> None:
        """Writes one part (see ``Upload.write_part``)."""
        await self._store._run(self._upload.write_part, offset, data, crc32c)

    async def commit(self) -> ObjectInfo:
        """Makes the object visible atomically."""
        return await self._store._run(self._upload.commit)

    async def abort(self) -> None:
        """Abandons the upload and frees its space."""
        await self._store._run(self._upload.abort)

    async def __aenter__(self) -> "AsyncUpload":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.abort()


