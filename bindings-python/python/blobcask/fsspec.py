"""fsspec front-end: a blobcask store as a file system (protocol ``blobcask``).

pandas, pyarrow, dask and anything else that speaks fsspec read and write a
store through it::

    import pandas as pd

    opts = {"path": "/data/media.blobcask"}
    df.to_parquet("blobcask://tables/sales.parquet", storage_options=opts)
    df = pd.read_parquet("blobcask://tables/sales.parquet", storage_options=opts)

A URL alone can name both, by fsspec's chaining (as ``zip://`` and
``tar://`` name an archive): the key, ``::``, then the store's path or
``file://`` URL. No ``storage_options`` are needed::

    df = pd.read_parquet("blobcask://tables/sales.parquet::/data/media.blobcask")
    with fsspec.open("blobcask://docs/a.txt::file:///data/media.blobcask", "wb") as f:
        f.write(b"...")

fsspec hands the part after ``::`` to the file system as ``fo`` (with
``target_protocol``), so ``BlobcaskFileSystem(fo="/data/media.blobcask")``
is the same as ``path=``; a store is a local file or block device, so a
chain onto any other protocol (``s3://``, ``memory://``) is refused with a
``ValueError`` (to cache a remote object store in blobcask, use the store
as a cache in front of it rather than inside it). Options of ``Store`` go
in ``storage_options`` as usual, or per protocol:
``storage_options={"blobcask": {"capacity": 1 << 30}}``.

Construct with an open store, ``BlobcaskFileSystem(store=store)``, or with
a path and the options of ``Store``,
``BlobcaskFileSystem(path="/data/media.blobcask")``; without an ``index``
option the store's stored kind is used when it is ordered, else
``"btree"`` (a new store, or one on the hash index, which then keeps
``"btree"``): the file system lists at almost every call, and on the hash
index each listing reads every tuple block. Stores
opened from a path are shared: every instance on the same file, whatever
its thread (fsspec caches one instance per thread), uses one ``Store`` (a
file has one open handle at a time; the options of the first open apply),
and ``close()`` closes it for all of them. fsspec's cache keeps instances,
and so their stores, alive until ``close()`` or ``clear_instance_cache()``.
Listing is how directories are found: a store passed in on the hash
index works, but each listing (``ls``, ``find``, ``info`` of a directory)
is then a pass over its tuple blocks; "btree" or "fst" list from memory.

Paths are keys, as on S3. The protocol and any leading or trailing "/" are
stripped and repeated "/" are one (``blobcask:///a/b.txt``, ``/a/b.txt``,
``a//b.txt`` and ``a/b.txt`` are the key ``a/b.txt``); a path with a "."
or ".." component is refused (``InvalidArgumentError``, a ``ValueError``):
keys are names, not resolved like a file system's, and such a key could
not be listed or removed by path. So every key written through the file
system is listed and removed through it. Keys are UTF-8 (bytes that are
not come back through ``surrogateescape``). Directories are implied by
the keys under them: no directory markers are stored, so a directory
exists exactly while some object lies under it, ``mkdir``/``makedirs``
store nothing (they refuse a path that is a file) and there are no empty
directories. Keys written otherwise that no path can name (an empty, "."
or ".." component: a trailing ``/``, ``//``, ``../x``) are left out of
listings, and make no directory.

Reads: ``cat_file`` is one ``Store.read`` of the range; files opened for
reading fetch their blocks the same way and raise ``OSError(ESTALE)`` if
the object is replaced or deleted while open, rather than mix versions.
Writes: an upload's size is needed up front, so a file opened for writing
is buffered in memory until ``close()``, which commits it atomically: one
``put`` when it fits in one block, else one multipart upload whose parts
are the buffered blocks. Mode ``"xb"`` refuses an existing path at open and
commits with a create-only put (decided atomically by the store).
A ``with fs.open(...)`` block that raises commits nothing; transactions
(``with fs.transaction:``) commit every file at the end.

``created``/``modified`` are the commit time of the object's current
version (an object is only ever replaced whole, never modified in place);
``checksum`` is that version and ``ukey`` derives from it.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import os
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Union

import fsspec
from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.spec import AbstractBufferedFile

from ._native import PART_ALIGN
from ._records import ObjectInfo
from ._native import Store as _NativeStore
from ._store import Store
from .errors import InvalidArgumentError, NotFoundError

__all__ = ["BlobcaskFileSystem", "BlobcaskFile"]

# Stores opened from a path, by real path: shared by every instance.
_opened: dict[str, Store] = {}
_opened_lock = threading.Lock()


def _release(fs_class: Any, store: Any, own_path: Optional[str]) -> bool:
    """For a file system class's ``close`` (``_opened_lock`` held): drops
    every instance of ``fs_class`` on ``store`` from fsspec's instance
    cache and, when ``own_path`` is the path ``store`` was opened from and
    it is still open there, forgets it: True then, and the caller closes
    it."""
    cache = fs_class._cache
    for token, fs in list(cache.items()):
        if fs.store is store:
            del cache[token]
    if own_path is not None and _opened.get(own_path) is store:
        del _opened[own_path]
        return True
    return False


def _open_ordered(path: str, options: dict[str, Any]) -> Store:
    """Opens the store at ``path`` on an ordered index: the one given, else
    the store's stored kind when ordered, else "btree". The index is passed
    only when needed: an explicit kind at a read-write open replaces the
    stored one."""
    if "index" in options:
        return Store(path, **options)
    if not os.path.exists(path) or (os.path.isfile(path) and os.path.getsize(path) == 0):
        return Store(path, index="btree", **options)  # a new store
    store = Store(path, **options)
    if store.stats()["index"] != "hash":
        return store
    store.close()
    return Store(path, index="btree", **options)


_LOCAL = {None, "file", "local"}


def _local_store_path(
    fo: Union[str, "os.PathLike[str]"],
    target_protocol: Optional[str],
    target_options: Optional[dict[str, Any]],
) -> str:
    """The store's path from a chained URL's ``fo``: a local path or
    ``file://`` URL; any other protocol is refused, never fetched."""
    fo = os.fspath(fo)
    inner, _, rest = fo.partition("://") if "://" in fo else (None, "", fo)
    protocol = target_protocol if target_protocol is not None else inner
    if isinstance(protocol, (list, tuple)):
        protocol = protocol[0] if len(protocol) == 1 else None
    if protocol not in _LOCAL:
        raise ValueError(
            f"a blobcask store is a local file or block device; the URL chains it onto "
            f"{protocol!r}: give its local path (blobcask://KEY::/path/to/store.blobcask)"
        )
    if target_options:
        raise ValueError(f"options for the store's file ({sorted(target_options)}) are not used")
    path = rest if inner is not None else fo
    if not path:
        raise ValueError("the chained URL names no store path after '::'")
    return path


def _bytes_like(value: Any) -> Any:
    """``value`` if it is bytes-like; TypeError otherwise (no coercion of
    ``str``, ``int`` or lists, which ``Store.put`` would accept or turn into
    bytes)."""
    try:
        memoryview(value)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(value).__name__!r}") from None
    return value


_SLASHES = re.compile("//+")


def _nameable(name: str) -> bool:
    """Whether a path names this key (or key suffix): no empty, "." or
    ".." component."""
    return not any(part in ("", ".", "..") for part in name.split("/"))


@contextmanager
def _missing_as_file_not_found(path: str) -> Iterator[None]:
    try:
        yield
    except NotFoundError as e:
        raise FileNotFoundError(errno.ENOENT, "no such object", path) from e


class BlobcaskFileSystem(fsspec.AbstractFileSystem):
    """A blobcask store seen through fsspec; see the module's documentation."""

    protocol = "blobcask"
    root_marker = ""

    def __init__(
        self,
        store: Optional[_NativeStore] = None,
        *,
        path: Union[str, "os.PathLike[str]", None] = None,
        fo: Union[str, "os.PathLike[str]", None] = None,
        target_protocol: Optional[str] = None,
        target_options: Optional[dict[str, Any]] = None,
        **store_options: Any,
    ) -> None:
        super().__init__()
        if fo is not None:
            # A chained URL's store (``blobcask://key::/path/to/store``).
            if path is not None:
                raise ValueError("give the store's path once: path= or a chained URL, not both")
            path = _local_store_path(fo, target_protocol, target_options)
        elif target_protocol is not None or target_options:
            raise ValueError("target_protocol/target_options go with a chained URL's store (fo=)")
        if (store is None) == (path is None):
            raise ValueError(
                "give exactly one of store= or path= (or name the store in the URL: "
                "blobcask://KEY::/path/to/store.blobcask)"
            )
        self._own_path: Optional[str] = None
        if store is None:
            real = os.path.realpath(os.fspath(path))  # type: ignore[arg-type]
            with _opened_lock:
                store = _opened.get(real)
                if store is None:
                    store = _opened[real] = _open_ordered(real, store_options)
            self._own_path = real
        elif not isinstance(store, _NativeStore):
            raise TypeError(f"store must be a blobcask.Store, not {type(store).__name__!r}")
        elif store_options:
            raise ValueError("store options go with path=, not with an open store")
        self.store = store

    def close(self) -> None:
        """Drops every instance on this store from fsspec's instance cache
        and, if the store was opened from a path, closes it (for all of
        them). A store passed in is its owner's to close."""
        with _opened_lock:
            if _release(type(self), self.store, self._own_path):
                self.store.close()

    # -- paths and keys -------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = _SLASHES.sub("/", super()._strip_protocol(path).lstrip("/"))
        if path and not _nameable(path):
            raise InvalidArgumentError(
                f"path {path!r} has a '.' or '..' component; keys are names, not resolved"
            )
        return path

    def _key(self, path: str) -> bytes:
        path = self._strip_protocol(path)
        if not path:
            raise IsADirectoryError(errno.EISDIR, "the root is a directory", path)
        return path.encode("utf-8", "surrogateescape")

    @staticmethod
    def _name(key: bytes) -> str:
        return key.decode("utf-8", "surrogateescape")

    def _stat(self, path: str) -> Optional[ObjectInfo]:
        """The object at ``path``, or None."""
        try:
            return self.store.stat(self._key(path))
        except (NotFoundError, IsADirectoryError):
            return None

    def _has_children(self, path: str) -> bool:
        path = self._strip_protocol(path)
        prefix = path + "/" if path else ""
        keys = self.store.list(prefix.encode("utf-8", "surrogateescape"))
        return any(_nameable(self._name(key)[len(prefix) :]) for key in keys)

    @staticmethod
    def _file_info(name: str, st: ObjectInfo) -> dict[str, Any]:
        return {
            "name": name,
            "size": st.size,
            "type": "file",
            "created": st.created,
            "mtime": st.created,
            "version": st.version,
        }

    # -- metadata -------------------------------------------------------

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        st = self._stat(path)
        if st is not None:
            return self._file_info(path, st)
        if not path or self._has_children(path):
            return {"name": path, "size": 0, "type": "directory"}
        raise FileNotFoundError(errno.ENOENT, "no such object or directory", path)

    def exists(self, path: str, **kwargs: Any) -> bool:
        # Not the base class's (it turns every error, ClosedError too, into False).
        path = self._strip_protocol(path)
        return not path or self._stat(path) is not None or self._has_children(path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        prefix = path + "/" if path else ""
        entries: dict[tuple[str, str], Optional[dict[str, Any]]] = {}
        for key in self.store.list(prefix.encode("utf-8", "surrogateescape")):
            rest = self._name(key)[len(prefix) :]
            if _nameable(rest):
                child, sep, _ = rest.partition("/")
                entries[(prefix + child, "directory" if sep else "file")] = None
        if not entries:
            if not path:
                return []
            st = self._stat(path)
            if st is None:
                raise FileNotFoundError(errno.ENOENT, "no such object or directory", path)
            return [self._file_info(path, st) if detail else path]
        if not detail:
            return [name for name, _ in entries]
        out = []
        for name, kind in entries:
            if kind == "directory":
                out.append({"name": name, "size": 0, "type": "directory"})
            elif (st := self._stat(name)) is not None:  # else deleted meanwhile
                out.append(self._file_info(name, st))
        return out

    def find(
        self,
        path: str,
        maxdepth: Optional[int] = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Union[list[str], dict[str, dict[str, Any]]]:
        """One listing (the base class lists directory by directory)."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        path = self._strip_protocol(path)
        prefix = path + "/" if path else ""
        out: dict[str, Optional[dict[str, Any]]] = {}
        for key in self.store.list(prefix.encode("utf-8", "surrogateescape")):
            rest = self._name(key)[len(prefix) :]
            if not _nameable(rest):
                continue
            parts = rest.split("/")
            if withdirs:  # the directories on the way, down to maxdepth
                deepest = len(parts) if maxdepth is None else min(len(parts), maxdepth + 1)
                for depth in range(1, deepest):
                    name = prefix + "/".join(parts[:depth])
                    out[name] = {"name": name, "size": 0, "type": "directory"}
            if maxdepth is None or len(parts) <= maxdepth:
                out[prefix + "/".join(parts)] = None
        if out and withdirs and path:
            out[path] = {"name": path, "size": 0, "type": "directory"}
        if not out and path and self._stat(path) is not None:
            out[path] = None  # find of a file is the file
        if not detail:
            return sorted(out)
        found = {}
        for name in sorted(out):
            info = out[name]
            if info is None and (st := self._stat(name)) is not None:
                info = self._file_info(name, st)
            if info is not None:
                found[name] = info
        return found

    def created(self, path: str) -> datetime.datetime:
        """Commit time of the object's current version (UTC)."""
        with _missing_as_file_not_found(path):
            t = self.store.stat(self._key(path)).created
        return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)

    modified = created  # objects are replaced whole, never changed in place

    def checksum(self, path: str) -> int:
        """The object's version: it changes with every commit."""
        with _missing_as_file_not_found(path):
            return self.store.stat(self._key(path)).version

    def ukey(self, path: str) -> str:
        token = f"{self._strip_protocol(path)}\0{self.checksum(path)}"
        return hashlib.sha256(token.encode()).hexdigest()

    # -- directories ----------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Stores nothing (directories are implied by their objects)."""
        if self._stat(path) is not None:
            raise FileExistsError(errno.EEXIST, "an object has this path", path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Stores nothing; FileExistsError for a file, or a directory that
        exists (has objects) unless ``exist_ok``."""
        if self._stat(path) is not None or (not exist_ok and self.exists(path)):
            raise FileExistsError(errno.EEXIST, "path exists", path)

    # -- reading and writing whole objects -----------------------------

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        """The bytes ``[start:end]`` of the object (negative counts from the
        end, as slices do), in one ``Store.read``."""
        key = self._key(path)
        with _missing_as_file_not_found(path):
            if (start is not None and start < 0) or (end is not None and end < 0):
                size = self.store.stat(key).size
                start = None if start is None else (max(0, size + start) if start < 0 else start)
                end = None if end is None else (max(0, size + end) if end < 0 else end)
            start = start or 0
            if end is not None and end <= start:
                self.store.stat(key)  # still FileNotFoundError when missing
                return b""
            try:
                return self.store.read(key, start, None if end is None else end - start)
            except InvalidArgumentError:
                if start >= self.store.stat(key).size:
                    return b""  # past the end: empty, as a slice is
                raise

    def pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        """Stores ``value`` (bytes-like) at ``path``: ``mode="overwrite"``
        creates or replaces, ``mode="create"`` only creates
        (FileExistsError, nothing changed, if the path has an object)."""
        if mode not in ("overwrite", "create"):
            raise ValueError(f"mode must be 'overwrite' or 'create', not {mode!r}")
        self.store.put(self._key(path), _bytes_like(value), if_absent=mode == "create")

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        """Uploads a local file: its size is known, so parts stream from the
        file without buffering it whole (``mode="create"`` reads it into one
        create-only put)."""
        if os.path.isdir(lpath):
            return  # directories are implied by what is put under them
        size = os.path.getsize(lpath)
        callback.set_size(size)
        with open(lpath, "rb") as f:
            if mode == "create" or size <= self.blocksize:
                self.pipe_file(rpath, f.read(), mode=mode)
                callback.relative_update(size)
                return
            upload = self.store.begin_upload(self._key(rpath), size)
            try:
                offset = 0
                while part := f.read(self.blocksize - self.blocksize % PART_ALIGN):
                    upload.write_part(offset, part)
                    offset += len(part)
                    callback.relative_update(len(part))
                upload.commit()
            except BaseException:
                upload.abort()
                raise

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copies through the store: one read and put, or block by block into
        a multipart upload (aborted with OSError(ESTALE) if the source is
        replaced meanwhile). A directory copies as nothing."""
        src, dst = self._key(path1), self._key(path2)
        st = self._stat(path1)
        if st is None:
            if self._has_children(path1):
                return
            raise FileNotFoundError(errno.ENOENT, "no such object", path1)
        step = self.blocksize - self.blocksize % PART_ALIGN
        with _missing_as_file_not_found(path1):
            if st.size <= step:
                self.store.put(dst, self.store.get_blob(src))
                return
            upload = self.store.begin_upload(dst, st.size)
            try:
                for offset in range(0, st.size, step):
                    upload.write_part(offset, self.store.read_blob(src, offset, step))
                if self.store.stat(src).version != st.version:
                    raise OSError(errno.ESTALE, "the source was replaced during the copy", path1)
                upload.commit()
            except BaseException:
                upload.abort()
                raise

    def _rm(self, path: str) -> None:
        with _missing_as_file_not_found(path):
            self.store.delete(self._key(path))

    def rm(
        self, path: Union[str, list[str]], recursive: bool = False, maxdepth: Optional[int] = None
    ) -> None:
        for p in reversed(self.expand_path(path, recursive=recursive, maxdepth=maxdepth)):
            try:
                self._rm(p)
            except FileNotFoundError:
                if not recursive:  # else an implied directory: nothing stored
                    raise

    # -- file objects ---------------------------------------------------

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> "BlobcaskFile":
        if mode == "ab":
            raise NotImplementedError("blobcask objects cannot be appended to; rewrite them")
        if mode == "xb" and self._stat(path) is not None:
            raise FileExistsError(errno.EEXIST, "an object has this path", path)
        block = block_size or "default"
        return BlobcaskFile(
            self, path, mode, block, autocommit, cache_options=cache_options, **kwargs
        )


class BlobcaskFile(AbstractBufferedFile):
    """A file of a ``BlobcaskFileSystem``: reads are ``Store.read`` ranges,
    writes are buffered until ``close()`` (or the transaction's end) and
    committed atomically."""

    fs: BlobcaskFileSystem

    def __init__(
        self, fs: BlobcaskFileSystem, path: str, mode: str = "rb", *args: Any, **kwargs: Any
    ) -> None:
        path = fs._strip_protocol(path)
        self.key = fs._key(path)
        self.version: Optional[int] = None
        self._chunks: Optional[list[bytes]] = []  # None once discarded
        if mode == "rb":
            with _missing_as_file_not_found(path):
                st = fs.store.stat(self.key)
            self.version = st.version
            kwargs["size"] = st.size
        super().__init__(fs, path, mode, *args, **kwargs)

    def _fetch_range(self, start: int, end: int) -> bytes:
        if start >= end or start >= self.size:
            return b""
        store = self.fs.store
        try:
            data = store.read(self.key, start, end - start)
            replaced = store.stat(self.key).version != self.version
        except NotFoundError:
            replaced = True
        if replaced:
            raise OSError(errno.ESTALE, "the object was replaced or deleted while open", self.path)
        return data

    def _upload_chunk(self, final: bool = False) -> bool:
        if self._chunks is None:
            return True  # discarded
        if self.buffer.tell():
            self._chunks.append(self.buffer.getvalue())
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        """Makes the written bytes the object at ``path``, atomically."""
        if self._chunks is None:
            return  # discarded
        chunks, self._chunks = self._chunks, None
        store, size = self.fs.store, sum(map(len, chunks))
        if self.mode == "xb" or len(chunks) <= 1:
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            store.put(self.key, data, if_absent=self.mode == "xb")
            return
        upload = store.begin_upload(self.key, size)
        try:
            offset, carry = 0, b""
            for chunk in chunks:
                view = memoryview(chunk)
                if carry:  # complete the unaligned tail of the previous chunk
                    take = PART_ALIGN - len(carry)
                    carry, view = carry + view[:take], view[take:]
                    if len(carry) < PART_ALIGN:
                        continue
                    upload.write_part(offset, carry)
                    offset, carry = offset + len(carry), b""
                aligned = len(view) - len(view) % PART_ALIGN
                if aligned:
                    upload.write_part(offset, chunk if aligned == len(chunk) else view[:aligned])
                    offset += aligned
                carry = bytes(view[aligned:])
            if carry:
                upload.write_part(offset, carry)
            upload.commit()
        except BaseException:
            upload.abort()
            raise

    def discard(self) -> None:
        """Drops what was written; nothing will be committed."""
        self._chunks = None

    def __exit__(self, exc_type: Optional[type[BaseException]], *args: Any) -> None:
        if exc_type is not None and self.writable():
            self.discard()  # the block raised: leave the object as it was
            self.closed = True
        else:
            self.close()
