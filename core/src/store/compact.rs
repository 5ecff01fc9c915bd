//! Compaction: moving objects down the heap so that free space deleted in
//! small holes becomes large free pieces again.
//!
//! The heap is a buddy heap: after random deletes the free space can be
//! half the store in holes of a few blocks, and an object larger than a
//! hole then needs more pieces than its tuple can list (`NoSpace`). A
//! compaction slides objects towards the start of the heap, highest first:
//!
//! 1. **Plan.** Under the index's read lock, every heap object's key,
//!    version and place (nothing is pinned: an object deleted meanwhile
//!    frees its space at once).
//! 2. **Move**, a batch at a time. For each object, highest first: pieces
//!    of the same orders are taken at the lowest free addresses, each
//!    ending below the object's lowest piece, and each cut from a free
//!    piece no larger than its own size or what its old place merges into
//!    once freed (`BuddyAllocator::alloc_below`, `merged_order`: a move
//!    never breaks a free piece larger than the one it makes); an object
//!    that has no such room stays. Its blocks are copied as they
//!    are (data and trailer table: the checksums do not change, so damaged
//!    bytes stay damage that a read reports) once its own commit group has
//!    written them (`landing`), then synced.
//! 3. **Commit.** Each move is a `Relocate` change: applied only if the key
//!    still holds that version, rewriting its tuple in place with the new
//!    pieces — same version, creation time and expiry. The old pieces are
//!    freed once that is durable and the last read of them is done
//!    (invariant 2). A cut anywhere leaves the old tuple with its intact
//!    old pieces, or the new tuple with its synced copy (invariant 1;
//!    `tests/crash.rs`).
//!
//! Puts and reads go on throughout. A put that finds no room although the
//! heap has enough free space runs a compaction and tries once more.
//! Metadata extents and inline values are not moved.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::{commit, heap, ObjectData, Store};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::tuple::{self, Piece};

/// Objects moved per batch (their relocations commit as one or two groups).
const BATCH_OBJECTS: usize = 256;
/// Bytes copied per batch at most (besides one object larger than this).
const BATCH_BYTES: u64 = 32 << 20;
/// Largest single read or write of a copy.
const COPY_CHUNK: u64 = 1 << 20;

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Objects moved to lower addresses.
    pub moved: u64,
    /// Heap bytes copied.
    pub bytes_moved: u64,
    /// Largest free piece before, in bytes.
    pub largest_free_before: u64,
    /// Largest free piece after, in bytes.
    pub largest_free_after: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// A heap object as planned: where it is now.
struct Planned {
    key: Box<[u8]>,
    version: u64,
    /// First block past its highest piece: the move order.
    top: u64,
}

/// A copy made and waiting for its commit.
struct Moved {
    key: Box<[u8]>,
    version: u64,
    data: ObjectData,
    bytes: u64,
}

impl Store {
    /// Moves objects towards the start of the heap so that its free space
    /// joins into large pieces (see the module docs of `store/compact.rs`):
    /// after deletes left the free space in small holes, an object as
    /// large as a good part of it fits again. A put that finds no room
    /// although enough is free does this by itself. Reads and writes go on
    /// meanwhile; moved objects keep their version, creation time and
    /// expiry. Only one compaction runs at a time (a second one waits).
    pub async fn compact(&self) -> Result<CompactReport> {
        let ctx = |e: Error| e.context("compact");
        self.check_open().map_err(ctx)?;
        self.shared().check_failed().map_err(ctx)?;
        let _staging = self.staging();
        let _one = self.shared().compacting.lock().await;
        let started = Instant::now();
        let mut report = CompactReport {
            largest_free_before: self.largest_free(),
            ..CompactReport::default()
        };
        let plan = self.plan();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        for p in plan {
            self.check_not_closing().map_err(ctx)?;
            let Some(moved) = self.copy_lower(&p).await.map_err(ctx)? else {
                continue;
            };
            batch_bytes += moved.bytes;
            batch.push(moved);
            if batch.len() >= BATCH_OBJECTS || batch_bytes >= BATCH_BYTES {
                self.commit_moves(std::mem::take(&mut batch), &mut report)
                    .await
                    .map_err(ctx)?;
                batch_bytes = 0;
            }
        }
        self.commit_moves(batch, &mut report).await.map_err(ctx)?;
        report.largest_free_after = self.largest_free();
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Whether a put refused with `e` may fit after a compaction: the heap
    /// had no room in pieces its tuple can list, though its free space is
    /// enough for the object, and more is free than after the last
    /// compaction that did not help (so a heap that compaction cannot fix,
    /// its metadata extents in the way, is not compacted again by every
    /// put until something is freed).
    pub(crate) fn worth_compacting(&self, e: &Error, size: u64) -> bool {
        let free = self.free_bytes();
        e.kind() == ErrorKind::NoSpace
            && free >= tuple::stored_len(size)
            && free > self.shared().futile_compaction.load(Ordering::Relaxed)
    }

    /// A put's compaction, then its second try: a try that still finds no
    /// room marks the compaction futile (see `worth_compacting`).
    pub(crate) fn after_compaction<T>(&self, retry: Result<T>) -> Result<T> {
        if retry
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::NoSpace)
        {
            let free = self.free_bytes();
            self.shared()
                .futile_compaction
                .store(free, Ordering::Relaxed);
        }
        retry
    }

    fn free_bytes(&self) -> u64 {
        self.shared().alloc.lock().free_blocks() * BLOCK_SIZE as u64
    }

    fn largest_free(&self) -> u64 {
        self.shared()
            .alloc
            .lock()
            .largest_free_order()
            .map_or(0, |k| (BLOCK_SIZE as u64) << k)
    }

    /// Every heap object, highest first.
    fn plan(&self) -> Vec<Planned> {
        let st = self.shared().state.read();
        let mut keys = Vec::new();
        if st.index.all(&mut keys).is_err() {
            return Vec::new();
        }
        let mut plan: Vec<Planned> = keys
            .into_iter()
            .filter_map(|(key, id)| {
                // An expired version is left to the reaper.
                let e = st.entry(id).filter(|e| e.live())?;
                let ObjectData::Heap { extent, .. } = &e.data else {
                    return None;
                };
                let top = extent
                    .pieces
                    .iter()
                    .map(|p| p.start + (1u64 << p.order))
                    .max()?;
                Some(Planned {
                    key,
                    version: e.version,
                    top,
                })
            })
            .collect();
        drop(st);
        plan.sort_by_key(|p| std::cmp::Reverse(p.top));
        plan
    }

    /// Copies `p`'s blocks to pieces below it, if the key still holds that
    /// version and the heap has the room there; synced.
    async fn copy_lower(&self, p: &Planned) -> Result<Option<Moved>> {
        let s = self.shared();
        let current = {
            let st = s.state.read();
            st.lookup_any(&p.key)
                .filter(|e| e.version == p.version)
                .map(|e| e.data.clone())
        };
        let Some(ObjectData::Heap { extent, sums, .. }) = current else {
            return Ok(None);
        };
        let Some(low) = extent.pieces.iter().map(|p| p.start).min() else {
            return Ok(None);
        };
        let pieces = {
            let mut a = s.alloc.lock();
            let mut taken: Vec<Piece> = Vec::with_capacity(extent.pieces.len());
            for old in &extent.pieces {
                // A move must not split a free piece larger than the one
                // it frees: its own size, or what the freed place merges
                // into.
                let merged = a.merged_order(*old);
                let split_at_most = old.order.max(merged.saturating_sub(1));
                match a.alloc_below(old.order, low, split_at_most) {
                    Some(p) => taken.push(p),
                    None => break,
                }
            }
            if taken.len() < extent.pieces.len() {
                for p in taken {
                    a.free(p);
                }
                return Ok(None);
            }
            taken
        };
        let target = s.new_extent(pieces);
        // The version's own group may still be writing its value.
        s.landing.wait(p.version).await;
        let mut bytes = 0;
        for (from, to) in extent.pieces.iter().zip(&target.pieces) {
            let len = from.len_bytes();
            let mut at = 0;
            while at < len {
                let n = COPY_CHUNK.min(len - at);
                let (r, buf) = s
                    .engine
                    .read_at(AlignedBuf::zeroed(n as usize), from.offset() + at)
                    .await;
                r.map_err(|e| Error::io("compaction reading an object", e))?;
                let (r, _) = s.engine.write_at(buf, to.offset() + at).await;
                r.map_err(|e| Error::io("compaction writing an object", e))?;
                s.device_bytes_written
                    .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                at += n;
            }
            bytes += len;
        }
        Ok(Some(Moved {
            key: p.key.clone(),
            version: p.version,
            data: heap(target, sums, false),
            bytes,
        }))
    }

    /// Commits a batch of moves (their data is synced first by the commit
    /// path: they are not UNSYNCED).
    async fn commit_moves(&self, batch: Vec<Moved>, report: &mut CompactReport) -> Result<()> {
        let results = join_all(batch.into_iter().map(|m| async move {
            let bytes = m.bytes;
            let moved = self
                .submit(|reply| commit::Request::Relocate {
                    key: m.key,
                    version: m.version,
                    data: m.data,
                    reply,
                })
                .await;
            moved.map(|yes| (yes, bytes))
        }))
        .await;
        for r in results {
            let (yes, bytes) = r?;
            if yes {
                report.moved += 1;
                report.bytes_moved += bytes;
            }
        }
        Ok(())
    }
}
