//! Warm-up after open: the tuple blocks that hold inline values, read into
//! the read cache in the background, so a small object's first get after a
//! restart is a memory hit rather than a device read.
//!
//! It runs on the maintenance thread, a batch per turn between its other
//! work (`CommitPath::maintain`), and ends at close with it. What it keeps:
//! * **Only checked blocks.** A slot is decoded with its magic, checksum and
//!   identity (invariant 5); one that does not decode is skipped, and the
//!   read that needs it reports it as any read would.
//! * **No stale value served.** A kept block serves a read only when it
//!   holds the exact (key, version) the index names (see `cache.rs`), so a
//!   block rewritten while the warm-up read it can only miss (invariant 8).
//! * **Only free room.** It adds blocks while they fit beside what the
//!   cache holds (`ReadCache::warm_block`) and stops at the first that does
//!   not: it never evicts what reads put there. `Options::cache_bytes` (or
//!   `cache_fraction`) bounds it; `Options::warm_up(false)` turns it off.
//! * **Yields to reads.** When foreground reads went to the device during a
//!   batch, the next waits `PAUSE`.
//!
//! Blocks are read in block order, `BATCH` at a time; the blocks to read
//! are found first, `SCAN` entries per turn under the state's read lock.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;

use super::shared::Shared;
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};

/// Tuple blocks read per turn (in flight at once).
const BATCH: usize = 32;
/// Entries looked at per hold of the state's read lock.
const SCAN: usize = 1 << 16;
/// The wait before the next batch when foreground reads went to the
/// device during one.
const PAUSE: Duration = Duration::from_millis(2);

/// A warm-up in progress.
pub(crate) struct WarmUp {
    shared: Arc<Shared>,
    /// Where the search for blocks goes on (`None`: done).
    scan_from: Option<usize>,
    /// Which tuple blocks hold an inline value read from the device.
    wanted: Vec<bool>,
    /// The next block to consider reading.
    next_block: usize,
}

impl WarmUp {
    /// A warm-up of `shared`'s cache, or `None` when there is nothing to
    /// warm (no cache, turned off, no object).
    pub(crate) fn new(shared: Arc<Shared>) -> Option<WarmUp> {
        if !shared.options.warm_up || !shared.cache.is_on() || shared.state.read().index.is_empty()
        {
            return None;
        }
        shared.cache.set_warming(true);
        Some(WarmUp {
            shared,
            scan_from: Some(0),
            wanted: Vec::new(),
            next_block: 0,
        })
    }

    /// One turn: finds blocks, or reads a batch of them into the cache.
    /// `Some(wait)` before the next turn; `None` when done.
    pub(crate) async fn step(&mut self) -> Option<Duration> {
        if let Some(from) = self.scan_from {
            let wanted = &mut self.wanted;
            self.scan_from = self.shared.state.read().inline_blocks(from, SCAN, |b| {
                let b = b as usize;
                if wanted.len() <= b {
                    wanted.resize(b + 1, false);
                }
                if let Some(w) = wanted.get_mut(b) {
                    *w = true;
                }
            });
            Some(Duration::ZERO)
        } else {
            // Done at `None`: dropping the warm-up clears `warming`.
            self.read_batch().await
        }
    }

    /// Reads the next `BATCH` wanted blocks and keeps those that decode.
    async fn read_batch(&mut self) -> Option<Duration> {
        let s = &*self.shared;
        let mut batch = Vec::with_capacity(BATCH);
        {
            let st = s.state.read();
            while batch.len() < BATCH && self.next_block < self.wanted.len() {
                let b = self.next_block;
                self.next_block += 1;
                if !self.wanted.get(b).copied().unwrap_or(false) {
                    continue;
                }
                let Ok(block) = u32::try_from(b) else { break };
                if let Some((at, _)) = st.slot_of(block) {
                    batch.push((block, at));
                }
            }
        }
        if batch.is_empty() {
            return None;
        }
        let misses = s.cache.misses();
        let reads = batch
            .iter()
            .map(|&(_, at)| s.engine.read_at(AlignedBuf::zeroed(BLOCK_SIZE), at));
        let read = join_all(reads).await;
        for (&(block, _), (io, buf)) in batch.iter().zip(read) {
            let id = SlotIdentity {
                store_id: s.geometry.store_id,
                block_no: block,
            };
            if io.is_err() {
                continue;
            }
            if let SlotContent::Valid { tuples, .. } = decode_slot(id, buf.as_slice()) {
                if !s.cache.warm_block(block, tuples.into()) {
                    // The cache is full.
                    return None;
                }
            }
        }
        Some(if s.cache.misses() > misses {
            PAUSE
        } else {
            Duration::ZERO
        })
    }
}

impl Drop for WarmUp {
    fn drop(&mut self) {
        self.shared.cache.set_warming(false);
    }
}
