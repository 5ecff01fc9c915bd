//! [`Shared`]: the engine state behind the `Arc` that every store handle,
//! the commit path, the maintenance thread and the background jobs hold,
//! and its small helpers (refusing changes, the capacity, new extents).
//!
//! Invariants kept here:
//! * after a failed metadata write (`failed`) every later change is
//!   refused until the store is reopened: the on-disk state is unknown
//!   (invariants 1 and 4);
//! * every publish of a superblock after open holds the `superblock`
//!   lock, and none follows the clean one close published (`sealed`);
//! * the capacity only grows;
//! * a new extent returns its pieces to this store's allocator when its
//!   last handle drops (invariant 2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::state::{ExpiryQueue, Extent, State};
use super::{backup, cache, commit, data, landing, upload};
use crate::alloc::BuddyAllocator;
use crate::error::{Error, ErrorKind, Result};
use crate::io::IoEngine;
use crate::meta::recovery::RecoveryReport;
use crate::meta::tuple::Piece;
use crate::options::Options;

/// Fixed facts about an open store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub store_id: u64,
}

/// What the store handles and the commit path share.
pub(crate) struct Shared {
    pub engine: Arc<dyn IoEngine>,
    /// A duplicate of the engine's descriptor when the store was opened by
    /// path (`None` on a caller-supplied engine): what `Store::local`
    /// reads through on another ring.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub io_file: Option<std::fs::File>,
    pub geometry: Geometry,
    pub options: Options,
    /// What the store runs with (the caller's options over the stored
    /// settings): index kind, inline threshold, growth limit.
    pub settings: crate::options::Settings,
    /// The current superblock. Every publish after open holds this lock
    /// (metadata growth, heap growth, clean close), so two never race for
    /// a copy or a sequence.
    pub superblock: parking_lot::Mutex<crate::format::Superblock>,
    /// Bytes of the file covered by the store; only grows (`grow`).
    pub capacity: AtomicU64,
    /// Uploads in progress (`Store::list_uploads`).
    pub uploads: upload::Uploads,
    pub state: RwLock<State>,
    pub alloc: crate::sync::Arc<crate::sync::Mutex<BuddyAllocator>>,
    /// Set after a failed metadata write: the on-disk state is unknown, so
    /// every later change is refused until the store is reopened.
    pub failed: Failure,
    /// Set, under the superblock lock, once close has published the clean
    /// superblock: nothing may publish after it (a growth that began
    /// before close fails with `Closed` instead).
    pub sealed: AtomicBool,
    /// Bytes written to the device since open, counted by the engine
    /// decorator every write goes through (`io::Counted`).
    pub device_bytes_written: Arc<AtomicU64>,
    pub user_bytes_written: AtomicU64,
    pub commit_groups: AtomicU64,
    pub metadata_bytes: AtomicU64,
    /// Trailer checksum tables of large objects, by version.
    pub tables: data::TableCache,
    /// Checked bytes of hot objects, by version.
    pub cache: cache::ReadCache,
    /// Versions whose values their commit group is still writing.
    pub landing: landing::Landing,
    /// What recovery did when the store was opened (and open's repairs
    /// after it).
    pub recovery: parking_lot::Mutex<RecoveryReport>,
    /// Wakes the maintenance thread (a buffered group to write by its
    /// deadline).
    pub maintenance: Arc<commit::Maintenance>,
    /// Held by the compaction in progress: one at a time.
    pub compacting: futures::lock::Mutex<()>,
    /// Versions that expire, by (expiry µs, version), with their key and
    /// size: the reaper's queue (the commit path removes the due ones) and
    /// what `stats` leaves out. An entry leaves when its version is
    /// replaced or removed.
    pub expiring: Mutex<ExpiryQueue>,
    /// Inline values removed from their blocks while a backup fills its
    /// snapshot.
    pub retired: backup::Retired,
    /// The allocator's `frees` count after the last compaction a put ran
    /// in vain (`u64::MAX`: none): puts do not compact again until a piece
    /// is freed.
    pub futile_compaction: AtomicU64,
    /// Reads found and missed, and a cache store's evictions (`evict/`).
    pub evict: super::evict::Evictions,
}

/// Whether the store stopped accepting changes, and why: the first failure
/// that stopped it, kept so every later refusal carries its kind and
/// message (a `Corrupt` tuple block is refused as `Corrupt`, not as a bare
/// `Io`).
#[derive(Default)]
pub(crate) struct Failure {
    stopped: AtomicBool,
    /// The first cause; written before `stopped` is set, so a refusal that
    /// sees `stopped` finds it.
    cause: Mutex<Option<Error>>,
}

impl Failure {
    /// Stops the store accepting changes because of `cause` (only the first
    /// cause is kept: a refusal seen after it is not the reason).
    pub fn poison(&self, cause: &Error) {
        let mut first = self.cause.lock();
        if first.is_none() {
            *first = Some(super::request::copy_error(cause));
            self.stopped.store(true, Ordering::Release);
        }
    }

    /// Whether a failure stopped the store.
    pub fn is_set(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The refusal of a change once the store stopped: of its cause's
    /// kind, with the cause (kind and message) as the reason.
    fn refusal(&self) -> Option<Error> {
        if !self.is_set() {
            return None;
        }
        let cause = self.cause.lock();
        let (kind, why) = match &*cause {
            Some(c) => (c.kind(), format!(" (the failure: {c})")),
            None => (ErrorKind::Io, String::new()),
        };
        Some(Error::new(
            kind,
            format!(
                "the store stopped accepting changes after a failed metadata write; reopen it{why}"
            ),
        ))
    }
}

impl Shared {
    pub fn wake_maintenance(&self) {
        self.maintenance.poke();
    }

    /// Refuses a change: on a read-only store (`Unsupported`), or after a
    /// failed metadata write (of that failure's kind, naming it).
    pub fn check_failed(&self) -> Result<()> {
        if self.options.is_read_only() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the store is open read-only",
            ));
        }
        if let Some(refusal) = self.failed.refusal() {
            return Err(refusal);
        }
        Ok(())
    }

    /// Bytes of the file the store covers now.
    pub fn capacity(&self) -> u64 {
        self.capacity.load(Ordering::Acquire)
    }

    /// The size the store may grow to by itself: `max_capacity`, or for a
    /// cache store without one the size it has (a cache evicts instead of
    /// growing); `None`: no limit but the file system.
    pub fn growth_limit(&self) -> Option<u64> {
        match self.settings.max_capacity {
            None if self.options.eviction != crate::options::Eviction::None => {
                Some(self.capacity())
            }
            m => m,
        }
    }

    /// The most metadata a cache store may hold (`Options::eviction`): half
    /// its bound. Past it the tuple blocks do not grow; a change that needs
    /// tuple room evicts objects to free it (`store/evict/`), so the other
    /// half is always there for values, however small the objects cached.
    pub fn metadata_limit(&self) -> Option<u64> {
        if self.options.eviction == crate::options::Eviction::None {
            return None;
        }
        self.growth_limit()
            .map(|l| l / crate::store::evict::METADATA_SHARE)
    }

    /// The largest metadata journal a cache store grows (its order: that
    /// many slots, a power of two): an eighth of its metadata limit, 8 to
    /// 256 slots. Its tuple blocks leave it room within the limit
    /// (`Committer::grow`), and its batches hold at most that many
    /// operations (or the journal it has, if larger).
    pub fn cache_journal_order(&self) -> Option<u8> {
        let cap = self.metadata_limit()?;
        let slots = (cap / 8 / crate::format::BLOCK_SIZE as u64).max(1);
        Some((slots.ilog2() as u8).clamp(3, 8))
    }

    /// In a cache store, the bytes by which a metadata area of `area`
    /// bytes (its checkpoint left out) may still grow its tuple blocks,
    /// with `journal` (the superblock's) and the room it may still grow
    /// by (to `cache_journal_order`) counted in. `None`: no limit.
    pub fn metadata_room(
        &self,
        area: u64,
        journal: Option<crate::format::MetaExtent>,
    ) -> Option<u64> {
        let cap = self.metadata_limit()?;
        let journal_room = match (journal, self.cache_journal_order()) {
            (Some(j), Some(largest)) => {
                ((crate::format::BLOCK_SIZE as u64) << largest).saturating_sub(j.len_bytes())
            }
            _ => 0,
        };
        Some(cap.saturating_sub(area.saturating_add(journal_room)))
    }

    pub fn new_extent(&self, pieces: Vec<Piece>) -> Arc<Extent> {
        Arc::new(Extent {
            pieces,
            alloc: self.alloc.clone(),
        })
    }
}
