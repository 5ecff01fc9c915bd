"""A caching file system backed by blobcask (protocol ``blobcache``).

Chains onto any fsspec file system, as fsspec's ``blockcache`` and
``filecache`` do, and keeps what it reads in one blobcask store, so a
second read of a remote file is a local one, and stays so across
restarts (the cache is a store file)::

    import fsspec, pandas as pd

    opts = {"blobcache": {"store": "/var/cache/s3.blobcask"}, "s3": {"anon": False}}
    df = pd.read_parquet("blobcache::s3://bucket/data.parquet", storage_options=opts)
    with fsspec.open("blobcache::s3://bucket/key", **opts) as f:
        head = f.read(100)

or ``BlobcacheFileSystem(store="/var/cache/s3.blobcask", target_protocol="s3",
target_options={...})``, or ``fs=`` a file system instance instead of
``target_protocol``. ``store`` is a path (opened as ``blobcask.fsspec`` opens
stores: shared by every instance on the same file, on an ordered index;
``store_options`` go to ``blobcask.Store`` when it is opened: other
``store_options`` for a store already open in the process are a
``ValueError``, not ignored) or an open ``blobcask.Store``;
a store open read-only is refused (``ValueError``): a cache stores what
it reads. In a forked child (which inherits the store's handle, not its
lock) every read and write passes through to the target, uncached.

Reads go to the store first and fall through to the target. A file of at
most ``whole_file_limit`` bytes is cached whole, fetched in one request; a
larger one, if its identity is strong (below), as aligned blocks of
``block_size`` bytes (both default to 1 MiB), and a read fetches only the
blocks it lacks, consecutive ones in one ranged request.

Identity. Every cached piece is keyed by the remote file's identity, taken
from the target's ``info()``: its ETag and/or version (``ETag``/``etag``,
``VersionId``/``generation``/``version``: S3, GCS, blobcask) when the target
gives one, else its modification time and size (``mtime``,
``LastModified``, HTTP's ``Last-Modified``, ...: local files, plain HTTP
servers). A file whose ``info()`` has none of these, or no size, is not
cached (read straight from the target): ``memory://`` gives only a
creation time, which an edit in place (``"r+b"``) keeps.
An ETag or version is a *strong* identity: it is trusted to name one
sequence of bytes, whatever the server made it from, with two
exceptions, taken as weak: an HTTP weak ETag (``W/"..."``), and one that
is visibly a time and this size in hex (``"<hex>-<hex>"``, one part equal
to the size: nginx's and Apache's static-file ETags). An ETag that hides
a time and size some other way cannot be told apart, and is trusted.
A modification time and size is *weak*: two versions of one size
written within the target's time resolution (1-second file systems,
``cp -p``, ``utime``) look alike. A file of a
weak identity is therefore never cached as blocks, which could join
blocks of two such versions: it is cached only whole (one request), and
only if at most ``whole_file_limit`` bytes; a larger one is read through
the target uncached. Such a whole file may be served stale (the version
cached first) while a look-alike version replaces it, never mixed.
After every fetch from the target the identity is read again; if it
changed, the fetched bytes belong to another version, and the read starts
over under the new identity (``cat_file``: up to 3 times, then
``OSError(ESTALE)``). So a read never mixes pieces of two versions. A file
object keeps the identity it opened with: if the file changes once it has
returned bytes, a read that must fetch raises ``OSError(ESTALE)``.
One gap: a change undone while a block is fetched (version A, then B, then
A again, where the identity is a content hash as S3's single-part ETags
are) is not seen by the check after the fetch, and the block, B's bytes,
is cached as A's. fsspec's ``cat_file`` cannot pin a ranged read to a
version; the Rust tier (``blobcask-object-store``'s ``CachedObjectStore``)
fetches with ``If-Match`` and has no such gap.
A whole-file fetch whose length is not the size ``info()`` gave
(``/proc`` says 0, ``/sys`` 4096) is served as fetched, once, uncached
(``size_mismatch``); ``open`` fetches such a small file at once, and
opens it on the target when its bytes are of another size.

Freshness. ``check="always"`` (the default) asks the target's ``info()`` at
every open and every ``cat_file``, and serves cached pieces only of the
identity it reports: every read returns the target's current bytes, or its
``FileNotFoundError``. ``expiry=T`` (seconds; ``check="expiry"``) trusts a
cached identity for at most ``T`` seconds after it was last confirmed with
the target (confirmation times are kept in the store, so a restart keeps
them): no read returns bytes of a version replaced more than ``T`` seconds
before, and within that ``info()`` too is answered from the cache.

``open(path, "rb")`` accepts fsspec's buffering options (``cache_type``,
``cache_options``, ``block_size``: dask passes them) and ignores them: the
store is the file's cache. Other options (``version_id=``, ...) go to the
target and make the read uncached, as they do for ``cat_file``.

Writes (``open(..., "wb")``, ``pipe_file``, ``put_file``, ``cp_file``,
``touch``) go to the target, then drop what the cache holds for the path;
``rm``, ``rm_file`` and ``mv`` drop it too. A drop also bumps the path's
generation in this process: a read that asked the target before it
stores nothing after it (so a reader's record or piece of the old version
cannot land after the drop and be served for ``T``). Other processes
sharing the target are seen only by identity (``check``/``expiry``). Listings (``ls``, ``find``,
``glob``) pass through. A write inside a target's transaction drops the
cache at the file's close, before the transaction commits.
A path is keyed as the target names it (its ``_strip_protocol``); on a
local target, which resolves them, by its real path, so ``d//f``,
``d/./f``, ``d/x/../f`` and a symbolic link to it read and drop one entry
(an object store's ``a//b`` or ``a/../b`` is an object of its own: kept
apart). ``mv`` drops every file under the source, recursive or not.

Damage and room. A cached piece that the store reports damaged
(``CorruptError``) is deleted and fetched again, never served. Damage in a
tuple block makes the store refuse every change until it is reopened
(and reported again at close and open: the cache never reformats its
file); reads then go on uncached, and since records can no longer be
updated or dropped, none is trusted without asking the target. A full
store (``NoSpaceError``, e.g. with ``store_options={"max_capacity": ...}``)
or a piece too large for it makes reads pass through uncached; nothing
fails. A store error while dropping a path after a write (the write has
reached the target) does not fail the write: it is logged and counted
(``drop_failed``), and records are no longer trusted without asking the
target. ``cache_stats()`` counts hits,
misses, pieces dropped as damaged and pieces left uncached for room.

Stores opened from a path default to ``durability="buffered"`` with
``max_delay=0.1`` s (a cache needs no durable commit per piece: a crash
loses at most the last 0.1 s of cached pieces and confirmations, each
whole or absent); ``store_options`` override it. Bounded: with
``store_options={"max_capacity": BYTES}`` the store never grows past
``BYTES`` and, unless ``eviction`` is given too, evicts by S3-FIFO
(``eviction="s3fifo"``: hot pieces kept under scans) to make room for new
pieces, so a cache that is full still caches what is read now; without
``max_capacity`` the store grows as it fills. ``fs.store.stats()`` counts
the store's hits, misses, evictions and evicted bytes.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Union

import fsspec
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from ._cache_entry import Entry, check_size, freshness, identity_and_strength, identity_of
from ._native import Store as _NativeStore
from ._store import Store
from .errors import (
    CorruptError,
    Error,
    LockedError,
    NoSpaceError,
    NotFoundError,
    TooLargeError,
    UnsupportedError,
)
from .fsspec import _open_ordered, _opened, _opened_lock, _release

__all__ = [
    "BlobcacheFileSystem",
    "BlobcacheFile",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_WHOLE_FILE_LIMIT",
    "MAX_RESTARTS",
    "identity_of",
]

#: Size of the aligned blocks a large file is cached in.
DEFAULT_BLOCK_SIZE = 1 << 20
#: Files of at most this many bytes are cached whole.
DEFAULT_WHOLE_FILE_LIMIT = 1 << 20
#: How many times a ``cat_file`` starts over when the file changes under it.
MAX_RESTARTS = 3

_KEY_FORMAT = "bc1"  # first component of every key this module writes

_log = logging.getLogger(__name__)

# The options this module opened each store path with (by real path), so
# that other store_options for an already open store are refused rather
# than silently ignored.
_opened_with: dict[str, dict[str, Any]] = {}

# open() options that say how a file object buffers, not what it reads.
_BUFFERING_OPTIONS = ("cache_type",)

# Wall-clock time of confirmations (a module attribute, so tests can move it).
_clock: Callable[[], float] = time.time

# Invalidation generations, per path, in this process: every drop of a
# path (a write, rm, invalidate, a deletion found) bumps its counter; a
# reader takes it before asking the target and stores what it fetched (a
# record, pieces) only if it is unchanged, checked under the same lock
# as the put. So a put held back while a write replaces the file and
# drops the cache cannot land after the drop. Striped: paths share
# 4096 counters (a shared counter only costs a spurious uncached read).
_STRIPES = 4096
_generations = [0] * _STRIPES
_generation_locks = [threading.Lock() for _ in range(_STRIPES)]


class _Changed(Exception):
    """The remote file's identity changed while a read fetched from it."""


class _SizeMismatch(_Changed):
    """A whole-file fetch returned another length than ``info()`` gave
    (``/proc``, ``/sys``, a file that changed): ``data`` is what the target
    returned, in one request, to pass through uncached."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data = data


class BlobcacheFileSystem(ChainedFileSystem):
    """Caches any fsspec file system's files in a blobcask store; see the
    module's documentation."""

    protocol = "blobcache"
    # A chained URL's path (fo) names a file, not this file system: one
    # instance serves every path.
    _strip_tokenize_options = ("fo",)

    def __init__(
        self,
        store: Union[str, "os.PathLike[str]", _NativeStore, None] = None,
        *,
        target_protocol: Optional[str] = None,
        target_options: Optional[dict[str, Any]] = None,
        fs: Optional[fsspec.AbstractFileSystem] = None,
        check: Optional[str] = None,
        expiry: Union[int, float, None] = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        whole_file_limit: int = DEFAULT_WHOLE_FILE_LIMIT,
        store_options: Optional[dict[str, Any]] = None,
        namespace: Optional[str] = None,
        fo: Optional[str] = None,
    ) -> None:
        super().__init__()
        self._expiry = freshness(check, expiry)
        self.block_size = check_size("block_size", block_size, 1)
        self.whole_file_limit = check_size("whole_file_limit", whole_file_limit, 0)
        if (fs is None) == (target_protocol is None):
            raise ValueError("give exactly one of target_protocol= or fs=")
        if fs is not None:
            if not isinstance(fs, fsspec.AbstractFileSystem):
                raise TypeError(f"fs must be an fsspec file system, not {type(fs).__name__!r}")
            if target_options:
                raise ValueError("target_options go with target_protocol=, not with fs=")
            self.fs = fs
        else:
            if not isinstance(target_protocol, str):
                raise TypeError(
                    f"target_protocol must be a str, not {type(target_protocol).__name__!r}"
                )
            if target_options is not None and not isinstance(target_options, dict):
                raise TypeError(
                    f"target_options must be a dict, not {type(target_options).__name__!r}"
                )
            self.fs = fsspec.filesystem(target_protocol, **(target_options or {}))
        # A local target's paths name files through the OS, which resolves
        # "//", "/./", "/../" and symbolic links: keys are then made from
        # the real path, so every spelling of a file reads and drops one
        # entry. Other targets' paths are names (an object store's
        # "a/../b" and "b" are two objects): keys are the path as the
        # target's _strip_protocol gives it.
        self._local = isinstance(self.fs, LocalFileSystem)
        if namespace is not None and not isinstance(namespace, str):
            raise TypeError(f"namespace must be a str, not {type(namespace).__name__!r}")
        self.namespace = namespace if namespace is not None else self._default_namespace()
        self.store, self._own_path = self._store(store, store_options)
        # The process that may use the store: a forked child inherits the
        # handle but not its lock (every call would be LockedError), so
        # there the cache passes everything through to the target.
        self._pid: Optional[int] = os.getpid()
        try:  # a probe that writes nothing: the key is never written
            self.store.delete(f"{_KEY_FORMAT}/read-only-probe")
        except NotFoundError:
            pass
        except LockedError:
            self._pid = None  # made in a forked child: never usable here
        except UnsupportedError:
            raise ValueError(
                "the cache's store is open read-only: a cache must store what it "
                "reads (open it writable, or read the target directly)"
            ) from None
        self._stats = {
            "hits": 0,
            "misses": 0,
            "corrupt": 0,
            "uncached": 0,
            "restarts": 0,
            "raced": 0,
            "drop_failed": 0,
            "size_mismatch": 0,
        }
        self._trust_records = True  # until the store refuses a change

        strip_own = getattr(type(self), "_strip_protocol")

        def _strip_protocol(path: Any) -> Any:
            # Per instance: the target's rules after this protocol's.
            return self.fs._strip_protocol(strip_own(path))

        self._strip_protocol = _strip_protocol

    def _default_namespace(self) -> str:
        """Which remote the keys belong to: the target's protocol and the
        options it was made with (stable across processes, unlike fsspec's
        instance token)."""
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        options = json.dumps(self.fs.storage_options, sort_keys=True, default=repr)
        return f"{protocol}:{options}"

    @staticmethod
    def _store(
        store: Any, store_options: Optional[dict[str, Any]]
    ) -> tuple[_NativeStore, Optional[str]]:
        if store_options is not None and not isinstance(store_options, dict):
            raise TypeError(f"store_options must be a dict, not {type(store_options).__name__!r}")
        if store_options and store_options.get("read_only"):
            raise ValueError("store_options read_only=True: a cache must store what it reads")
        if isinstance(store, _NativeStore):
            if store_options:
                raise ValueError("store_options go with a store path, not with an open store")
            return store, None
        if store is None:
            raise ValueError("store= is required: the cache's blobcask store (a path or a Store)")
        if not isinstance(store, (str, os.PathLike)):
            raise TypeError(
                f"store must be a path or a blobcask.Store, not {type(store).__name__!r}"
            )
        options = dict(store_options or {})
        if "durability" not in options:
            options.update(durability="buffered", max_delay=options.get("max_delay", 0.1))
        if "max_capacity" in options and "eviction" not in options:
            # A bounded cache makes room by evicting (S3-FIFO), not by
            # leaving new pieces uncached.
            options["eviction"] = "s3fifo"
        real = os.path.realpath(os.fspath(store))
        with _opened_lock:
            opened: Optional[Store] = _opened.get(real)
            if opened is None:
                opened = _opened[real] = _open_ordered(real, options)
                _opened_with[real] = options
            elif store_options is not None:
                before = _opened_with.get(real)
                if before is None:
                    raise ValueError(
                        f"the store {real!r} is already open in this process (by "
                        "blobcask.fsspec or a Store): store_options would not apply; "
                        "give no store_options, or pass the open Store as store="
                    )
                if before != options:
                    raise ValueError(
                        f"the store {real!r} is already open in this process with "
                        f"store_options {before!r}, not {options!r}: options apply only "
                        "when a store is opened (close the other cache first)"
                    )
        return opened, real

    def close(self) -> None:
        """Drops every instance on this store from fsspec's instance cache
        and, if the store was opened from a path, closes it (for every
        file system using it). A store passed in is its owner's to close."""
        with _opened_lock:
            if _release(type(self), self.store, self._own_path):
                assert self._own_path is not None
                _opened_with.pop(self._own_path, None)
                self.store.close()

    def cache_stats(self) -> dict[str, int]:
        """Counts since this instance was made: ``hits`` and ``misses``
        (pieces: whole files or blocks, served from the store or fetched),
        ``corrupt`` (pieces the store reported damaged, dropped and
        fetched again), ``uncached`` (pieces or records not stored for
        want of room), ``restarts`` (reads started over because the file
        changed while they fetched), ``raced`` (records or pieces not
        stored because a write dropped the path while they fetched),
        ``drop_failed`` (drops the store refused: records are no longer
        trusted without asking the target), ``size_mismatch`` (whole
        files whose bytes were not of ``info()``'s size: passed through
        uncached)."""
        return dict(self._stats)

    def __getattr__(self, name: str) -> Any:
        # What this class does not define is the target's (s3fs's sign(),
        # url(), ...). Only called when normal lookup fails.
        if name.startswith("__") or "fs" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["fs"], name)

    def _bypass(self) -> bool:
        """True in a process that cannot use the store (a forked child):
        reads pass through to the target uncached, writes drop nothing
        (this process cannot; others see the change by its identity)."""
        return self._pid != os.getpid()

    # -- keys -------------------------------------------------------------

    def _key_path(self, path: str) -> str:
        """The name a path's keys are made from (see ``_local``)."""
        return os.path.realpath(path) if self._local else path

    def _prefix(self, path: str) -> str:
        name = f"{self.namespace}\0{self._key_path(path)}"
        # surrogateescape: a local name that is not UTF-8 ("bad\udcff.bin",
        # as os.listdir gives it) is keyed by its own bytes
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:40]
        return f"{_KEY_FORMAT}/{digest}/"

    @staticmethod
    def _idhash(identity: str) -> str:
        return hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:24]

    def _whole_key(self, path: str, entry: Entry) -> str:
        return f"{self._prefix(path)}w/{self._idhash(entry.identity)}"

    def _block_key(self, path: str, entry: Entry, index: int) -> str:
        return f"{self._prefix(path)}b/{self._idhash(entry.identity)}/{self.block_size}/{index}"

    # -- the store, never failing a read ----------------------------------

    def _stripe(self, path: str) -> int:
        return int(self._prefix(path)[len(_KEY_FORMAT) + 1 :][:8], 16) % _STRIPES

    def _generation(self, path: str) -> int:
        i = self._stripe(path)
        with _generation_locks[i]:
            return _generations[i]

    def _bump(self, path: str) -> None:
        i = self._stripe(path)
        with _generation_locks[i]:
            _generations[i] += 1

    def _put(self, key: str, value: Any, path: str, generation: Optional[int]) -> bool:
        """Stores a piece or record of ``path``, fetched by a reader that
        started at invalidation ``generation`` (None: unchecked); False
        (and nothing stored) when the path was dropped since, when the
        store is full, or refuses changes for damage it found (the read
        goes on uncached; the store reports the damage at close and
        open)."""
        try:
            i = self._stripe(path)
            with _generation_locks[i]:
                if generation is not None and _generations[i] != generation:
                    self._stats["raced"] += 1
                    return False
                self.store.put(key, value)
        except (NoSpaceError, TooLargeError):
            self._stats["uncached"] += 1
            return False
        except CorruptError:
            self._refused_change()
            return False
        return True

    def _delete(self, key: str) -> None:
        """Deletes a piece or record if it can: one in a damaged tuple
        block stays, unreadable (every read of it is CorruptError, so it
        is never served)."""
        try:
            self.store.delete(key)
        except NotFoundError:
            pass
        except CorruptError:
            self._refused_change()

    def _refused_change(self) -> None:
        """The store refused a change for damage it found (it then refuses
        every change until reopened): records it could not update or drop
        may be out of date, so from now on none is trusted without asking
        the target (``expiry`` acts as ``check="always"``)."""
        self._stats["corrupt"] += 1
        self._trust_records = False

    def _read_piece(self, key: str, offset: int, length: int) -> Optional[bytes]:
        """``length`` bytes of a cached piece from ``offset``, or None when
        it is absent; a damaged piece (or one of the wrong length) is
        deleted and reported absent, never served."""
        try:
            data = self.store.read(key, offset, length)
        except NotFoundError:
            return None
        except CorruptError:
            self._stats["corrupt"] += 1
            self._delete(key)
            return None
        if len(data) != length:
            self._stats["corrupt"] += 1
            self._delete(key)
            return None
        return data

    def _drop(self, path: str, keep: Optional[Entry] = None) -> None:
        """Deletes what the cache holds for ``path``: everything, or every
        piece not of ``keep``'s identity (the record stays then).
        Dropping everything bumps the path's generation first, so no
        reader that started before stores anything after."""
        if self._bypass():
            return
        prefix = self._prefix(path)
        if keep is None:
            self._bump(path)
        kept: tuple[str, ...] = ()
        if keep is not None:
            idh = self._idhash(keep.identity)
            kept = (f"{prefix}m", f"{prefix}w/{idh}", f"{prefix}b/{idh}/")
        try:
            for key in list(self.store.list(prefix)):
                name = key.decode()
                if not any(name == k or (k.endswith("/") and name.startswith(k)) for k in kept):
                    self._delete(name)
        except Error as e:
            # Never fails the write or read that called it (a write has
            # reached the target by now): what stays may be out of date,
            # so no record is trusted from now on.
            _log.warning("blobcache: could not drop %r from the cache: %s", path, e)
            self._stats["drop_failed"] += 1
            self._trust_records = False

    def invalidate(self, path: str) -> None:
        """Drops everything the cache holds for ``path`` (its record and
        every piece of every version)."""
        self._drop(self._strip_protocol(path))

    # -- identity and freshness -------------------------------------------

    def _load_entry(self, path: str) -> Optional[Entry]:
        key = f"{self._prefix(path)}m"
        try:
            raw = self.store.get(key)
        except CorruptError:
            self._stats["corrupt"] += 1
            self._delete(key)
            return None
        if raw is None:
            return None
        try:
            return Entry.decode(raw)
        except (ValueError, KeyError, TypeError):
            self._delete(key)  # not a record this module wrote: ignore it
            return None

    def _remote_info(self, path: str) -> dict[str, Any]:
        """The target's ``info()``, never from its listings cache."""
        self.fs.invalidate_cache(path)
        try:
            info: dict[str, Any] = self.fs.info(path)
        except FileNotFoundError:
            self._drop(path)
            raise
        return info

    def _confirm(self, path: str, known: Optional[Entry], generation: int) -> Optional[Entry]:
        """Asks the target which version ``path`` is; records it when it
        changed (dropping other versions' pieces) or when its confirmation
        time matters (``expiry``). None: the target names no version, so
        the file is read uncached."""
        before = _clock()
        info = self._remote_info(path)
        if info.get("type", "file") != "file":
            raise IsADirectoryError(errno.EISDIR, "not a file", path)
        found, size = identity_and_strength(info), info.get("size")
        if found is None or not isinstance(size, int) or isinstance(size, bool):
            if known is not None:
                self._drop(path)
            return None  # no version, or no size, to key pieces by
        entry = Entry(found[0], size, before, info, found[1], generation)
        changed = known is None or known.identity != entry.identity
        if changed:
            self._drop(path, keep=entry)
        if changed or self._expiry is not None:
            self._put(f"{self._prefix(path)}m", entry.encode(), path, generation)
        return entry

    def _cacheable(self, entry: Entry) -> bool:
        """Whether ``entry``'s version can be read through the store: a
        strong identity always (whole or as blocks); a weak one (mtime
        and size) only whole, fetched in one request, so no read can join
        pieces of two versions that the identity cannot tell apart."""
        return entry.strong or entry.size <= self.whole_file_limit

    def _fresh(self, entry: Optional[Entry]) -> bool:
        if entry is None or self._expiry is None or not self._trust_records:
            return False
        age = _clock() - entry.confirmed
        return 0 <= age <= self._expiry

    def _current(self, path: str, force: bool = False) -> Optional[Entry]:
        """The version to read: the cached one while fresh (``expiry``),
        else the target's, confirmed now."""
        generation = self._generation(path)  # before the record or target says
        known = self._load_entry(path)
        if not force and known is not None and self._fresh(known):
            return replace(known, generation=generation)
        return self._confirm(path, known, generation)

    def _verify(self, path: str, entry: Entry) -> None:
        """After a fetch: _Changed unless the target still has ``entry``'s
        version (so what was fetched is of that version)."""
        try:
            info = self._remote_info(path)
        except FileNotFoundError:
            raise _Changed() from None
        if identity_of(info) != entry.identity:
            raise _Changed()

    # -- reading ----------------------------------------------------------

    def _read(self, path: str, entry: Entry, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``entry``'s version (clipped to its
        size): cached pieces, the missing ones fetched and stored."""
        end = min(end, entry.size)
        if start >= end and entry.size > 0:
            return b""  # (an empty file is fetched: its identity is checked)
        if entry.size <= self.whole_file_limit:
            return self._read_whole(path, entry, start, end)
        if not entry.strong:  # callers pass such a file through
            raise ValueError("a weak identity is never cached as blocks")
        b = self.block_size
        first, last = start // b, (end - 1) // b
        parts: dict[int, bytes] = {}
        missing: list[int] = []
        for index in range(first, last + 1):
            lo, hi = max(start, index * b), min(end, (index + 1) * b)
            piece = self._read_piece(self._block_key(path, entry, index), lo - index * b, hi - lo)
            if piece is None:
                missing.append(index)
            else:
                self._stats["hits"] += 1
                parts[index] = piece
        if missing:
            for index, block in self._fetch_blocks(path, entry, missing).items():
                lo, hi = max(start, index * b), min(end, (index + 1) * b)
                parts[index] = block[lo - index * b : hi - index * b]
        return b"".join(parts[i] for i in range(first, last + 1))

    def _read_whole(self, path: str, entry: Entry, start: int, end: int) -> bytes:
        key = self._whole_key(path, entry)
        piece = self._read_piece(key, start, end - start)
        if piece is not None:
            self._stats["hits"] += 1
            return piece
        self._stats["misses"] += 1
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            raise _Changed() from None
        if len(data) != entry.size:
            self._stats["size_mismatch"] += 1
            raise _SizeMismatch(bytes(data))
        self._verify(path, entry)
        self._put(key, data, path, entry.generation)
        return bytes(data[start:end])

    def _fetch_blocks(self, path: str, entry: Entry, indexes: list[int]) -> dict[int, bytes]:
        """Fetches the blocks ``indexes`` (sorted) from the target, runs of
        consecutive blocks in one ranged request each, checks that the
        file is still ``entry``'s version, then stores them."""
        b, size = self.block_size, entry.size
        runs: list[list[int]] = []
        for index in indexes:
            if runs and runs[-1][-1] == index - 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        starts = [run[0] * b for run in runs]
        ends = [min((run[-1] + 1) * b, size) for run in runs]
        self._stats["misses"] += len(indexes)
        try:
            datas = self.fs.cat_ranges([path] * len(runs), starts, ends, on_error="raise")
        except FileNotFoundError:
            raise _Changed() from None
        blocks: dict[int, bytes] = {}
        for run, lo, hi, data in zip(runs, starts, ends, datas):
            if isinstance(data, BaseException):
                raise data
            if len(data) != hi - lo:
                raise _Changed()  # the file is no longer entry's size
            for index in run:
                at = index * b - lo
                blocks[index] = bytes(data[at : at + min(b, size - index * b)])
        self._verify(path, entry)
        for index, block in blocks.items():
            if not self._put(self._block_key(path, entry, index), block, path, entry.generation):
                break  # full: the rest would not fit either
        return blocks

    def _cat_range(self, path: str, start: Optional[int], end: Optional[int]) -> bytes:
        if self._bypass():
            data0: bytes = self.fs.cat_file(path, start=start, end=end)
            return data0
        force = False
        for _ in range(MAX_RESTARTS):
            entry = self._current(path, force)
            if entry is None or not self._cacheable(entry):
                data: bytes = self.fs.cat_file(path, start=start, end=end)
                return data
            lo, hi = _resolve(start, end, entry.size)
            try:
                return self._read(path, entry, lo, hi)
            except _SizeMismatch as e:  # the target's bytes, not info()'s size
                return e.data[start:end]
            except _Changed:
                self._stats["restarts"] += 1
                force = True
        raise OSError(errno.ESTALE, f"the file changed during each of {MAX_RESTARTS} reads", path)

    # -- the file system ---------------------------------------------------

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        """Bytes ``[start:end]`` of the file (negative counts from the end),
        from the cache where it holds them, of one version. Options for
        the target (``version_id=``, ...) make it a read of the target,
        uncached: the cache cannot tell what they select."""
        for name, value in (("start", start), ("end", end)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"{name} must be an int or None, not {type(value).__name__!r}")
        path = self._strip_protocol(path)
        if kwargs:
            data: bytes = self.fs.cat_file(path, start=start, end=end, **kwargs)
            return data
        return self._cat_range(path, start, end)

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Any:
        path = self._strip_protocol(path)
        if mode != "rb":
            f = self.fs.open(
                path, mode, block_size=block_size, autocommit=autocommit, **kwargs
            )
            close = f.close

            def close_then_invalidate() -> None:
                try:
                    close()
                finally:
                    self._drop(path)

            f.close = close_then_invalidate
            return f
        # fsspec's own buffering options (dask passes cache_type=) are for
        # a target's file: the store is this one's cache, so they are
        # accepted and ignored, not taken for options that select a
        # version (which make the read uncached).
        for option in _BUFFERING_OPTIONS:
            kwargs.pop(option, None)
        entry = None if kwargs or self._bypass() else self._current(path)
        if entry is None or not self._cacheable(entry):
            # no identity, a large file of a weak one, or options for the
            # target: uncached
            return self.fs.open(
                path, mode, block_size=block_size, cache_options=cache_options, **kwargs
            )
        if entry.size <= self.whole_file_limit and not self.store.contains(
            self._whole_key(path, entry)
        ):
            # Fetched (and cached) now: a file whose bytes are not of the
            # size info() gives (/proc, /sys) is then opened on the target.
            try:
                self._read_whole(path, entry, 0, entry.size)
            except _SizeMismatch:
                return self.fs.open(
                    path, mode, block_size=block_size, cache_options=cache_options, **kwargs
                )
            except _Changed:
                pass  # the file object's first read starts over
        return BlobcacheFile(self, path, entry, block_size=block_size, cache_options=cache_options)

    def modified(self, path: str) -> Any:
        return self.fs.modified(self._strip_protocol(path))

    def created(self, path: str) -> Any:
        return self.fs.created(self._strip_protocol(path))

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> Any:
        return self.fs.sign(self._strip_protocol(path), expiration=expiration, **kwargs)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """The target's ``info()``; with ``expiry``, the cached one while
        it is fresh."""
        path = self._strip_protocol(path)
        if self._expiry is not None and not kwargs and not self._bypass():
            entry = self._load_entry(path)
            if entry is not None and self._fresh(entry):
                return dict(entry.info)
        info: dict[str, Any] = self.fs.info(path, **kwargs)
        return info

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return self.fs.ls(path, detail=detail, **kwargs)

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self.fs.find(path, *args, **kwargs)

    def glob(self, path: str, *args: Any, **kwargs: Any) -> Any:
        return self.fs.glob(path, *args, **kwargs)

    def exists(self, path: str, **kwargs: Any) -> bool:
        return bool(self.fs.exists(path, **kwargs))

    def isdir(self, path: str) -> bool:
        return bool(self.fs.isdir(path))

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.fs.mkdir(path, create_parents=create_parents, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.fs.makedirs(path, exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        self.fs.rmdir(path)

    def invalidate_cache(self, path: Optional[str] = None) -> None:
        """The target's listings cache (fsspec's meaning); the blob cache
        is dropped per path with ``invalidate``."""
        self.fs.invalidate_cache(path)

    # -- writes: through to the target, then drop what is cached ----------

    def pipe_file(self, path: str, value: Any, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        try:
            self.fs.pipe_file(path, value, **kwargs)
        finally:
            self._drop(path)

    def put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None:
        rpath = self._strip_protocol(rpath)
        try:
            self.fs.put_file(lpath, rpath, **kwargs)
        finally:
            self._drop(rpath)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path2 = self._strip_protocol(path2)
        try:
            self.fs.cp_file(self._strip_protocol(path1), path2, **kwargs)
        finally:
            self._drop(path2)

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        try:
            self.fs.touch(path, truncate=truncate, **kwargs)
        finally:
            self._drop(path)

    def rm_file(self, path: str) -> None:
        path = self._strip_protocol(path)
        try:
            self.fs.rm_file(path)
        finally:
            self._drop(path)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(
        self, path: Union[str, list[str]], recursive: bool = False, maxdepth: Optional[int] = None
    ) -> None:
        files = self._files(path, recursive, maxdepth)
        try:
            self.fs.rm(path, recursive=recursive, maxdepth=maxdepth)
        finally:
            for name in files:
                self._drop(name)

    def mv(
        self,
        path1: Union[str, list[str]],
        path2: str,
        recursive: bool = False,
        maxdepth: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        # Every file under path1, whatever recursive says: a target that
        # moves a directory tree without it (local) moves them all.
        sources = self._files(path1, True, None)
        try:
            self.fs.mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)
        finally:
            for name in sources + self._files(path2, True, None):
                self._drop(name)

    def _files(
        self, path: Union[str, list[str]], recursive: bool, maxdepth: Optional[int]
    ) -> list[str]:
        """The target's paths that ``path`` names (empty when none)."""
        try:
            names: list[str] = self.fs.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        except (FileNotFoundError, ValueError):
            return []
        return names


def _resolve(start: Optional[int], end: Optional[int], size: int) -> tuple[int, int]:
    """Slice bounds (None, negative from the end) as offsets in [0, size]."""
    lo = 0 if start is None else (max(0, size + start) if start < 0 else min(start, size))
    hi = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
    return lo, max(lo, hi)


class BlobcacheFile(AbstractBufferedFile):
    """A file of a ``BlobcacheFileSystem`` opened for reading: its reads
    come from the cache's pieces of the version found at open, missing
    ones fetched (see the module's documentation)."""

    fs: BlobcacheFileSystem

    def __init__(
        self,
        fs: BlobcacheFileSystem,
        path: str,
        entry: Entry,
        block_size: Optional[int] = None,
        cache_options: Optional[dict[str, Any]] = None,
    ) -> None:
        self.entry = entry
        self._served = False
        # cache_type="none": the store is the cache; each read asks it for
        # exactly its range.
        super().__init__(
            fs,
            path,
            "rb",
            block_size=block_size or "default",
            cache_type="none",
            cache_options=cache_options,
            size=entry.size,
        )
        self.details = dict(entry.info)

    def _fetch_range(self, start: int, end: int) -> bytes:
        for _ in range(MAX_RESTARTS):
            try:
                data = self.fs._read(self.path, self.entry, start, end)
            except _Changed:
                self.fs._stats["restarts"] += 1
                if self._served:
                    break
                entry = self.fs._current(self.path, force=True)
                if entry is None or entry.size != self.entry.size or not self.fs._cacheable(entry):
                    break
                self.entry = entry  # nothing returned yet: read the new version
                continue
            self._served = True
            return data
        raise OSError(errno.ESTALE, "the file was replaced or deleted while open", self.path)
