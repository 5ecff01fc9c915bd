//! How a [`CachedObjectStore`](super::CachedObjectStore) is configured:
//! freshness, the whole-object limit, the chunk size, retries, the clock.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use blobcask::Store;

use super::object_store::{self, ObjectStore};
use super::{CachedObjectStore, Inner};
pub use crate::tier::{
    Clock, Freshness, CHUNK_ALIGN, DEFAULT_CHUNK_SIZE, DEFAULT_FRESHNESS, DEFAULT_READ_ATTEMPTS,
    DEFAULT_WHOLE_OBJECT_LIMIT,
};

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
