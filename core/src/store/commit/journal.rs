//! The metadata journal's slots, seen from the commit path: which free
//! slot a journaled block's new image goes to, when the home slots are
//! rewritten, and when a larger journal is made ready and published.
//!
//! Invariants kept here (invariant 1): a journal slot is not reused before
//! a newer image of its block is synced or a sync follows its block's home
//! write (`meta::journal`); no group needs more journal slots than it can
//! have (`room_for_one` splits a group before the change that would
//! overflow it when no larger journal fits); a new journal is zeroed and
//! synced before the superblock names it, and the old one is freed only
//! once no reader is sent there.

use std::sync::atomic::Ordering;

use super::{no_journal, Committer};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{MetaExtent, BLOCK_SIZE};
use crate::io::AlignedBuf;
use crate::meta::journal::Journal;
use crate::meta::superblock::publish_superblock;

/// A journaled block's image, synced in the journal, not yet in its home
/// slot.
pub(super) struct Unplaced {
    pub(super) home: u64,
    pub(super) image: AlignedBuf,
    /// Sequence of the group that wrote it: the oldest go home first.
    pub(super) seq: u64,
}

impl Committer {
    /// Rewrites every journaled block's home slot not yet rewritten with
    /// its newest image now (not synced: the journal keeps their images
    /// until a later sync).
    pub(super) async fn place_homes(&mut self) -> Result<()> {
        let unplaced = std::mem::take(&mut self.unplaced);
        if unplaced.is_empty() {
            return Ok(());
        }
        let engine = &self.shared.engine;
        let placed: Vec<(u32, u64)> = unplaced.iter().map(|(&b, u)| (b, u.home)).collect();
        let futs: Vec<_> = unplaced
            .into_values()
            .map(|u| engine.write_at(u.image, u.home))
            .collect();
        for (r, _) in futures::future::join_all(futs).await {
            r.map_err(|e| Error::io("writing tuple blocks to their home slots", e))?;
        }
        if let Some(j) = self.journal.as_mut() {
            j.placed(placed.iter().map(|&(b, _)| b));
        }
        let mut st = self.shared.state.write();
        for (block, home) in placed {
            st.set_slot(block, home);
        }
        Ok(())
    }

    /// `n` free journal slots for a group, and the journal they are in when
    /// it is a new one (`move_journal` once the group is synced): every
    /// home placed and a sync first when too many are held, a larger
    /// journal when the journal has fewer.
    pub(super) async fn journal_slots(&mut self, n: usize) -> Result<(Vec<u32>, Option<Journal>)> {
        if n == 0 {
            return Ok((Vec::new(), None));
        }
        // A larger journal made ready for this group (or an earlier one).
        if let Some(mut spare) = self.spare.take() {
            match spare.pick(n) {
                Some(slots) => return Ok((slots, Some(spare))),
                None => self.free_journal(spare),
            }
        }
        let journal = self.journal.as_mut().ok_or_else(no_journal)?;
        if let Some(slots) = journal.pick(n) {
            return Ok((slots, None));
        }
        if n <= self.journal.as_ref().map_or(0, |j| j.slots() as usize) {
            // The held slots are free once their homes are written and
            // synced.
            self.place_homes().await?;
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing tuple blocks", e))?;
            let journal = self.journal.as_mut().ok_or_else(no_journal)?;
            journal.synced();
            if let Some(slots) = journal.pick(n) {
                return Ok((slots, None));
            }
        }
        let mut new = self.new_journal(n).await?;
        let slots = new.pick(n).ok_or_else(no_journal)?;
        Ok((slots, Some(new)))
    }

    /// Frees a journal extent that was never published (a spare not
    /// used): it is plain heap space on the device.
    pub(super) fn free_journal(&self, j: Journal) {
        self.shared.alloc.lock().free(crate::meta::tuple::Piece {
            start: j.extent.start,
            order: j.extent.order,
        });
    }

    /// Journal slots a group can have without a larger journal (`None`: a
    /// two-slot store, no journal).
    fn journal_room(&self) -> Option<usize> {
        let j = self.journal.as_ref()?;
        let spare = self.spare.as_ref().map_or(0, |s| s.slots() as usize);
        Some(spare.max(j.slots() as usize - j.pinned()))
    }

    /// Keeps the open group within what the metadata journal takes, before
    /// one more change is applied. A change adds at most one journaled
    /// block to the group, and at most one stale copy for step 0 of the
    /// next group to remove (a group of its own). When either would need
    /// more slots than the journal has, a larger journal is made ready
    /// (`spare`); when the heap has no room for one, the open group is
    /// written now (and its stale copies removed), and the change opens a
    /// new group of the same kind. So no group ever needs a journal it
    /// cannot have, and a full device is never a reason to fail a change
    /// that fits the metadata area: invariant 1 holds for each group, and
    /// a bulk load split this way still keeps a prefix after a cut (its
    /// groups are written in order, each all or nothing). Whether the open
    /// group was written.
    pub(super) async fn room_for_one(&mut self) -> Result<bool> {
        self.room_for(1).await
    }

    /// [`room_for_one`](Self::room_for_one) for `n` changes applied
    /// together (an atomic batch): the open group is written first when
    /// the `n` would not fit beside it, never in the middle of them. The
    /// caller checks [`fits`](Self::fits) afterwards: `n` changes may need
    /// more slots than any journal the device has room for.
    pub(super) async fn room_for(&mut self, n: usize) -> Result<bool> {
        // A failed write leaves the store poisoned: nothing more is written
        // (above all no stale copy removed whose replacement did not land).
        self.check_failed()?;
        let Some(room) = self.journal_room() else {
            return Ok(false);
        };
        let need = self.pending.journaled.max(self.stale_blocks.len()) + n;
        if need <= room {
            return Ok(false);
        }
        match self.new_journal(need).await {
            Ok(j) => {
                if let Some(old) = self.spare.replace(j) {
                    self.free_journal(old);
                }
                return Ok(false);
            }
            Err(e) if matches!(e.kind(), ErrorKind::NoSpace | ErrorKind::TooLarge) => {}
            Err(e) => return Err(e),
        }
        let (open, atomic, needs_data_sync) = (
            self.pending.first.is_some(),
            self.pending.atomic,
            self.pending.needs_data_sync,
        );
        self.flush().await?;
        if self.stale_blocks.len() + n > room {
            self.remove_stale().await?;
        }
        if open {
            self.pending.first = Some(self.next_version);
            self.pending.atomic = atomic;
            self.pending.needs_data_sync = needs_data_sync;
        }
        Ok(true)
    }

    /// Whether `n` more changes fit the open group without a larger
    /// journal than is ready (each adds at most one journaled block to the
    /// group and one stale copy to the next group's step 0).
    pub(super) fn fits(&self, n: usize) -> bool {
        self.journal_room()
            .is_none_or(|room| self.pending.journaled.max(self.stale_blocks.len()) + n <= room)
    }

    /// A zeroed, synced journal extent of at least `2n` slots and at least
    /// the current size (a journal of `n` when `2n` exceeds the largest
    /// piece), not yet in the superblock.
    async fn new_journal(&mut self, n: usize) -> Result<Journal> {
        let (current, max) = {
            let sb = self.shared.superblock.lock();
            (sb.journal.map_or(1, |j| j.order), sb.max_order)
        };
        let need = |k: usize| (usize::BITS - (k.max(2) - 1).leading_zeros()) as u8;
        let mut order = current.max(need(2 * n)).min(max);
        // A cache store's journal grows to its largest and no further (its
        // metadata area has a limit): a group needing more is split, a
        // batch was refused up front.
        if let Some(largest) = self.shared.cache_journal_order() {
            order = order.min(largest.max(current));
        }
        if (1usize << order) < n {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("a commit group of {n} tuple blocks exceeds the largest metadata journal"),
            ));
        }
        let full = || Error::new(ErrorKind::NoSpace, "no room for the metadata journal");
        let piece =
            crate::store::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << order, |a| {
                a.alloc(order).ok_or_else(full)
            })?;
        let extent = MetaExtent {
            start: piece.start,
            order: piece.order,
        };
        let zeroed = async {
            self.zero(extent).await?;
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing a new metadata journal", e))
        };
        if let Err(e) = zeroed.await {
            self.shared.alloc.lock().free(piece);
            return Err(e);
        }
        Ok(Journal::new(extent))
    }

    /// Makes `new` (whose group's images are synced) the store's journal,
    /// published in the superblock; returns the old extent, which the
    /// caller frees once no reader is sent there. Before the publish the
    /// old journal and the home slots hold every state, so a cut on either
    /// side leaves a whole store.
    pub(super) fn move_journal(&mut self, new: Journal) -> Result<Option<MetaExtent>> {
        let mut sb = self.shared.superblock.lock();
        let mut next = sb.clone();
        let old = next.journal.replace(new.extent);
        let published = publish_superblock(self.shared.engine.as_ref(), &next);
        match published {
            Ok(p) => *sb = p,
            Err(e) => {
                drop(sb);
                self.poison(&e);
                return Err(e);
            }
        }
        drop(sb);
        self.shared
            .metadata_bytes
            .fetch_add(new.extent.len_bytes(), Ordering::Relaxed);
        self.journal = Some(new);
        Ok(old)
    }
}
