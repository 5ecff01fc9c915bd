//! Writing a group: its tuple blocks encoded from the cached images and
//! written beside the values the group writes itself, then one sync
//! (steps 1 and 3 of `commit`'s module doc).
//!
//! Invariants kept here: object bytes are durable before any tuple that
//! points at them (a data sync first, or one sync for values and blocks
//! together: invariant 1); a tuple block with state is never overwritten in
//! place before its new image is synced elsewhere (its spare slot, or a
//! journal slot: invariant 1); a failed write fails the group before its
//! sync and poisons the store, so that group stays the newest for recovery
//! (invariant 6); a value's extent is kept until its write is done
//! (invariant 2); superseded pieces go only once the group is durable.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::{unknown_block, Committer, Unplaced};
use crate::error::{Error, Result};
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::block::{
    encode_journaled_slot, encode_slot, GroupStamp, SlotIdentity, GROUP_ATOMIC, SLOT_FIRST,
};
use crate::options::Durability;
use crate::store::request::DataWrite;

/// Home slots a group that finds the journal crowded rewrites at least
/// (the oldest images first); at least twice as many as it takes journal
/// slots, so crowded groups free slots faster than they take them, while
/// no one group writes every home at once.
const PLACE_AT_LEAST: usize = 8;

impl Committer {
    /// Writes the open group: data sync when needed, then every changed
    /// tuple block to its spare slot and one sync. Then superseded pieces
    /// may go, and readers waiting for the group's values go on (also
    /// after a failure: the store is then poisoned, and they find what the
    /// device holds, checked).
    pub(super) async fn flush(&mut self) -> Result<()> {
        let r = self.write_group().await;
        self.shared.landing.release();
        r
    }

    async fn write_group(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let Some(first) = pending.first else {
            return Ok(());
        };
        if pending.needs_data_sync {
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing object data", e))?;
        }
        let seq = self.next_version - 1;
        // All or nothing: a bulk load; and any group in buffered mode,
        // whose changes were acknowledged one by one before it was written,
        // so that rolling back one object whose bytes did not land (and
        // keeping later ones) would leave no prefix of what was
        // acknowledged.
        let buffered = matches!(self.shared.options.durability, Durability::Buffered { .. });
        let flags = if pending.atomic || buffered {
            GROUP_ATOMIC
        } else {
            0
        };
        if !pending.data_writes.is_empty() {
            self.write_blocks_beside(pending.data_writes, &pending.dirty, seq, first, flags)
                .await?;
        } else if !pending.dirty.is_empty() {
            self.write_blocks(&pending.dirty, seq, first, flags).await?;
        }
        self.shared.commit_groups.fetch_add(1, Ordering::Relaxed);
        // Written and synced: no recovery rolls an object of it back now.
        for (block, keep) in pending.kept_room {
            self.table.shrink_used(block, keep);
        }
        // Superseded versions are unlinked on disk now: their pieces may go
        // as soon as the last reader lets go of them, and their cached
        // bytes now (no new read can find them: invariant 8).
        for e in pending.release {
            self.shared.cache.forget(e.version);
        }
        Ok(())
    }

    /// Encodes each block's cached content: (block, slot image). `seq` is
    /// the group's last version, `group_first` its first.
    fn encode_blocks(
        &self,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<Vec<(u32, AlignedBuf)>> {
        let store_id = self.shared.geometry.store_id;
        let mut payload = Vec::with_capacity(BLOCK_SIZE);
        let mut out = Vec::with_capacity(blocks.len());
        for &b in blocks {
            let state = self.table.block(b).ok_or_else(|| unknown_block(b))?;
            // Every block of a group is loaded before it is changed.
            let tuples = self.table.images.get(&b).ok_or_else(|| unknown_block(b))?;
            payload.clear();
            for t in tuples {
                t.encode_into(&mut payload);
            }
            let mut buf = AlignedBuf::zeroed(BLOCK_SIZE);
            let id = SlotIdentity {
                store_id,
                block_no: b,
            };
            let stamp = GroupStamp {
                seq,
                first: group_first,
                blocks: blocks.len() as u32,
                flags,
            };
            if state.journaled {
                // Straight to the home slot: say it had no state before.
                let stamp = GroupStamp {
                    flags: if state.has_state {
                        flags
                    } else {
                        flags | SLOT_FIRST
                    },
                    ..stamp
                };
                encode_journaled_slot(id, stamp, tuples.len(), &payload, buf.as_mut_slice())?;
            } else {
                encode_slot(id, stamp, tuples.len(), &payload, buf.as_mut_slice())?;
            }
            out.push((b, buf));
        }
        Ok(out)
    }

    /// After the writes and the sync: the slots just written hold the
    /// blocks' state (a two-slot block's next write goes to its other
    /// slot). Readers now find the blocks' state in those slots: inline
    /// values of the blocks held in RAM until now are let go.
    fn blocks_written(
        &mut self,
        blocks: &BTreeSet<u32>,
        placed: &[(u32, u64)],
        journaled: &[(u32, u64)],
    ) {
        let mut st = self.shared.state.write();
        // `encode_blocks` found every one of them.
        for &b in blocks {
            if let Some(state) = self.table.block_mut(b) {
                st.set_slot(b, state.write_offset());
                if !state.journaled {
                    state.next_slot ^= 1;
                }
                state.has_state = true;
            }
        }
        // Home slots rewritten with this group; blocks of this group whose
        // state is in the journal until the next.
        for &(b, at) in placed.iter().chain(journaled) {
            st.set_slot(b, at);
        }
        // Written with its block: the value is read from the slot now.
        // Gone (replaced, deleted) or in a block still unwritten: as is.
        self.inline_pending.retain(|&(id, version)| {
            let Some(e) = st.entry_mut(id, version) else {
                return false;
            };
            if blocks.contains(&e.block) {
                e.data.mark_written();
                false
            } else {
                true
            }
        });
        drop(st);
        self.table.trim_images(blocks);
    }

    /// Writes each block (all at once) and syncs once: see
    /// [`write_blocks_beside`](Self::write_blocks_beside).
    pub async fn write_blocks(
        &mut self,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<()> {
        self.write_blocks_beside(Vec::new(), blocks, seq, group_first, flags)
            .await
    }

    /// Writes a group's tuple blocks, and the values it writes itself:
    /// values and block images go to the device together (one submission
    /// on io_uring), and the one sync follows once all of them are done. A
    /// failed write fails the group before its sync (the store is then
    /// poisoned, so this group stays the newest, and recovery rolls back a
    /// tuple whose UNSYNCED data did not land: invariant 1).
    ///
    /// Where an image goes: a two-slot block's spare slot; a journaled
    /// block never written, its home slot; any other journaled block, a
    /// free journal slot, where readers find it until its home slot is
    /// rewritten (`meta::journal`).
    async fn write_blocks_beside(
        &mut self,
        data_writes: Vec<DataWrite>,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<()> {
        // Every block marked in the change map before it can be missed
        // (`checkpoint`); the marks of journaled blocks go with the group.
        let marks = self.mark_changed(blocks).await?;
        self.written_since_checkpoint += blocks.len() as u64;
        // A group's sequence is its last version, no smaller than its first
        // (invariant 4: recovery orders a slot's writes by it).
        assert!(
            group_first <= seq,
            "invariant 4: a group's versions decrease: first {group_first}, last {seq}"
        );
        let images = self.encode_blocks(blocks, seq, group_first, flags)?;
        let mut extents = Vec::with_capacity(data_writes.len());
        let mut writes: Vec<(AlignedBuf, u64)> = data_writes
            .into_iter()
            .map(|d| {
                extents.push(d.extent);
                (d.buf, d.at)
            })
            .collect();
        writes.extend(marks);
        // (block, home slot, image) of the blocks that go through the journal.
        let mut homes = Vec::new();
        for (b, buf) in images {
            let state = self.table.block(b).ok_or_else(|| unknown_block(b))?;
            if state.journaled && state.has_state {
                homes.push((b, state.offset, buf));
            } else {
                writes.push((buf, state.write_offset()));
            }
        }
        let (slots, moved) = self.journal_slots(homes.len()).await?;
        let journal_at: Vec<(u32, u64)> = match (&moved, &self.journal) {
            (Some(j), _) | (None, Some(j)) => homes
                .iter()
                .zip(&slots)
                .map(|((b, _, _), &s)| (*b, j.offset(s)))
                .collect(),
            (None, None) => Vec::new(),
        };
        // Every journaled image has its slot: one left out of the zip would
        // be acknowledged without being written (invariant 1).
        assert_eq!(
            journal_at.len(),
            homes.len(),
            "invariant 1: a journaled tuple block of the group has no journal slot"
        );
        for ((_, _, buf), &(_, at)) in homes.iter().zip(&journal_at) {
            writes.push((AlignedBuf::copy_from(buf.as_slice()), at));
        }
        // Once the journal is half held, homes not yet rewritten go out
        // with this group's writes (the oldest images first) and its sync
        // makes them durable; when this group moves the journal, all of
        // them. Never those of blocks this group writes again: its newer
        // images supersede them.
        let place = if moved.is_some() {
            usize::MAX
        } else if self
            .journal
            .as_ref()
            .is_some_and(|j| j.crowded(slots.len()))
        {
            (2 * slots.len()).max(PLACE_AT_LEAST)
        } else {
            0
        };
        let mut placed_at: Vec<(u32, u64)> = Vec::new();
        if place > 0 {
            let mut oldest: Vec<(u64, u32)> = self
                .unplaced
                .iter()
                .filter(|(b, _)| !blocks.contains(b))
                .map(|(&b, u)| (u.seq, b))
                .collect();
            oldest.sort_unstable();
            for (_, block) in oldest.into_iter().take(place) {
                if let Some(u) = self.unplaced.remove(&block) {
                    placed_at.push((block, u.home));
                    writes.push((u.image, u.home));
                }
            }
        }
        let r = self.shared.engine.clone().write_and_sync(writes).await;
        // Every write is done: the extents may go (with the group's failure).
        drop(extents);
        r.map_err(|e| Error::io("writing object data and tuple blocks", e))?;
        let old_journal = match moved {
            Some(new) => self.move_journal(new)?,
            None => None,
        };
        let images: Vec<(u32, u32)> = homes.iter().map(|(b, _, _)| *b).zip(slots).collect();
        if let Some(j) = self.journal.as_mut() {
            // This group's sync made every home write before it durable
            // (its own and `place_homes`'s); its images are held until they
            // are superseded or placed in turn.
            j.placed(placed_at.iter().map(|&(b, _)| b));
            j.synced();
            j.hold(&images);
        }
        // Readers read the journaled blocks from the journal until their
        // home slots are rewritten.
        for (block, home, image) in homes {
            self.unplaced.insert(block, Unplaced { home, image, seq });
        }
        self.blocks_written(blocks, &placed_at, &journal_at);
        // No reader is sent to the old journal any more: its space may go.
        if let Some(old) = old_journal {
            self.release_extent(old);
        }
        Ok(())
    }
}
