//! Compaction: moving objects down the heap so that free space deleted in
//! small holes becomes large free pieces again.
//!
//! The heap is a buddy heap: after random deletes the free space can be
//! half the store in holes of a few blocks, and an object larger than a
//! hole then needs more pieces than its tuple can list (`NoSpace`). A
//! compaction slides objects towards the start of the heap, highest first:
//!
//! 1. **Plan.** One scan of the entry table under its read lock: every
//!    live heap object's entry id, version and place (no key is copied,
//!    nothing is pinned: an object deleted meanwhile frees its space at
//!    once).
//! 2. **Move**, a batch at a time. For each object, highest first: pieces
//!    of the same orders are taken at the lowest free addresses, each
//!    ending below the object's lowest piece, and each cut from a free
//!    piece no larger than its own size or what its old place merges into
//!    once freed (`BuddyAllocator::alloc_below`, `merged_order`: a move
//!    never breaks a free piece larger than the one it makes); an object
//!    that has no such room stays. Its blocks are copied as they
//!    are (data and trailer table: the checksums do not change, so damaged
//!    bytes stay damage that a read reports) once its own commit group has
//!    written them (`landing`), then synced. A compaction dropped half way
//!    lets a write in flight finish before its pieces are freed
//!    (`HeldWrite`, invariant 2).
//! 3. **Commit.** Each move is a `Relocate` change: applied only if the key
//!    still holds that version, rewriting its tuple in place with the new
//!    pieces — same version, creation time and expiry. The old pieces are
//!    freed once that is durable and the last read of them is done
//!    (invariant 2). A cut anywhere leaves the old tuple with its intact
//!    old pieces, or the new tuple with its synced copy (invariant 1;
//!    `tests/all/crash.rs`).
//!
//! Puts and reads go on throughout (the compaction yields to its executor
//! every few objects). A put or `begin_upload` that finds no room although
//! the heap has enough free space (and the store cannot grow) runs a
//! compaction and tries once more; not again, after one that did not
//! help, until something is freed. With buffered durability each batch
//! of moves is written at once, so their old space comes back.
//! Metadata extents and inline values are not moved.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::data::HeldWrite;
use super::{heap, request, ObjectData, Store};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::index::EntryId;
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
    id: EntryId,
    version: u64,
    /// First block past its highest piece: the move order.
    top: u64,
}

/// A copy made and waiting for its commit.
struct Moved {
    id: EntryId,
    version: u64,
    data: ObjectData,
    bytes: u64,
}

/// Candidates looked at between two yields to the executor (a compaction
/// that finds nothing to move must not hold its thread).
const YIELD_EVERY: usize = 64;

/// Lets other tasks of the executor run once.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

impl Store {
    /// Moves objects towards the start of the heap so that its free space
    /// joins into large pieces (see the module docs of `store/compact.rs`):
    /// after deletes left the free space in small holes, an object as
    /// large as a good part of it fits again. A put or an upload that finds
    /// no room although enough is free does this by itself. Reads and
    /// writes go on meanwhile; moved objects keep their version, creation
    /// time and expiry. Only one compaction runs at a time (a second one
    /// waits). Dropped half way, the moves already committed stay.
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
        for (n, p) in plan.iter().enumerate() {
            self.check_not_closing().map_err(ctx)?;
            if n % YIELD_EVERY == YIELD_EVERY - 1 {
                YieldNow(false).await;
            }
            let Some(moved) = self.copy_lower(p).await.map_err(ctx)? else {
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
    /// enough for the object, and something was freed since the last
    /// compaction that did not help (so a heap that compaction cannot fix,
    /// its metadata extents in the way, is not compacted again by every
    /// put).
    pub(crate) fn worth_compacting(&self, e: &Error, size: u64) -> bool {
        let a = self.shared().alloc.lock();
        e.kind() == ErrorKind::NoSpace
            && a.free_blocks() * BLOCK_SIZE as u64 >= tuple::stored_len(size)
            && a.frees() != self.shared().futile_compaction.load(Ordering::Relaxed)
    }

    /// A put's compaction, then its second try: a try that still finds no
    /// room marks the compaction futile (see `worth_compacting`).
    pub(crate) fn after_compaction<T>(&self, retry: Result<T>) -> Result<T> {
        if retry
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::NoSpace)
        {
            let frees = self.shared().alloc.lock().frees();
            self.shared()
                .futile_compaction
                .store(frees, Ordering::Relaxed);
        }
        retry
    }

    fn largest_free(&self) -> u64 {
        self.shared()
            .alloc
            .lock()
            .largest_free_order()
            .map_or(0, |k| (BLOCK_SIZE as u64) << k)
    }

    /// Every live heap object, highest first: a scan of the entry table
    /// (no key is copied; the index is not walked).
    fn plan(&self) -> Vec<Planned> {
        let st = self.shared().state.read();
        let mut plan: Vec<Planned> = st
            .iter()
            // An expired version is left to the reaper.
            .filter(|(_, e)| e.live())
            .filter_map(|(id, e)| {
                let top = e
                    .data
                    .heap()?
                    .extent
                    .pieces
                    .iter()
                    .map(|p| p.start + (1u64 << p.order))
                    .max()?;
                Some(Planned {
                    id,
                    version: e.version,
                    top,
                })
            })
            .collect();
        drop(st);
        plan.sort_by_key(|p| std::cmp::Reverse(p.top));
        plan
    }

    /// Copies `p`'s blocks to pieces below it, if its entry still holds
    /// that version and the heap has the room there; synced.
    async fn copy_lower(&self, p: &Planned) -> Result<Option<Moved>> {
        let s = self.shared();
        let current = {
            let st = s.state.read();
            st.entry(p.id)
                .filter(|e| e.version == p.version)
                .and_then(|e| e.data.heap().cloned())
        };
        let Some(super::HeapValue { extent, sums, .. }) = current else {
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
                // Held: a compaction dropped mid-write frees the copy's
                // pieces only once the write is done.
                let write = s.engine.write_at(buf, to.offset() + at);
                HeldWrite::new(write, target.clone())
                    .await
                    .map_err(|e| Error::io("compaction writing an object", e))?;
                at += n;
            }
            bytes += len;
        }
        Ok(Some(Moved {
            id: p.id,
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
                .submit(|reply| request::Request::Relocate {
                    id: m.id,
                    version: m.version,
                    data: m.data,
                    reply,
                })
                .await;
            moved.map(|yes| (yes, bytes))
        }))
        .await;
        let mut any = false;
        for r in results {
            let (yes, bytes) = r?;
            if yes {
                any = true;
                report.moved += 1;
                report.bytes_moved += bytes;
            }
        }
        // Buffered durability acknowledges a group before writing it, and
        // the old pieces are freed only once it is written: write it now,
        // or the space would come back only after `max_delay`.
        let buffered = matches!(
            self.shared().options.durability,
            crate::Durability::Buffered { .. }
        );
        if any && buffered {
            self.sync().await?;
        }
        Ok(())
    }
}
