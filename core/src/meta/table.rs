//! The committer's view of the tuple blocks: which entries each block holds,
//! how full it is, and which of its two slots the next write goes to.
//!
//! Owned by the commit thread alone; readers never touch it.

use std::collections::BTreeSet;

use crate::format::{MetaExtent, BLOCK_SIZE};
use crate::index::EntryId;
use crate::meta::block::BLOCK_PAYLOAD;

/// Blocks with at least this much free payload are candidates for new tuples.
const MIN_ROOM: usize = 128;
/// How many candidate blocks a placement looks at before asking for growth.
const PLACE_SCAN: usize = 64;

/// One logical tuple block.
#[derive(Debug)]
pub(crate) struct BlockState {
    /// Byte offset of slot 0; slot 1 follows it.
    pub offset: u64,
    /// Slot the next write goes to: never the one holding the last synced
    /// state, so a torn write cannot destroy it.
    pub next_slot: u8,
    /// Entries whose tuples live here.
    pub members: Vec<EntryId>,
    /// Encoded tuples of superseded versions that moved to another block.
    /// They stay until the new block is durable, then go (see commit.rs).
    pub stale: Vec<Vec<u8>>,
    /// Payload bytes used by members and stale tuples.
    pub used: usize,
}

impl BlockState {
    pub fn free(&self) -> usize {
        BLOCK_PAYLOAD - self.used
    }

    pub fn slot_offset(&self, slot: u8) -> u64 {
        self.offset + slot as u64 * BLOCK_SIZE as u64
    }
}

/// All tuple blocks of the store, in extent order.
#[derive(Debug, Default)]
pub(crate) struct TupleBlockTable {
    pub blocks: Vec<BlockState>,
    with_room: BTreeSet<u32>,
    /// Block that took the last new tuple: filled first so a group touches
    /// as few blocks as possible.
    last_placed: Option<u32>,
}

impl TupleBlockTable {
    /// Adds the blocks of a new (zeroed) extent.
    pub fn add_extent(&mut self, extent: MetaExtent) {
        for i in 0..extent.tuple_blocks() {
            let offset = (extent.start + 2 * i) * BLOCK_SIZE as u64;
            self.push_block(offset, 0);
        }
    }

    /// Adds one block found at open; `next_slot` is the slot not holding its
    /// state.
    pub fn push_block(&mut self, offset: u64, next_slot: u8) -> u32 {
        let no = self.blocks.len() as u32;
        self.blocks.push(BlockState {
            offset,
            next_slot,
            members: Vec::new(),
            stale: Vec::new(),
            used: 0,
        });
        self.with_room.insert(no);
        no
    }

    /// Finds a block with `len` bytes free, or `None` when the metadata area
    /// must grow first.
    pub fn place(&self, len: usize) -> Option<u32> {
        if let Some(b) = self.last_placed {
            if self.blocks[b as usize].free() >= len {
                return Some(b);
            }
        }
        self.with_room
            .iter()
            .take(PLACE_SCAN)
            .copied()
            .find(|&b| self.blocks[b as usize].free() >= len)
    }

    /// Records that `id` (tuple of `len` bytes) now lives in `block`.
    pub fn add(&mut self, block: u32, id: EntryId, len: usize) {
        let b = &mut self.blocks[block as usize];
        b.members.push(id);
        b.used += len;
        debug_assert!(b.used <= BLOCK_PAYLOAD);
        self.last_placed = Some(block);
        self.refresh(block);
    }

    /// Records that `id`'s tuple (`len` bytes) left `block`.
    pub fn remove(&mut self, block: u32, id: EntryId, len: usize) {
        let b = &mut self.blocks[block as usize];
        if let Some(i) = b.members.iter().position(|&m| m == id) {
            b.members.swap_remove(i);
            b.used -= len;
        }
        self.refresh(block);
    }

    /// Keeps a superseded tuple's bytes in `block` until they may go.
    pub fn keep_stale(&mut self, block: u32, encoded: Vec<u8>) {
        let b = &mut self.blocks[block as usize];
        b.used += encoded.len();
        b.stale.push(encoded);
        self.refresh(block);
    }

    /// Drops every stale tuple of `block`.
    pub fn clear_stale(&mut self, block: u32) {
        let b = &mut self.blocks[block as usize];
        let freed: usize = b.stale.iter().map(Vec::len).sum();
        b.stale.clear();
        b.used -= freed;
        self.refresh(block);
    }

    fn refresh(&mut self, block: u32) {
        if self.blocks[block as usize].free() >= MIN_ROOM {
            self.with_room.insert(block);
        } else {
            self.with_room.remove(&block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_prefers_last_block_and_tracks_room() {
        let mut t = TupleBlockTable::default();
        t.add_extent(MetaExtent {
            start: 10,
            order: 2,
        });
        assert_eq!(t.blocks.len(), 2);
        assert_eq!(t.blocks[1].offset, 12 * BLOCK_SIZE as u64);
        let b = t.place(1000).unwrap();
        t.add(b, 1, 1000);
        assert_eq!(t.place(1000), Some(b));
        t.add(b, 2, BLOCK_PAYLOAD - 1000 - 50);
        let other = t.place(100).unwrap();
        assert_ne!(other, b);
        t.remove(b, 2, BLOCK_PAYLOAD - 1000 - 50);
        assert_eq!(t.blocks[b as usize].used, 1000);
        t.keep_stale(b, vec![0; 300]);
        t.clear_stale(b);
        assert_eq!(t.blocks[b as usize].used, 1000);
    }
}
