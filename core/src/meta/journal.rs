//! The metadata journal of a format-4 store: where a commit group's new
//! images of tuple blocks that already have state are written (and synced)
//! before their one home slot is rewritten in place.
//!
//! A group writes the images of its blocks with state to free journal
//! slots (blocks never written go straight to their home slot: a torn first
//! write loses nothing) and syncs once. The home slots are rewritten later,
//! with the next group's writes (before its sync), when the store is idle,
//! at `sync()` or at close (`Committer::place_homes`); readers read the
//! journal images until then. A torn home write is repaired at open from
//! the journal image. A journal slot is therefore *held* from its group's
//! sync until a sync that follows its home write: normally the next
//! group's, so only the last group's slots are held, and a group never
//! writes over them (invariant 1 in `INVARIANTS.md`).
//!
//! A group that needs more slots than are free has the held slots' homes
//! rewritten and syncs first (nothing is held then); one that needs more
//! slots than the journal has moves to a larger journal extent
//! (`Committer`).

use std::collections::BTreeSet;

use crate::format::{MetaExtent, BLOCK_SIZE};

/// The journal extent and which of its slots are held.
#[derive(Debug)]
pub(crate) struct Journal {
    pub extent: MetaExtent,
    /// Slots of the last group: their blocks' home writes are not yet
    /// durable.
    held: BTreeSet<u32>,
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
            held: BTreeSet::new(),
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
        self.slots() as usize - self.held.union(&self.pinned).count()
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
            if !self.held.contains(&at) && !self.pinned.contains(&at) {
                out.push(at);
            }
            at = (at + 1) % total;
        }
        self.cursor = at;
        Some(out)
    }

    /// A sync completed after the last group's home writes: its slots are
    /// free again.
    pub fn synced(&mut self) {
        self.held.clear();
    }

    /// The slots a group just wrote (and synced): held until the next sync.
    /// Recovery's pinned slots are free from now on.
    pub fn hold(&mut self, slots: &[u32]) {
        self.pinned.clear();
        self.held.extend(slots.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_never_takes_the_slots_the_last_group_holds() {
        let mut j = Journal::new(MetaExtent {
            start: 100,
            order: 3,
        });
        assert_eq!(j.slots(), 8);
        let a = j.pick(5).unwrap();
        j.synced();
        j.hold(&a);
        // Three are free; the held five are never handed out.
        assert!(j.pick(4).is_none());
        let b = j.pick(3).unwrap();
        assert!(b.iter().all(|s| !a.contains(s)), "{a:?} {b:?}");
        // The next group's sync frees the first group's slots.
        j.synced();
        j.hold(&b);
        let c = j.pick(5).unwrap();
        assert!(c.iter().all(|s| !b.contains(s)), "{b:?} {c:?}");
        assert_eq!(j.offset(2), (100 + 2) * BLOCK_SIZE as u64);
    }
}
