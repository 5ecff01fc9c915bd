"""``blobcache::s3://``: pandas reads Parquet from S3 (s3fs against a moto
server on 127.0.0.1) through the blobcask cache, with both freshness
rules, across a restart of the store, with the object overwritten and
deleted behind the cache's back."""

from __future__ import annotations

import fsspec
import pandas as pd
import pytest
import s3fs

from blobcask.fsspec_cache import BlobcacheFileSystem
from test_same_code_s3 import aws_env, s3_endpoint  # noqa: F401 (fixtures)

URL = "blobcache::s3://tables/sales.parquet"


def frame(seed: int) -> pd.DataFrame:
    n = 20_000
    return pd.DataFrame(
        {
            "day": [f"2026-11-{1 + (i + seed) % 28:02d}" for i in range(n)],
            "units": [(i * 7 + seed) % 101 for i in range(n)],
            "price": [((i * 13 + seed) % 997) / 10 for i in range(n)],
        }
    )


def test_read_parquet_from_s3_through_the_cache(tmp_path, s3_endpoint, aws_env):  # noqa: F811
    s3 = s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)
    s3.mkdir("tables")
    v1, v2 = frame(1), frame(2)
    s3opts = {"endpoint_url": s3_endpoint}
    v1.to_parquet("s3://tables/sales.parquet", storage_options=s3opts)
    store = str(tmp_path / "cache.blobcask")

    def options(**blobcache):
        # Blocks well under the file's size: the footer and the column
        # chunks are read as separate blocks.
        cache = {"store": store, "block_size": 4096, "whole_file_limit": 4096}
        return {"blobcache": {**cache, **blobcache}, "s3": s3opts}

    def cache_fs(**blobcache):
        fs, path = fsspec.core.url_to_fs(URL, **options(**blobcache))
        assert isinstance(fs, BlobcacheFileSystem) and path == "tables/sales.parquet"
        return fs

    assert s3.size("tables/sales.parquet") > 3 * 4096
    pd.testing.assert_frame_equal(pd.read_parquet(URL, storage_options=options(expiry=600)), v1)
    fs = cache_fs(expiry=600)
    entry = fs._load_entry("tables/sales.parquet")
    assert entry is not None and entry.identity.startswith("ETag=")  # S3's identity
    assert fs.cache_stats()["misses"] > 0

    # A restart keeps the pieces and the confirmation: with the object
    # deleted from S3, the second read (expiry) is served from the cache.
    fs.close()
    s3.rm_file("tables/sales.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(URL, storage_options=options(expiry=600)), v1)
    fs = cache_fs(expiry=600)
    assert fs.cache_stats()["misses"] == 0 and fs.cache_stats()["hits"] > 0

    # check="always" asks S3: the deletion is seen...
    with pytest.raises(FileNotFoundError):
        pd.read_parquet(URL, storage_options=options(check="always"))
    # ... and so is an overwrite, never mixed with the cached version.
    v2.to_parquet("s3://tables/sales.parquet", storage_options=s3opts)
    pd.testing.assert_frame_equal(pd.read_parquet(URL, storage_options=options()), v2)
    pd.testing.assert_frame_equal(pd.read_parquet(URL, storage_options=options()), v2)
    always = cache_fs()
    assert always.cache_stats()["hits"] > 0
    always.close()
