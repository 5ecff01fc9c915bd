//! `object_store`'s own conformance helpers (feature `integration`) run
//! against a `CachedObjectStore` over `InMemory`, with each freshness rule:
//! reads through the tier, writes through it to the remote, listings
//! passed through, and the cache kept in step with the tier's own writes.
//!
//! Left out, because they test what the tier does not offer:
//! * `put_get_attributes`: a cached read returns no attributes (the
//!   remote's content type etc. are not kept in the cache);
//! * `multipart` and `list_paginated` need the `MultipartStore` and
//!   `PaginatedListStore` traits, which the tier does not implement.

use std::sync::Arc;
use std::time::Duration;

use blobcask::{Options, Store};
// The object_store version under test: 0.14 when its feature is on (also
// with both features), else 0.13 (the default build); scripts/test.sh runs
// the file once per version.
#[cfg(not(feature = "object_store_014"))]
use blobcask_object_store::v013::{object_store, CachedObjectStore, Freshness};
#[cfg(feature = "object_store_014")]
use blobcask_object_store::v014::{object_store, CachedObjectStore, Freshness};
use object_store::integration::*;
use object_store::memory::InMemory;

const RULES: [Freshness; 2] = [
    Freshness::Revalidate,
    Freshness::MaxStale(Duration::from_secs(3600)),
];

async fn fresh(dir: &tempfile::TempDir, freshness: Freshness) -> CachedObjectStore {
    let cache = Store::open(
        dir.path().join("cache.bcask"),
        Options::default().capacity(64 << 20),
    )
    .await
    .expect("open");
    // Small pieces: the helpers' objects span whole objects and chunks.
    CachedObjectStore::builder(Arc::new(InMemory::new()), cache)
        .freshness(freshness)
        .whole_object_limit(8 << 10)
        .chunk_size(4 << 10)
        .build()
        .expect("valid options")
}

macro_rules! conformance {
    ($($name:ident => |$s:ident| $body:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for freshness in RULES {
                let dir = tempfile::tempdir().expect("tempdir");
                let $s = fresh(&dir, freshness).await;
                $body.await;
                $s.cache().close().await.expect("close");
            }
        }
    )*};
}

conformance! {
    put_get_delete_list_passes => |s| put_get_delete_list(&s);
    list_with_offset_exclusivity_passes => |s| list_with_offset_exclusivity(&s);
    get_opts_passes => |s| get_opts(&s);
    put_opts_with_update_passes => |s| put_opts(&s, true);
    list_uses_directories_correctly_passes => |s| list_uses_directories_correctly(&s);
    list_with_delimiter_passes => |s| list_with_delimiter(&s);
    rename_and_copy_passes => |s| rename_and_copy(&s);
    copy_if_not_exists_passes => |s| copy_if_not_exists(&s);
    copy_rename_nonexistent_object_passes => |s| copy_rename_nonexistent_object(&s);
    stream_get_passes => |s| stream_get(&s);
    multipart_race_condition_last_writer_wins => |s| multipart_race_condition(&s, true);
    multipart_out_of_order_passes => |s| multipart_out_of_order(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_nonexistent_object_is_not_found() {
    for freshness in RULES {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = fresh(&dir, freshness).await;
        let err = get_nonexistent_object(&s, None).await.unwrap_err();
        assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
    }
}
