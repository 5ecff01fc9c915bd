//! The cache tier in front of a real S3 API (moto's server on 127.0.0.1):
//! a chunk fetched for a version the bucket no longer holds is refused by
//! S3 itself (`If-Match` on the ETag: 412), and the read starts again on
//! the new version; a revalidating read follows an overwrite and a delete
//! made behind the tier's back.
//!
//! Needs the `s3` feature and `BLOBCASK_TEST_PYTHON` (see same_code_s3.rs).
#![cfg(feature = "s3")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use blobcask::{Options, Store};
// S3 through object_store 0.13 (the `s3` feature enables it).
use blobcask_object_store::v013::{object_store, CachedObjectStore, Freshness};
use common::Moto;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

const C: u64 = 64 << 10;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_of_a_replaced_version_is_refused_by_s3_and_the_read_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let moto = Moto::start();
    let s3: Arc<dyn ObjectStore> = Arc::new(moto.client());
    let cache = Store::open(dir.path().join("c.bcask"), Options::default())
        .await
        .unwrap();
    let tier = |freshness| {
        CachedObjectStore::builder(s3.clone(), cache.clone())
            .freshness(freshness)
            .whole_object_limit(C)
            .chunk_size(C)
            .build()
            .unwrap()
    };
    let trusting = tier(Freshness::MaxStale(Duration::from_secs(3600)));
    let path = Path::from("data/file.bin");
    let (v1, v2) = (pattern(1, 3 * C as usize), pattern(2, 3 * C as usize));
    s3.put(&path, v1.clone().into()).await.unwrap();
    assert_eq!(trusting.get_range(&path, 10..20).await.unwrap(), v1[10..20]);

    // Replaced behind the tier's back: the trusted record still names v1,
    // so chunk 2 is asked for with v1's ETag, which S3 refuses.
    s3.put(&path, v2.clone().into()).await.unwrap();
    let r = 2 * C + 5..2 * C + 50;
    let got = trusting.get_range(&path, r.clone()).await.unwrap();
    assert_eq!(got, v2[r.start as usize..r.end as usize]);
    assert_eq!(trusting.stats().restarts, 1, "{:?}", trusting.stats());
    // Chunk 0 is now of v2 too: nothing of v1 is served.
    assert_eq!(trusting.get_range(&path, 10..20).await.unwrap(), v2[10..20]);

    let checking = tier(Freshness::Revalidate);
    s3.put(&path, v1.clone().into()).await.unwrap();
    assert_eq!(
        checking.get(&path).await.unwrap().bytes().await.unwrap(),
        v1
    );
    let gets = checking.stats().remote_gets;
    assert_eq!(
        checking.get(&path).await.unwrap().bytes().await.unwrap(),
        v1
    );
    assert_eq!(checking.stats().remote_gets, gets, "served from the cache");
    s3.delete(&path).await.unwrap();
    let err = checking.get(&path).await.unwrap_err();
    assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
    cache.close().await.unwrap();
}
