"""Exceptions raised by blobcask: one class per error kind under ``Error``.

``NotFoundError`` is also a ``KeyError`` (so ``store[key]`` behaves like a
mapping), argument errors are ``ValueError`` and I/O errors ``OSError``.

An error the operating system reported is an ``IOError`` with ``errno``,
``strerror`` and ``filename`` set as ``OSError`` sets them (``filename``:
the store's path, or a backup's destination), and of the ``OSError``
subclass Python gives that errno: ENOENT makes a ``FileNotFoundError``
(``FileNotFoundIOError``), EACCES a ``PermissionError``, and so on. Nothing
at the path of an open or a backup (a missing directory, a dangling
symbolic link) is a ``PathNotFoundError``: a ``NotFoundError`` and a
``FileNotFoundError`` (errno ENOENT); a backup destination that exists is
an ``AlreadyExistsError`` with errno EEXIST.
"""

from __future__ import annotations

import os
from typing import Optional

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
    "PathNotFoundError",
    "FileNotFoundIOError",
    "PermissionIOError",
    "IsADirectoryIOError",
    "NotADirectoryIOError",
    "FileExistsIOError",
    "InterruptedIOError",
    "BlockingIOIOError",
    "TimeoutIOError",
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
    """Not supported by this build or these options (e.g. a write to a read-only store)."""

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


class PathNotFoundError(NotFoundError, FileNotFoundError):
    """Nothing at the path of an open (with nothing to create) or of a
    backup's directory; ``errno`` is ENOENT, ``filename`` the path."""


class FileNotFoundIOError(IOError, FileNotFoundError):
    """An ``IOError`` with errno ENOENT (e.g. a store path whose directory
    does not exist)."""


class PermissionIOError(IOError, PermissionError):
    """An ``IOError`` with errno EACCES or EPERM."""


class IsADirectoryIOError(IOError, IsADirectoryError):
    """An ``IOError`` with errno EISDIR."""


class NotADirectoryIOError(IOError, NotADirectoryError):
    """An ``IOError`` with errno ENOTDIR."""


class FileExistsIOError(IOError, FileExistsError):
    """An ``IOError`` with errno EEXIST."""


class InterruptedIOError(IOError, InterruptedError):
    """An ``IOError`` with errno EINTR."""


class BlockingIOIOError(IOError, BlockingIOError):
    """An ``IOError`` with errno EAGAIN, EALREADY, EWOULDBLOCK or EINPROGRESS."""


class TimeoutIOError(IOError, TimeoutError):
    """An ``IOError`` with errno ETIMEDOUT."""


# Python's own errno -> OSError subclass mapping, for the subclasses above.
_IO_ERROR_OF: dict[type[OSError], type[IOError]] = {
    FileNotFoundError: FileNotFoundIOError,
    PermissionError: PermissionIOError,
    IsADirectoryError: IsADirectoryIOError,
    NotADirectoryError: NotADirectoryIOError,
    FileExistsError: FileExistsIOError,
    InterruptedError: InterruptedIOError,
    BlockingIOError: BlockingIOIOError,
    TimeoutError: TimeoutIOError,
}


def _from_native(
    name: str, message: str, errno: Optional[int] = None, filename: Optional[bytes] = None
) -> Error:
    """The exception the extension raises for an engine error of class
    ``name``, with the OS errno and the file when known (see the module's
    docs)."""
    cls = globals()[name]
    if cls is IOError and errno is not None:
        # OSError(errno, ...) is constructed as the subclass Python maps
        # that errno to (FileNotFoundError for ENOENT, ...).
        cls = _IO_ERROR_OF.get(type(OSError(errno, "")), IOError)
    elif cls is NotFoundError and errno is not None:
        cls = PathNotFoundError
    exc = cls(message)
    if isinstance(exc, OSError):
        exc.errno = errno
        exc.strerror = os.strerror(errno) if errno is not None else None
        exc.filename = os.fsdecode(filename) if filename is not None else None
    assert isinstance(exc, Error)
    return exc
