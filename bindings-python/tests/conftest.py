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


# Byte j of every 512-byte run of `pattern` is (c + 7 * j) & 0xFF for the
# run's own c: the 256 possible runs, made once.
_RUNS = [bytes((c + 7 * j) & 0xFF for j in range(512)) for c in range(256)]


def pattern(seed: int, n: int) -> bytes:
    """Deterministic bytes that differ per seed and per block: byte i is
    (seed * 31 + i * 7 + (i >> 9)) & 0xFF, put together from 512-byte runs
    (7 * 512 is a multiple of 256) rather than byte by byte."""
    runs = b"".join(_RUNS[(seed * 31 + b) & 0xFF] for b in range(-(-n // 512)))
    return runs[:n]
