"""Expiry: ``put(..., ttl=...)`` and ``Upload.commit(ttl=...)``; an expired
object is invisible at once (and removed by the store in the background)."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import timedelta

import pytest

import blobcask
from blobcask import errors

from conftest import pattern


def wait_past(t: float) -> None:
    """Sleeps until the wall clock is past `t` (seconds since the epoch)."""
    while time.time() <= t:
        time.sleep(max(t - time.time(), 0) + 0.01)


def assert_gone(s: blobcask.Store, key: str) -> None:
    """`key` has no object, by every call that looks."""
    for call in (s.get_blob, s.read, s.stat):
        with pytest.raises(errors.NotFoundError):
            call(key)
    assert s.get(key) is None and s.get(key, b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        s[key]
    assert key not in s and not s.contains(key)


def test_an_object_with_a_ttl_is_readable_then_gone(path):
    with blobcask.Store(path, capacity=16 << 20, index="btree") as s:
        s.put("keep", pattern(1, 20_000))
        heap = s.put("brief/heap", pattern(2, 50_000), ttl=0.3)
        inline = s.put("brief/inline", b"tiny", ttl=0.3)
        assert inline.inline and not heap.inline
        for info in (heap, inline):
            assert info.expires == pytest.approx(info.created + 0.3, abs=1e-3)
        st = s.stat("brief/heap")
        assert (st.version, st.expires) == (heap.version, heap.expires)
        assert f"expires={heap.expires!r}" in repr(st)
        assert s.stat("keep").expires is None
        assert "expires=None" in repr(s.stat("keep"))
        assert s.get("brief/heap") == pattern(2, 50_000)
        assert s.get("brief/inline") == b"tiny" and "brief/inline" in s
        assert list(s.list("brief/")) == [b"brief/heap", b"brief/inline"]

        wait_past(max(heap.expires, inline.expires))
        assert_gone(s, "brief/heap")
        assert_gone(s, "brief/inline")
        with pytest.raises(errors.NotFoundError):
            s.delete("brief/heap")
        assert list(s.list()) == [b"keep"]
        # A create-only put sees no object there.
        s.put("brief/heap", b"again", if_absent=True)
        assert s.get("brief/heap") == b"again"
        assert s.stat("brief/heap").expires is None
        assert s.get("keep") == pattern(1, 20_000)


def test_ttl_takes_int_float_and_timedelta_and_a_put_without_one_clears_it(store):
    hour = store.put("int", b"v", ttl=3600)
    assert hour.expires == pytest.approx(hour.created + 3600, abs=1e-3)
    frac = store.put("float", b"v", ttl=1.5)
    assert frac.expires == pytest.approx(frac.created + 1.5, abs=1e-3)
    delta = store.put("delta", b"v", ttl=timedelta(days=2, microseconds=250))
    assert delta.expires == pytest.approx(delta.created + 2 * 86_400 + 250e-6, abs=1e-3)
    longest = store.put("longest", b"v", ttl=blobcask.MAX_TTL)
    assert longest.expires == pytest.approx(longest.created + blobcask.MAX_TTL, abs=1)
    assert store.put("micro", b"v", ttl=1e-6).expires is not None
    # A put without a ttl replaces the object with one that never expires.
    assert store.put("int", b"w").expires is None
    assert store.stat("int").expires is None
    # A new ttl replaces the old one: the short one no longer applies.
    store.put("k", b"short", ttl=0.2)
    long = store.put("k", b"long", ttl=3600)
    time.sleep(0.3)
    assert store.get("k") == b"long"
    assert store.stat("k").expires == long.expires
    store["plain"] = b"x"
    assert store.stat("plain").expires is None


def test_ttl_takes_other_real_numbers_but_no_bool(store):
    from decimal import Decimal
    from fractions import Fraction

    half = store.put("frac", b"v", ttl=Fraction(1, 2))
    assert half.expires == pytest.approx(half.created + 0.5, abs=1e-3)
    # Too large for a float: out of range, as 2**64 is.
    with pytest.raises(errors.InvalidArgumentError):
        store.put("huge", b"v", ttl=Fraction(10**400, 3))
    # Decimal is no `numbers.Real`: refused, as by `math` functions' peers.
    with pytest.raises(TypeError, match="ttl"):
        store.put("dec", b"v", ttl=Decimal("1.5"))  # type: ignore[arg-type]
    np = pytest.importorskip("numpy")
    i = store.put("np-int", b"v", ttl=np.int64(60))
    assert i.expires == pytest.approx(i.created + 60, abs=1e-3)
    f = store.put("np-float", b"v", ttl=np.float32(1.5))
    assert f.expires == pytest.approx(f.created + 1.5, abs=1e-3)
    # numpy's bools are no numbers here; its timedelta64 registers as an
    # integer but has no exact value.
    for bad in (np.True_, np.False_, np.timedelta64(5, "s")):
        with pytest.raises(TypeError, match="ttl"):
            store.put("np-bool", b"v", ttl=bad)  # type: ignore[arg-type]
    for bad in (np.int64(-1), np.int64(0), np.float64("nan"), np.uint64(2**64 - 1)):
        with pytest.raises(errors.InvalidArgumentError):
            store.put("np-bad", b"v", ttl=bad)
    assert not store.contains("np-bool") and not store.contains("np-bad")
    assert not store.contains("huge")
    assert not store.contains("dec")


BAD_TYPES: list[object] = [True, False, "5", b"5", [1], None.__class__, 1j]
BAD_VALUES: list[object] = [
    -1,
    -0.5,
    0,
    0.0,
    5e-7,  # under 1 µs
    math.nan,
    math.inf,
    -math.inf,
    10**12,  # above MAX_TTL
    blobcask.MAX_TTL + 1,
    2**64,
    1e300,
    timedelta(0),
    timedelta(seconds=-1),
]


def test_a_bad_ttl_is_refused_and_nothing_is_stored(store):
    for bad in BAD_TYPES:
        with pytest.raises(TypeError, match="ttl"):
            store.put("k", pattern(1, 10_000), ttl=bad)
    for bad in BAD_VALUES:
        with pytest.raises(errors.InvalidArgumentError, match="ttl") as e:
            store.put("k", pattern(1, 10_000), ttl=bad)
        assert isinstance(e.value, ValueError) and e.value.code == "INVALID_ARGUMENT", bad
    assert "k" not in store and len(store) == 0
    assert store.stats()["allocated_bytes"] == 0, "a refused put kept space"
    # A refused ttl does not touch what the key holds.
    first = store.put("k", b"one")
    for bad in (True, -1, 0, math.nan):
        with pytest.raises((TypeError, ValueError)):
            store.put("k", b"two", ttl=bad)
    assert store.get("k") == b"one" and store.stat("k").version == first.version


def test_an_upload_commit_takes_a_ttl(store):
    value = pattern(3, 3 * blobcask.PART_ALIGN + 5)
    up = store.begin_upload("up", len(value))
    up.write_part(0, value)
    # An argument refused before the commit leaves the upload usable,
    # whether the binding or the store's rule refuses the ttl.
    for bad in ("1", True, -1, math.inf, 0, 1e-9, 10**10):
        with pytest.raises((TypeError, ValueError), match="ttl"):
            up.commit(ttl=bad)
    assert "up" not in store
    info = up.commit(ttl=0.3)
    assert info.size == len(value)
    assert info.expires == pytest.approx(info.created + 0.3, abs=1e-3)
    assert store.get("up") == value and store.stat("up").expires == info.expires
    wait_past(info.expires)
    assert_gone(store, "up")
    # A condition that fails is a refused commit: nothing is stored, and
    # the upload's space is freed.
    up = store.begin_upload("up2", len(value))
    up.write_part(0, value)
    with pytest.raises(errors.VersionMismatchError):
        up.commit(ttl=5, if_version=12345)
    assert "up2" not in store and store.list_uploads() == []
    up = store.begin_upload("up3", len(value))
    up.write_part(0, value)
    assert up.commit(ttl=timedelta(hours=1)).expires is not None


def test_async_put_and_upload_commit_take_a_ttl(path):
    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=32 << 20) as s:
            infos = await asyncio.gather(
                s.put("a", pattern(1, 30_000), ttl=0.3),
                s.put("b", b"small", ttl=timedelta(milliseconds=300)),
                s.put("c", pattern(3, 30_000)),
            )
            for info in infos[:2]:
                assert info.expires == pytest.approx(info.created + 0.3, abs=1e-3)
            assert infos[2].expires is None
            assert (await s.stat("a")).expires == infos[0].expires
            assert await s.get("a") == pattern(1, 30_000)
            for bad in BAD_TYPES:
                with pytest.raises(TypeError, match="ttl"):
                    await s.put("bad", b"x", ttl=bad)  # type: ignore[arg-type]
            for bad in BAD_VALUES:
                with pytest.raises(errors.InvalidArgumentError, match="ttl"):
                    await s.put("bad", b"x", ttl=bad)  # type: ignore[arg-type]
            assert "bad" not in s

            value = pattern(4, 2 * blobcask.PART_ALIGN)
            up = await s.begin_upload("up", len(value))
            await up.write_part(0, value)
            with pytest.raises(TypeError, match="ttl"):
                await up.commit(ttl="0.3")  # type: ignore[arg-type]
            committed = await up.commit(ttl=0.3)
            assert committed.expires == pytest.approx(committed.created + 0.3, abs=1e-3)
            assert await s.get("up") == value

            assert infos[0].expires is not None and committed.expires is not None
            last = max(infos[0].expires, committed.expires)
            await asyncio.sleep(max(0.0, last - time.time()) + 0.05)
            for key in ("a", "b", "up"):
                assert await s.get(key) is None
                with pytest.raises(errors.NotFoundError):
                    await s.read(key)
                with pytest.raises(errors.NotFoundError):
                    await s.stat(key)
                assert key not in s
            assert await s.get("c") == pattern(3, 30_000)

    asyncio.run(main())
