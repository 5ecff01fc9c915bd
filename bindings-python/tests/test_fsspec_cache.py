"""``blobcache::``: the caching file system in front of another fsspec
file system (``blobcask.fsspec_cache``), against ``memory://`` targets that
count what is asked of them. Freshness, identity, restarts, damage and a
full store; the S3 test is in test_fsspec_cache_s3.py."""

from __future__ import annotations

import errno
import hashlib
import inspect
import os
import random
import threading
import time
from collections import Counter

import fsspec
import fsspec.tests.abstract as abstract
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import blobcask
from blobcask import fsspec_cache
from blobcask.fsspec_cache import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_WHOLE_FILE_LIMIT,
    BlobcacheFileSystem,
    identity_of,
)
from conftest import pattern

B = 8192  # block size of most tests: a few blocks make a small file


class CountingFS(MemoryFileSystem):
    """An independent memory file system that counts its ``info`` and
    ``cat_file`` calls (every read of bytes, ranged or whole, is one
    ``cat_file``: the base ``cat_ranges`` calls it per range) and records
    the ranges read. ``after_read`` runs after each read of bytes. Its
    ``info()`` gives an ETag (a hash of the bytes, as S3's is), a strong
    identity, unless ``strong=False`` (then an ``mtime``: its ``created``)."""

    def __init__(self, strong: bool = True) -> None:
        super().__init__(global_store=False)
        self.calls: Counter[str] = Counter()
        self.ranges: list[tuple[str, int | None, int | None]] = []
        self.after_read = None
        self.after_info = None  # runs after info() has read the file
        self.strong = strong

    def info(self, path, **kwargs):
        self.calls["info"] += 1
        info = super().info(path, **kwargs)
        if self.strong and info["type"] == "file":
            data = self.store[self._strip_protocol(path)].getvalue()
            info["ETag"] = '"' + hashlib.md5(data).hexdigest() + '"'
        elif info["type"] == "file":
            info["mtime"] = info["created"]
        if self.after_info is not None:
            self.after_info()
        return info

    def cat_file(self, path, start=None, end=None, **kwargs):
        self.calls["cat_file"] += 1
        self.ranges.append((self._strip_protocol(path), start, end))
        data = super().cat_file(path, start=start, end=end, **kwargs)
        if self.after_read is not None:
            self.after_read()
        return data

    def reset(self) -> None:
        self.calls.clear()
        self.ranges.clear()


@pytest.fixture
def remote():
    return CountingFS(skip_instance_cache=True)


@pytest.fixture
def weak_remote():
    """A target whose files are told apart only by time and size."""
    return CountingFS(strong=False, skip_instance_cache=True)


@pytest.fixture
def clock(monkeypatch):
    """The cache's clock, moved by hand: ``clock.now = ...``."""

    class Clock:
        now = 1_000_000.0

    monkeypatch.setattr(fsspec_cache, "_clock", lambda: Clock.now)
    return Clock


def cache_on(path, remote, **options):
    options.setdefault("block_size", B)
    options.setdefault("whole_file_limit", B)
    return BlobcacheFileSystem(store=path, fs=remote, skip_instance_cache=True, **options)


@pytest.fixture
def caches():
    made = []

    def make(path, remote, **options):
        fs = cache_on(path, remote, **options)
        made.append(fs)
        return fs

    yield make
    for fs in made:
        fs.close()


class CacheOverMemoryFixtures(abstract.AbstractFixtures):
    """fsspec's own suites (copy, get, put, open, pipe) through the cache
    with a long expiry, over an independent memory file system: what they
    write through the cache they must read back through it."""

    @pytest.fixture
    def fs(self, tmp_path):
        target = CountingFS(skip_instance_cache=True)
        fs = BlobcacheFileSystem(
            store=tmp_path / "suite.blobcask",
            fs=target,
            expiry=3600,
            store_options={"capacity": 4 << 20},
            skip_instance_cache=True,
        )
        yield fs
        fs.close()

    @pytest.fixture
    def fs_join(self):
        return lambda *parts: "/".join(parts)

    @pytest.fixture
    def fs_path(self):
        return "/root"

    @pytest.fixture
    def supports_empty_directories(self):
        return True


class TestCacheCopy(abstract.AbstractCopyTests, CacheOverMemoryFixtures):
    pass


class TestCacheGet(abstract.AbstractGetTests, CacheOverMemoryFixtures):
    pass


class TestCachePut(abstract.AbstractPutTests, CacheOverMemoryFixtures):
    pass


class TestCacheOpen(abstract.AbstractOpenTests, CacheOverMemoryFixtures):
    pass


class TestCachePipe(abstract.AbstractPipeTests, CacheOverMemoryFixtures):
    pass


V1 = pattern(1, 5 * B + 123)  # six blocks, the last one short
V2 = pattern(2, 5 * B + 123)  # same size: only the identity tells them apart


def test_defaults_are_the_named_constants():
    params = inspect.signature(BlobcacheFileSystem.__init__).parameters
    assert params["block_size"].default == DEFAULT_BLOCK_SIZE == 1 << 20
    assert params["whole_file_limit"].default == DEFAULT_WHOLE_FILE_LIMIT == 1 << 20
    assert params["check"].default is None  # "always" unless expiry= is given


def test_identity_prefers_etag_and_version_then_mtime_and_size():
    etag = identity_of({"size": 3, "ETag": '"abc"', "LastModified": 5})
    assert etag is not None and "abc" in etag and "LastModified" not in etag
    assert identity_of({"size": 3, "ETag": '"abc"'}) != identity_of({"size": 3, "ETag": '"abd"'})
    assert identity_of({"size": 3, "version": 7}) != identity_of({"size": 3, "version": 8})
    assert identity_of({"size": 3, "mtime": 1.5}) != identity_of({"size": 4, "mtime": 1.5})
    assert identity_of({"size": 3, "name": "x"}) is None


def test_second_read_with_expiry_asks_the_target_nothing(path, remote, caches, clock):
    remote.pipe_file("/d/big", V1)
    remote.pipe_file("/d/small", b"tiny")
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/d/big") == V1
    assert fs.cat_file("/d/small") == b"tiny"
    misses = fs.cache_stats()["misses"]
    assert misses == 7  # six blocks and a whole file
    remote.reset()
    clock.now += 59
    assert fs.cat_file("/d/big") == V1
    assert fs.cat_file("/d/big", start=B - 10, end=3 * B + 7) == V1[B - 10 : 3 * B + 7]
    with fs.open("/d/big", "rb") as f:
        f.seek(2 * B + 5)
        assert f.read(B) == V1[2 * B + 5 : 3 * B + 5]
    assert fs.cat_file("/d/small") == b"tiny"
    assert fs.info("/d/big")["size"] == len(V1)
    assert remote.calls == {}
    assert fs.cache_stats()["misses"] == misses


def test_second_read_with_check_always_costs_one_info_and_no_bytes(path, remote, caches):
    remote.pipe_file("/d/big", V1)
    fs = caches(path, remote)
    assert fs.cat_file("/d/big") == V1
    remote.reset()
    assert fs.cat_file("/d/big") == V1
    assert remote.calls == {"info": 1}
    remote.reset()
    with fs.open("/d/big", "rb") as f:
        assert f.read() == V1
    assert remote.calls == {"info": 1}


def test_reads_fetch_only_missing_blocks_in_coalesced_ranges(path, remote, caches):
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/f", start=2 * B + 1, end=4 * B - 1) == V1[2 * B + 1 : 4 * B - 1]
    assert remote.ranges == [("/f", 2 * B, 4 * B)]  # blocks 2 and 3, aligned
    remote.reset()
    with fs.open("/f", "rb") as f:
        assert f.read() == V1
    # blocks 0-1 in one request, 4-5 (the short last one) in another
    assert remote.ranges == [("/f", 0, 2 * B), ("/f", 4 * B, len(V1))]


def test_a_small_file_is_fetched_and_cached_whole(path, remote, caches):
    remote.pipe_file("/s", V1[:B])
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/s", start=10, end=20) == V1[10:20]
    assert remote.ranges == [("/s", None, None)]
    remote.reset()
    assert fs.cat_file("/s", start=-5) == V1[B - 5 : B]
    assert remote.calls == {}


def test_check_always_serves_the_current_bytes_or_file_not_found(path, remote, caches):
    remote.pipe_file("/f", V1)
    remote.pipe_file("/s", b"small one")
    fs = caches(path, remote)
    assert fs.cat_file("/f") == V1 and fs.cat_file("/s") == b"small one"
    remote.pipe_file("/f", V2)  # behind the cache's back
    remote.pipe_file("/s", b"small two")
    assert fs.cat_file("/f") == V2
    assert fs.cat_file("/s") == b"small two"
    with fs.open("/f", "rb") as f:
        assert f.read() == V2
    remote.rm_file("/f")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/f")
    with pytest.raises(FileNotFoundError):
        fs.open("/f", "rb")
    # and what was cached for it is gone
    prefix = fs._prefix("/f")
    assert list(fs.store.list(prefix)) == []


def test_expiry_serves_nothing_older_than_t(path, remote, caches, clock):
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=10)
    assert fs.cat_file("/f") == V1  # confirmed at t0
    t0 = clock.now
    clock.now = t0 + 1
    remote.pipe_file("/f", V2)  # replaced at t0 + 1
    clock.now = t0 + 9
    assert fs.cat_file("/f") == V1  # v1 was current 9 s ago: allowed
    clock.now = t0 + 10.5
    assert fs.cat_file("/f") == V2  # more than T since the confirmation
    assert fs.info("/f")["size"] == len(V2)
    t1 = clock.now
    remote.rm_file("/f")
    clock.now = t1 + 5
    assert fs.cat_file("/f") == V2
    clock.now = t1 + 10.5
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/f")


def test_expiry_with_a_stale_identity_restarts_on_the_new_version(path, remote, caches, clock):
    """A trusted identity whose file has changed: the first fetch of a
    missing block finds out, and the read restarts on the new version
    rather than joining new blocks to old ones."""
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/f", start=0, end=B) == V1[:B]  # block 0 of v1 cached
    remote.pipe_file("/f", V2)
    assert fs.cat_file("/f") == V2
    assert fs.cache_stats()["restarts"] == 1
    with fs.open("/f", "rb") as f:  # now cached under v2's identity
        assert f.read() == V2


def test_expiry_with_a_deleted_file_and_a_missing_block_drops_it(path, remote, caches, clock):
    """Trusted, but a block must be fetched and the file is gone: the
    read asks again and reports the deletion (dropping what was cached)
    rather than failing on the half it could serve."""
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/f", start=0, end=B) == V1[:B]
    remote.rm_file("/f")
    assert fs.cat_file("/f", start=0, end=B) == V1[:B]  # cached and trusted
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/f")
    assert list(fs.store.list("bc1/")) == []


def test_a_read_racing_an_overwrite_between_block_fetches_never_mixes(path, remote, caches):
    remote.pipe_file("/f", V1)
    fs = caches(path, remote)
    # blocks 1 and 3 cached: a whole read then fetches 0, 2 and 4-5 separately
    fs.cat_file("/f", start=B, end=2 * B)
    fs.cat_file("/f", start=3 * B, end=4 * B)
    remote.reset()
    overwrites = []

    def overwrite_once():
        if not overwrites:
            overwrites.append(1)
            remote.pipe_file("/f", V2)

    remote.after_read = overwrite_once  # lands after the first block fetch
    assert fs.cat_file("/f") == V2
    assert fs.cache_stats()["restarts"] == 1
    remote.after_read = None
    assert fs.cat_file("/f") == V2

    # A file object that has returned bytes of one version refuses to go
    # on with another's.
    remote.pipe_file("/g", V1)
    with fs.open("/g", "rb") as f:
        assert f.read(B) == V1[:B]
        remote.pipe_file("/g", V2)
        with pytest.raises(OSError) as e:
            f.read()
        assert e.value.errno == errno.ESTALE
    # One that has returned nothing yet reads the new version whole.
    remote.pipe_file("/h", V1)
    with fs.open("/h", "rb") as f:
        remote.pipe_file("/h", V2)
        assert f.read() == V2


def test_a_file_changing_at_every_fetch_is_estale_not_a_mix(path, remote, caches):
    remote.pipe_file("/f", V1)
    fs = caches(path, remote)
    versions = [V1, V2]

    def overwrite_always():
        versions.reverse()
        remote.pipe_file("/f", versions[0])

    remote.after_read = overwrite_always
    with pytest.raises(OSError) as e:
        fs.cat_file("/f")
    assert e.value.errno == errno.ESTALE
    assert fs.cache_stats()["restarts"] == fsspec_cache.MAX_RESTARTS
    with pytest.raises(OSError) as e:
        fs.open("/f", "rb").read()
    assert e.value.errno == errno.ESTALE


def test_concurrent_readers_under_overwrites_see_one_version_per_read(path, remote, caches):
    """8 threads read random ranges through one cache (check="always")
    while the file is overwritten behind its back, each time with a new
    version: every read is a slice of one version, or ESTALE, never a mix.
    (Each version is new: a version written again while a fetch runs, A
    to B and back to A, is not detected by the check after the fetch; the
    module doc says so.)"""
    versions = [pattern(100 + i, len(V1)) for i in range(41)]
    remote.pipe_file("/f", versions[0])
    fs = caches(path, remote)
    stop = threading.Event()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            start = rng.randrange(len(V1))
            end = rng.randrange(start, len(V1) + 1)
            try:
                data = fs.cat_file("/f", start=start, end=end)
            except OSError as e:
                outcomes["estale" if e.errno == errno.ESTALE else repr(e)] += 1
                continue
            if start == end and data == b"":
                outcomes["empty"] += 1
            elif any(data == v[start:end] for v in versions):
                outcomes["one version"] += 1
            else:
                failures.append(f"mixed read of [{start}, {end})")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for v in versions[1:]:
        time.sleep(0.01)
        remote.pipe_file("/f", v)
    stop.set()
    for t in threads:
        t.join()
    assert failures == []
    assert outcomes["one version"] > 0
    assert set(outcomes) <= {"one version", "empty", "estale"}, outcomes


def test_writes_through_the_cache_reach_the_target_and_invalidate(path, remote, caches, clock):
    """With a long expiry, only the invalidation makes these reads fresh."""
    remote.pipe_file("/w/a", V1)
    fs = caches(path, remote, expiry=3600)
    assert fs.cat_file("/w/a") == V1
    fs.pipe_file("/w/a", V2)
    assert remote.cat_file("/w/a") == V2 and fs.cat_file("/w/a") == V2
    with fs.open("/w/a", "wb") as f:
        f.write(b"written through")
    assert remote.cat_file("/w/a") == b"written through"
    assert fs.cat_file("/w/a") == b"written through"
    fs.mv("/w/a", "/w/b")
    assert remote.cat_file("/w/b") == b"written through"
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/w/a")
    assert fs.cat_file("/w/b") == b"written through"
    fs.rm("/w", recursive=True)
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/w/b")
    assert list(fs.store.list("bc1/")) == []


def once_at(call, action):
    """A hook that runs ``action`` at its ``call``-th call (from 1)."""
    calls = [0]

    def hook():
        calls[0] += 1
        if calls[0] == call:
            action()

    return hook


def test_a_record_held_back_by_a_reader_cannot_outlive_a_write(path, remote, caches, clock):
    """Expiry mode: a reader asks the target (old version), then a write
    through the cache replaces the file and drops the path; the reader's
    record of the old version must not land after the drop (it would be
    trusted for T)."""
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=10)
    assert fs.cat_file("/f") == V1
    clock.now += 11  # the record is stale: the next open asks the target
    v2 = V2[:-7]
    remote.after_info = once_at(1, lambda: fs.pipe_file("/f", v2))
    fs.open("/f", "rb").close()  # the reader found v1, then the write ran
    remote.after_info = None
    assert fs.info("/f")["size"] == len(v2)
    assert fs.cat_file("/f") == v2
    assert fs.cache_stats()["raced"] >= 1


def test_pieces_held_back_by_a_reader_cannot_outlive_a_write(path, remote, caches, clock):
    """A reader fetched and checked blocks of the old version; a write
    through the cache drops the path before the reader stores them: they
    are not stored (the reader's own bytes were of one version)."""
    remote.pipe_file("/f", V1)
    fs = caches(path, remote, expiry=10)
    # info 1: the reader's confirmation; info 2: its check after the fetch
    remote.after_info = once_at(2, lambda: fs.pipe_file("/f", V2))
    assert fs.cat_file("/f") == V1  # read before the write finished
    remote.after_info = None
    assert list(fs.store.list(fs._prefix("/f"))) == []  # nothing of v1 kept
    assert fs.cat_file("/f") == V2


def test_an_empty_file_is_checked_after_its_fetch(path, remote, caches):
    """A zero-size version is fetched like any other (not answered b""
    from info() alone): a file that grew after info() is read as it is
    (passed through, since its bytes are not of info()'s size)."""
    remote.pipe_file("/z", b"")
    fs = caches(path, remote)
    remote.after_info = once_at(1, lambda: remote.pipe_file("/z", b"grown"))
    assert fs.cat_file("/z") == b"grown"
    assert fs.cache_stats()["size_mismatch"] == 1
    remote.after_info = None
    assert fs.cat_file("/z") == b"grown"
    remote.pipe_file("/z", b"")
    assert fs.cat_file("/z") == b"" and fs.cat_file("/z") == b""
    assert fs.cache_stats()["hits"] >= 1  # an empty whole piece is cached


def test_a_forked_child_reads_through_the_target(path, remote, caches, tmp_path):
    """A forked child inherits the store's handle but not its lock: the
    cache passes its reads (and writes) through to the target."""
    remote.pipe_file("/f", V1)
    remote.pipe_file("/s", b"small")
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/f") == V1  # cached in the parent
    out = tmp_path / "child.out"
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            remote.pipe_file("/s", b"changed")
            ok = (
                fs.cat_file("/f") == V1
                and fs.cat_file("/f", 5, 9) == V1[5:9]
                and fs.open("/f", "rb").read() == V1
                and fs.cat_file("/s") == b"changed"
                and fs.info("/f")["size"] == len(V1)
            )
            fs.pipe_file("/t", b"written by the child")  # (the child's memory)
            ok = ok and remote.cat_file("/t") == b"written by the child"
            out.write_text("ok" if ok else "wrong bytes")
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out.write_text(f"{type(e).__name__}: {e}")
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert out.read_text() == "ok" and status == 0
    assert fs.cat_file("/f") == V1 and fs.cache_stats()["hits"] >= 1


def test_a_read_only_store_is_refused(path, remote, tmp_path):
    with blobcask.Store(path, capacity=8 << 20):
        pass
    with blobcask.Store(path, read_only=True) as ro:
        with pytest.raises(ValueError, match="read-only"):
            BlobcacheFileSystem(store=ro, fs=remote, skip_instance_cache=True)
    with pytest.raises(ValueError, match="read_only"):
        BlobcacheFileSystem(
            store=tmp_path / "other.blobcask",
            fs=remote,
            store_options={"read_only": True},
            skip_instance_cache=True,
        )


def test_a_store_error_while_dropping_does_not_fail_the_write(path, remote, caches, clock):
    """The write reached the target: a store that then fails to drop the
    path must not make it look failed; records are no longer trusted."""
    remote.pipe_file("/f", b"old")
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/f") == b"old"
    real = fs.store

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def list(self, *args, **kwargs):
            raise blobcask.errors.IOError("EIO: the cache's disk failed")

    fs.store = Failing()
    try:
        fs.pipe_file("/f", b"new")  # no exception: the write is done
    finally:
        fs.store = real
    assert remote.cat_file("/f") == b"new"
    assert fs.cache_stats()["drop_failed"] == 1
    assert fs.cat_file("/f") == b"new"  # the old record is not trusted


def test_every_spelling_of_a_local_path_reads_and_drops_one_entry(
    tmp_path, path, caches, clock
):
    """A local target resolves "//", "/./", "/../" and symbolic links: a
    write under one spelling drops what a read under another cached."""
    local = fsspec.filesystem("file", skip_instance_cache=True)
    d = str(tmp_path / "t")
    os.makedirs(d + "/sub")
    os.symlink(d, d + "/link")
    fs = caches(path, local, expiry=60)
    spellings = [d + "//f", d + "/./f", d + "/sub/../f", d + "/link/f"]
    for n, spelling in enumerate(spellings):
        clock.now += 61  # what was cached before is no longer trusted
        local.pipe_file(d + "/f", b"old %d" % n)
        assert fs.cat_file(d + "/f") == b"old %d" % n  # cached, trusted for T
        fs.pipe_file(spelling, b"new %d" % n)
        assert fs.cat_file(d + "/f") == b"new %d" % n, spelling
        fs.cat_file(spelling)  # cached under the one entry
        fs.pipe_file(d + "/f", b"newer %d" % n)
        assert fs.cat_file(spelling) == b"newer %d" % n, spelling


def test_mv_of_a_directory_without_recursive_drops_its_files(tmp_path, path, caches, clock):
    """A local target moves a whole tree on mv(dir, dir2) even without
    recursive=True: what was cached under the old names is dropped."""
    local = fsspec.filesystem("file", skip_instance_cache=True)
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    local.makedirs(src + "/a")
    local.pipe_file(src + "/a/f", b"moved")
    fs = caches(path, local, expiry=60)
    assert fs.cat_file(src + "/a/f") == b"moved"
    fs.mv(src, dst)
    assert local.cat_file(dst + "/a/f") == b"moved"
    with pytest.raises(FileNotFoundError):
        fs.cat_file(src + "/a/f")


def test_a_local_name_that_is_not_utf8_is_cached_and_dropped(tmp_path, path, caches):
    local = fsspec.filesystem("file", skip_instance_cache=True)
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff.bin")
    assert "\udcff" in name
    local.pipe_file(name, b"odd name")
    fs = caches(path, local, expiry=60)
    assert fs.cat_file(name) == b"odd name"
    with fs.open(name, "rb") as f:
        assert f.read() == b"odd name"
    fs.pipe_file(name, b"rewritten")
    assert fs.cat_file(name) == b"rewritten"
    fs.rm(name)
    assert not local.exists(name)
    assert list(fs.store.list(fs._prefix(name))) == []


def test_bytes_of_another_size_than_info_gives_pass_through(path, caches):
    """/proc (size 0, bytes behind it) and /sys (size 4096, fewer bytes):
    the fetched bytes are served as they are, once, uncached."""

    class Lying(CountingFS):
        def info(self, path, **kwargs):
            info = dict(super().info(path, **kwargs))
            if "proc" in path:
                info["size"] = 0
            elif "sys" in path:
                info["size"] = 4096
            return info

    remote = Lying(strong=False, skip_instance_cache=True)
    remote.pipe_file("/proc/x", b"proc bytes")
    remote.pipe_file("/sys/y", b"sys\n")
    fs = caches(path, remote, expiry=60)
    for _ in range(2):
        assert fs.cat_file("/proc/x") == b"proc bytes"
        assert fs.cat_file("/proc/x", 5, -1) == b"byte"
        assert fs.cat_file("/sys/y") == b"sys\n"
        with fs.open("/proc/x", "rb") as f:
            assert f.read() == b"proc bytes"
        with fs.open("/sys/y", "rb") as f:
            assert f.read() == b"sys\n"
    assert fs.cache_stats()["restarts"] == 0
    assert not [k for k in fs.store.list("bc1/") if b"/w/" in k]


def test_fsspec_buffering_options_do_not_bypass_the_cache(path, remote, caches):
    """dask opens files with cache_type= (and block_size=, cache_options=):
    they tell a target's file how to buffer; reads still use the cache."""
    remote.pipe_file("/f", V1)
    fs = caches(path, remote)
    assert fs.cat_file("/f") == V1
    remote.reset()
    for options in (
        {"cache_type": "readahead"},
        {"cache_type": "bytes", "block_size": 5 * B, "cache_options": {}},
    ):
        with fs.open("/f", "rb", **options) as f:
            assert isinstance(f, fsspec_cache.BlobcacheFile)
            assert f.read() == V1
    assert remote.calls["cat_file"] == 0


def test_listings_pass_through(path, remote, caches):
    remote.pipe_file("/l/x/1", b"1")
    remote.pipe_file("/l/2", b"22")
    fs = caches(path, remote, expiry=60)
    assert fs.ls("/l", detail=False) == remote.ls("/l", detail=False)
    assert fs.find("/l") == remote.find("/l") == ["/l/2", "/l/x/1"]
    assert fs.glob("/l/*") == remote.glob("/l/*")
    assert fs.isdir("/l/x") and fs.exists("/l/2") and not fs.exists("/l/3")


def test_a_restart_keeps_pieces_and_confirmation_times(path, remote, caches, clock):
    remote.pipe_file("/r", V1)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/r") == V1
    fs.close()
    with pytest.raises(blobcask.ClosedError):
        fs.store.stats()
    remote.reset()
    fs = caches(path, remote, expiry=60)
    clock.now += 30
    assert fs.cat_file("/r") == V1
    assert remote.calls == {}  # confirmed 30 s ago, before the restart
    clock.now += 31
    assert fs.cat_file("/r") == V1
    assert remote.calls == {"info": 1}  # confirmed again; bytes still cached
    remote.reset()
    clock.now += 50
    assert fs.cat_file("/r") == V1
    assert remote.calls == {}  # the new confirmation time was kept
    fs.close()
    remote.reset()
    fs = caches(path, remote)  # check="always" on the same store
    assert fs.cat_file("/r") == V1
    assert remote.calls == {"info": 1}


def flip_a_byte_of(store_path: str, chunk: bytes, every: bool = False) -> None:
    """Flips a byte inside ``chunk``, which must be once in the store file;
    with ``every``, inside each copy of it (a tuple block's bytes can be in
    its home slot and in a journal slot not yet reused)."""
    raw = bytearray(open(store_path, "rb").read())
    at = raw.find(chunk)
    assert at >= 0, "the chunk is not in the store file"
    if not every:
        assert raw.find(chunk, at + 1) < 0, "the chunk is not once in the store file"
    while at >= 0:
        raw[at + 10] ^= 0x01
        at = raw.find(chunk, at + 1) if every else -1
    with open(store_path, "wb") as f:
        f.write(raw)


def test_a_damaged_piece_is_fetched_again_never_served(path, remote, caches, clock):
    data = os.urandom(5 * B + 123)  # random: a chunk of it is nowhere else
    remote.pipe_file("/c", data)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/c") == data
    fs.close()
    flip_a_byte_of(path, data[2 * B + 100 : 2 * B + 164])  # inside block 2
    remote.reset()
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/c") == data
    assert remote.ranges == [("/c", 2 * B, 3 * B)]
    assert fs.cache_stats()["corrupt"] == 1
    remote.reset()
    assert fs.cat_file("/c") == data  # stored again, whole
    assert remote.calls == {}


def test_a_damaged_record_is_read_past_never_trusted(path, remote, caches, clock):
    """A flipped byte in the tuple block holding a file's record (its
    identity and confirmation time, stored inline): the store refuses the
    block's keys, then every change, and the cache reads through to the
    target instead of failing, trusting no record it could not update."""
    data = os.urandom(3 * B)
    remote.pipe_file("/c", data)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/c") == data
    fs.close()
    flip_a_byte_of(path, b'"confirmed": ')
    remote.reset()
    fs = cache_on(path, remote, expiry=60)
    try:
        assert fs.cat_file("/c") == data
        assert fs.cat_file("/c", start=B, end=B + 10) == data[B : B + 10]
        with fs.open("/c", "rb") as f:
            assert f.read() == data
        assert fs.cache_stats()["corrupt"] >= 1
        # No record is trusted now: every read asks the target, so a write
        # whose invalidation the store refused is still seen.
        remote.reset()
        assert fs.cat_file("/c") == data
        assert remote.calls["info"] >= 1
        fs.pipe_file("/c", b"new")
        assert fs.cat_file("/c") == b"new"
    finally:
        try:
            fs.close()
        except blobcask.CorruptError:
            pass  # the store reports the damage it found; not the cache's to hide


def test_after_the_store_refuses_changes_no_record_is_trusted(path, remote, caches, clock):
    """Once the store refuses changes (damage found in one tuple block),
    records in intact blocks still read but can no longer be updated or
    dropped: a write through the cache could not invalidate its record,
    so expiry must not trust it, and the write is seen."""
    names = [f"/f{i:02d}" for i in range(60)]
    for name in names:
        remote.pipe_file(name, f"old {name}".encode())
    fs = caches(path, remote, expiry=60)
    for name in names:
        assert fs.cat_file(name) == f"old {name}".encode()
    fs.close()
    flip_a_byte_of(path, b'"name": "/f00"', every=True)
    fs = cache_on(path, remote, expiry=60)
    try:
        last = names[-1]
        assert fs.store.get(fs._prefix(last) + "m") is not None  # in an intact block
        assert fs.cat_file(names[0]) == b"old /f00"  # its record is damaged
        fs.pipe_file(last, b"new")  # the store refuses to drop the record
        assert fs.cat_file(last) == b"new"
        assert fs.cache_stats()["corrupt"] >= 1
    finally:
        try:
            fs.close()
        except blobcask.CorruptError:
            pass


def test_a_full_store_passes_reads_through(tmp_path, remote, caches):
    big = pattern(3, 24 << 20)
    remote.pipe_file("/big", big)
    fs = caches(
        str(tmp_path / "small.blobcask"),
        remote,
        block_size=1 << 20,
        whole_file_limit=0,
        store_options={"capacity": 16 << 20, "max_capacity": 16 << 20, "eviction": "none"},
    )
    assert fs.cat_file("/big") == big
    assert fs.cache_stats()["uncached"] >= 1
    with fs.open("/big", "rb") as f:
        f.seek(20 << 20)
        assert f.read(100) == big[20 << 20 : (20 << 20) + 100]


def test_a_bounded_cache_evicts_to_cache_what_is_read_now(tmp_path, remote, caches):
    """With ``max_capacity`` the store evicts (S3-FIFO) rather than leave
    new pieces uncached: 48 MiB read through a 16 MiB cache, the file never
    grows past its bound, every read is right, and the last file read is
    served from the cache the second time."""
    files = {f"/f{i}": pattern(10 + i, 4 << 20) for i in range(12)}
    for name, data in files.items():
        remote.pipe_file(name, data)
    store = tmp_path / "bounded.blobcask"
    fs = caches(
        str(store),
        remote,
        block_size=1 << 20,
        whole_file_limit=0,
        expiry=3600,
        store_options={"capacity": 16 << 20, "max_capacity": 16 << 20},
    )
    for name, data in files.items():
        assert fs.cat_file(name) == data
        assert os.path.getsize(store) <= 16 << 20
    assert fs.store.stats().evictions > 0
    assert fs.cache_stats()["uncached"] == 0
    remote.reset()
    assert fs.cat_file("/f11") == files["/f11"]
    assert remote.calls["cat_file"] == 0


def test_a_target_without_identity_is_read_uncached(path, caches):
    class NoIdentity(CountingFS):
        def info(self, path, **kwargs):
            info = dict(super().info(path, **kwargs))
            info.pop("created", None)
            info.pop("mtime", None)
            return info

    remote = NoIdentity(strong=False, skip_instance_cache=True)
    remote.pipe_file("/n", V1)
    fs = caches(path, remote, expiry=60)
    assert fs.cat_file("/n") == V1 and fs.cat_file("/n", start=5, end=9) == V1[5:9]
    with fs.open("/n", "rb") as f:
        assert f.read() == V1
    assert list(fs.store.list("bc1/")) == []


def test_a_weak_identity_never_mixes_two_versions(tmp_path, path, caches):
    """Two versions of one size with one modification time (a 1-second
    file system, ``cp -p``, ``utime``) look alike: a large such file is
    read through uncached (never as blocks, which could join block 0 of
    one version to blocks 1-2 of the other), a small one is cached whole
    from one request."""
    local = fsspec.filesystem("file", skip_instance_cache=True)
    big, small = str(tmp_path / "big.bin"), str(tmp_path / "small.bin")
    stamp = (1_700_000_000, 1_700_000_000)

    def write(name, data):
        with open(name, "wb") as f:
            f.write(data)
        os.utime(name, stamp)

    write(big, b"A" * 3 * B)
    write(small, b"a" * B)
    fs = caches(path, local)
    assert fs.cat_file(big, 0, 10) == b"A" * 10
    assert fs.cat_file(small, 0, 10) == b"a" * 10
    write(big, b"B" * 3 * B)
    data = fs.cat_file(big)
    assert data == b"B" * 3 * B, (data.count(b"A"), data.count(b"B"))
    with fs.open(big, "rb") as f:
        f.seek(B + 1)
        assert f.read(10) == b"B" * 10
    assert fs.cat_file(small) == b"a" * B  # whole: one version (if stale)
    keys = [k.decode() for k in fs.store.list("bc1/")]
    assert not [k for k in keys if "/b/" in k]  # no blocks of a weak identity
    assert [k for k in keys if "/w/" in k]  # the small file, whole


def test_an_etag_is_strong_unless_http_weak():
    from blobcask._cache_entry import identity_and_strength

    # nginx's ETag is "<mtime hex>-<size hex>", Apache's "<size hex>-<mtime
    # us hex>": visibly time and size, so weak; any other ETag is trusted
    assert identity_and_strength({"size": 3, "ETag": '"6553f100-3"'})[1] is False
    assert identity_and_strength({"size": 45, "ETag": '"2d-432a5e4a73a80"'})[1] is False
    assert identity_and_strength({"size": 4, "ETag": '"6553f100-3"'})[1] is True
    md5_parts = '"' + "a" * 32 + '-2"'  # S3 multipart: md5 of md5s, part count
    assert identity_and_strength({"size": 2, "ETag": md5_parts})[1] is True
    assert identity_and_strength({"size": 3, "ETag": 'W/"x"'})[1] is False
    assert identity_and_strength({"size": 3, "ETag": 'W/"x"', "VersionId": "v"})[1] is True
    assert identity_and_strength({"size": 3, "mtime": 1.0})[1] is False
    assert identity_and_strength({"size": 3, "Last-Modified": "Sun, 29 Nov 2026"})[1] is False


def test_an_http_file_with_only_last_modified_is_cached_whole(tmp_path, path, caches):
    """Python's http.server sends Last-Modified and no ETag: a weak
    identity, so a small file is cached whole."""
    import functools
    import http.server

    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "page.txt").write_bytes(b"served over http")
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "www")
    )
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/page.txt"
        http_fs = fsspec.filesystem("http", skip_instance_cache=True)
        assert "Last-Modified" in http_fs.info(url) and "ETag" not in http_fs.info(url)
        fs = caches(path, http_fs, expiry=60)
        assert fs.cat_file(url) == b"served over http"
        assert fs.cat_file(url) == b"served over http"
        assert fs.cache_stats()["hits"] == 1
        assert [k for k in fs.store.list("bc1/") if b"/w/" in k]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("bad", [True, False, 1.0, "3"])
def test_cat_file_bounds_must_be_ints(path, remote, caches, bad):
    remote.pipe_file("/f", b"0123456789")
    fs = caches(path, remote)
    with pytest.raises(TypeError, match="start must be an int"):
        fs.cat_file("/f", start=bad)
    with pytest.raises(TypeError, match="end must be an int"):
        fs.cat_file("/f", end=bad)
    assert fs.cat_file("/f", start=1, end=-1) == b"12345678"


def test_store_options_for_a_store_already_open_are_refused_not_ignored(path, remote, caches):
    fs = caches(path, remote, store_options={"capacity": 8 << 20})
    same = caches(path, remote, store_options={"capacity": 8 << 20})  # the same: fine
    assert same.store is fs.store
    assert caches(path, remote).store is fs.store  # none given: fine
    with pytest.raises(ValueError, match="already open in this process with"):
        caches(path, remote, store_options={"capacity": 8 << 20, "durability": "sync"})


def test_modified_created_and_sign_are_the_targets(tmp_path, path, caches):
    local = fsspec.filesystem("file", skip_instance_cache=True)
    name = str(tmp_path / "f")
    local.pipe_file(name, b"x")
    fs = caches(path, local)
    assert fs.modified(name) == local.modified(name)
    assert fs.created(name) == local.created(name)
    with pytest.raises(NotImplementedError):
        fs.sign(name)  # the local target's own answer


def test_memory_files_edited_in_place_are_read_uncached(path, caches):
    """memory:// gives only ``created``, which an "r+b" edit keeps: not an
    identity, so its files are read through, and the edit is seen."""
    memory = MemoryFileSystem(global_store=False, skip_instance_cache=True)
    memory.pipe_file("/m", b"0123456789")
    fs = caches(path, memory)
    assert fs.cat_file("/m") == b"0123456789"
    with memory.open("/m", "r+b") as f:
        f.seek(2)
        f.write(b"XY")
    assert fs.cat_file("/m") == b"01XY456789"
    assert list(fs.store.list("bc1/")) == []


def test_a_chained_url_opens_through_the_cache(path, tmp_path):
    assert fsspec.get_filesystem_class("blobcache") is BlobcacheFileSystem
    data = tmp_path / "data.bin"
    data.write_bytes(V1)
    url = f"blobcache::file://{data}"
    with fsspec.open(url, "rb", blobcache={"store": path, "expiry": 60}) as f:
        assert f.read() == V1
        cache_fs = f.fs
    assert isinstance(cache_fs, BlobcacheFileSystem) and "file" in cache_fs.fs.protocol
    data.unlink()  # cached: still served
    with fsspec.open(url, "rb", blobcache={"store": path, "expiry": 60}) as f:
        assert f.read() == V1
    cache_fs.close()


@pytest.mark.parametrize(
    "options, error",
    [
        ({"expiry": "60"}, TypeError),
        ({"expiry": True}, TypeError),
        ({"expiry": -1}, ValueError),
        ({"expiry": float("nan")}, ValueError),
        ({"check": "sometimes"}, ValueError),
        ({"check": 1}, TypeError),
        ({"check": "expiry"}, ValueError),
        ({"check": "always", "expiry": 5}, ValueError),
        ({"block_size": 1.5}, TypeError),
        ({"block_size": 0}, ValueError),
        ({"whole_file_limit": "1M"}, TypeError),
        ({"store_options": [("capacity", 1)]}, TypeError),
        ({"store_options": {"no_such_option": 1}}, TypeError),
        ({"namespace": 5}, TypeError),
        ({"store": 5}, TypeError),
        ({"store": None}, ValueError),
        ({"target_protocol": "memory"}, ValueError),  # and fs=
    ],
)
def test_wrong_options_are_refused(path, remote, options, error):
    options = {"store": path, "fs": remote, **options}
    with pytest.raises(error):
        BlobcacheFileSystem(skip_instance_cache=True, **options)


def test_target_protocol_and_fs_exclusive_and_typed(path):
    with pytest.raises(ValueError):
        BlobcacheFileSystem(store=path, skip_instance_cache=True)
    with pytest.raises(TypeError):
        BlobcacheFileSystem(store=path, fs="memory", skip_instance_cache=True)
    with pytest.raises(TypeError):
        BlobcacheFileSystem(store=path, target_protocol="memory", target_options=[1],
                            skip_instance_cache=True)
