"""Exceptions raised by blobcask: one class per error kind under ``Error``.

``NotFoundError`` is also a ``KeyError`` (so ``store[key]`` behaves like a
mapping), argument errors are ``ValueError`` and I/O errors ``OSError``.
"""

from __future__ import annotations

__all__ = [
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
    "AlreadyExistsError",
    "VersionMismatchError",
]


class Error(Exception):
    """Base class of every blobcask error. ``code`` names the kind."""

    code = "ERROR"
    #: For an error that refused a batch (``Store.batch``): the index of the
    #: operation that failed, counted from 0; ``None`` otherwise.
    batch_op: int | None = None

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else self.code


class NotFoundError(Error, KeyError):
    """The key has no object."""

    code = "NOT_FOUND"


class InvalidArgumentError(Error, ValueError):
    """An argument is out of range (empty key, offset past the end, bad part)."""

    code = "INVALID_ARGUMENT"


class TooLargeError(Error, ValueError):
    """A key or object exceeds a hard limit."""

    code = "TOO_LARGE"


class NoSpaceError(Error):
    """The store is full; deletes free space and the store stays usable."""

    code = "NO_SPACE"


class CorruptError(Error):
    """The file is not a blobcask store, or its metadata fails a checksum."""

    code = "CORRUPT"


class IOError(Error, OSError):  # noqa: A001 - the kind's name
    """The operating system reported an I/O error."""

    code = "IO"


class LockedError(Error):
    """Another handle or process has the store open."""

    code = "LOCKED"


class UnsupportedError(Error):
    """Not supported by this build or these options (e.g. list on the hash index)."""

    code = "UNSUPPORTED"


class ClosedError(Error):
    """The store was closed."""

    code = "CLOSED"


class AlreadyExistsError(Error, FileExistsError):
    """A create-only put (``if_absent=True``) found the key present, or a
    backup's destination exists."""

    code = "ALREADY_EXISTS"


class VersionMismatchError(Error):
    """A put with ``if_version`` found another version, or no object."""

    code = "VERSION_MISMATCH"
