"""Atomic batches (``with store.batch() as b:``) and ``get_many``."""

import pytest

import blobcask
from conftest import pattern


def test_a_batch_commits_on_a_clean_exit(store):
    store.put("gone", b"x")
    with store.batch() as b:
        b.put("small", b"abc")
        b.put("large", pattern(1, 300_000))
        b.delete("gone")
        b.delete("never-was")
        assert len(b) == 4
    assert store.get("small") == b"abc"
    assert store.get("large") == pattern(1, 300_000)
    assert "gone" not in store


def test_commit_returns_each_outcome_in_order(store):
    b = store.batch()
    b.put("a", b"1")
    b.delete("a2")
    out = b.commit()
    assert isinstance(out[0], blobcask.ObjectInfo) and out[0].size == 1
    assert out[1] is False
    with pytest.raises(blobcask.ClosedError):
        b.put("b", b"2")


def test_an_exception_in_the_block_discards_the_batch(store):
    with pytest.raises(RuntimeError, match="boom"):
        with store.batch() as b:
            b.put("a", b"1")
            raise RuntimeError("boom")
    assert "a" not in store


def test_a_failed_condition_aborts_all_and_names_the_operation(store):
    info = store.put("taken", b"old")
    with pytest.raises(blobcask.AlreadyExistsError) as caught:
        with store.batch() as b:
            b.put("fresh", pattern(2, 50_000))
            b.put("taken", b"new", if_absent=True)
    assert caught.value.batch_op == 1
    assert 'batch operation 1 (put "taken")' in str(caught.value)
    assert "fresh" not in store and store.get("taken") == b"old"
    with pytest.raises(blobcask.VersionMismatchError) as caught:
        with store.batch() as b:
            b.delete("taken", if_version=info.version + 1)
    assert caught.value.batch_op == 0
    with store.batch() as b:
        b.put("taken", b"newer", if_version=info.version)
    assert store.get("taken") == b"newer"


def test_the_same_key_twice_is_refused(store):
    with pytest.raises(blobcask.InvalidArgumentError) as caught:
        with store.batch() as b:
            b.put("a", b"1")
            b.delete("a")
    assert caught.value.batch_op == 1
    assert "a" not in store


def test_an_empty_batch_and_bad_arguments(store):
    with store.batch():
        pass
    assert len(store) == 0
    b = store.batch()
    with pytest.raises(TypeError):
        b.put("a", "not bytes")
    assert len(b) == 0
    b.discard()
    assert b.commit is not None and len(b) == 0


def test_get_many_returns_values_in_order_and_none_for_a_miss(store):
    store.put("a", b"1")
    store.put("c", pattern(3, 70_000))
    assert store.get_many(["c", "b", b"a"]) == [pattern(3, 70_000), None, b"1"]
    assert store.get_many([]) == []
    with pytest.raises(TypeError):
        store.get_many("abc")
    with pytest.raises(blobcask.InvalidArgumentError):
        store.get_many(["a", ""])


def test_returning_from_a_batch_block_commits_it(store):
    def put_two() -> int:
        with store.batch() as b:
            b.put("x", b"1")
            b.put("y", b"2")
            return len(b)

    assert put_two() == 2
    assert store.get("y") == b"2"


def test_an_async_batch_commits_on_a_clean_exit_and_discards_on_an_exception(path):
    import asyncio

    async def main() -> None:
        async with await blobcask.AsyncStore.open(path, capacity=16 << 20) as s:
            await s.put("gone", b"x")
            async with s.batch() as b:
                b.put("a", b"1")
                b.put("big", bytes(300_000))
                b.delete("gone")
                assert len(b) == 3
            assert await s.get_many(["a", "big", "gone"]) == [b"1", bytes(300_000), None]
            with pytest.raises(RuntimeError):
                async with s.batch() as b:
                    b.put("never", b"1")
                    raise RuntimeError("stop")
            assert await s.get("never") is None
            b = s.batch()
            b.put("c", b"3")
            b.put("a", b"again", if_absent=True)
            with pytest.raises(blobcask.AlreadyExistsError) as e:
                await b.commit()
            assert e.value.batch_op == 1
            assert await s.get("c") is None
            b = s.batch()
            b.delete("a", if_version=(await s.stat("a")).version)
            assert await b.commit() == [True]
            assert await s.get("a") is None

    asyncio.run(main())
