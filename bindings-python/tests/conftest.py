"""Fixtures shared by the binding's test modules."""

import pytest

import blobcask


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "store.blobcask")


@pytest.fixture
def store(path):
    with blobcask.Store(path, capacity=64 << 20) as s:
        yield s


def pattern(seed: int, n: int) -> bytes:
    """Deterministic bytes that differ per seed and per block."""
    return bytes((seed * 31 + i * 7 + (i >> 9)) & 0xFF for i in range(n))
