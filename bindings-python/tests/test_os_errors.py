"""Errors the operating system reported are ``OSError``s as Python's own:
``errno``, ``strerror`` and ``filename`` set, and the ``OSError`` subclass
Python gives that errno (a missing directory is a ``FileNotFoundError``)."""

import errno
import os
import pickle

import pytest

import blobcask
from blobcask import errors


def assert_os_error(e: OSError, code: int, filename: str) -> None:
    assert e.errno == code
    assert e.strerror == os.strerror(code)
    assert e.filename == filename
    assert e.filename2 is None


def test_a_store_in_a_missing_directory_is_a_file_not_found_error(tmp_path):
    path = str(tmp_path / "no-such-dir" / "s.blobcask")
    with pytest.raises(FileNotFoundError) as caught:
        blobcask.Store(path)
    e = caught.value
    assert isinstance(e, blobcask.IOError) and isinstance(e, blobcask.Error)
    assert e.code == "IO"
    assert_os_error(e, errno.ENOENT, path)
    # The message is still the engine's, with its context.
    assert str(e).startswith(f"IO: open {path}: ")
    assert not os.path.exists(tmp_path / "no-such-dir")


def test_a_file_used_as_a_directory_is_a_not_a_directory_error(tmp_path):
    (tmp_path / "plain").write_bytes(b"x")
    path = str(tmp_path / "plain" / "s.blobcask")
    with pytest.raises(NotADirectoryError) as caught:
        blobcask.Store(path)
    assert isinstance(caught.value, blobcask.IOError)
    assert_os_error(caught.value, errno.ENOTDIR, path)


@pytest.mark.parametrize("how", [{"read_only": True}, {"create": False}])
def test_no_store_at_the_path_is_also_a_file_not_found_error(tmp_path, how):
    path = str(tmp_path / "absent.blobcask")
    with pytest.raises(blobcask.NotFoundError) as caught:
        blobcask.Store(path, **how)
    e = caught.value
    assert isinstance(e, FileNotFoundError) and isinstance(e, KeyError)
    assert type(e) is errors.PathNotFoundError
    assert_os_error(e, errno.ENOENT, path)
    assert not os.path.exists(path)


def test_a_dangling_symbolic_link_is_a_file_not_found_error(tmp_path):
    link = tmp_path / "link.blobcask"
    link.symlink_to(tmp_path / "gone.blobcask")
    with pytest.raises(FileNotFoundError) as caught:
        blobcask.Store(str(link))
    assert isinstance(caught.value, blobcask.NotFoundError)
    assert_os_error(caught.value, errno.ENOENT, str(link))


def test_an_empty_file_is_not_found_but_exists(tmp_path):
    path = tmp_path / "empty.blobcask"
    path.write_bytes(b"")
    with pytest.raises(blobcask.NotFoundError) as caught:
        blobcask.Store(str(path), read_only=True)
    assert not isinstance(caught.value, OSError)


def test_a_missing_key_is_no_os_error(store):
    with pytest.raises(blobcask.NotFoundError) as caught:
        store["nothing"]
    assert type(caught.value) is blobcask.NotFoundError
    assert not isinstance(caught.value, OSError)


def test_backup_into_a_missing_directory_is_a_file_not_found_error(store, tmp_path):
    dest = str(tmp_path / "missing" / "copy.blobcask")
    with pytest.raises(FileNotFoundError) as caught:
        store.backup(dest)
    assert isinstance(caught.value, blobcask.NotFoundError)
    assert_os_error(caught.value, errno.ENOENT, dest)


def test_backup_onto_an_existing_file_has_errno_eexist(store, tmp_path):
    dest = tmp_path / "taken"
    dest.write_bytes(b"mine")
    with pytest.raises(FileExistsError) as caught:
        store.backup(str(dest))
    assert isinstance(caught.value, blobcask.AlreadyExistsError)
    assert_os_error(caught.value, errno.EEXIST, str(dest))
    assert dest.read_bytes() == b"mine"


def test_a_conditional_put_that_finds_the_key_has_no_errno(store):
    store.put("k", b"1")
    with pytest.raises(blobcask.AlreadyExistsError) as caught:
        store.put("k", b"2", if_absent=True)
    assert caught.value.errno is None and caught.value.filename is None


def test_the_errno_classes_pickle_by_name(tmp_path):
    path = str(tmp_path / "no-such-dir" / "s.blobcask")
    with pytest.raises(FileNotFoundError) as caught:
        blobcask.Store(path)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is errors.FileNotFoundIOError
    assert str(again) == str(caught.value)


async def _open_in_missing_dir(path: str) -> None:
    await blobcask.AsyncStore.open(path)


def test_async_open_raises_the_same(tmp_path):
    import asyncio

    path = str(tmp_path / "no-such-dir" / "s.blobcask")
    with pytest.raises(FileNotFoundError) as caught:
        asyncio.run(_open_in_missing_dir(path))
    assert_os_error(caught.value, errno.ENOENT, path)
