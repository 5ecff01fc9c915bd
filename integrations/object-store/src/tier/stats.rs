//! What the tier counts: pieces served from the cache or fetched, and what
//! it asked the remote for.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts since the tier was built (see `CachedObjectStore::stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TierStats {
    /// Pieces (whole objects or chunks) a read found in the cache.
    pub hits: u64,
    /// Pieces a read had to fetch from the remote.
    pub misses: u64,
    /// `get` requests sent to the remote to fill pieces.
    pub remote_gets: u64,
    /// `head` requests sent to the remote to learn an object's identity.
    pub remote_heads: u64,
    /// Bytes received from the remote to fill pieces.
    pub bytes_fetched: u64,
    /// Requests passed to the remote unchanged: objects with neither an
    /// ETag nor a version, reads of a named version, ranges the object
    /// does not have (the remote gives its own answer or error).
    pub passed_through: u64,
    /// Fetched pieces the cache store did not take (full: `NoSpace`, or
    /// any other error); the read was served from the fetched bytes.
    pub fills_refused: u64,
    /// Cached pieces that failed the store's checksum (`Corrupt`) or had
    /// the wrong size: dropped and fetched again, never served.
    pub damaged_dropped: u64,
    /// Reads started again because the remote object changed between
    /// their requests.
    pub restarts: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub remote_gets: AtomicU64,
    pub remote_heads: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub passed_through: AtomicU64,
    pub fills_refused: AtomicU64,
    pub damaged_dropped: AtomicU64,
    pub restarts: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> TierStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TierStats {
            hits: get(&self.hits),
            misses: get(&self.misses),
            remote_gets: get(&self.remote_gets),
            remote_heads: get(&self.remote_heads),
            bytes_fetched: get(&self.bytes_fetched),
            passed_through: get(&self.passed_through),
            fills_refused: get(&self.fills_refused),
            damaged_dropped: get(&self.damaged_dropped),
            restarts: get(&self.restarts),
        }
    }
}
