"""blobcask.fsspec: fsspec's own abstract suites, pandas and pyarrow through
the ``blobcask://`` protocol, and what the suites do not cover (one read per
range, atomic create, buffering and commit, errors)."""

from __future__ import annotations

import datetime
import errno
import subprocess
import sys
import threading
from itertools import product

import fsspec
import fsspec.tests.abstract as abstract
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import blobcask
from blobcask.fsspec import BlobcaskFileSystem
from conftest import pattern


@pytest.fixture
def bfs(tmp_path_factory):
    """A file system over a fresh store, kept apart from the suites' local
    tmpdir, and removed afterwards (a store's capacity is reserved on disk)."""
    path = tmp_path_factory.mktemp("store") / "fs.blobcask"
    with blobcask.Store(path, capacity=4 << 20, index="btree") as store:
        yield BlobcaskFileSystem(store=store, skip_instance_cache=True)
    path.unlink()


class BlobcaskFixtures(abstract.AbstractFixtures):
    """Keys are "/"-joined paths under "root"; directories are implied by
    keys, as on S3, so there are no empty directories."""

    @pytest.fixture
    def fs(self, bfs):
        return bfs

    @pytest.fixture
    def fs_join(self):
        return lambda *parts: "/".join(parts)

    @pytest.fixture
    def fs_path(self):
        return "root"

    @pytest.fixture
    def supports_empty_directories(self):
        return False


class TestBlobcaskCopy(abstract.AbstractCopyTests, BlobcaskFixtures):
    pass


class TestBlobcaskGet(abstract.AbstractGetTests, BlobcaskFixtures):
    pass


class TestBlobcaskPut(abstract.AbstractPutTests, BlobcaskFixtures):
    pass


class TestBlobcaskOpen(abstract.AbstractOpenTests, BlobcaskFixtures):
    pass


class TestBlobcaskPipe(abstract.AbstractPipeTests, BlobcaskFixtures):
    pass


class Spy:
    """Forwards to a store and records the name of every method called."""

    def __init__(self, store):
        self._store, self.calls = store, []

    def __getattr__(self, name):
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self.calls.append(name)
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def spied(bfs):
    real = bfs.store
    bfs.store = spy = Spy(real)
    yield bfs, spy
    bfs.store = real


# -- registration, pandas, pyarrow ------------------------------------------


def test_entry_point_finds_the_class(tmp_path):
    assert fsspec.get_filesystem_class("blobcask") is BlobcaskFileSystem
    path = str(tmp_path / "ep.blobcask")
    fs = fsspec.filesystem("blobcask", path=path, capacity=4 << 20)
    try:
        assert isinstance(fs, BlobcaskFileSystem)
        assert fs.store.stats()["index"] == "btree"  # the default for a path
        with fsspec.open("blobcask://docs/a.txt", "wb", path=path) as f:
            f.write(b"via fsspec.open")
        assert fs.cat_file("docs/a.txt") == b"via fsspec.open"
        # fsspec keeps one instance per thread; they share the one open store
        other = []
        t = threading.Thread(target=lambda: other.append(fsspec.filesystem("blobcask", path=path)))
        t.start()
        t.join()
        assert other[0] is not fs and other[0].store is fs.store
    finally:
        fs.close()
    with pytest.raises(blobcask.ClosedError):
        fs.cat_file("docs/a.txt")
    # closed, the file can be opened again (no LockedError)
    with blobcask.Store(path, index="btree") as store:
        fs = BlobcaskFileSystem(store=store)
        assert BlobcaskFileSystem(store=store) is fs  # fsspec's instance cache
        fs.close()  # drops it from the cache; the store is its owner's
        assert BlobcaskFileSystem(store=store) is not fs
        assert store.get("docs/a.txt") == b"via fsspec.open"
        BlobcaskFileSystem(store=store).close()


def test_a_path_uses_the_stored_ordered_index_and_btree_for_hash(tmp_path):
    fst = str(tmp_path / "fst.blobcask")
    with blobcask.Store(fst, index="fst") as store:
        store.put("a/b", b"1")
    fs = BlobcaskFileSystem(path=fst, skip_instance_cache=True)
    try:
        assert fs.store.stats()["index"] == "fst"  # not replaced by "btree"
        assert fs.ls("a", detail=False) == ["a/b"]
    finally:
        fs.close()
    with blobcask.Store(fst) as store:
        assert store.stats()["index"] == "fst"
    hashed = str(tmp_path / "hash.blobcask")
    with blobcask.Store(hashed) as store:
        store.put("a/b", b"1")
    fs = BlobcaskFileSystem(path=hashed, skip_instance_cache=True)
    try:
        assert fs.store.stats()["index"] == "btree"  # listing needs an ordered one
        assert fs.ls("a", detail=False) == ["a/b"]
    finally:
        fs.close()


def test_a_store_on_the_hash_index_passed_in_lists(tmp_path):
    # Each listing is then a pass over the tuple blocks, but it works.
    with blobcask.Store(tmp_path / "hash.blobcask", capacity=1 << 20) as hashed:
        assert hashed.stats()["index"] == "hash"
        hashed.put("d/b", b"2")
        hashed.put("d/a", b"1")
        hashed.put("e", b"3")
        fs = BlobcaskFileSystem(store=hashed, skip_instance_cache=True)
        assert fs.ls("", detail=False) == ["d", "e"]
        assert fs.ls("d", detail=False) == ["d/a", "d/b"]
        assert fs.find("") == ["d/a", "d/b", "e"]
        assert fs.isdir("d") and not fs.isdir("e")
        fs.close()


def test_importing_blobcask_does_not_import_fsspec():
    code = "import sys, blobcask; assert 'fsspec' not in sys.modules, 'fsspec imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pandas_reads_parquet_written_through_the_file_system(tmp_path):
    opts = {"path": str(tmp_path / "tables.blobcask"), "capacity": 8 << 20}
    df = pd.DataFrame({"city": ["Lyon", "Oslo", "Lima"] * 1000, "n": range(3000), "x": 0.5})
    df.to_parquet("blobcask://tables/cities.parquet", storage_options=opts)
    fs = fsspec.filesystem("blobcask", **opts)
    try:
        # pyarrow writes a second file through the same file system
        pq.write_table(pa.table({"k": list(range(10))}), "tables/keys.parquet", filesystem=fs)
        assert fs.ls("tables", detail=False) == ["tables/cities.parquet", "tables/keys.parquet"]
        back = pd.read_parquet("blobcask://tables/cities.parquet", storage_options=opts)
        pd.testing.assert_frame_equal(back, df)
        url = "blobcask:///tables/cities.parquet"  # a leading "/" names the same key
        cols = pd.read_parquet(url, columns=["n"], storage_options=opts)
        assert cols["n"].tolist() == list(range(3000))
        keys = pd.read_parquet("blobcask://tables/keys.parquet", storage_options=opts)
        assert keys["k"].tolist() == list(range(10))
    finally:
        fs.close()


# -- reads -----------------------------------------------------------------


def test_cat_file_is_one_store_read_and_slices_like_python(spied):
    fs, spy = spied
    data = pattern(3, 100)
    fs.pipe_file("r/obj", data)
    for start, end in product([None, 0, 5, 99, 100, 200, -5, -200], repeat=2):
        spy.calls.clear()
        assert fs.cat_file("r/obj", start, end) == data[start:end], (start, end)
        assert spy.calls.count("read") <= 1 and "get" not in spy.calls, (start, end, spy.calls)
    spy.calls.clear()
    assert fs.cat_file("r/obj", 10, 20) == data[10:20]
    assert spy.calls == ["read"]
    assert fs.cat_file("blobcask://r/obj", -10) == data[-10:]


def test_read_through_a_file_object(bfs):
    data = pattern(4, 300_000)
    bfs.pipe_file("big", data)
    with bfs.open("big", "rb", block_size=65536) as f:
        assert f.size == len(data)
        f.seek(150_000)
        assert f.read(10) == data[150_000:150_010]
        f.seek(-7, 2)
        assert f.read() == data[-7:]
    assert bfs.head("big", 16) == data[:16] and bfs.tail("big", 16) == data[-16:]


def test_file_replaced_while_open_for_reading_is_not_mixed(bfs):
    bfs.pipe_file("v", pattern(5, 200_000))
    with bfs.open("v", "rb", block_size=4096, cache_type="none") as f:
        assert f.read(10) == pattern(5, 10)
        bfs.pipe_file("v", pattern(6, 200_000))
        with pytest.raises(OSError) as e:
            f.read(10)
        assert e.value.errno == errno.ESTALE


# -- writes ----------------------------------------------------------------


def test_pipe_file_create_on_existing_key_raises_and_changes_nothing(spied):
    fs, spy = spied
    fs.pipe_file("c/k", b"first")
    before = fs.info("c/k")
    spy.calls.clear()
    with pytest.raises(FileExistsError):
        fs.pipe_file("c/k", b"second", mode="create")
    assert spy.calls == ["put"]  # decided by the store (if_absent), not by a check first
    assert fs.cat_file("c/k") == b"first" and fs.info("c/k") == before
    fs.pipe_file("c/new", b"made", mode="create")
    assert fs.cat_file("c/new") == b"made"
    with pytest.raises(ValueError):
        fs.pipe_file("c/k", b"x", mode="append")


def test_open_xb_is_decided_at_commit_too(bfs):
    data = pattern(2, 3 * 4096 + 5)
    with bfs.open("x/big", "xb", block_size=4096) as f:
        for at in range(0, len(data), 1000):
            f.write(data[at : at + 1000])
    assert bfs.cat_file("x/big") == data
    with bfs.open("x/a", "xb") as f:
        f.write(b"mine")
        bfs.pipe_file("x/a", b"theirs")  # another writer gets there first
        with pytest.raises(FileExistsError):
            f.close()
    assert bfs.cat_file("x/a") == b"theirs"


@pytest.mark.parametrize("sizes", [[10], [8192, 8192, 1], [5000, 7000, 3, 9000, 4096], [12288] * 3])
def test_written_file_is_committed_once_at_close(spied, sizes):
    fs, spy = spied
    data = pattern(7, sum(sizes))
    with fs.open("w/obj", "wb", block_size=8192) as f:
        at = 0
        for n in sizes:
            f.write(data[at : at + n])
            at += n
        assert not fs.exists("w/obj")  # buffered until close
    assert fs.cat_file("w/obj") == data
    commits = [c for c in spy.calls if c in ("put", "begin_upload")]
    assert commits == (["put"] if len(data) < 8192 else ["begin_upload"])


def test_failed_write_block_commits_nothing(bfs):
    bfs.pipe_file("f/obj", b"old")
    with pytest.raises(RuntimeError):
        with bfs.open("f/obj", "wb", block_size=4096) as f:
            f.write(pattern(1, 20_000))
            raise RuntimeError("interrupted")
    assert bfs.cat_file("f/obj") == b"old"


def test_transaction_commits_at_its_end(bfs):
    with bfs.transaction:
        bfs.pipe_file("t/direct", b"not part of it")
        with bfs.open("t/a", "wb") as f:
            f.write(b"a")
        with bfs.open("t/b", "wb") as f:
            f.write(b"b")
        assert not bfs.exists("t/a") and not bfs.exists("t/b")
    assert bfs.cat(["t/a", "t/b"]) == {"t/a": b"a", "t/b": b"b"}
    with pytest.raises(ZeroDivisionError):
        with bfs.transaction:
            with bfs.open("t/c", "wb") as f:
                f.write(b"c")
            raise ZeroDivisionError("the transaction fails after the file closed")
    assert not bfs.exists("t/c")
    with bfs.transaction:
        with pytest.raises(KeyError):
            with bfs.open("t/d", "wb") as f:
                f.write(b"d")
                raise KeyError("this file only")
        with bfs.open("t/e", "wb") as f:
            f.write(b"e")
    assert not bfs.exists("t/d") and bfs.cat_file("t/e") == b"e"


def test_put_file_and_cp_file_stream_large_objects(bfs, tmp_path):
    bfs.blocksize = 3 * blobcask.PART_ALIGN  # force multipart uploads
    data = pattern(8, 10 * blobcask.PART_ALIGN + 123)
    local = tmp_path / "local.bin"
    local.write_bytes(data)
    bfs.put_file(str(local), "p/up")
    assert bfs.cat_file("p/up") == data
    bfs.cp_file("p/up", "p/copy")
    assert bfs.cat_file("p/copy") == data
    with pytest.raises(FileExistsError):
        bfs.put_file(str(local), "p/up", mode="create")


# -- listing and metadata ---------------------------------------------------


def test_directories_are_implied_by_keys(bfs):
    bfs.mkdir("empty")
    assert not bfs.exists("empty")  # nothing stored for a directory
    bfs.pipe({"d/a": b"1", "d/sub/b": b"22", "d/sub/deeper/c": b"333", "da": b"x"})
    assert bfs.isdir("d") and bfs.isdir("d/sub") and bfs.isfile("d/a") and not bfs.isdir("d/a")
    assert bfs.ls("d", detail=False) == ["d/a", "d/sub"]
    assert bfs.ls("", detail=False) == ["d", "da"]
    assert [(e["name"], e["type"], e["size"]) for e in bfs.ls("/d/")] == [
        ("d/a", "file", 1),
        ("d/sub", "directory", 0),
    ]
    assert bfs.ls("d/a", detail=False) == ["d/a"]
    assert bfs.find("d") == ["d/a", "d/sub/b", "d/sub/deeper/c"]
    assert bfs.find("d", maxdepth=2, withdirs=True) == [
        "d",
        "d/a",
        "d/sub",
        "d/sub/b",
        "d/sub/deeper",
    ]
    assert bfs.find("d/a") == ["d/a"]
    assert bfs.glob("d/**/c") == ["d/sub/deeper/c"]
    assert bfs.du("d") == 6
    with pytest.raises(FileExistsError):
        bfs.mkdir("d/a")  # a file is there
    with pytest.raises(FileExistsError):
        bfs.makedirs("d")
    bfs.makedirs("d", exist_ok=True)
    bfs.rm("d", recursive=True)
    assert not bfs.exists("d") and bfs.ls("", detail=False) == ["da"]


def test_keys_no_path_can_name_are_left_out_of_listings(bfs):
    bfs.store.put("odd/", b"marker")
    bfs.store.put("odd//x", b"double")
    bfs.store.put("odd/y", b"plain")
    assert bfs.ls("odd", detail=False) == ["odd/y"]
    assert bfs.find("odd") == ["odd/y"]
    bfs.store.put(b"raw/\xff", b"not UTF-8")  # comes back through surrogateescape
    (name,) = bfs.ls("raw", detail=False)
    assert bfs.cat_file(name) == b"not UTF-8" and bfs.info(name)["size"] == 9


def test_keys_no_path_can_name_make_no_directories(bfs):
    for key in ("ghost//x", "../up", "./here", "odd/./z", "odd/../w", "odd/z/.."):
        bfs.store.put(key, b"unnamed")
    bfs.pipe_file("odd/y", b"plain")
    assert bfs.ls("", detail=False) == ["odd"]
    assert bfs.ls("odd", detail=False) == ["odd/y"]
    assert bfs.find("") == ["odd/y"]
    assert not bfs.exists("ghost")


def test_every_key_written_through_paths_is_listed_and_removed(bfs):
    # Repeated "/" are one: "a//b" names the key "a/b".
    bfs.pipe_file("a//b", b"1")
    bfs.pipe_file("a/x", b"2")
    assert list(bfs.store.list(b"")) == [b"a/b", b"a/x"]
    assert bfs.cat_file("a//b") == bfs.cat_file("a/b") == b"1"
    assert bfs.ls("a", detail=False) == ["a/b", "a/x"]
    bfs.rm("a", recursive=True)
    assert list(bfs.store.list(b"")) == [] and bfs.ls("", detail=False) == []
    # "." and ".." are refused, not stored as names no path gives back.
    for bad in ("../up", "./d", "a/./b", "a/../c", "a/b/..", ".", "..", "blobcask://a/../b"):
        with pytest.raises(ValueError, match="component"):
            bfs.pipe_file(bad, b"z")
        with pytest.raises(ValueError, match="component"):
            with bfs.open(bad, "wb") as f:
                f.write(b"z")
    assert list(bfs.store.list(b"")) == []


def test_times_checksum_ukey_come_from_the_version(bfs):
    bfs.pipe_file("m/obj", b"one")
    info = bfs.info("m/obj")
    created = bfs.created("m/obj")
    assert isinstance(created, datetime.datetime) and created.tzinfo is not None
    assert created.timestamp() == pytest.approx(info["created"])
    assert bfs.modified("m/obj") == created
    assert bfs.checksum("m/obj") == info["version"] == bfs.store.stat("m/obj").version
    key = bfs.ukey("m/obj")
    bfs.pipe_file("m/obj", b"one")  # same bytes, new version
    assert bfs.checksum("m/obj") > info["version"] and bfs.ukey("m/obj") != key


# -- errors ----------------------------------------------------------------


def test_missing_path_raises_file_not_found(bfs):
    for call in (
        lambda: bfs.cat_file("nope"),
        lambda: bfs.cat_file("nope", 1, 2),
        lambda: bfs.cat_file("nope", 5, 2),
        lambda: bfs.open("nope", "rb"),
        lambda: bfs.info("nope"),
        lambda: bfs.ls("nope"),
        lambda: bfs.rm_file("nope"),
        lambda: bfs.rm("nope"),
        lambda: bfs.cp_file("nope", "other"),
        lambda: bfs.created("nope"),
        lambda: bfs.checksum("nope"),
    ):
        with pytest.raises(FileNotFoundError):
            call()
    assert not bfs.exists("nope") and not bfs.isfile("nope") and not bfs.isdir("nope")


def test_closed_store_raises_closed_error(bfs):
    bfs.pipe_file("k", b"v")
    bfs.store.close()
    for call in (
        lambda: bfs.cat_file("k"),
        lambda: bfs.open("k", "rb"),
        lambda: bfs.exists("k"),  # not False: the base class would swallow it
        lambda: bfs.ls(""),
        lambda: bfs.pipe_file("k2", b"v"),
    ):
        with pytest.raises(blobcask.ClosedError):
            call()


@pytest.mark.parametrize("value", ["text", 5, [1, 2], None, 1.5])
def test_wrong_value_types_raise_type_error_and_store_nothing(bfs, value):
    with pytest.raises(TypeError):
        bfs.pipe_file("t/k", value)
    with pytest.raises(TypeError):
        with bfs.open("t/f", "wb") as f:
            f.write(value)
    assert not bfs.exists("t")


def test_bad_construction_and_modes(tmp_path, bfs):
    with pytest.raises(TypeError):
        BlobcaskFileSystem(store=str(tmp_path / "x"), skip_instance_cache=True)
    with pytest.raises(ValueError):
        BlobcaskFileSystem(skip_instance_cache=True)
    bfs.pipe_file("a", b"x")
    with pytest.raises(NotImplementedError):
        bfs.open("a", "ab")
    with pytest.raises(IsADirectoryError):
        bfs.cat_file("")
    with pytest.raises(FileExistsError):
        bfs.open("a", "xb")


# -- a URL that names the store (fsspec chaining) ---------------------------


def test_a_chained_url_names_the_store_and_the_key(tmp_path):
    path = str(tmp_path / "chained.blobcask")
    df = pd.DataFrame({"city": ["Lyon", "Oslo"] * 500, "n": range(1000)})
    try:
        # No storage_options: the store's path follows "::", as a plain
        # path or a file:// URL.
        df.to_parquet(f"blobcask://tables/c.parquet::{path}")
        pd.testing.assert_frame_equal(pd.read_parquet(f"blobcask://tables/c.parquet::file://{path}"), df)
        with fsspec.open(f"blobcask://docs/a.txt::{path}", "wb") as f:
            f.write(b"named by the URL")
        with fsspec.open(f"blobcask:///docs/a.txt::file://{path}", "rb") as f:
            assert f.read() == b"named by the URL"
        fs, key = fsspec.core.url_to_fs(f"blobcask://docs/a.txt::{path}")
        assert isinstance(fs, BlobcaskFileSystem) and key == "docs/a.txt"
        assert fs.ls("docs", detail=False) == ["docs/a.txt"]
        # Options of the store, per protocol, beside the chained URL.
        fs2, _ = fsspec.core.url_to_fs(f"blobcask://x::{path}", blobcask={"capacity": 8 << 20})
        assert fs2.store is fs.store  # one open store per file
        assert BlobcaskFileSystem(fo=path).store is fs.store
    finally:
        fsspec.filesystem("blobcask", path=path).close()
    with blobcask.Store(path) as store:
        assert store.get("docs/a.txt") == b"named by the URL"


def test_a_chained_url_onto_another_protocol_is_refused(tmp_path):
    with pytest.raises(ValueError, match="local file or block device"):
        fsspec.core.url_to_fs("blobcask://k::memory://store.blobcask")
    with pytest.raises(ValueError, match="local file or block device"):
        BlobcaskFileSystem(fo="s3://bucket/store.blobcask")
    with pytest.raises(ValueError, match="path= or a chained URL"):
        BlobcaskFileSystem(fo=str(tmp_path / "a"), path=str(tmp_path / "b"))
    with pytest.raises(ValueError, match="exactly one of store= or path="):
        fsspec.core.url_to_fs("blobcask://k")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
