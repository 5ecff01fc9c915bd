"""``blobcask.Store``: the native store, as a ``collections.abc.MutableMapping``.

The native class (``blobcask._native.Store``) has every call that reaches
the engine, the mapping basics among them (``store[key]``, ``get``, ``in``,
``len``, ``iter``, ``del``). This subclass adds the rest of the
``MutableMapping`` API, mostly as the ABC's own mixins, with these
choices (documented in the README):

* Keys come back as ``bytes`` (``iter(store)``, ``keys()``, ``items()``,
  ``popitem()``), whether they were put as ``str`` or bytes: the store keeps
  bytes only, and ``"k"`` and ``b"k"`` are one key. Every method that takes
  a key takes either.
* A key that is neither ``str`` nor bytes-like is a ``TypeError`` wherever
  a key is taken, ``in`` included (as ``dbm`` and py-lmdb do): it can never
  be a key, so asking is a bug, not a miss.
* ``items()`` and ``values()`` skip keys whose object goes away between
  being listed and being read (a delete or an expiry meanwhile), instead
  of raising in the middle of an iteration.
* To a type checker a ``Store`` is a ``MutableMapping[bytes, bytes]``
  (what iteration and reads give); its methods take ``str`` keys too, and
  any bytes-like value (``str`` values are refused: a ``TypeError`` at run
  time, an error to mypy).
* Equality is identity and stores are hashable, like files: ``Mapping``'s
  ``==`` would read every object of both stores.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, MutableMapping, ValuesView
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union, overload

from ._native import Blob
from ._native import Store as _NativeStore
from .errors import AlreadyExistsError, NotFoundError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["Store"]

Key = Union[str, bytes, bytearray, memoryview, Blob]
_T = TypeVar("_T")
_MISSING: Any = object()


class Store(_NativeStore, MutableMapping[bytes, bytes]):
    """An open blob store, and a ``MutableMapping`` of keys to ``bytes``.

    Thread-safe; every call that does I/O releases the GIL. See
    ``blobcask._native.Store`` for the calls and the options of
    ``Store(path, ...)``.
    """

    __slots__ = ()

    # Identity, not Mapping's content comparison (which would read every
    # object of both stores); hashable again (Mapping's __eq__ unset it).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def keys(self) -> KeysView[bytes]:
        """A view of the keys, as ``bytes``; ``in`` takes ``str`` keys too."""
        return KeysView(self)

    def items(self) -> ItemsView[bytes, bytes]:
        """A view of ``(key, value)`` pairs: keys as ``bytes``, values read
        as the iteration reaches them (one ``get`` each). A key whose
        object is gone by then (deleted, expired) is skipped."""
        return _ItemsView(self)

    def values(self) -> ValuesView[bytes]:
        """A view of the values, read as the iteration reaches them; keys
        gone by then are skipped (see ``items``)."""
        return _ValuesView(self)

    @overload
    def pop(self, key: Key, /) -> bytes: ...
    @overload
    def pop(self, key: Key, default: bytes, /) -> bytes: ...
    @overload
    def pop(self, key: Key, default: _T, /) -> Union[bytes, _T]: ...
    def pop(self, key: Key, default: Any = _MISSING, /) -> Any:
        """Deletes ``key`` and returns the value it had; ``default`` when
        absent, or NotFoundError (a KeyError) without one. A read, then a
        delete: not atomic against another writer of the same key (the
        store has no conditional delete)."""
        try:
            value = self[key]
        except NotFoundError:
            if default is _MISSING:
                raise
            return default
        try:
            self.delete(key)
        except NotFoundError:
            pass  # deleted meanwhile by another writer: popped all the same
        return value

    def popitem(self) -> tuple[bytes, bytes]:
        """Deletes and returns one ``(key, value)`` pair: the first key in
        iteration order (the smallest with an ordered index). NotFoundError
        (a KeyError) when the store is empty. With the hash index each
        call lists every key first: ``clear()`` empties a store faster."""
        for key in self:
            value = self.get(key)
            if value is None:
                continue  # gone meanwhile
            try:
                self.delete(key)
            except NotFoundError:
                continue
            return key, value
        raise NotFoundError("NOT_FOUND: popitem(): the store is empty")

    def clear(self) -> None:
        """Deletes every object, one durable delete each (keys added
        meanwhile may stay)."""
        for key in self:
            try:
                self.delete(key)
            except NotFoundError:
                pass

    def setdefault(self, key: Key, default: Optional[Buffer] = None, /) -> bytes:
        """``store[key]`` if present, else stores ``default`` and returns it
        as ``bytes``. ``default`` must be bytes-like: ``None`` is no value,
        so leaving it out raises ``TypeError`` (for an absent key). Atomic:
        of several racing ``setdefault`` calls one stores its value, and
        every one returns that value."""
        while True:
            value = self.get(key)
            if value is not None:
                return value
            if default is None:
                raise TypeError(
                    "setdefault needs a bytes-like default for an absent key: "
                    "None cannot be stored"
                )
            try:
                self.put(key, default, if_absent=True)
            except AlreadyExistsError:
                continue  # another writer won: read what it stored
            return default if type(default) is bytes else bytes(default)

    def __repr__(self) -> str:
        return f"<blobcask.Store at {id(self):#x}>"


class _ItemsView(ItemsView[bytes, bytes]):
    _mapping: Store  # set by MappingView.__init__

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        store = self._mapping
        for key in store:
            value = store.get(key)
            if value is not None:
                yield key, value


class _ValuesView(ValuesView[bytes]):
    _mapping: Store  # set by MappingView.__init__

    def __iter__(self) -> Iterator[bytes]:
        store = self._mapping
        for key in store:
            value = store.get(key)
            if value is not None:
                yield value
