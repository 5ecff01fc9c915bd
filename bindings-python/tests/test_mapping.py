"""``blobcask.Store`` as a ``collections.abc.MutableMapping``.

Run after `pip install ./bindings-python`."""

from __future__ import annotations

import collections.abc as abc
import threading
import time

import pytest

import blobcask
from blobcask import errors

INDEXES = ["hash", "btree", "fst"]
WRONG_KEYS = [3, None, 1.5, [b"k"], (b"k",), {"k": 1}]


@pytest.fixture(params=INDEXES)
def any_store(request, path):
    with blobcask.Store(path, capacity=16 << 20, index=request.param) as s:
        yield s


def test_a_store_is_a_mutable_mapping(store):
    for abc_class in (abc.MutableMapping, abc.Mapping, abc.Collection, abc.Sized, abc.Iterable):
        assert isinstance(store, abc_class), abc_class
    assert issubclass(blobcask.Store, abc.MutableMapping)
    # The native class underneath is still what AsyncStore and fsspec take.
    assert isinstance(store, blobcask._native.Store)


def test_iteration_yields_every_key_as_bytes_in_byte_order_on_ordered_indexes(any_store):
    keys = ["b/2", "a", "b/10", "\u00e9t\u00e9", "b/1"]
    for k in keys:
        any_store[k] = k.encode() * 3
    any_store[b"\xff\x00raw"] = b"raw"  # not UTF-8: still a key, as bytes
    expected = [k.encode() for k in keys] + [b"\xff\x00raw"]
    got = list(any_store)
    assert all(type(k) is bytes for k in got)
    if any_store.stats().index == "hash":
        assert sorted(got) == sorted(expected)
    else:
        assert got == sorted(expected)
    assert list(any_store.keys()) == got
    assert len(any_store) == len(any_store.keys()) == 6
    assert dict(any_store) == {k: (k * 3 if k != b"\xff\x00raw" else b"raw") for k in expected}


def test_an_empty_store_iterates_nothing(any_store):
    assert list(any_store) == [] and len(any_store) == 0 and not any_store
    assert list(any_store.items()) == [] and list(any_store.values()) == []


def test_str_and_bytes_keys_are_the_same_key_everywhere(store):
    store["k"] = b"v"
    assert "k" in store and b"k" in store and bytearray(b"k") in store
    assert "k" in store.keys() and b"k" in store.keys()
    assert store[b"k"] == store["k"] == store.get(memoryview(b"k")) == b"v"
    assert ("k", b"v") in store.items() and (b"k", b"v") in store.items()
    assert (b"k", b"other") not in store.items() and ("x", b"v") not in store.items()
    assert b"v" in store.values() and b"nope" not in store.values()


def test_get_returns_the_default_on_a_miss(store):
    store["k"] = b"value"
    assert store.get("k") == b"value" and type(store.get("k")) is bytes
    assert store.get("missing") is None
    assert store.get("missing", b"d") == b"d"
    sentinel = object()
    assert store.get("missing", sentinel) is sentinel
    assert store.get("missing", default=7) == 7
    with pytest.raises(KeyError):
        store["missing"]
    # Only a miss becomes the default: other errors still raise.
    with pytest.raises(errors.InvalidArgumentError):
        store.get("")
    for key in WRONG_KEYS:
        with pytest.raises(TypeError):
            store.get(key)  # type: ignore[arg-type]


def test_missing_keys_raise_key_error_on_getitem_and_delitem(store):
    with pytest.raises(KeyError):
        store["missing"]
    with pytest.raises(KeyError):
        del store["missing"]
    with pytest.raises(errors.NotFoundError):
        del store["missing"]


def test_keys_of_the_wrong_type_are_type_errors_everywhere(store):
    """As dbm and py-lmdb: a value that can never be a key is a bug, not
    a miss; `in` raises too (it does not answer False)."""
    store["k"] = b"v"
    for key in WRONG_KEYS:
        with pytest.raises(TypeError):
            key in store  # noqa: B015
        with pytest.raises(TypeError):
            store[key]  # type: ignore[index]
        with pytest.raises(TypeError):
            store[key] = b"v"  # type: ignore[index]
        with pytest.raises(TypeError):
            del store[key]  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.pop(key)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.setdefault(key, b"v")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            key in store.keys()  # noqa: B015
    assert list(store) == [b"k"]


def test_values_of_the_wrong_type_are_refused_by_every_writer(store):
    for value in (7, None, [1, 2], 1.5, {"a": 1}):
        with pytest.raises(TypeError):
            store["k"] = value  # type: ignore[assignment]
        with pytest.raises(TypeError):
            store.update({"k": value})  # type: ignore[dict-item]
        with pytest.raises(TypeError):
            store.setdefault("k", value)
    with pytest.raises(TypeError, match="not str"):
        store.update(k="text")  # type: ignore[arg-type]
    assert len(store) == 0, "a refused write stored something"


def test_pop(store):
    store["k"] = b"v"
    assert store.pop("k") == b"v" and "k" not in store
    assert store.pop("k", None) is None
    assert store.pop("k", b"d") == b"d"
    with pytest.raises(KeyError):
        store.pop("k")
    with pytest.raises(errors.NotFoundError):
        store.pop("k")


def test_popitem_takes_the_smallest_key_on_ordered_indexes(path):
    with blobcask.Store(path, capacity=16 << 20, index="btree") as s:
        s.update({"b": b"2", "a": b"1", "c": b"3"})
        assert s.popitem() == (b"a", b"1")
        assert s.popitem() == (b"b", b"2")
        assert s.popitem() == (b"c", b"3")
        with pytest.raises(KeyError, match="empty"):
            s.popitem()


def test_popitem_empties_a_hash_store(store):
    store.update({"a": b"1", "b": b"2"})
    got = dict([store.popitem(), store.popitem()])
    assert got == {b"a": b"1", b"b": b"2"} and len(store) == 0
    with pytest.raises(KeyError):
        store.popitem()


def test_setdefault(store):
    assert store.setdefault("k", b"first") == b"first"
    assert store.setdefault("k", b"second") == b"first"
    assert store["k"] == b"first"
    assert store.setdefault("ba", bytearray(b"x")) == b"x"
    assert type(store.setdefault("ba2", bytearray(b"x"))) is bytes
    # No default: None is no value, so an absent key is a TypeError...
    with pytest.raises(TypeError, match="setdefault needs a bytes-like default"):
        store.setdefault("absent")
    assert "absent" not in store
    # ... and a present one returns its value, as dict does.
    assert store.setdefault("k") == b"first"


def test_setdefault_is_atomic_between_threads(store):
    results = []
    start = threading.Barrier(8)

    def racer(i: int) -> None:
        start.wait()
        results.append(store.setdefault("race", bytes([i]) * 1000))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1, "two setdefault calls returned different values"
    assert store["race"] == results[0]


def test_update_takes_a_mapping_pairs_and_keywords(store):
    store.update({"a": b"1"})
    store.update([("b", b"2"), (b"c", bytearray(b"3"))])
    store.update(d=b"4")
    store.update({b"e": memoryview(b"5")})
    assert dict(store) == {b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"e": b"5"}


def test_clear(any_store):
    any_store.update({f"k{i}": b"v" * i for i in range(50)})
    any_store.clear()
    assert len(any_store) == 0 and list(any_store) == []
    any_store.clear()  # an empty store: nothing to do


def test_items_and_values_read_each_object(store):
    big = bytes(range(256)) * 400
    store.update({"small": b"s", "big": big})
    assert dict(store.items()) == {b"small": b"s", b"big": big}
    assert sorted(store.values(), key=len) == [b"s", big]
    assert len(store.items()) == len(store.values()) == 2


@pytest.mark.parametrize("index", INDEXES)
def test_items_skip_keys_deleted_while_iterating(path, index):
    with blobcask.Store(path, capacity=16 << 20, index=index) as s:
        s.update({f"k{i}": str(i).encode() for i in range(10)})
        seen = {}
        for key, value in s.items():
            seen[key] = value
            # Delete every other key not reached yet: it is skipped, no
            # KeyError in the middle of the iteration.
            for other in list(s):
                if other not in seen and int(other[1:]) % 2:
                    del s[other]
        assert all(seen[k] == k[1:] for k in seen)
        assert set(seen) >= {k for k in s}
        values = list(s.values())
        assert len(values) == len(s)


def test_iteration_sees_keys_that_stay_while_others_change(path):
    with blobcask.Store(path, capacity=32 << 20, index="btree") as s:
        s.update({f"stay/{i:05}": b"x" for i in range(3000)})
        seen = []
        for i, key in enumerate(s):
            seen.append(key)
            if i % 100 == 0:
                s[f"new/{i}"] = b"y"  # added meanwhile: may or may not appear
        assert [k for k in seen if k.startswith(b"stay/")] == [
            f"stay/{i:05}".encode() for i in range(3000)
        ]


def test_expired_objects_are_not_iterated(any_store):
    any_store["keep"] = b"1"
    any_store.put("brief", b"2", ttl=0.05)
    time.sleep(0.15)
    assert list(any_store) == [b"keep"] and len(any_store) == 1
    assert dict(any_store.items()) == {b"keep": b"1"}


def test_equality_is_identity_and_stores_are_hashable(path, tmp_path):
    with blobcask.Store(path, capacity=8 << 20) as a:
        with blobcask.Store(str(tmp_path / "b"), capacity=8 << 20) as b:
            assert a == a and a != b
            assert a != {} and b != {}, "an empty store is not equal to {}: identity"
            assert {a: 1, b: 2}[a] == 1
            a["k"] = b"v"
            assert dict(a) == {b"k": b"v"}  # compare contents explicitly


def test_a_closed_store_refuses_the_mapping_calls(path):
    s = blobcask.Store(path, capacity=8 << 20)
    s["k"] = b"v"
    s.close()
    for call in (
        lambda: list(s),
        lambda: len(s),
        lambda: "k" in s,
        lambda: s.get("k"),
        lambda: s.pop("k", None),
        lambda: list(s.items()),
    ):
        with pytest.raises(errors.ClosedError):
            call()


def test_mapping_helpers_from_the_standard_library_work(store):
    import collections
    import json

    store.update({"a": b"1", "b": b"2"})
    assert collections.ChainMap({b"z": b"0"}, store)[b"a"] == b"1"
    assert json.dumps(sorted(k.decode() for k in store)) == '["a", "b"]'
    assert {**store} == {b"a": b"1", b"b": b"2"}
