//! "Same code, S3 cluster": one application routine, written against
//! `object_store::ObjectStore`, runs unchanged on blobcask and on an S3
//! endpoint (moto's server on 127.0.0.1, started here). Only the line that
//! builds the store differs.
//!
//! Needs the `s3` feature and `BLOBCASK_TEST_PYTHON`: a Python with
//! `moto[server]` and `boto3` (scripts/test.sh sets both). Without the
//! variable the test fails: it is never skipped quietly.
#![cfg(feature = "s3")]

mod common;

use std::sync::Arc;

use blobcask::{IndexKind, Options, Store};
// S3 through object_store 0.13 (the `s3` feature enables it).
use blobcask_object_store::v013::{object_store, BlobcaskObjectStore};
use common::Moto;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, WriteMultipart};

/// What the application saw; compared across the two stores.
#[derive(Debug, PartialEq)]
struct Report {
    listed: Vec<(String, u64)>,
    ranges: Vec<Vec<u8>>,
    multipart_len: u64,
    create_twice: &'static str,
    after_delete: Vec<String>,
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The application: nothing in it knows which store it talks to.
async fn application(store: Arc<dyn ObjectStore>) -> Report {
    // Objects under a prefix, and one outside it.
    for i in 0..5u8 {
        let path = Path::from(format!("photos/2026/{i:02}.jpg"));
        store
            .put(&path, pattern(i, 10_000 + i as usize).into())
            .await
            .unwrap();
    }
    store.put(&Path::from("other/x"), "x".into()).await.unwrap();

    // A multipart upload: 2 × 5 MiB parts and a tail, written concurrently.
    let upload = store
        .put_multipart(&Path::from("video/seg.ts"))
        .await
        .unwrap();
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 5 << 20);
    let video = pattern(9, (10 << 20) + 12_345);
    for chunk in video.chunks(1 << 20) {
        writer.write(chunk);
    }
    writer.finish().await.unwrap();

    // List by prefix.
    let mut listed: Vec<(String, u64)> = store
        .list(Some(&Path::from("photos")))
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .unwrap();
    listed.sort();

    // Ranged reads: a footer, a middle, and several at once.
    let video_path = Path::from("video/seg.ts");
    let meta = store.head(&video_path).await.unwrap();
    let mut ranges = vec![
        store
            .get_range(&video_path, meta.size - 8..meta.size)
            .await
            .unwrap()
            .to_vec(),
        store
            .get_range(&Path::from("photos/2026/03.jpg"), 100..200)
            .await
            .unwrap()
            .to_vec(),
    ];
    let many = store
        .get_ranges(&video_path, &[0..16, 5_000_000..5_000_100])
        .await
        .unwrap();
    ranges.extend(many.into_iter().map(|b| b.to_vec()));
    assert_eq!(ranges[0], video[video.len() - 8..]);

    // Conditional create: the second one must be refused.
    let lock = Path::from("locks/job-1");
    store
        .put_opts(&lock, "owner-a".into(), PutMode::Create.into())
        .await
        .unwrap();
    let create_twice = match store
        .put_opts(&lock, "owner-b".into(), PutMode::Create.into())
        .await
    {
        Err(object_store::Error::AlreadyExists { .. }) => "AlreadyExists",
        Err(_) => "other error",
        Ok(_) => "accepted",
    };
    let owner = store.get(&lock).await.unwrap().bytes().await.unwrap();
    assert_eq!(owner, "owner-a");

    // Delete, then list again.
    store
        .delete(&Path::from("photos/2026/00.jpg"))
        .await
        .unwrap();
    let mut after_delete: Vec<String> = store
        .list(Some(&Path::from("photos")))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    after_delete.sort();

    Report {
        listed,
        ranges,
        multipart_len: meta.size,
        create_twice,
        after_delete,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_routine_runs_on_blobcask_and_on_s3() {
    let dir = tempfile::tempdir().unwrap();
    let moto = Moto::start();

    // The one line that differs: which store.
    let blobcask: Arc<dyn ObjectStore> = Arc::new(BlobcaskObjectStore::new(
        Store::open(
            dir.path().join("app.bcask"),
            Options::default()
                .capacity(256 << 20)
                .index(IndexKind::BTree),
        )
        .await
        .unwrap(),
    ));
    let s3: Arc<dyn ObjectStore> = Arc::new(moto.client());

    let on_blobcask = application(blobcask).await;
    let on_s3 = application(s3).await;
    assert_eq!(on_blobcask.create_twice, "AlreadyExists");
    assert_eq!(on_blobcask, on_s3);
    assert_eq!(on_blobcask.listed.len(), 5);
    assert_eq!(on_blobcask.after_delete.len(), 4);
}
