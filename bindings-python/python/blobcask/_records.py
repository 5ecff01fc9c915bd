"""The reports a store gives, as frozen dataclasses.

The native layer builds them from the core's one description of each
report (``blobcask::report`` in Rust), by field name: a figure the core
adds and this module lacks fails loudly (``TypeError`` from the
constructor) instead of being dropped. Times are seconds since the Unix
epoch, durations seconds, as ``time.time()`` gives them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Optional

__all__ = [
    "ObjectInfo",
    "BackupReport",
    "CompactReport",
    "UploadInfo",
    "LoadReport",
    "CacheStats",
    "RecoveryReport",
    "Stats",
]


class _Figures:
    """What every report adds to its fields: ``as_dict()``, and
    ``report["name"]``, ``"name" in report`` and iteration over the names,
    as the dict ``stats()`` once returned allowed."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = getattr(type(self), "__match_args__")
        return names

    def as_dict(self) -> dict[str, Any]:
        """Every figure as a dict: reports inside it as nested dicts, lines
        of text as lists (the form ``stats()`` once returned)."""
        out: dict[str, Any] = {}
        for name in self._names():
            value = getattr(self, name)
            if isinstance(value, _Figures):
                value = value.as_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    def __getitem__(self, name: str, /) -> Any:
        """``as_dict()[name]``: ``stats()["capacity"]``,
        ``stats()["cache"]["hits"]``; ``KeyError`` for a name that is no
        figure, ``TypeError`` for a name that is no ``str``."""
        if not isinstance(name, str):
            raise TypeError(f"figure names are str, not {type(name).__name__}")
        return self.as_dict()[name]

    def __contains__(self, name: object, /) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        """The figures' names, in order."""
        return iter(self._names())


@dataclass(frozen=True, slots=True)
class ObjectInfo(_Figures):
    """What a commit produced, or what ``stat`` reports.

    ``size`` in bytes; ``version``: larger for every later commit in the
    store; ``created``: commit time; ``inline``: whether the value is stored
    inline in its tuple (small values); ``expires``: when it expires (put
    with a ``ttl``), None: never. Times are seconds since the Unix epoch.
    """

    size: int
    version: int
    created: float
    inline: bool
    expires: Optional[float]


@dataclass(frozen=True, slots=True)
class BackupReport(_Figures):
    """What ``Store.backup`` did.

    ``path``: where the copy is (the destination given); ``objects``: the
    live objects when the backup started; ``bytes``: theirs (keys not
    counted); ``elapsed``: seconds from the call to the copy being verified
    and published; ``bytes_per_sec`` over the whole backup.
    """

    path: str
    objects: int
    bytes: int
    elapsed: float
    bytes_per_sec: float


@dataclass(frozen=True, slots=True)
class CompactReport(_Figures):
    """What ``Store.compact`` did.

    ``moved``: objects moved to lower addresses; ``bytes_moved``: heap bytes
    copied; the largest free piece before and after, in bytes; ``elapsed``:
    seconds.
    """

    moved: int
    bytes_moved: int
    largest_free_before: int
    largest_free_after: int
    elapsed: float


@dataclass(frozen=True, slots=True)
class UploadInfo(_Figures):
    """An upload in progress, as ``Store.list_uploads`` shows it.

    ``id`` identifies it in its store until it ends (``Upload.id``,
    ``Store.abort_upload``); ``key``: what it will commit; ``size``: given
    to ``begin_upload``; ``written``: bytes written so far (whole parts);
    ``started``: when ``begin_upload`` was called (Unix seconds).
    """

    id: int
    key: bytes
    size: int
    written: int
    started: float


@dataclass(frozen=True, slots=True)
class LoadReport(_Figures):
    """What ``Store.bulk_load`` did.

    ``objects`` and their value ``bytes`` committed, in ``groups`` commit
    groups (each all-or-nothing); ``elapsed``: seconds the whole load took;
    the rates over it.
    """

    objects: int
    bytes: int
    groups: int
    elapsed: float
    objects_per_sec: float
    bytes_per_sec: float


@dataclass(frozen=True, slots=True)
class CacheStats(_Figures):
    """The read cache since open (``Stats.cache``).

    ``hits`` and ``misses``: reads of heap objects served from the cache and
    from the device; ``bytes``: what it holds now; ``capacity``: its bound
    (0: no cache); ``warmed_blocks``: tuple blocks the warm-up after open
    read into it; ``warming``: whether the warm-up still reads.
    """

    hits: int
    misses: int
    bytes: int
    capacity: int
    warmed_blocks: int
    warming: bool


@dataclass(frozen=True, slots=True)
class RecoveryReport(_Figures):
    """What recovery found and did when the store was opened
    (``Stats.recovery``).

    ``clean``: it had been closed cleanly, nothing could be torn;
    ``rolled_back_groups``: commit groups rolled back whole (cut by a crash
    before their sync); ``rolled_back_objects``: objects whose newest
    version was rolled back (or removed, when new); ``repaired``: damage
    found that lost nothing, and what was done; ``details``: what was rolled
    back and why (at most 100 object names); ``skipped``: damaged tuple
    blocks a ``salvage=True`` open left out, their objects missing (always
    empty otherwise: such damage refuses the open); ``from_image``: the
    state was loaded from the index image the last clean close wrote (no
    tuple block was read).
    """

    clean: bool
    rolled_back_groups: int
    rolled_back_objects: int
    repaired: tuple[str, ...]
    details: tuple[str, ...]
    skipped: tuple[str, ...]
    from_image: bool


@dataclass(frozen=True, slots=True)
class Stats(_Figures):
    """Space and content figures of a store, as of ``Store.stats()``.

    ``objects`` committed and their ``logical_bytes``; ``allocated_bytes``
    held by their heap pieces; ``metadata_bytes`` (tuple blocks and their
    journal); ``free_bytes`` and the ``largest_free_piece`` (the largest run
    a new object gets in one piece); ``capacity`` of the file or device and
    ``max_capacity`` it grows to by itself (None: no limit but the file
    system); since open: ``device_bytes_written``, ``user_bytes_written``
    and ``commit_groups`` (each ends with one sync); reads since open:
    ``hits`` (found their key) and ``misses`` (``NotFoundError``); a cache
    store's (``eviction="s3fifo"``) ``evictions`` since open and the
    ``evicted_bytes`` of the objects it gave up (0 otherwise);
    ``space_amplification``: bytes occupied per byte of committed values
    (None while empty); ``write_amplification``: device bytes written per
    value byte committed (None before the first commit); ``io_engine``
    (``"io_uring"`` or ``"portable"``), ``direct_io``, ``index``
    (``"hash"``, ``"btree"`` or ``"fst"``); the read ``cache``; what
    ``recovery`` did at open.
    """

    objects: int
    logical_bytes: int
    allocated_bytes: int
    metadata_bytes: int
    free_bytes: int
    largest_free_piece: int
    capacity: int
    max_capacity: Optional[int]
    device_bytes_written: int
    user_bytes_written: int
    commit_groups: int
    hits: int
    misses: int
    evictions: int
    evicted_bytes: int
    space_amplification: Optional[float]
    write_amplification: Optional[float]
    io_engine: str
    direct_io: bool
    index: str
    cache: CacheStats
    recovery: RecoveryReport
