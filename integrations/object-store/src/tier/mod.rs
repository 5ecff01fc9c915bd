//! What a cache tier (`CachedObjectStore`, one per object_store version:
//! `v013::cached`, `v014::cached`) is configured with and counts, whatever
//! the object_store version: freshness, the size defaults, the clock, the
//! statistics.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod stats;
pub(crate) use stats::Counters;
pub use stats::TierStats;

/// Objects up to this size are cached whole. Defaults for
/// `CachedObjectStoreBuilder::whole_object_limit`.
pub const DEFAULT_WHOLE_OBJECT_LIMIT: u64 = 4 << 20;
/// Larger objects are cached as aligned chunks of this size. Default for
/// `CachedObjectStoreBuilder::chunk_size`.
pub const DEFAULT_CHUNK_SIZE: u64 = 1 << 20;
/// How many times a read starts again on a new version after the remote
/// object changed under it. Default for
/// `CachedObjectStoreBuilder::read_attempts`.
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

/// Defaults for `CachedObjectStoreBuilder::freshness`.
pub const DEFAULT_FRESHNESS: Freshness = Freshness::Revalidate;

/// The wall clock the tier stamps confirmations with (injectable for
/// tests of [`Freshness::MaxStale`]).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;
