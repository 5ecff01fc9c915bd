//! OpenDAL over blobcask (feature `opendal`): the operations an OpenDAL
//! user reaches for, checked against what the store holds.
#![cfg(feature = "opendal")]

use blobcask::{IndexKind, Options, Store};
use blobcask_object_store::opendal_operator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opendal_operator_reads_writes_lists_and_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        dir.path().join("o.bcask"),
        Options::default()
            .capacity(64 << 20)
            .index(IndexKind::BTree),
    )
    .await
    .unwrap();
    let op = opendal_operator(store.clone()).unwrap();

    let big: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    op.write("media/a.bin", big.clone()).await.unwrap();
    op.write("media/b.txt", "hello").await.unwrap();
    op.write("other/c", vec![7u8; 10]).await.unwrap();

    // A writer written once is one atomic put, visible on close.
    let mut w = op.writer("media/parts").await.unwrap();
    w.write(big[..1 << 20].to_vec()).await.unwrap();
    assert!(!store.contains(b"media/parts"), "invisible until close");
    w.close().await.unwrap();
    assert_eq!(store.get(b"media/parts").await.unwrap(), big[..1 << 20]);

    // A writer written in several calls would be a multipart upload, whose
    // parts object_store_opendal hands over out of order: refused, nothing
    // stored, the earlier object untouched. (Before the refusal this wrote
    // a permuted object in 2 of 6 runs.)
    for _ in 0..4 {
        let mut w = op.writer_with("media/parts").chunk(1 << 20).await.unwrap();
        let mut outcome = Ok(());
        for chunk in big.chunks(700_000) {
            outcome = w.write(chunk.to_vec()).await;
            if outcome.is_err() {
                break;
            }
        }
        let outcome = match outcome {
            Ok(()) => w.close().await.map(|_| ()),
            Err(e) => Err(e),
        };
        let refused = outcome.expect_err("a multi-call writer is refused");
        assert_eq!(refused.kind(), opendal::ErrorKind::Unsupported, "{refused}");
        assert!(refused.to_string().contains("one call"), "{refused}");
        assert_eq!(store.get(b"media/parts").await.unwrap(), big[..1 << 20]);
    }

    // Written through OpenDAL, stored as blobcask objects under the path.
    assert_eq!(store.get(b"media/a.bin").await.unwrap(), big);
    assert_eq!(
        op.stat("media/a.bin").await.unwrap().content_length(),
        3 << 20
    );

    let head = op
        .read_with("media/a.bin")
        .range(1_000_000..1_000_500)
        .await
        .unwrap();
    assert_eq!(head.to_vec(), big[1_000_000..1_000_500]);
    assert_eq!(op.read("media/b.txt").await.unwrap().to_vec(), b"hello");

    let mut listed: Vec<String> = op
        .list_with("media/")
        .recursive(true)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.path().to_owned())
        .collect();
    listed.sort();
    // OpenDAL lists the directory itself too.
    assert_eq!(
        listed,
        ["media/", "media/a.bin", "media/b.txt", "media/parts"]
    );

    op.delete("media/b.txt").await.unwrap();
    assert!(!store.contains(b"media/b.txt"));
    let missing = op.read("media/b.txt").await.unwrap_err();
    assert_eq!(missing.kind(), opendal::ErrorKind::NotFound);
}
