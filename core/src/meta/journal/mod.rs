//! The metadata journal of a format-4 store: where a commit group's new
//! images of tuple blocks that already have state are written (and synced)
//! before their one home slot is rewritten in place.
//!
//! A group writes the images of its blocks with state to free journal
//! slots (blocks never written go straight to their home slot: a torn first
//! write loses nothing) and syncs once. The home slots are rewritten later
//! (`Committer::place_homes`), each with the newest image of its block:
//! with a group's writes (before its sync) once the journal is half held,
//! when the store is idle, at `sync()` or at close; readers read the
//! journal images until then, and a block changed again meanwhile skips
//! the older home write. A journal slot is therefore *held* from its
//! group's sync until a newer image of the same block is synced, or a sync
//! follows its block's home write, and a group never writes over a held
//! slot (invariant 1 in `INVARIANTS.md`). Recovery then always finds each
//! block's newest synced image, and while a group may still be cut before
//! its sync, the image it would fall back to.
//!
//! A group that needs more slots than are free has the held slots' homes
//! rewritten and syncs first (nothing is held then); one that needs more
//! slots than the journal has moves to a larger journal extent
//! (`Committer`), rewriting every held slot's home with its writes.

/// Reading the journal back at open: its slots scanned, images restored
/// home, the journal erased after a rollback (run by `meta::recovery`).
pub(crate) mod recovery;

use std::collections::{BTreeMap, BTreeSet};

use crate::format::{MetaExtent, BLOCK_SIZE};

/// The journal extent and which of its slots are held.
#[derive(Debug)]
pub(crate) struct Journal {
    pub extent: MetaExtent,
    /// Held slots, each with the block whose image it holds.
    held: BTreeMap<u32, u32>,
    /// Per block with a held image whose home slot is not yet rewritten
    /// with it: the slot of its newest image.
    newest: BTreeMap<u32, u32>,
    /// Held slots whose images are in their home slots now, not yet
    /// synced there: free at the next sync.
    placed: BTreeSet<u32>,
    /// Slots recovery still needs (images its in-memory edits came from):
    /// free again once a group's sync has made the edited blocks durable.
    pinned: BTreeSet<u32>,
    /// Where the next search for free slots starts (slots are used in turn).
    cursor: u32,
}

impl Journal {
    /// A journal of which nothing is held: every block's state is durable in
    /// its home slot.
    pub fn new(extent: MetaExtent) -> Journal {
        Journal {
            extent,
            held: BTreeMap::new(),
            newest: BTreeMap::new(),
            placed: BTreeSet::new(),
            pinned: BTreeSet::new(),
            cursor: 0,
        }
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        1u32 << self.extent.order.min(31)
    }

    /// Slots recovery still needs (free after the next group's sync).
    pub fn pinned(&self) -> usize {
        self.pinned.len()
    }

    /// Free slots now.
    pub fn free(&self) -> usize {
        let pinned_only = self
            .pinned
            .iter()
            .filter(|s| !self.held.contains_key(s))
            .count();
        self.slots() as usize - self.held.len() - pinned_only
    }

    /// Whether a group taking `n` more slots would leave fewer than half of
    /// the journal free: then it rewrites the held images' home slots with
    /// its writes, so that the next groups find free slots without a sync
    /// of their own.
    pub fn crowded(&self, n: usize) -> bool {
        self.free() < n + self.slots() as usize / 2
    }

    /// Keeps the slot at byte `offset` (if it is one of this journal's)
    /// until the next group is synced.
    pub fn pin(&mut self, offset: u64) {
        let first = self.extent.offset();
        if offset >= first && offset < first + self.extent.len_bytes() {
            self.pinned
                .insert(((offset - first) / BLOCK_SIZE as u64) as u32);
        }
    }

    /// Byte offset of slot `slot`.
    pub fn offset(&self, slot: u32) -> u64 {
        self.extent.offset() + slot as u64 * BLOCK_SIZE as u64
    }

    /// `n` free slots, taken in turn from where the last search ended, or
    /// `None` when fewer are free.
    pub fn pick(&mut self, n: usize) -> Option<Vec<u32>> {
        if n > self.free() {
            return None;
        }
        let total = self.slots();
        let mut out = Vec::with_capacity(n);
        let mut at = self.cursor % total;
        while out.len() < n {
            if !self.held.contains_key(&at) && !self.pinned.contains(&at) {
                out.push(at);
            }
            at = (at + 1) % total;
        }
        self.cursor = at;
        Some(out)
    }

    /// The home slots of `blocks` now hold (written, not yet synced) the
    /// newest image the journal holds of each: those slots are free after
    /// the next sync.
    pub fn placed(&mut self, blocks: impl IntoIterator<Item = u32>) {
        for b in blocks {
            if let Some(slot) = self.newest.remove(&b) {
                self.placed.insert(slot);
            }
        }
    }

    /// A sync completed after every home write reported to
    /// [`placed`](Self::placed): those slots are free again.
    pub fn synced(&mut self) {
        for slot in std::mem::take(&mut self.placed) {
            self.held.remove(&slot);
        }
    }

    /// The images a group just wrote (and synced), as (block, slot): held
    /// until a newer image of the block is synced or its home write is.
    /// An older image of the same block is free from now on (this one is
    /// durable, and this group can no longer be cut before its sync), and
    /// so are recovery's pinned slots.
    pub fn hold(&mut self, images: &[(u32, u32)]) {
        self.pinned.clear();
        for &(block, slot) in images {
            if let Some(old) = self.newest.insert(block, slot) {
                self.held.remove(&old);
                self.placed.remove(&old);
            }
            self.held.insert(slot, block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(order: u8) -> Journal {
        Journal::new(MetaExtent { start: 100, order })
    }

    /// (block, slot) pairs: block `first + i` in the `i`th slot.
    fn images(first: u32, slots: &[u32]) -> Vec<(u32, u32)> {
        slots.iter().zip(first..).map(|(&s, b)| (b, s)).collect()
    }

    #[test]
    fn a_group_never_takes_a_held_slot() {
        let mut j = journal(3);
        assert_eq!(j.slots(), 8);
        let a = j.pick(5).unwrap();
        j.synced();
        j.hold(&images(0, &a));
        // Three are free; the held five are never handed out.
        assert!(j.pick(4).is_none());
        let b = j.pick(3).unwrap();
        assert!(b.iter().all(|s| !a.contains(s)), "{a:?} {b:?}");
        // Other blocks' images: the first five stay held (their homes are
        // not rewritten).
        j.synced();
        j.hold(&images(10, &b));
        assert_eq!(j.free(), 0);
        assert!(j.pick(1).is_none());
        assert_eq!(j.offset(2), (100 + 2) * BLOCK_SIZE as u64);
    }

    #[test]
    fn a_slot_is_free_once_a_newer_image_of_its_block_is_synced() {
        let mut j = journal(3);
        let a = j.pick(2).unwrap();
        j.synced();
        j.hold(&images(0, &a));
        assert_eq!(j.free(), 6);
        // Block 0 again: until this group is synced, its older image is
        // what a cut would fall back to, so it is not handed out.
        let b = j.pick(1).unwrap();
        assert!(!a.contains(&b[0]));
        j.synced();
        j.hold(&[(0, b[0])]);
        // Synced: block 0's older image is free, block 1's is not.
        assert_eq!(j.free(), 6);
        let taken: Vec<u32> = j.pick(6).unwrap();
        assert!(taken.contains(&a[0]) && !taken.contains(&a[1]) && !taken.contains(&b[0]));
    }

    #[test]
    fn a_placed_slot_is_free_only_after_the_next_sync() {
        let mut j = journal(3);
        let a = j.pick(3).unwrap();
        j.synced();
        j.hold(&images(0, &a));
        assert_eq!(j.free(), 5);
        // Blocks 0 and 1 rewritten in their homes: held until a sync.
        j.placed([0, 1]);
        assert_eq!(j.free(), 5);
        assert!(j.pick(6).is_none());
        j.synced();
        assert_eq!(j.free(), 7);
        // A block placed twice, or one without a held image: nothing more.
        j.placed([0, 7]);
        j.synced();
        assert_eq!(j.free(), 7);
        assert!(j.crowded(4) && !j.crowded(3));
    }

    #[test]
    fn pinned_slots_are_kept_until_a_group_is_synced() {
        let mut j = journal(2);
        j.pin(j.offset(1));
        j.pin(j.offset(9)); // not this journal's
        assert_eq!(j.pinned(), 1);
        assert_eq!(j.free(), 3);
        let a = j.pick(3).unwrap();
        assert!(!a.contains(&1));
        j.synced();
        j.hold(&images(0, &a[..1]));
        assert_eq!((j.pinned(), j.free()), (0, 3));
    }
}
