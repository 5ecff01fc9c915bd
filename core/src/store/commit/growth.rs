//! Metadata growth: a new extent of tuple blocks when the metadata area is
//! full (and a new extent table once the superblock's list is), and the
//! release of metadata extents no longer named.
//!
//! Invariants kept here: a new extent is zeroed and synced (with its
//! extent table, when one is written) before the superblock naming it is
//! published, so until that write is durable the extent is just free heap
//! space and a cut on either side leaves a whole store (invariants 1 and
//! 4); the old extent table stays whole until its successor is published;
//! a failed publish poisons the store.

use std::sync::atomic::Ordering;

use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{MetaExtent, Superblock, BLOCK_SIZE, MAX_META_EXTENTS, MAX_TOTAL_META_EXTENTS};
use crate::io::AlignedBuf;
use crate::meta::superblock::{publish_superblock, write_extent_table};

/// Largest zero-fill write when a metadata extent is added.
const ZERO_CHUNK: usize = 1 << 20;

impl Committer {
    /// Writes zeros over `extent`.
    pub(super) async fn zero(&self, extent: MetaExtent) -> Result<()> {
        let engine = &self.shared.engine;
        let total = extent.len_bytes() as usize;
        let mut done = 0;
        while done < total {
            let len = ZERO_CHUNK.min(total - done);
            let (r, _) = engine
                .write_at(AlignedBuf::zeroed(len), extent.offset() + done as u64)
                .await;
            r.map_err(|e| Error::io("zeroing a new metadata extent", e))?;
            done += len;
        }
        Ok(())
    }

    /// Adds a metadata extent: allocate from the heap, zero it, sync, then
    /// publish it in the superblock's spare slot and sync again. Until the
    /// superblock write is durable the extent is just free heap space.
    pub(super) async fn grow(&mut self) -> Result<()> {
        let full = || Error::new(ErrorKind::NoSpace, "metadata area is full and cannot grow");
        let (count, want, max, journal) = {
            let sb = self.shared.superblock.lock();
            (
                sb.meta_extents.len(),
                sb.next_extent_order(),
                sb.max_order,
                sb.journal,
            )
        };
        let journaled = journal.is_some();
        // Two-slot (format 3) stores are not converted: their superblock's
        // list is all they have.
        let limit = if journaled {
            MAX_TOTAL_META_EXTENTS
        } else {
            MAX_META_EXTENTS
        };
        if count >= limit {
            return Err(full().for_tuple_room());
        }
        // A cache store's metadata area (tuple blocks, journal, extent
        // table) stays within its share of the bound: the largest extent
        // that keeps it there, or none (then the change evicts objects for
        // tuple room instead).
        // The checkpoint (index image and change map) is not the area's:
        // written only into free heap, replaced, dropped.
        let checkpoint = self.checkpoint.as_ref().map_or(0, |c| c.bytes());
        let area = self
            .shared
            .metadata_bytes
            .load(Ordering::Relaxed)
            .saturating_sub(checkpoint);
        let want = match self.shared.metadata_room(area, journal) {
            None => want,
            Some(room) => match (1..=want).rev().find(|&k| (BLOCK_SIZE as u64) << k <= room) {
                Some(k) => k,
                None => {
                    return Err(Error::new(
                        ErrorKind::NoSpace,
                        format!(
                            "the metadata area is at this cache's limit of {} bytes (half its \
                             bound, room for its journal kept) and does not grow",
                            self.shared.metadata_limit().unwrap_or(0)
                        ),
                    )
                    .for_tuple_room())
                }
            },
        };
        // A full heap grows the store file first (`grow`).
        let piece = crate::store::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << want, |a| {
            (1..=want).rev().find_map(|k| a.alloc(k)).ok_or_else(full)
        })
        .map_err(|e| match e.kind() {
            ErrorKind::NoSpace => e.for_tuple_room(),
            _ => e,
        })?;
        let extent = MetaExtent {
            start: piece.start,
            order: piece.order,
        };
        // Past the superblock's list, a new extent table (format 5) lists
        // the rest: a piece of its own, written before the superblock that
        // names it (the old table stays whole until that is published).
        let table = if count + 1 > MAX_META_EXTENTS {
            let order = Superblock::extent_table_order(count + 1 - MAX_META_EXTENTS);
            let table = if order <= max {
                crate::store::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << order, |a| {
                    a.alloc(order).ok_or_else(full)
                })
            } else {
                Err(full())
            };
            match table {
                Ok(t) => Some(t),
                Err(e) => {
                    self.shared.alloc.lock().free(piece);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let result = self.publish_extent(extent, table).await;
        if let Err(e) = &result {
            self.poison(e);
            return result;
        }
        self.table.add_extent(extent);
        self.shared
            .metadata_bytes
            .fetch_add(piece.len_bytes(), Ordering::Relaxed);
        Ok(())
    }

    /// Zeroes `extent` (and writes the new extent table into `table`, when
    /// the superblock's list is full), syncs, then publishes the superblock
    /// naming them, and frees the table it replaced.
    async fn publish_extent(
        &mut self,
        extent: MetaExtent,
        table: Option<crate::meta::tuple::Piece>,
    ) -> Result<()> {
        self.zero(extent).await?;
        let engine = &self.shared.engine;
        let table_at = table.map(|t| MetaExtent {
            start: t.start,
            order: t.order,
        });
        if let Some(to) = table_at {
            // Only this path adds extents: the list read now is the one
            // published below (other fields may change meanwhile).
            let mut with_new = self.shared.superblock.lock().clone();
            with_new.meta_extents.push(extent);
            write_extent_table(engine.as_ref(), &with_new, to).await?;
        }
        engine
            .sync()
            .await
            .map_err(|e| Error::io("syncing a new metadata extent", e))?;
        let mut sb = self.shared.superblock.lock();
        let old_table = sb.extent_table;
        let mut next = sb.clone();
        next.meta_extents.push(extent);
        if table_at.is_some() {
            next.extent_table = table_at;
            next.format_version = next.current_version();
        }
        *sb = publish_superblock(engine.as_ref(), &next)?;
        drop(sb);
        // The zeros are counted by `zero`; this is the superblock.
        if let Some(new) = table {
            self.shared
                .metadata_bytes
                .fetch_add(new.len_bytes(), Ordering::Relaxed);
            if let Some(old) = old_table {
                self.release_extent(old);
            }
        }
        Ok(())
    }

    /// Frees a metadata extent the published superblock no longer names
    /// (an old journal or extent table) and stops counting it.
    pub(super) fn release_extent(&self, old: MetaExtent) {
        self.shared.alloc.lock().free(crate::meta::tuple::Piece {
            start: old.start,
            order: old.order,
        });
        self.shared
            .metadata_bytes
            .fetch_sub(old.len_bytes(), Ordering::Relaxed);
    }
}
