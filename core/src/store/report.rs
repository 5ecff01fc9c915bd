//! The public reports of what the store holds: [`ObjectInfo`] for one
//! object version and [`Stats`] for the whole store, gathered from the
//! shared state. (The other jobs' reports live with their jobs:
//! `CacheStats` in `cache.rs`, `BackupReport` in `backup/`, and so on.)
//!
//! Invariant kept here: the figures leave out expired objects not yet
//! removed, which no reader sees any more.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::shared::Shared;
use super::state::now_micros;
use super::CacheStats;
use crate::format::BLOCK_SIZE;
use crate::index::IndexKind;
use crate::meta::recovery::RecoveryReport;
#[cfg(doc)] // for the docs' links
use crate::options::Options;

/// What a commit produced, and what `stat` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Object size in bytes.
    pub size: u64,
    /// Version assigned at commit: strictly larger for every later commit
    /// in this store, across reopens.
    pub version: u64,
    /// When this version was committed.
    pub created: SystemTime,
    /// Whether the value is stored inline in its tuple (small-value path).
    pub inline: bool,
    /// When this version expires (put with a
    /// [`ttl`](crate::PutOptions::ttl)); `None`: never.
    pub expires: Option<SystemTime>,
}

/// A snapshot of the store's space and content.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Committed objects (not those expired, removed or not yet).
    pub objects: u64,
    /// Sum of the sizes of committed objects (expired ones left out).
    pub logical_bytes: u64,
    /// Heap bytes held by committed objects' pieces.
    pub allocated_bytes: u64,
    /// Bytes of the metadata area: tuple blocks (one home slot each, or two
    /// slots in a format-3 store) and the metadata journal, and the index
    /// image of the last clean close while the store still names it (until
    /// its first change after an open).
    pub metadata_bytes: u64,
    /// Bytes not allocated to anything.
    pub free_bytes: u64,
    /// Size of the largest free piece: the largest run a new object can
    /// get in one piece.
    pub largest_free_piece: u64,
    /// Size of the store file or device (it grows; see
    /// [`Options::max_capacity`]).
    pub capacity: u64,
    /// Largest size the store grows to by itself (`None`: no limit but the
    /// file system; a block device keeps its size whatever this says). A
    /// cache store without `max_capacity` reports its capacity: it does
    /// not grow.
    pub max_capacity: Option<u64>,
    /// Bytes written to the device since open (data, metadata, superblock).
    pub device_bytes_written: u64,
    /// Bytes of values committed since open.
    pub user_bytes_written: u64,
    /// Tuple-block group commits since open (each ends with one sync).
    pub commit_groups: u64,
    /// Name of the I/O engine in use.
    pub io_engine: &'static str,
    /// Whether reads and writes bypass the page cache.
    pub direct_io: bool,
    /// Index backend in use.
    pub index: IndexKind,
    /// What recovery found and did when the store was opened.
    pub recovery: RecoveryReport,
    /// The read cache since open.
    pub cache: CacheStats,
    /// Reads (`get`, `read`, their blocking and local forms) that found
    /// their key, since open. Counted by every store.
    pub hits: u64,
    /// Reads of keys that have no object (`NotFound`), since open. For a
    /// cache store, `hits / (hits + misses)` is its hit ratio.
    pub misses: u64,
    /// Objects a cache store ([`Options::eviction`]) deleted to make room,
    /// since open (durable, like any delete); 0 otherwise.
    pub evictions: u64,
    /// Sum of the sizes of the objects counted in `evictions`.
    pub evicted_bytes: u64,
}

impl Stats {
    /// Bytes the store occupies on the device (everything not free) per
    /// byte of committed values; `None` while empty.
    pub fn space_amplification(&self) -> Option<f64> {
        (self.logical_bytes > 0)
            .then(|| (self.capacity - self.free_bytes) as f64 / self.logical_bytes as f64)
    }

    /// Device bytes written per user byte committed since open.
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes_written > 0)
            .then(|| self.device_bytes_written as f64 / self.user_bytes_written as f64)
    }
}

impl Stats {
    /// The figures of the store `s` now ([`Store::stats`](super::Store::stats)).
    pub(crate) fn gather(s: &Shared) -> Stats {
        let (objects, logical_bytes, allocated_bytes) = {
            let st = s.state.read();
            (st.index.len() as u64, st.logical_bytes, st.heap_bytes)
        };
        // Expired objects not yet removed are not counted: they are gone
        // for every reader.
        let (expired, expired_bytes) = if s.options.keep_expired {
            (0, 0)
        } else {
            let expiring = s.expiring.lock();
            expiring
                .range(..=(now_micros(), u64::MAX))
                .fold((0u64, 0u64), |(n, b), (_, (_, size))| (n + 1, b + size))
        };
        let objects = objects.saturating_sub(expired);
        let logical_bytes = logical_bytes.saturating_sub(expired_bytes);
        let (free_bytes, largest_free_piece) = {
            let a = s.alloc.lock();
            (
                a.free_blocks() * BLOCK_SIZE as u64,
                a.largest_free_order()
                    .map_or(0, |k| (BLOCK_SIZE as u64) << k),
            )
        };
        let (hits, misses, evictions, evicted_bytes) = s.evict.figures();
        Stats {
            hits,
            misses,
            evictions,
            evicted_bytes,
            objects,
            logical_bytes,
            allocated_bytes,
            metadata_bytes: s.metadata_bytes.load(Ordering::Relaxed),
            free_bytes,
            largest_free_piece,
            capacity: s.capacity(),
            max_capacity: s.growth_limit(),
            device_bytes_written: s.device_bytes_written.load(Ordering::Relaxed),
            user_bytes_written: s.user_bytes_written.load(Ordering::Relaxed),
            commit_groups: s.commit_groups.load(Ordering::Relaxed),
            io_engine: s.engine.name(),
            direct_io: s.engine.direct_io(),
            index: s.settings.index,
            recovery: s.recovery.lock().clone(),
            cache: s.cache.stats(),
        }
    }
}
