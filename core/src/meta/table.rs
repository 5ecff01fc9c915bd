//! The committer's view of the tuple blocks: how full each is, where the
//! next write of each goes (which of its two slots, or through the journal
//! to its one home slot), and a bounded cache of block contents.
//!
//! Keys live in RAM only in the index; a block's tuples are kept here only
//! while the block is being changed or was changed recently. A block whose
//! content is not cached is read back from its current slot before it is
//! changed (read-modify-write), so memory stays bounded by the cache.
//!
//! Owned by the commit lead alone (`store::commit`); readers never touch it.

use std::collections::{BTreeSet, HashMap};

use crate::format::{Layout, MetaExtent, BLOCK_SIZE};
use crate::meta::block::BLOCK_PAYLOAD;
use crate::meta::tuple::Tuple;

/// `BLOCK_PAYLOAD` as the table keeps it (it fits: 4032).
const PAYLOAD: u16 = BLOCK_PAYLOAD as u16;

/// Block contents kept decoded between groups.
pub(crate) const IMAGE_CACHE: usize = 256;

/// One logical tuple block.
#[derive(Debug)]
pub(crate) struct BlockState {
    /// Byte offset of slot 0; slot 1 follows it (two-slot stores). In a
    /// journaled store, the block's one home slot.
    pub offset: u64,
    /// Two-slot stores: the slot the next write goes to, never the one
    /// holding the last synced state, so a torn write cannot destroy it.
    /// Always 0 in a journaled store.
    pub next_slot: u8,
    /// Whether the block has state on the device: the other slot holds it
    /// (two-slot stores), or its home slot was written (journaled stores,
    /// whose next writes of it then go through the journal first).
    pub has_state: bool,
    /// A journaled store's block (one home slot).
    pub journaled: bool,
    /// Payload bytes used by the block's tuples (at most `BLOCK_PAYLOAD`,
    /// 4032: two bytes, as there is one of these per block).
    pub used: u16,
    /// The free space under which the block is filed in `by_free`.
    filed_free: u16,
}

impl BlockState {
    pub fn free(&self) -> usize {
        BLOCK_PAYLOAD.saturating_sub(self.used as usize)
    }

    pub fn slot_offset(&self, slot: u8) -> u64 {
        self.offset + slot as u64 * BLOCK_SIZE as u64
    }

    /// Offset of the slot holding the current state (once it is written).
    pub fn current_offset(&self) -> u64 {
        if self.journaled {
            self.offset
        } else {
            self.slot_offset(self.next_slot ^ 1)
        }
    }

    /// Offset of the slot the next write goes to: the spare slot, or a
    /// journaled store's home slot.
    pub fn write_offset(&self) -> u64 {
        if self.journaled {
            self.offset
        } else {
            self.slot_offset(self.next_slot)
        }
    }
}

/// All tuple blocks of the store, in extent order.
#[derive(Debug)]
pub(crate) struct TupleBlockTable {
    pub layout: Layout,
    pub blocks: Vec<BlockState>,
    /// Every block by (free bytes, number): placement is a best-fit lookup.
    by_free: BTreeSet<(u16, u32)>,
    /// Block that took the last new tuple: filled first so a group touches
    /// as few blocks as possible.
    last_placed: Option<u32>,
    /// Decoded contents of recently used blocks: trimmed to `IMAGE_CACHE`
    /// when a group is written (more while an open group holds more).
    pub images: HashMap<u32, Vec<Tuple>>,
    /// When each cached image was last used (`touch_image`): trimming
    /// keeps the most recently used, so a working set of blocks that fits
    /// is never read back from the device.
    used: HashMap<u32, u64>,
    clock: u64,
}

impl TupleBlockTable {
    pub fn new(layout: Layout) -> Self {
        TupleBlockTable {
            layout,
            blocks: Vec::new(),
            by_free: BTreeSet::new(),
            last_placed: None,
            images: HashMap::new(),
            used: HashMap::new(),
            clock: 0,
        }
    }

    /// Adds the blocks of a new (zeroed) extent.
    pub fn add_extent(&mut self, extent: MetaExtent) {
        let step = self.layout.slots_per_block();
        for i in 0..extent.tuple_blocks(self.layout) {
            let offset = (extent.start + step * i) * BLOCK_SIZE as u64;
            let no = self.push_block(offset, 0, false);
            self.images.insert(no, Vec::new());
        }
    }

    /// Adds one block found at open; `next_slot` is the slot not holding its
    /// state, `has_state` whether the other one does.
    pub fn push_block(&mut self, offset: u64, next_slot: u8, has_state: bool) -> u32 {
        let no = self.blocks.len() as u32;
        self.blocks.push(BlockState {
            offset,
            next_slot,
            has_state,
            journaled: matches!(self.layout, Layout::Journaled(_)),
            used: 0,
            filed_free: PAYLOAD,
        });
        self.by_free.insert((PAYLOAD, no));
        no
    }

    /// Adds blocks whose state is known (an index image's, a checkpoint's),
    /// in order: (offset, next slot, has state, payload bytes used) each,
    /// filed by free space in one bulk build (a block at a time costs a
    /// tree insert and a move each).
    pub fn push_described(&mut self, blocks: impl IntoIterator<Item = (u64, u8, bool, u16)>) {
        let first = self.blocks.len() as u32;
        let journaled = matches!(self.layout, Layout::Journaled(_));
        let mut filed = Vec::new();
        for (i, (offset, next_slot, has_state, used)) in blocks.into_iter().enumerate() {
            let used = used.min(PAYLOAD);
            let free = PAYLOAD - used;
            self.blocks.push(BlockState {
                offset,
                next_slot,
                has_state,
                journaled,
                used,
                filed_free: free,
            });
            filed.push((free, first + i as u32));
        }
        filed.sort_unstable();
        if self.by_free.is_empty() {
            self.by_free = filed.into_iter().collect();
        } else {
            self.by_free.extend(filed);
        }
    }

    /// Finds a block with `len` bytes free, or `None` when the metadata area
    /// must grow first.
    pub fn place(&self, len: usize) -> Option<u32> {
        if let Some(b) = self.last_placed {
            if self.block(b).is_some_and(|s| s.free() >= len) {
                return Some(b);
            }
        }
        // Best fit: the fullest block that still takes the tuple.
        let len = u16::try_from(len).ok()?;
        self.by_free.range((len, 0)..).next().map(|&(_, b)| b)
    }

    /// How many blocks have `len` bytes free, counted up to `up_to`.
    pub fn blocks_with_room(&self, len: usize, up_to: usize) -> usize {
        let Ok(len) = u16::try_from(len) else {
            return 0;
        };
        self.by_free.range((len, 0)..).take(up_to).count()
    }

    /// The block numbered `no`. Blocks are never removed, so every number
    /// this table handed out (`push_block`, `place`) has one.
    pub fn block(&self, no: u32) -> Option<&BlockState> {
        self.blocks.get(no as usize)
    }

    /// The block numbered `no`, mutably (see [`Self::block`]).
    pub fn block_mut(&mut self, no: u32) -> Option<&mut BlockState> {
        self.blocks.get_mut(no as usize)
    }

    /// Accounts `len` more payload bytes in `block` (a number this table
    /// handed out; any other is ignored).
    pub fn grow_used(&mut self, block: u32, len: usize, placed: bool) {
        let Some(b) = self.block_mut(block) else {
            debug_assert!(false, "tuple block {block} is not in the table");
            return;
        };
        b.used = b
            .used
            .saturating_add(u16::try_from(len).unwrap_or(u16::MAX));
        if placed {
            self.last_placed = Some(block);
        }
        self.refresh(block);
    }

    /// Accounts `len` fewer payload bytes in `block` (a number this table
    /// handed out; any other is ignored).
    pub fn shrink_used(&mut self, block: u32, len: usize) {
        let Some(b) = self.block_mut(block) else {
            debug_assert!(false, "tuple block {block} is not in the table");
            return;
        };
        b.used = b
            .used
            .saturating_sub(u16::try_from(len).unwrap_or(u16::MAX));
        self.refresh(block);
    }

    /// Notes that `block`'s cached image is in use now.
    pub fn touch_image(&mut self, block: u32) {
        self.clock += 1;
        self.used.insert(block, self.clock);
    }

    /// Drops cached contents beyond the cache size, least recently used
    /// first (never touched counts as oldest), keeping `keep`.
    pub fn trim_images(&mut self, keep: &BTreeSet<u32>) {
        if self.images.len() <= IMAGE_CACHE {
            return;
        }
        let excess = self.images.len() - IMAGE_CACHE;
        let mut by_use: Vec<(u64, u32)> = self
            .images
            .keys()
            .filter(|b| !keep.contains(b))
            .map(|&b| (self.used.get(&b).copied().unwrap_or(0), b))
            .collect();
        if excess < by_use.len() {
            by_use.select_nth_unstable(excess);
            by_use.truncate(excess);
        }
        for (_, b) in by_use {
            self.images.remove(&b);
            self.used.remove(&b);
        }
    }

    fn refresh(&mut self, block: u32) {
        let Some(b) = self.blocks.get_mut(block as usize) else {
            return;
        };
        let free = b.free();
        let free = u16::try_from(free).unwrap_or(PAYLOAD);
        if free != b.filed_free {
            self.by_free.remove(&(b.filed_free, block));
            self.by_free.insert((free, block));
            b.filed_free = free;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_prefers_last_block_and_tracks_room() {
        let mut t = TupleBlockTable::new(Layout::Paired);
        t.add_extent(MetaExtent {
            start: 10,
            order: 2,
        });
        assert_eq!(t.blocks.len(), 2);
        assert_eq!(t.blocks[1].offset, 12 * BLOCK_SIZE as u64);
        let b = t.place(1000).unwrap();
        t.grow_used(b, 1000, true);
        assert_eq!(t.place(1000), Some(b));
        t.grow_used(b, BLOCK_PAYLOAD - 1000 - 50, true);
        let other = t.place(100).unwrap();
        assert_ne!(other, b);
        t.shrink_used(b, BLOCK_PAYLOAD - 1000 - 50);
        assert_eq!(t.blocks[b as usize].used, 1000);
    }

    #[test]
    fn image_cache_is_bounded_and_keeps_dirty_blocks() {
        let mut t = TupleBlockTable::new(Layout::Paired);
        t.add_extent(MetaExtent {
            start: 0,
            order: 10,
        });
        assert_eq!(t.images.len(), 512);
        let keep: BTreeSet<u32> = [0, 1, 511].into_iter().collect();
        // Used in this order: 300..=310 last, and 5 before them.
        for b in [5].into_iter().chain(300..=310) {
            t.touch_image(b);
        }
        t.trim_images(&keep);
        assert_eq!(t.images.len(), IMAGE_CACHE);
        assert!(keep.iter().all(|b| t.images.contains_key(b)));
        assert!(t.images.contains_key(&5) && (300..=310).all(|b| t.images.contains_key(&b)));
        // Every image used, in block order from 100: the least recently
        // used go first.
        for b in (100..512).chain(0..100) {
            t.images.entry(b).or_default();
            t.touch_image(b);
        }
        t.trim_images(&keep);
        assert_eq!(t.images.len(), IMAGE_CACHE);
        let mut kept: Vec<u32> = t.images.keys().copied().collect();
        kept.sort_unstable();
        // `keep` (0, 1, 511) and the 253 others used last: 2..100 and
        // 356..511.
        let expected: Vec<u32> = (0..100).chain(356..512).collect();
        assert_eq!(kept, expected);
    }
}
