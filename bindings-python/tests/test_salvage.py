"""``salvage=True``: a read-only open that skips a damaged tuple block
instead of refusing the store, and reports it in ``stats().recovery``.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import dataclasses
import os

import pytest

import blobcask


def value_of(i: int) -> bytes:
    return bytes([i % 251]) * 100


def damage_the_block_of(path: str, key: bytes) -> None:
    """Flips one byte beside `key` in every block of the file that holds
    it: its tuple block (and any journal image of it)."""
    data = bytearray(open(path, "rb").read())
    at = data.find(key)
    assert at >= 0, "the key is in no block"
    while at >= 0:
        data[at + len(key) + 2] ^= 0x40
        at = data.find(key, at + 1)
    with open(path, "wb") as f:
        f.write(data)


def test_a_salvage_open_serves_only_exact_objects_and_names_the_skipped_block(tmp_path):
    path = str(tmp_path / "s")
    with blobcask.Store(path, capacity=16 << 20) as s:
        for i in range(3000):
            s[f"k{i:05d}"] = value_of(i)
        assert s.stats().recovery.skipped == ()
    damage_the_block_of(path, b"k01500")
    before = open(path, "rb").read()

    # The clean close wrote an index image, which holds no keys (the hash
    # index records fingerprints): it is whole, so the open loads it and
    # reads no tuple block; the damaged block is found by the read of an
    # object it holds. (The close writes nothing: nothing changed.)
    with blobcask.Store(path) as s:
        with pytest.raises(blobcask.CorruptError, match="tuple block"):
            s[b"k01500"]
    with pytest.raises(blobcask.InvalidArgumentError, match="read_only"):
        blobcask.Store(path, salvage=True)
    with blobcask.Store(path, read_only=True, salvage=True) as s:
        skipped = s.stats().recovery.skipped
        assert len(skipped) == 1 and "tuple block" in skipped[0]
        assert b"k01500" not in s
        served = list(s)
        assert 0 < len(served) < 3000
        for key in served:
            assert s[key] == value_of(int(key[1:]))
        with pytest.raises(blobcask.UnsupportedError):
            s["new"] = b"x"
        copy = str(tmp_path / "copy")
        report = s.backup(copy)
        assert report.objects == len(served)
    # Nothing was written to the damaged store; the copy is whole.
    assert open(path, "rb").read() == before
    with blobcask.Store(copy, read_only=True) as c:
        assert sorted(c) == sorted(served)
        assert c.stats().recovery.skipped == ()


def test_reports_are_frozen_records_of_the_cores_figures(tmp_path):
    with blobcask.Store(str(tmp_path / "s"), capacity=16 << 20) as s:
        info = s.put("k", b"v" * 5000)
        assert info == s.stat("k")
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.size = 1  # type: ignore[misc]
        st = s.stats()
        # Figures the core gives every binding, not only some.
        assert st.largest_free_piece > 0 and st.max_capacity is None
        assert st.space_amplification is not None and st.space_amplification > 1
        assert st.as_dict()["recovery"]["skipped"] == []
        assert info["size"] == 5000 and info.as_dict()["inline"] is False
        with pytest.raises(TypeError):
            st[0]  # type: ignore[index]
        # Hashable and immutable all the way down; a dict's reading habits.
        assert hash(st) == hash(s.stats()) or st != s.stats()
        with pytest.raises(AttributeError):
            st.recovery.skipped.append("forged")  # type: ignore[attr-defined]
        assert "cache" in st and "nonsense" not in st and 0 not in st
        assert list(st)[:2] == ["objects", "logical_bytes"] and list(st) == list(st.as_dict())
        assert st.as_dict()["recovery"]["details"] == []
        assert os.path.basename(s.backup(str(tmp_path / "b"))["path"]) == "b"
