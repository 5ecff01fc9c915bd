//! [`CachedObjectStore`]: a blobcask store as the local, persistent tier in
//! front of any `ObjectStore` (S3, an S3-compatible cluster, …).
//!
//! ```no_run
//! # #[cfg(feature = "object_store_013")]
//! # use blobcask_object_store::v013::{object_store, CachedObjectStore};
//! # #[cfg(not(feature = "object_store_013"))]
//! # use blobcask_object_store::v014::{object_store, CachedObjectStore};
//! # async fn demo(remote: std::sync::Arc<dyn object_store::ObjectStore>)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use blobcask::{Options, Store};
//! use blobcask_object_store::Freshness;
//! use object_store::{path::Path, ObjectStoreExt};
//!
//! let cache = Store::open("cache.bcask", Options::default()).await?;
//! let tier = CachedObjectStore::builder(remote, cache)
//!     .freshness(Freshness::MaxStale(Duration::from_secs(60)))
//!     .build()?;
//! let footer = tier.get_range(&Path::from("t/part-0.parquet"), 1000..1008).await?;
//! # Ok(()) }
//! ```
//!
//! What it promises:
//! * **One version per read.** Cached pieces are keyed by the remote
//!   object's identity (its ETag, else its version id); a read takes every
//!   piece under the identity it started from, and fetches missing ones
//!   pinned to it (`if_match` on the ETag, or the version id). When the
//!   remote has moved on (precondition failed, not found, or an answer of
//!   another identity) the read starts again on the new version (up to
//!   [`read_attempts`](CachedObjectStoreBuilder::read_attempts) times):
//!   it never returns bytes of two versions. An object the remote names no
//!   version of (neither ETag nor version id) is never cached: its reads
//!   pass through.
//! * **Freshness is chosen** ([`Freshness`]): `Revalidate` (the default)
//!   asks the remote for the current identity on every read (one `head`);
//!   `MaxStale(T)` trusts a cached identity for at most `T` after the
//!   remote confirmed it, the confirmation time kept in the cache store.
//! * **Pieces.** Objects up to
//!   [`whole_object_limit`](CachedObjectStoreBuilder::whole_object_limit)
//!   are fetched and cached whole; larger ones as aligned
//!   [chunks](CachedObjectStoreBuilder::chunk_size), fetched only when a
//!   read touches them, adjacent missing chunks in one remote request. A
//!   cached chunk serves a range with one store read of just that range.
//! * **Writes through.** `put`, multipart uploads, `copy` and `rename` go
//!   to the remote first, then the cache forgets the object(s) written;
//!   `delete` too. A read that began before such a write may still record
//!   the version it read, which `MaxStale` then trusts for at most `T`.
//!   Listing passes through.
//! * **The cache never fails a read.** A piece the store reports damaged
//!   (`Corrupt`) is dropped and fetched again, never served; a store that
//!   refuses a piece (full: `NoSpace`; closed) leaves the read served from
//!   the fetched bytes. Errors come only from the remote.
//! * **Persistent.** The cache is a store file: pieces and confirmation
//!   times survive a restart.
//!
//! Not done: attributes the remote keeps (content type, …) are not cached
//! (a cached read returns none; a read of an uncacheable object passes
//! them through); two concurrent reads of one missing piece both fetch it;
//! pieces of a version whose record was lost (a crash between the two
//! writes, a concurrent forget) stay until the store evicts or is cleared.
//! A bounded cache is the store's job: open the cache store with
//! `Options::max_capacity` and `Options::eviction(Eviction::S3Fifo)` and a
//! full store evicts to take new pieces (a record or piece evicted costs a
//! `head` or a fetch, never a wrong answer); without eviction a full
//! store leaves new pieces uncached and reads pass through.

mod identity;
mod lookup;
mod options;
mod read;
mod write;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use blobcask::Store;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};

use super::{compat, object_store};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

pub use crate::tier::TierStats;
pub use options::{
    CachedObjectStoreBuilder, Clock, Freshness, CHUNK_ALIGN, DEFAULT_CHUNK_SIZE, DEFAULT_FRESHNESS,
    DEFAULT_READ_ATTEMPTS, DEFAULT_WHOLE_OBJECT_LIMIT,
};

use crate::tier::Counters;
use read::Miss;

/// The name errors of the tier carry as their store.
const STORE: &str = "blobcask-cache";

/// An `ObjectStore` that serves reads from a blobcask store and fills it
/// from a remote `ObjectStore` (see the [module](self) documentation).
#[derive(Debug, Clone)]
pub struct CachedObjectStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    remote: Arc<dyn ObjectStore>,
    cache: Store,
    freshness: Freshness,
    whole_object_limit: u64,
    chunk_size: u64,
    read_attempts: usize,
    clock: Clock,
    counters: Counters,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObjectStore")
            .field("remote", &self.remote)
            .field("freshness", &self.freshness)
            .field("whole_object_limit", &self.whole_object_limit)
            .field("chunk_size", &self.chunk_size)
            .field("read_attempts", &self.read_attempts)
            .finish()
    }
}

impl CachedObjectStore {
    /// `remote` cached in `cache`, with the default options (revalidate
    /// every read, objects up to 4 MiB whole, 1 MiB chunks).
    pub fn new(remote: Arc<dyn ObjectStore>, cache: Store) -> Self {
        CachedObjectStoreBuilder::new(remote, cache)
            .build()
            .expect("the default options are valid")
    }

    /// Options first; [`CachedObjectStoreBuilder::build`] makes the tier.
    pub fn builder(remote: Arc<dyn ObjectStore>, cache: Store) -> CachedObjectStoreBuilder {
        CachedObjectStoreBuilder::new(remote, cache)
    }

    /// What the tier has counted since it was built.
    pub fn stats(&self) -> TierStats {
        self.inner.counters.snapshot()
    }

    /// The cache store.
    pub fn cache(&self) -> &Store {
        &self.inner.cache
    }

    /// The remote store.
    pub fn remote(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.remote
    }
}

impl fmt::Display for CachedObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CachedObjectStore({})", self.inner.remote)
    }
}

impl Inner {
    async fn pass_get(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        Counters::add(&self.counters.passed_through, 1);
        self.remote.get_opts(location, options).await
    }

    async fn pass_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        Counters::add(&self.counters.passed_through, 1);
        self.remote.get_ranges(location, ranges).await
    }

    fn kept_changing(&self, location: &Path) -> object_store::Error {
        object_store::Error::Generic {
            store: STORE,
            source: format!(
                "{location} changed on the remote during each of {} attempts to read one version",
                self.read_attempts
            )
            .into(),
        }
    }
}

fn answer(meta: ObjectMeta, range: Range<u64>, data: Bytes) -> GetResult {
    compat::get_result(
        GetResultPayload::Stream(stream::once(async move { Ok(data) }).boxed()),
        meta,
        range,
        Default::default(),
    )
}

#[async_trait]
impl ObjectStore for CachedObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let put = self.inner.remote.put_opts(location, payload, opts).await;
        self.inner.forget(location).await;
        put
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let upload = self.inner.remote.put_multipart_opts(location, opts).await?;
        Ok(Box::new(write::CachedUpload {
            upload,
            tier: self.inner.clone(),
            location: location.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let tier = &self.inner;
        // A named version is the remote's to find.
        if options.version.is_some() {
            return tier.pass_get(location, options).await;
        }
        for attempt in 0..tier.read_attempts {
            let Some(version) = tier.current(location, attempt == 0).await? else {
                return tier.pass_get(location, options).await;
            };
            options.check_preconditions(&version.meta)?;
            let size = version.meta.size;
            if options.head {
                return Ok(answer(version.meta, 0..size, Bytes::new()));
            }
            let range = match options.range.as_ref().map(|r| r.as_range(size)) {
                None => 0..size,
                Some(Ok(range)) => range,
                // The remote's own error for a range the object lacks.
                Some(Err(_)) => return tier.pass_get(location, options).await,
            };
            match tier
                .read_ranges(location, &version, std::slice::from_ref(&range))
                .await
            {
                Ok(mut got) => {
                    let data = got.pop().unwrap_or_default();
                    return Ok(answer(version.meta, range, data));
                }
                Err(Miss::Moved) => Counters::add(&tier.counters.restarts, 1),
                Err(Miss::Failed(e)) => return Err(e),
            }
        }
        Err(tier.kept_changing(location))
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let tier = &self.inner;
        for attempt in 0..tier.read_attempts {
            let Some(version) = tier.current(location, attempt == 0).await? else {
                return tier.pass_ranges(location, ranges).await;
            };
            let size = version.meta.size;
            if ranges.iter().any(|r| r.start > r.end || r.end > size) {
                return tier.pass_ranges(location, ranges).await;
            }
            match tier.read_ranges(location, &version, ranges).await {
                Ok(got) => return Ok(got),
                Err(Miss::Moved) => Counters::add(&tier.counters.restarts, 1),
                Err(Miss::Failed(e)) => return Err(e),
            }
        }
        Err(tier.kept_changing(location))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let tier = self.inner.clone();
        self.inner
            .remote
            .delete_stream(locations)
            .then(move |deleted| {
                let tier = tier.clone();
                async move {
                    if let Ok(location) = &deleted {
                        tier.forget(location).await;
                    }
                    deleted
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.remote.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.remote.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.remote.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let copied = self.inner.remote.copy_opts(from, to, options).await;
        self.inner.forget(to).await;
        copied
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let renamed = self.inner.remote.rename_opts(from, to, options).await;
        self.inner.forget(from).await;
        self.inner.forget(to).await;
        renamed
    }
}
