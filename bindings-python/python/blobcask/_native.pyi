"""Type stubs for the native extension (``blobcask._native``)."""

import asyncio
import numbers
from datetime import timedelta
from os import PathLike
from types import TracebackType
from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    List,
    Literal,
    Optional,
    SupportsIndex,
    Tuple,
    TypeVar,
    Union,
    final,
    overload,
)

from typing_extensions import Buffer, Self, disjoint_base

from ._records import (
    BackupReport,
    CompactReport,
    LoadReport,
    ObjectInfo,
    Stats,
    UploadInfo,
)

_Key = Union[str, bytes, bytearray, memoryview, "Blob"]
# Any object with the buffer protocol (bytes, bytearray, memoryview, Blob,
# array.array, mmap, numpy arrays); a ``str`` is not one.
_BytesLike = Buffer
_TTL = Union[int, float, timedelta, numbers.Real]
_Seconds = Union[int, float, timedelta]
_T = TypeVar("_T")

__all__ = [
    "crc32c",
    "Store",
    "Blob",
    "EventLoop",
    "Upload",
    "Batch",
    "KeyIterator",
    "MAX_KEY_LEN",
    "PART_ALIGN",
    "MAX_TTL",
]

MAX_KEY_LEN: int
PART_ALIGN: int
MAX_TTL: float

@final
class Blob(Buffer):
    """Bytes read from a store, handed over without a copy.

    Owns the engine's buffer and lends it, read-only, through the buffer
    protocol: ``memoryview(blob)`` and every API taking a bytes-like object
    read it in place (asking for a writable buffer raises ``BufferError``).
    ``bytes(blob)`` copies. A Blob equals any bytes-like object with the
    same bytes and hashes as ``bytes`` does. Its bytes stay valid as long as
    it (or a memoryview of it) lives, even after the key is overwritten or
    deleted and the store closed.
    """

    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes:
        """A copy of the bytes."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    @overload
    def __getitem__(self, key: SupportsIndex, /) -> int: ...
    @overload
    def __getitem__(self, key: slice, /) -> Union["Blob", bytes]:
        """``blob[a:b]`` is a Blob over the same buffer (no copy); a slice
        with a step is a ``bytes`` copy."""
    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        """The bytes decoded, as ``bytes.decode`` does."""

@final
class KeyIterator(Iterator[bytes]):
    """Keys of a listing (``Store.list``: byte order) or of ``iter(store)``,
    as ``bytes``."""

    def __iter__(self) -> "KeyIterator": ...
    def __next__(self) -> bytes: ...
    def next_page(self, n: int) -> list[bytes]:
        """Up to ``n`` next keys (1 to 65536), fewer only at the end (an
        empty list: done). Runs without the GIL."""

@final
class Upload:
    """A multipart upload; see ``Store.begin_upload``."""

    @property
    def id(self) -> int:
        """This upload's id in ``Store.list_uploads`` (for
        ``Store.abort_upload``); still readable once committed or aborted."""
    def write_part(self, offset: int, data: _BytesLike, crc32c: int | None = None) -> None:
        """Writes ``data`` at ``offset`` (a multiple of PART_ALIGN); with
        ``crc32c`` the bytes are checked against it before anything is written.
        A part overlapping one still being written raises
        ``InvalidArgumentError`` (retry once that one returned); a part that
        fails leaves its range unwritten."""
    def commit(
        self,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[_TTL] = None,
    ) -> ObjectInfo:
        """Makes the object visible atomically. ``if_absent=True`` commits
        only if the key has no object (``AlreadyExistsError``);
        ``if_version=v`` only if it holds version ``v``
        (``VersionMismatchError``); ``ttl`` as for ``Store.put``, counted
        from the commit. A commit the store refuses changes nothing and
        frees the upload's space; an argument refused before that (wrong
        type, negative ttl) leaves the upload as it was, as does a commit
        while a ``write_part`` of this upload is still running
        (``InvalidArgumentError``: commit once every part has returned).
        Only parts that returned count as written. Once the upload ended,
        ``write_part`` and ``commit`` raise ``ClosedError`` saying how."""
    def abort(self) -> None:
        """Abandons the upload and frees its space (a no-op once it ended)."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> Literal[False]:
        """Aborts the upload unless it was committed; never swallows the
        exception."""

@final
class Batch:
    """Puts and deletes committed all or nothing; see ``Store.batch``."""

    def put(
        self,
        key: _Key,
        value: _BytesLike,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[_TTL] = None,
    ) -> None:
        """Adds a put (conditions and ``ttl`` as ``Store.put``); nothing is
        written before the commit."""
    def delete(self, key: _Key, *, if_version: Optional[int] = None) -> None:
        """Adds a delete: of whatever ``key`` holds (a missing key is no
        change), or with ``if_version`` only of that version."""
    def commit(self) -> list[Union[ObjectInfo, bool]]:
        """Commits every operation or none; durable on return. Per
        operation, in order: the put's ``ObjectInfo``, or whether the delete
        removed an object. A failed condition raises its error
        (``AlreadyExistsError``, ``VersionMismatchError``), as does a bad
        key or value or a key twice (``InvalidArgumentError``), with
        ``batch_op`` the index of that operation; nothing is written."""
    def discard(self) -> None:
        """Drops every operation without writing anything."""
    def __len__(self) -> int: ...
    def __enter__(self) -> "Batch": ...
    def __exit__(self, *args: object) -> None:
        """Commits on a clean exit; discards when the block raised (and
        lets its exception through)."""

@disjoint_base
class Store:
    """An open blob store. Thread-safe; every I/O call releases the GIL."""

    def __new__(
        cls,
        path: Union[str, bytes, "PathLike[str]", "PathLike[bytes]"],
        *,
        capacity: Optional[int] = None,
        index: Optional[str] = None,
        inline_threshold: Optional[int] = None,
        max_capacity: Optional[int] = None,
        io_engine: str = "auto",
        direct_io: bool = True,
        create: bool = True,
        create_new: bool = False,
        read_only: bool = False,
        salvage: bool = False,
        cache_bytes: Optional[int] = None,
        cache_fraction: Optional[float] = None,
        warm_up: bool = True,
        durability: Literal["sync", "buffered"] = "sync",
        max_delay: Optional[_Seconds] = None,
        eviction: Literal["none", "s3fifo"] = "none",
    ) -> Self:
        """Opens the store at ``path``.

        ``create`` makes a store only where nothing is: a missing path or an
        empty file. Any other file without a blobcask superblock raises
        ``CorruptError`` and is left untouched. ``create_new`` insists on a
        new store (an existing non-empty file raises ``InvalidArgumentError``).
        ``read_only`` opens an existing store with a shared lock on a
        read-only descriptor: several read-only handles may share it, writes
        raise ``UnsupportedError``, and nothing is ever written.
        ``salvage`` (with ``read_only`` only) opens a store that a plain
        open refuses for a damaged tuple block: the block is skipped, its
        objects are missing (never served from an older copy), and
        ``stats().recovery.skipped`` names it; copy out what reads with
        ``backup``.
        ``cache_bytes`` bounds the read cache of whole small objects (default
        64 MiB; 0 turns it off); ``stats()["cache"]`` counts its hits.
        ``cache_fraction`` bounds it as a fraction of memory instead (in
        (0, 1]; the system's, or the cgroup's limit when lower; not with
        ``cache_bytes``). ``warm_up`` (default True): after open, the tuple
        blocks holding small (inline) values are read into the cache in the
        background, into free room only, so their first gets are memory
        hits; ``stats().cache.warming`` says whether it still reads.

        A new store file starts at ``capacity`` bytes (default 16 MiB) and
        grows by itself as it fills, up to ``max_capacity`` (default: no
        limit but the file system; a put that needs more raises
        ``NoSpaceError``); a block device keeps its size. ``capacity`` larger
        than an existing store grows it at open; smaller is fine when the
        store grew past it by itself, and raises ``InvalidArgumentError``
        below a capacity asked for before. ``index`` (``"hash"``, ``"btree"``,
        ``"fst"``), ``inline_threshold`` and ``max_capacity`` are stored in
        the store: left as None, an existing store uses its stored ones (a
        new one gets ``"hash"``, 1024 bytes and no limit); given at
        a read-write open, they replace the stored ones (a read-only open
        uses them for itself only). ``max_capacity`` must be an ``int``
        (``TypeError`` otherwise); ``2**64 - 1`` means no limit.

        ``durability="sync"`` (the default): a put, commit or delete returns
        once durable. ``"buffered"`` acknowledges at once and writes the
        changes as one group at most ``max_delay`` later (seconds, or a
        ``timedelta``; required), or at ``sync()``/``close()``: a crash
        loses up to the last ``max_delay`` of changes (what survives is a
        prefix of them, in order, every object whole).
        Anything else raises ``InvalidArgumentError`` (``TypeError`` for a
        wrong type).

        ``eviction="s3fifo"`` makes the store a bounded cache: a put or an
        upload that finds no room deletes objects the S3-FIFO policy gives
        up (durably, like any delete; never one being read) until it fits,
        instead of raising ``NoSpaceError``. It never grows past
        ``max_capacity``, or without one past the size it has. Not stored:
        give it at every open. ``stats()`` counts ``hits``, ``misses``,
        ``evictions`` and ``evicted_bytes``. ``"none"`` (the default) does
        not evict; anything else raises ``InvalidArgumentError`` (a
        ``ValueError``), a non-``str`` ``TypeError``.
        """
    def put(
        self,
        key: _Key,
        value: _BytesLike,
        *,
        if_absent: bool = False,
        if_version: Optional[int] = None,
        ttl: Optional[_TTL] = None,
    ) -> ObjectInfo:
        """Stores ``value`` under ``key`` (create or replace); durable on return.
        ``if_absent=True`` creates only (``AlreadyExistsError`` if present);
        ``if_version=v`` replaces only version ``v`` (``VersionMismatchError``).

        ``ttl`` (seconds as a real number, ``int``, ``float`` or numpy's, or a ``timedelta``)
        makes the object expire that long after its commit: from then on
        reads, ``stat``, ``in`` and listings no longer see it, and its space
        is freed in the background. Without ``ttl`` the object never expires
        (replacing one that would have). A ``ttl`` under 1 µs, zero,
        negative, NaN or above ``MAX_TTL`` seconds raises
        ``InvalidArgumentError`` (a ``ValueError``); one that is not a
        number or timedelta (a ``bool`` included) ``TypeError``."""
    @overload
    def get(self, key: _Key, default: None = None) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Key, default: bytes) -> bytes: ...
    @overload
    def get(self, key: _Key, default: _T) -> Union[bytes, _T]:
        """The whole object, as a ``bytes`` copy (see ``get_blob``), or
        ``default`` when ``key`` has no object (``store[key]``, ``read`` and
        ``get_blob`` raise ``NotFoundError``)."""
    def read(self, key: _Key, offset: int = 0, length: Optional[int] = None) -> bytes:
        """``length`` bytes from ``offset``, clipped at the end, as a ``bytes``
        copy (see ``read_blob``)."""
    def get_blob(self, key: _Key) -> Blob:
        """The whole object as a ``Blob``: the engine's buffer, no copy."""
    def read_blob(self, key: _Key, offset: int = 0, length: Optional[int] = None) -> Blob:
        """``read`` as a ``Blob``: the engine's buffer, no copy."""
    def read_into(
        self, key: _Key, buffer: Any, offset: Optional[int] = None, length: Optional[int] = None
    ) -> int:
        """Reads the object from ``offset`` into ``buffer`` (writable,
        C-contiguous: bytearray, memoryview, array, numpy array, mmap):
        ``len(buffer)`` bytes, or ``length``, fewer at the object's end;
        returns the count. ``TypeError`` for a read-only or non-contiguous
        buffer, ``ValueError`` for a ``length`` over the buffer's size."""
    def stat(self, key: _Key) -> ObjectInfo:
        """Size, version and commit time."""
    def delete(self, key: _Key) -> None:
        """Deletes ``key`` (NotFoundError when absent)."""
    def batch(self) -> Batch:
        """A new atomic batch: ``with store.batch() as b: b.put(...);
        b.delete(...)`` commits every operation or none on a clean exit (one
        commit, one sync), and discards them when the block raises."""
    def get_many(self, keys: Iterable[_Key]) -> list[Optional[bytes]]:
        """The whole object of each key, in order (``None`` for a key
        without one). Not one snapshot: a batch committed meanwhile may show
        for some keys only."""
    def contains(self, key: _Key) -> bool:
        """Whether ``key`` has an object."""
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> KeyIterator:
        """Every key, as ``bytes``: byte order with an ordered index, a
        snapshot's order with "hash"."""
    def __getitem__(self, key: _Key, /) -> bytes: ...
    def __setitem__(self, key: _Key, value: _BytesLike, /) -> None: ...
    def __delitem__(self, key: _Key, /) -> None: ...
    def list(self, prefix: Optional[_Key] = None) -> KeyIterator:
        """Keys starting with ``prefix``, in byte order, with every index
        ("hash": read from the tuple blocks by this call, one pass)."""
    def begin_upload(self, key: _Key, size: int) -> Upload:
        """Starts a multipart upload of exactly ``size`` bytes."""
    def list_uploads(self) -> List[UploadInfo]:
        """The uploads in progress on this store (begun through this
        process's open store, neither committed, aborted nor dropped),
        oldest first; memory only. Uploads are not persisted: one not
        committed when the process ends is gone at the next open, its space
        free. ``ClosedError`` after ``close()``."""
    def abort_upload(self, id: int) -> None:
        """Aborts upload ``id`` wherever its handle is: its space is freed
        once parts being written finish, and the handle's later
        ``write_part``/``commit`` raise ``ClosedError``. Raises
        ``NotFoundError`` when no such upload is in progress,
        ``ClosedError`` after ``close()``, ``TypeError`` for a non-int. A
        commit already under way is not stopped."""
    def stats(self) -> Stats:
        """Space and content figures (``stats()[name]`` also works)."""
    def bulk_load(
        self,
        items: Iterable[Union[Tuple[_Key, _BytesLike], List[Any]]],
        *,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> LoadReport:
        """Loads every ``(key, value)`` pair of ``items`` at sequential
        speed, committed in groups (visible group by group); values must be
        bytes-like (``TypeError`` otherwise). ``progress(objects, bytes)``
        is called at most every 0.25 s and with the totals at the end. On
        an error what was committed before stays (a prefix of ``items``)."""
    def grow(self, capacity: int) -> None:
        """Grows the store file to ``capacity`` bytes (rounded down to 4096)
        now, with the space reserved on the file system; durable on return.
        The current size is a no-op. Raises ``InvalidArgumentError`` for a
        smaller size (a store never shrinks) or one above ``max_capacity``,
        ``UnsupportedError`` on a block device or a read-only store,
        ``NoSpaceError`` when the file system is full (the store keeps its
        size), ``ClosedError`` after ``close()``, ``TypeError`` for a
        non-int."""
    def sync(self) -> None:
        """Barrier: everything acknowledged before is durable."""
    def backup(
        self,
        dest: Union[str, bytes, "PathLike[str]", "PathLike[bytes]"],
        *,
        progress: Optional[Callable[[int, int], object]] = None,
    ) -> BackupReport:
        """Writes a consistent copy of the store to ``dest``, which must not
        exist yet, while other threads go on reading and writing; open the
        copy with ``Store(dest)``. The copy holds the objects live at the
        call, is checked against the source's bytes before this returns,
        and appears under ``dest`` only once complete.

        ``progress(objects, bytes)``, as for ``bulk_load``, is called with
        what has been copied so far at most every 0.25 s (on the calling
        thread) and with the totals before this returns. A backup cannot be
        stopped half way: an exception from ``progress`` is raised once the
        backup has ended, with a note saying whether the copy was made.

        Raises ``AlreadyExistsError`` if ``dest`` exists (nothing is ever
        replaced; errno EEXIST), ``PathNotFoundError`` (a ``NotFoundError``
        and a ``FileNotFoundError``) if its directory does not exist,
        ``InvalidArgumentError`` if it names no file, ``ClosedError`` after
        ``close()``, ``CorruptError`` if an object fails its checksums,
        ``NoSpaceError``, ``IOError`` (``errno``, ``strerror``, ``filename``);
        ``TypeError`` if ``dest`` is not a ``str`` or ``os.PathLike``, or
        ``progress`` is not callable.
        """
    def compact(self) -> CompactReport:
        """Moves objects towards the start of the store so that free space
        left in small holes by deletes joins into large pieces, while other
        threads go on reading and writing; moved objects keep their version,
        creation time and expiry. A put that finds no room although enough
        is free does this by itself. Raises ``UnsupportedError`` on a
        read-only store, ``ClosedError`` after ``close()``."""
    def close(self) -> None:
        """Finishes pending commits and releases the lock."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        """Closes the store; never swallows the exception."""

@final
class EventLoop:
    """Runs a store's asyncio calls on the event loop's thread (see
    ``blobcask.aio``): watch ``fds()`` with ``loop.add_reader(fd, run)``."""
    def __new__(cls, store: Store) -> Self: ...
    def fds(self) -> list[int]:
        """Descriptors to watch for readability."""
    def run(self) -> None:
        """Delivers completions and resolves finished calls' futures."""
    def __len__(self) -> int: ...
    def cancel(self, task: int) -> bool:
        """Drops a pending call (a put or delete may still land)."""
    def cancel_all(self) -> int:
        """Drops every pending call (their loop was closed)."""
    def read(self, key: _Key, offset: int, length: Optional[int], fut: "asyncio.Future[Any]") -> int:
        """Starts a read resolving ``fut`` with a ``Blob``; the task id."""
    def put(
        self,
        key: _Key,
        value: _BytesLike,
        if_absent: bool,
        if_version: Optional[int],
        ttl: Optional[_TTL],
        fut: "asyncio.Future[Any]",
    ) -> int:
        """Starts a put resolving ``fut`` with an ``ObjectInfo``; the task id."""
    def stat(self, key: _Key, fut: "asyncio.Future[Any]") -> int:
        """Starts a stat resolving ``fut`` with an ``ObjectInfo``; the task id."""
    def delete(self, key: _Key, fut: "asyncio.Future[Any]") -> int:
        """Starts a delete resolving ``fut`` with None; the task id."""

def crc32c(data: _BytesLike) -> int:
    """CRC32C (Castagnoli) of ``data``: the checksum ``Upload.write_part`` takes."""
