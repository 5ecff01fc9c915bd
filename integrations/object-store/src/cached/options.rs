//! How a [`CachedObjectStore`](super::CachedObjectStore) is configured:
//! freshness, the whole-object limit, the chunk size, retries, the clock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use blobcask::Store;
use object_store::ObjectStore;

use super::{CachedObjectStore, Inner};

/// Objects up to this size are cached whole. Defaults for
/// [`CachedObjectStoreBuilder::whole_object_limit`].
pub const DEFAULT_WHOLE_OBJECT_LIMIT: u64 = 4 << 20;
/// Larger objects are cached as aligned chunks of this size. Default for
/// [`CachedObjectStoreBuilder::chunk_size`].
pub const DEFAULT_CHUNK_SIZE: u64 = 1 << 20;
/// How many times a read starts again on a new version after the remote
/// object changed under it. Default for
/// [`CachedObjectStoreBuilder::read_attempts`].
pub const DEFAULT_READ_ATTEMPTS: usize = 8;
/// Chunk sizes are multiples of this (the store's block size: a chunk
/// then fills its pieces with no tail waste beyond the last one).
pub const CHUNK_ALIGN: u64 = 4096;

/// When a cached copy may be served without asking the remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Every read first asks the remote for the object's current identity
    /// (a `head`) and serves cached pieces only of that identity: every
    /// read returns the remote's current bytes (as of that `head`) or its
    /// error. The safe default; costs one small request per read.
    Revalidate,
    /// A cached identity is trusted for at most this long after the
    /// remote last confirmed it (the time is kept in the cache store, so
    /// it survives a restart): reads within it make no remote request at
    /// all. For data that does not change in place (Parquet files under
    /// new names); a changed object is seen at most this late.
    MaxStale(Duration),
}

/// Defaults for [`CachedObjectStoreBuilder::freshness`].
pub const DEFAULT_FRESHNESS: Freshness = Freshness::Revalidate;

/// The wall clock the tier stamps confirmations with (injectable for
/// tests of [`Freshness::MaxStale`]).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Options of a [`CachedObjectStore`]; [`build`](Self::build) checks them.
pub struct CachedObjectStoreBuilder {
    remote: Arc<dyn ObjectStore>,
    cache: Store,
    freshness: Freshness,
    whole_object_limit: u64,
    chunk_size: u64,
    read_attempts: usize,
    clock: Clock,
}

impl fmt::Debug for CachedObjectStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObjectStoreBuilder")
            .field("remote", &self.remote)
            .field("freshness", &self.freshness)
            .field("whole_object_limit", &self.whole_object_limit)
            .field("chunk_size", &self.chunk_size)
            .field("read_attempts", &self.read_attempts)
            .finish()
    }
}

impl CachedObjectStoreBuilder {
    pub(super) fn new(remote: Arc<dyn ObjectStore>, cache: Store) -> Self {
        CachedObjectStoreBuilder {
            remote,
            cache,
            freshness: DEFAULT_FRESHNESS,
            whole_object_limit: DEFAULT_WHOLE_OBJECT_LIMIT,
            chunk_size: DEFAULT_CHUNK_SIZE,
            read_attempts: DEFAULT_READ_ATTEMPTS,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// When a cached copy is served without asking the remote (see
    /// [`Freshness`]). Defaults to [`DEFAULT_FRESHNESS`] (revalidate on
    /// every read).
    pub fn freshness(mut self, freshness: Freshness) -> Self {
        self.freshness = freshness;
        self
    }

    /// Objects of at most this many bytes are fetched and cached whole on
    /// their first read (one request, one piece); larger ones by chunks.
    /// A higher limit saves requests for small files and costs whole
    /// fetches for a small range. Defaults to
    /// [`DEFAULT_WHOLE_OBJECT_LIMIT`].
    pub fn whole_object_limit(mut self, bytes: u64) -> Self {
        self.whole_object_limit = bytes;
        self
    }

    /// Larger objects are cached as chunks of this many bytes (a multiple
    /// of [`CHUNK_ALIGN`]), each fetched only when a read touches it:
    /// a Parquet footer and a few row groups do not pull a whole file.
    /// Smaller chunks fetch less beyond what was asked and cost more
    /// requests for long reads. Defaults to [`DEFAULT_CHUNK_SIZE`].
    pub fn chunk_size(mut self, bytes: u64) -> Self {
        self.chunk_size = bytes;
        self
    }

    /// How many times a read starts again (with a fresh `head`) when the
    /// remote object changes between its requests, before it fails.
    /// Defaults to [`DEFAULT_READ_ATTEMPTS`].
    pub fn read_attempts(mut self, attempts: usize) -> Self {
        self.read_attempts = attempts;
        self
    }

    /// The clock that stamps and ages confirmations ([`Freshness::MaxStale`]).
    /// Defaults to `SystemTime::now`.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The tier; a chunk size that is zero or not a multiple of
    /// [`CHUNK_ALIGN`], or zero attempts, is refused.
    pub fn build(self) -> object_store::Result<CachedObjectStore> {
        if self.chunk_size == 0 || !self.chunk_size.is_multiple_of(CHUNK_ALIGN) {
            return Err(invalid(format!(
                "chunk size {} is not a positive multiple of {CHUNK_ALIGN}",
                self.chunk_size
            )));
        }
        if self.read_attempts == 0 {
            return Err(invalid("read_attempts must be at least 1".into()));
        }
        Ok(CachedObjectStore {
            inner: Arc::new(Inner {
                remote: self.remote,
                cache: self.cache,
                freshness: self.freshness,
                whole_object_limit: self.whole_object_limit,
                chunk_size: self.chunk_size,
                read_attempts: self.read_attempts,
                clock: self.clock,
                counters: Default::default(),
            }),
        })
    }
}

fn invalid(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: super::STORE,
        source: message.into(),
    }
}
