"""asyncio API: the same calls as ``Store``, as coroutines.

Reads, puts, stats and deletes run on the event loop's own thread, with no
thread in between: the call submits its I/O to the kernel at once, the
loop watches the store's completion descriptors (``loop.add_reader``), and
when one turns readable the extension reaps the completion and resolves
the future right there (``_native.EventLoop``). An ``AsyncStore`` serves
the first event loop that uses it. The rarer calls (open, uploads, grow,
sync, backup, compact, bulk_load, close) and the pages of an ``async for``
listing use a thread pool.

Reads resolve to a ``Blob`` (the engine's buffer, read-only, no copy), so
the event loop never waits for a copy, whatever the object's size. Use it
as any bytes-like object; ``bytes(blob)`` copies when ``bytes`` is needed.
"""

from __future__ import annotations

import asyncio
import functools
import numbers
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from os import PathLike
from typing import (
    Any,
    Callable,
    Deque,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    TYPE_CHECKING,
    TypeVar,
    Union,
    overload,
)

from ._native import Batch, Blob, EventLoop, KeyIterator, Upload
from ._native import Store as _NativeStore
from ._records import BackupReport, CompactReport, LoadReport, ObjectInfo, Stats, UploadInfo
from ._store import Store
from .errors import ClosedError, NotFoundError

if TYPE_CHECKING:
    from typing_extensions import Buffer

Key = Union[str, bytes, bytearray, memoryview, Blob]
TTL = Union[int, float, timedelta, numbers.Real]
T = TypeVar("T")

__all__ = ["AsyncStore", "AsyncUpload", "AsyncKeyIterator"]

#: Keys an ``async for`` over a listing fetches per trip to the thread pool.
LIST_PAGE = 1024


class AsyncStore:
    """An open store for asyncio code.

    Construct with ``await AsyncStore.open(path, **options)`` (the options
    of ``Store``), use as ``async with``. ``workers`` bounds the threads that
    run the calls which block (open, uploads, grow, sync, backup, compact,
    bulk_load, close, listing pages); reads, puts, stats and deletes use
    none.
    """

    def __init__(self, store: _NativeStore, workers: int = 16) -> None:
        self._store = store
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="blobcask")
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._events: Optional[EventLoop] = None
        self._closed = False

    @classmethod
    async def open(cls, path: Any, *, workers: int = 16, **options: Any) -> "AsyncStore":
        """Opens (creating when missing) the store at ``path``."""
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(None, functools.partial(Store, path, **options))
        return cls(store, workers)

    @property
    def sync_store(self) -> _NativeStore:
        """The blocking ``Store`` sharing this engine."""
        return self._store

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise ClosedError("the store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def _bind(self) -> EventLoop:
        """The extension's executor for the running loop, watched by it."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._events is not None:
            return self._events
        if self._loop is not None and not self._loop.is_closed():
            raise RuntimeError("this AsyncStore serves another event loop")
        self._forget_closed_loop()
        events = EventLoop(self._store)
        for fd in events.fds():
            loop.add_reader(fd, events.run)
        self._loop, self._events = loop, events
        return events

    def _forget_closed_loop(self) -> None:
        # Calls left pending by a loop closed under them are dropped: one
        # of them may lead a commit group that nothing would finish.
        if self._events is not None and self._loop is not None and self._loop.is_closed():
            self._events.cancel_all()
            self._loop = self._events = None

    def _unbind(self) -> None:
        if self._loop is not None and self._events is not None and not self._loop.is_closed():
            for fd in self._events.fds():
                self._loop.remove_reader(fd)
        self._loop = self._events = None

    def _start(self, start: Callable[..., int], *args: Any) -> "asyncio.Future[Any]":
        """Starts a call on the loop's thread; its future resolves there."""
        loop = asyncio.get_running_loop()
        events = self._bind()
        fut = loop.create_future()
        task = start(events, *args, fut)
        if not fut.done():
            fut.add_done_callback(functools.partial(_forget_if_cancelled, events, task))
        return fut

    async def put(
        self,
        key: Key,
        value: Buffer,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[TTL] = None,
    ) -> ObjectInfo:
        """Stores ``value`` under ``key``; durable when awaited.
        ``if_absent``/``if_version``/``ttl`` as for ``Store.put``."""
        info: ObjectInfo = await self._start(EventLoop.put, key, value, if_absent, if_version, ttl)
        return info

    @overload
    async def get(self, key: Key) -> Optional[Blob]: ...
    @overload
    async def get(self, key: Key, default: T) -> Union[Blob, T]: ...
    async def get(self, key: Key, default: Any = None) -> Any:
        """The whole object, as a ``Blob`` (no copy); ``default`` when
        ``key`` has no object (as ``Store.get``; ``read`` raises
        ``NotFoundError``)."""
        try:
            return await self._start(EventLoop.read, key, 0, None)
        except NotFoundError:
            return default

    async def read(self, key: Key, offset: int = 0, length: Optional[int] = None) -> Blob:
        """``length`` bytes from ``offset``, clipped at the end, as a ``Blob``
        (no copy)."""
        blob: Blob = await self._start(EventLoop.read, key, offset, length)
        return blob

    async def stat(self, key: Key) -> ObjectInfo:
        """Size, version and commit time."""
        info: ObjectInfo = await self._start(EventLoop.stat, key)
        return info

    async def delete(self, key: Key) -> None:
        """Deletes ``key``; durable when awaited."""
        await self._start(EventLoop.delete, key)

    def contains(self, key: Key) -> bool:
        """Whether ``key`` has an object (memory only, no I/O)."""
        return self._store.contains(key)

    def __contains__(self, key: Key) -> bool:
        return self._store.contains(key)

    def __len__(self) -> int:
        return len(self._store)

    def list(self, prefix: Optional[Key] = None) -> "AsyncKeyIterator":
        """Keys starting with ``prefix``, in byte order, with every index,
        as ``bytes``: ``async for key in astore.list(prefix)`` starts the
        listing and fetches its keys a page at a time on the thread pool,
        so the event loop never waits for the index (nor, on "hash", for
        the pass over the tuple blocks that starts it). A plain ``for``
        works too (on the calling thread). ``ClosedError`` at once after
        ``close()``; other errors (a prefix of the wrong type) at the first
        step."""
        if self._closed:
            raise ClosedError("the store is closed")
        return AsyncKeyIterator(self, lambda: self._store.list(prefix))

    def __aiter__(self) -> "AsyncKeyIterator":
        """``async for key in astore``: every key, with any index (as
        ``iter(store)``: byte order with an ordered index, a snapshot's
        order with "hash"), fetched on the thread pool."""
        return AsyncKeyIterator(self, self._store.__iter__)

    async def bulk_load(
        self,
        items: Iterable[Tuple[Key, Buffer]],
        *,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> LoadReport:
        """``Store.bulk_load`` on the thread pool: ``items`` is consumed on
        a worker thread, and ``progress(objects, bytes)`` is called on the
        event loop's thread (at most every 0.25 s, and with the totals
        before this returns). Cancelling the await does not stop the load."""
        return await self._run(
            functools.partial(self._store.bulk_load, items, progress=_on_loop(progress))
        )

    async def begin_upload(self, key: Key, size: int) -> "AsyncUpload":
        """Starts a multipart upload of exactly ``size`` bytes."""
        up = await self._run(self._store.begin_upload, key, size)
        return AsyncUpload(self, up)

    def list_uploads(self) -> List[UploadInfo]:
        """The uploads in progress, oldest first (memory only, no I/O; see
        ``Store.list_uploads``)."""
        return self._store.list_uploads()

    def abort_upload(self, id: int) -> None:
        """Aborts upload ``id`` wherever its handle is (memory only, no I/O,
        so not a coroutine; see ``Store.abort_upload``): the handle's later
        ``write_part``/``commit`` raise ``ClosedError``."""
        self._store.abort_upload(id)

    def stats(self) -> Stats:
        """Space and content figures (memory only, no I/O; see
        ``Store.stats``)."""
        return self._store.stats()

    async def grow(self, capacity: int) -> None:
        """Grows the store file to ``capacity`` bytes now (see
        ``Store.grow``), on the thread pool."""
        await self._run(self._store.grow, capacity)

    async def sync(self) -> None:
        """Barrier: everything acknowledged before is durable."""
        await self._run(self._store.sync)

    def batch(self) -> "AsyncBatch":
        """Puts and deletes committed all or nothing (see ``Store.batch``):
        ``async with astore.batch() as b: b.put(...); b.delete(...)``
        commits on a clean exit, on the thread pool, and discards when the
        block raises; ``await b.commit()`` commits explicitly."""
        return AsyncBatch(self, self._store.batch())

    async def get_many(self, keys: Iterable[Key]) -> List[Optional[bytes]]:
        """``Store.get_many`` on the thread pool: the objects in order,
        ``None`` for a miss (each read on its own, not one snapshot)."""
        return await self._run(self._store.get_many, list(keys))

    async def backup(
        self,
        dest: Union[str, "PathLike[str]"],
        *,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> BackupReport:
        """Writes a consistent copy of the store to ``dest`` (see
        ``Store.backup``) on the thread pool, so the event loop and the
        store's other calls go on meanwhile. ``progress(objects, bytes)``
        is called on the event loop's thread, as ``bulk_load``'s is."""
        return await self._run(
            functools.partial(self._store.backup, dest, progress=_on_loop(progress))
        )

    async def compact(self) -> CompactReport:
        """Moves objects down the store so that free space joins into
        large pieces (see ``Store.compact``), on the thread pool, so the
        event loop and the store's other calls go on meanwhile."""
        return await self._run(self._store.compact)

    async def close(self) -> None:
        """Closes the store and its thread pool. Calls still pending end
        with ClosedError or finish first. Closing twice is a no-op."""
        if self._closed:
            return
        self._forget_closed_loop()
        await asyncio.get_running_loop().run_in_executor(self._pool, self._store.close)
        self._closed = True
        # Calls still in flight (reads) complete through the loop's readers:
        # keep watching until they have.
        while self._events is not None and len(self._events):
            await asyncio.sleep(0.001)
        self._unbind()
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _on_loop(
    progress: Optional[Callable[[int, int], object]],
) -> Optional[Callable[[int, int], None]]:
    """``progress`` called on the running event loop's thread, from the
    worker thread that runs a bulk load or backup; ``TypeError`` unless it
    is None or callable."""
    if progress is None:
        return None
    if not callable(progress):
        raise TypeError(f"progress must be callable, not {type(progress).__name__}")
    loop = asyncio.get_running_loop()

    def report(objects: int, nbytes: int) -> None:
        loop.call_soon_threadsafe(progress, objects, nbytes)

    return report


def _forget_if_cancelled(events: EventLoop, task: int, fut: "asyncio.Future[Any]") -> None:
    # A cancelled call's engine future is dropped (a put may still land).
    if fut.cancelled():
        events.cancel(task)


class AsyncKeyIterator:
    """Keys of a listing (``AsyncStore.list``, ``async for key in astore``)
    as ``bytes``.

    ``async for`` fetches ``LIST_PAGE`` keys per trip to the store's thread
    pool, so the event loop never waits on the index (a hash index's
    snapshot of every key included). Plain ``for``/``next`` also work, on
    the calling thread. Iterate one way or the other, from one task.
    """

    def __init__(self, store: AsyncStore, start: Callable[[], KeyIterator]) -> None:
        self._store = store
        self._start = start
        self._keys: Optional[KeyIterator] = None
        self._page: Deque[bytes] = deque()
        self._done = False

    def _opened(self) -> KeyIterator:
        if self._keys is None:
            self._keys = self._start()
        return self._keys

    def _fetch(self) -> List[bytes]:
        return self._opened().next_page(LIST_PAGE)

    def __aiter__(self) -> "AsyncKeyIterator":
        return self

    async def __anext__(self) -> bytes:
        if not self._page and not self._done:
            page = await self._store._run(self._fetch)
            self._done = len(page) < LIST_PAGE
            self._page.extend(page)
        if not self._page:
            raise StopAsyncIteration
        return self._page.popleft()

    def __iter__(self) -> "AsyncKeyIterator":
        return self

    def __next__(self) -> bytes:
        if self._page:
            return self._page.popleft()
        return next(self._opened())


class AsyncUpload:
    """A multipart upload for asyncio code; parts may be awaited concurrently."""

    def __init__(self, store: AsyncStore, upload: Upload) -> None:
        self._store = store
        self._upload = upload

    @property
    def id(self) -> int:
        """This upload's id in ``list_uploads`` (for ``abort_upload``)."""
        return self._upload.id

    async def write_part(self, offset: int, data: Buffer, crc32c: int | None = None) -> None:
        """Writes one part (see ``Upload.write_part``)."""
        await self._store._run(self._upload.write_part, offset, data, crc32c)

    async def commit(
        self,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[TTL] = None,
    ) -> ObjectInfo:
        """Makes the object visible atomically (conditions and ``ttl`` as in
        ``Upload.commit``)."""
        return await self._store._run(
            functools.partial(
                self._upload.commit, if_absent=if_absent, if_version=if_version, ttl=ttl
            )
        )

    async def abort(self) -> None:
        """Abandons the upload and frees its space."""
        await self._store._run(self._upload.abort)

    async def __aenter__(self) -> "AsyncUpload":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.abort()


class AsyncBatch:
    """A ``Batch`` for asyncio code (``AsyncStore.batch``): operations are
    added at once (no I/O); the commit runs on the store's thread pool."""

    def __init__(self, store: AsyncStore, batch: Batch) -> None:
        self._store = store
        self._batch = batch

    def put(
        self,
        key: Key,
        value: Buffer,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[TTL] = None,
    ) -> None:
        """Adds a put (see ``Batch.put``)."""
        self._batch.put(key, value, if_absent=if_absent, if_version=if_version, ttl=ttl)

    def delete(self, key: Key, *, if_version: Optional[int] = None) -> None:
        """Adds a delete (see ``Batch.delete``)."""
        self._batch.delete(key, if_version=if_version)

    def discard(self) -> None:
        """Drops every operation without writing anything."""
        self._batch.discard()

    def __len__(self) -> int:
        return len(self._batch)

    async def commit(self) -> List[Union[ObjectInfo, bool]]:
        """Commits every operation or none (see ``Batch.commit``)."""
        return await self._store._run(self._batch.commit)

    async def __aenter__(self) -> "AsyncBatch":
        return self

    async def __aexit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            await self.commit()
        else:
            self.discard()
