"""What the cache tier (``blobcask.fsspec_cache``) knows of a remote
file, and how it reads its options: the version identity taken from
``info()``, the record kept in the store (identity, size, confirmation
time, ``info()``), and the checks of ``check``/``expiry`` and sizes."""

from __future__ import annotations

import datetime
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["identity_of", "identity_and_strength", "Entry", "check_size", "freshness"]

# Fields of ``info()`` that name a version of a file, in order of preference.
_ETAG_FIELDS = ("ETag", "etag", "e_tag")
_VERSION_FIELDS = ("VersionId", "version_id", "generation", "version")
_MTIME_FIELDS = (
    "mtime",
    "LastModified",
    "last_modified",
    "Last-Modified",  # HTTP's header, as fsspec's http:// info() gives it
    "modified",
    "updated",
)  # not "created" (memory://'s only time): a file edited in place keeps it


# An ETag that is only a modification time and a size, in hex: nginx's
# "<mtime s>-<size>", Apache's "<size>-<mtime us>" (the size may be
# either part; S3's multipart "<32 hex>-<parts>" is not one of these).
_TIME_SIZE_ETAG = re.compile(r'^(?:W/)?"([0-9a-fA-F]{1,16})-([0-9a-fA-F]{1,16})"$')


def _time_and_size_etag(etag: Any, size: Any) -> bool:
    if not isinstance(etag, str) or not isinstance(size, int):
        return False
    m = _TIME_SIZE_ETAG.match(etag)
    return m is not None and size in (int(m.group(1), 16), int(m.group(2), 16))


def identity_and_strength(info: dict[str, Any]) -> Optional[tuple[str, bool]]:
    """The version identity of a file from its ``info()`` and whether it
    is strong: an ETag or a version names one sequence of bytes (strong;
    an ETag is trusted as such whatever the server made it from, except
    an HTTP weak one, ``W/"..."``, and one that is visibly a time and
    this size in hex, ``"<hex>-<hex>"`` as nginx and Apache make them);
    a modification time and size does not (weak: two versions of one
    size written within the target's time resolution look alike). None
    when the target gives neither."""
    size = info.get("size")
    named = [f"{f}={info[f]!r}" for f in _ETAG_FIELDS + _VERSION_FIELDS if info.get(f) is not None]
    if named:
        weak_etag = any(
            isinstance(info.get(f), str)
            and (info[f].startswith("W/") or _time_and_size_etag(info[f], size))
            for f in _ETAG_FIELDS
        )
        has_version = any(info.get(f) is not None for f in _VERSION_FIELDS)
        return ";".join(named + [f"size={size!r}"]), has_version or not weak_etag
    for field in _MTIME_FIELDS:
        if info.get(field) is not None:
            return f"{field}={info[field]!r};size={size!r}", False
    return None


def identity_of(info: dict[str, Any]) -> Optional[str]:
    """The version identity of a file from its ``info()``: ETag and/or
    version when given, else modification time and size; None when the
    target gives neither (the file is then not cached)."""
    found = identity_and_strength(info)
    return None if found is None else found[0]


# -- the meta record: identity, size, confirmation time, info ------------


def _encode_info(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON-able part of an ``info()`` dict (datetimes tagged)."""
    out: dict[str, Any] = {}
    for name, value in info.items():
        if value is None or isinstance(value, (str, int, float, bool)):
            out[name] = value
        elif isinstance(value, datetime.datetime):
            out[name] = {"datetime": value.isoformat()}
    return out


def _decode_info(info: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (
            datetime.datetime.fromisoformat(value["datetime"]) if isinstance(value, dict) else value
        )
        for name, value in info.items()
    }


@dataclass(frozen=True)
class Entry:
    """What the cache knows of one remote file."""

    identity: str
    size: int
    confirmed: float  # time.time() just before the info() that reported it
    info: dict[str, Any]
    # An ETag or version (pieces of it may be cached separately) rather
    # than a modification time and size (the file is cached only whole).
    strong: bool = False
    # The process's invalidation generation of the path when the reader
    # that holds this entry started (not stored): what it fetched is
    # stored only if no write dropped the path since.
    generation: Optional[int] = field(default=None, compare=False)

    def encode(self) -> bytes:
        record = {
            "identity": self.identity,
            "size": self.size,
            "confirmed": self.confirmed,
            "info": _encode_info(self.info),
            "strong": self.strong,
        }
        return json.dumps(record, sort_keys=True).encode()

    @staticmethod
    def decode(raw: bytes) -> "Entry":
        record = json.loads(raw)
        return Entry(
            str(record["identity"]),
            int(record["size"]),
            float(record["confirmed"]),
            _decode_info(record["info"]),
            record.get("strong") is True,  # a record without it: weak
        )


def check_size(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return value


def freshness(check: Optional[str], expiry: Any) -> Optional[float]:
    """The expiry in seconds, or None for ``check="always"``."""
    if check is not None and not isinstance(check, str):
        raise TypeError(f"check must be a str, not {type(check).__name__!r}")
    if expiry is not None:
        if not isinstance(expiry, (int, float)) or isinstance(expiry, bool):
            raise TypeError(
                f"expiry must be seconds as an int or float, not {type(expiry).__name__!r}"
            )
        if math.isnan(expiry) or expiry < 0:
            raise ValueError(f"expiry must be a number of seconds >= 0, not {expiry!r}")
    if check is None:
        check = "always" if expiry is None else "expiry"
    if check == "always":
        if expiry is not None:
            raise ValueError("expiry= goes with check='expiry', not check='always'")
        return None
    if check == "expiry":
        if expiry is None:
            raise ValueError("check='expiry' needs expiry=T (seconds)")
        return float(expiry)
    raise ValueError(f"check must be 'always' or 'expiry', not {check!r}")
