//! The checkpoint the superblock names while the store runs: the index
//! image of the last clean close and its change map (format 7,
//! `meta::image::changes`). Every tuple block written after the image's
//! stamp is marked in the map before recovery could miss it, so an open
//! after a crash loads the image and reads only the marked blocks.
//!
//! Invariant 10, as the commit path keeps it (`mark_changed`, called by
//! `write_blocks_beside` before any tuple block is written):
//! * a block written straight to its home slot (it has no state yet) is
//!   marked, and the mark written and synced, before that write is issued
//!   (blocks after it that have no state are marked with it, so a bulk
//!   load syncs its marks once per `MARK_AHEAD` new blocks, not per group);
//! * a block written through the journal is marked by a map write issued
//!   with the group's other writes, before its one sync: recovery reads the
//!   whole journal whatever the map says, and the group's sync makes the
//!   mark durable before the journal slot can be reused;
//! * a block the map cannot hold (the metadata area grew past it), or an
//!   image named without a map (format 6, written by an older build), ends
//!   the checkpoint: the superblock stops naming it (synced) before the
//!   write, as every change did before the map. So does compaction's first
//!   relocation (`commit_group`), so that it can pack objects into the
//!   checkpoint's space too.

use std::collections::BTreeSet;

use super::Committer;
use crate::error::{Error, Result};
use crate::format::{ImageRef, MetaExtent};
use crate::io::AlignedBuf;
use crate::meta::image::changes::ChangeMap;
use crate::meta::superblock::publish_superblock;
use crate::meta::tuple::Piece;

/// Blocks without state marked with one that is written first, after it.
const MARK_AHEAD: u32 = 256;

/// Fewest tuple-block writes between checkpoints written in the background
/// (`Options::checkpoint_after` unset).
const DEFAULT_CHECKPOINT_AFTER: u64 = 4096;

/// What the superblock names: the image's pieces and, from format 7, its
/// change map.
pub(crate) struct Checkpoint {
    pub pieces: Vec<Piece>,
    pub map: Option<ChangeMap>,
}

impl Checkpoint {
    /// Every piece it holds (the image's, the map's).
    fn all_pieces(&self) -> impl Iterator<Item = Piece> + '_ {
        self.pieces
            .iter()
            .copied()
            .chain(self.map.as_ref().map(|m| m.piece))
    }

    /// Bytes of its pieces (counted as metadata while it is named).
    pub fn bytes(&self) -> u64 {
        self.all_pieces().map(|p| p.len_bytes()).sum()
    }
}

impl Committer {
    /// Notes that the superblock names the checkpoint open loaded.
    pub fn keep_checkpoint(&mut self, pieces: Vec<Piece>, map: Option<ChangeMap>) {
        self.checkpoint = Some(Checkpoint { pieces, map });
    }

    /// Whether the superblock names a checkpoint that reflects the store
    /// as it is: nothing written since its image (the close keeps it).
    pub(super) fn checkpoint_current(&self) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(|c| c.map.as_ref().is_none_or(|m| m.marked_count() == 0))
    }

    /// Before anything changes: an image without a change map stops being
    /// named (it could not tell what changed). One with a map stays.
    pub(super) fn before_change(&mut self) -> Result<()> {
        match &self.checkpoint {
            Some(c) if c.map.is_none() => self.end_checkpoint(),
            _ => Ok(()),
        }
    }

    /// Stops the superblock naming the checkpoint (synced) and frees its
    /// pieces; a no-op when it names none. On a failed publish it stays
    /// named, and nothing may change.
    pub(super) fn end_checkpoint(&mut self) -> Result<()> {
        let Some(checkpoint) = self.checkpoint.take() else {
            return Ok(());
        };
        {
            let mut sb = self.shared.superblock.lock();
            let mut next = sb.clone();
            next.index_image = None;
            next.change_map = None;
            next.format_version = next.current_version();
            match publish_superblock(self.shared.engine.as_ref(), &next) {
                Ok(published) => *sb = published,
                Err(e) => {
                    self.checkpoint = Some(checkpoint);
                    return Err(e);
                }
            }
        }
        self.release_checkpoint(checkpoint);
        Ok(())
    }

    /// Gives a checkpoint no superblock names any more back to the heap.
    pub(super) fn release_checkpoint(&self, checkpoint: Checkpoint) {
        self.shared
            .metadata_bytes
            .fetch_sub(checkpoint.bytes(), std::sync::atomic::Ordering::Relaxed);
        let mut alloc = self.shared.alloc.lock();
        for p in checkpoint.all_pieces() {
            alloc.free(p);
        }
    }

    /// Gives back a checkpoint written but never named (its bytes were
    /// never counted as metadata).
    pub(super) fn release_new(&self, checkpoint: Checkpoint) {
        let mut alloc = self.shared.alloc.lock();
        for p in checkpoint.all_pieces() {
            alloc.free(p);
        }
    }

    /// Marks `blocks` in the change map before they are written (see the
    /// module docs): blocks without state are marked and synced now; the
    /// returned map writes, of blocks written through the journal, go out
    /// with the group, before its sync.
    pub(super) async fn mark_changed(
        &mut self,
        blocks: &BTreeSet<u32>,
    ) -> Result<Vec<(AlignedBuf, u64)>> {
        let fits = match &self.checkpoint {
            None => return Ok(Vec::new()),
            Some(Checkpoint { map: None, .. }) => false,
            Some(Checkpoint { map: Some(m), .. }) => {
                blocks.last().is_none_or(|&b| (b as usize) < m.capacity())
            }
        };
        if !fits {
            self.end_checkpoint()?;
            return Ok(Vec::new());
        }
        let table = &self.table;
        let Some(map) = self.checkpoint.as_mut().and_then(|c| c.map.as_mut()) else {
            return Ok(Vec::new());
        };
        let has_state = |b: u32| table.block(b).is_some_and(|s| s.has_state);
        let mut now = BTreeSet::new();
        let mut with_group = BTreeSet::new();
        for &b in blocks {
            if has_state(b) {
                if let Ok(Some(i)) = map.mark(b) {
                    with_group.insert(i);
                }
            } else if !map.is_marked(b) {
                let end = b.saturating_add(MARK_AHEAD);
                for a in (b..end).filter(|&a| a == b || !has_state(a)) {
                    match map.mark(a) {
                        Ok(Some(i)) => {
                            now.insert(i);
                        }
                        Ok(None) => {}
                        // Past the map's end (it holds `b`).
                        Err(()) => break,
                    }
                }
            }
        }
        if !now.is_empty() {
            let writes = now.iter().map(|&i| map.encode_block(i)).collect();
            with_group.retain(|i| !now.contains(i));
            self.shared
                .engine
                .clone()
                .write_and_sync(writes)
                .await
                .map_err(|e| Error::io("writing the change map", e))?;
        }
        Ok(with_group.iter().map(|&i| map.encode_block(i)).collect())
    }

    /// Whether enough was written since the last checkpoint for the idle
    /// store to write a new one (`Options::checkpoint_after`).
    pub(super) fn checkpoint_due(&self) -> bool {
        let every = match self.shared.options.checkpoint_after {
            Some(0) => return false,
            Some(n) => n,
            None => (self.table.blocks.len() as u64 / 4).max(DEFAULT_CHECKPOINT_AFTER),
        };
        self.journal.is_some() && self.written_since_checkpoint >= every
    }

    /// Writes a checkpoint of the store as it is (idle: no open group): the
    /// homes not yet rewritten, then a new image and an empty change map,
    /// synced, then the superblock naming them with their stamp as the
    /// clean sequence (every group up to it is synced), then the old ones
    /// freed. Not written (no room, something not yet in its block, or a
    /// failed write of the new image or map, whose pieces are then freed):
    /// the old checkpoint stays named, the store goes on, and the next try
    /// waits for as many writes again. A failed sync or publish is
    /// returned: what the device holds is not known (the caller poisons).
    pub(super) async fn write_checkpoint(&mut self) -> Result<()> {
        self.written_since_checkpoint = 0;
        self.place_homes().await?;
        let Ok(Some((image, new))) = self.write_image().await else {
            return Ok(());
        };
        if let Err(e) = self.shared.engine.sync().await {
            self.release_new(new);
            return Err(Error::io("syncing a checkpoint", e));
        }
        self.publish_checkpoint(image.seq, Some((image, new)))
    }

    /// Publishes the superblock recording `clean_seq` (every group up to it
    /// is synced) and naming `new` (or no checkpoint), then frees the one
    /// named until now. On a failed publish `new` is freed and the old one
    /// stays named.
    pub(super) fn publish_checkpoint(
        &mut self,
        clean_seq: u64,
        new: Option<(ImageRef, Checkpoint)>,
    ) -> Result<()> {
        let published = {
            let mut sb = self.shared.superblock.lock();
            let mut next = sb.clone();
            next.clean_seq = clean_seq;
            next.index_image = new.as_ref().map(|(r, _)| *r);
            next.change_map = new
                .as_ref()
                .and_then(|(_, c)| c.map.as_ref())
                .map(|m| MetaExtent {
                    start: m.piece.start,
                    order: m.piece.order,
                });
            next.format_version = next.current_version();
            publish_superblock(self.shared.engine.as_ref(), &next).map(|p| *sb = p)
        };
        let new = new.map(|(_, c)| c);
        if let Err(e) = published {
            if let Some(c) = new {
                self.release_new(c);
            }
            return Err(e);
        }
        if let Some(c) = &new {
            self.shared
                .metadata_bytes
                .fetch_add(c.bytes(), std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(old) = std::mem::replace(&mut self.checkpoint, new) {
            self.release_checkpoint(old);
        }
        Ok(())
    }

    /// Marks `blocks` and writes the marks now, synced (open, before it
    /// copies journal images home and erases the journal).
    pub async fn mark_now(&mut self, blocks: &BTreeSet<u32>) -> Result<()> {
        let writes = self.mark_changed(blocks).await?;
        if writes.is_empty() {
            return Ok(());
        }
        self.shared
            .engine
            .clone()
            .write_and_sync(writes)
            .await
            .map_err(|e| Error::io("writing the change map", e))
    }
}
