//! The change map: which tuple blocks were written since the index image's
//! stamp (format 7; `core/FORMAT.md`, "Change map"). With it the image is a
//! checkpoint that stays named while the store runs: an open after a crash
//! loads the image and reads only the blocks the map marks (and those the
//! metadata journal names), not every tuple block.
//!
//! One bit per tuple block, in map blocks of 4 KiB, each with the store's
//! id, the image's stamp, its own index and a checksum. A map is written
//! whole (all bits clear) with its image; from then on bits are only set.
//!
//! Invariant 10 (derived state costs time, never objects), as the commit
//! path keeps it (`store::commit::checkpoint`):
//! * a block written straight to its home slot (its first write) is marked
//!   and the mark synced *before* that write is issued, so no home slot
//!   can hold state newer than the image unless the map marks it;
//! * a block written through the journal is marked by a write issued with
//!   the group, before the group's one sync: recovery reads the whole
//!   journal anyway, so an image that landed without its mark is still
//!   found, and once the group is synced its mark is durable, before the
//!   journal slot can be reused (its home then being the only copy);
//! * any map block that does not check out (torn, damaged, another
//!   store's, another image's) makes open scan every tuple block, reported.

use crate::format::{get_u32, get_u64, RecordWriter, BLOCK_SIZE};
use crate::io::AlignedBuf;
use crate::meta::tuple::Piece;

/// Magic of a change map block.
pub(crate) const MAP_MAGIC: &[u8; 8] = b"BCCHMAP1";

const M_STORE_ID: usize = 8;
const M_STAMP: usize = 16;
const M_INDEX: usize = 24;
const M_CRC: usize = 28;
/// Where a map block's bits start.
const M_BITS: usize = 32;
/// Bytes of bits per map block.
const BITS_LEN: usize = BLOCK_SIZE - M_BITS;
/// Tuple blocks one map block covers: 32,512.
pub(crate) const BLOCKS_PER_MAP_BLOCK: usize = BITS_LEN * 8;

/// The change map of one image, as the committer keeps it in memory.
#[derive(Debug, Clone)]
pub(crate) struct ChangeMap {
    /// Its piece (named by the superblock).
    pub piece: Piece,
    store_id: u64,
    /// The image's stamp (the clean sequence it reflects).
    pub stamp: u64,
    /// Every map block's bits, back to back.
    bits: Vec<u8>,
    /// Tuple blocks marked.
    marked: usize,
}

/// The buddy order of a map for a store of `blocks` tuple blocks: room for
/// twice as many, so the metadata area can grow a while before the map
/// must be replaced (a block beyond it ends the checkpoint).
pub(crate) fn map_order(blocks: usize) -> u8 {
    let need = (blocks.saturating_mul(2))
        .div_ceil(BLOCKS_PER_MAP_BLOCK)
        .max(1);
    need.next_power_of_two().trailing_zeros() as u8
}

impl ChangeMap {
    /// An empty map (no block marked) in `piece`, for the image stamped
    /// `stamp`.
    pub fn new(piece: Piece, store_id: u64, stamp: u64) -> ChangeMap {
        ChangeMap {
            piece,
            store_id,
            stamp,
            bits: vec![0; (1usize << piece.order) * BITS_LEN],
            marked: 0,
        }
    }

    /// Tuple blocks the map can mark.
    pub fn capacity(&self) -> usize {
        self.bits.len() * 8
    }

    /// Tuple blocks marked.
    pub fn marked_count(&self) -> usize {
        self.marked
    }

    pub fn is_marked(&self, block: u32) -> bool {
        let b = block as usize;
        self.bits
            .get(b / 8)
            .is_some_and(|byte| byte & (1 << (b % 8)) != 0)
    }

    /// Marks `block`; the index of the map block that changed, `None` when
    /// it was marked already. `Err` when the map cannot hold it.
    pub fn mark(&mut self, block: u32) -> Result<Option<usize>, ()> {
        let b = block as usize;
        let byte = self.bits.get_mut(b / 8).ok_or(())?;
        let bit = 1u8 << (b % 8);
        if *byte & bit != 0 {
            return Ok(None);
        }
        *byte |= bit;
        self.marked += 1;
        Ok(Some(b / BLOCKS_PER_MAP_BLOCK))
    }

    /// Every marked block, ascending.
    pub fn marked(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(i, &byte)| {
            (0..8)
                .filter(move |k| byte & (1 << k) != 0)
                .map(move |k| (i * 8 + k) as u32)
        })
    }

    /// Map block `i` encoded, and where it goes.
    pub fn encode_block(&self, i: usize) -> (AlignedBuf, u64) {
        let mut b = Vec::with_capacity(BLOCK_SIZE);
        let mut w = RecordWriter::new(&mut b);
        w.bytes(MAP_MAGIC);
        w.at(M_STORE_ID).u64(self.store_id);
        w.at(M_STAMP).u64(self.stamp);
        w.at(M_INDEX).u32(i as u32);
        w.at(M_BITS);
        let bits = self
            .bits
            .get(i * BITS_LEN..(i + 1) * BITS_LEN)
            .unwrap_or_default();
        w.bytes(bits);
        let crc = block_crc(&b);
        if let Some(c) = b.get_mut(M_CRC..M_CRC + 4) {
            c.copy_from_slice(&crc.to_le_bytes());
        }
        let at = self.piece.offset() + (i * BLOCK_SIZE) as u64;
        (AlignedBuf::copy_from(&b), at)
    }

    /// Every map block encoded, with where each goes.
    pub fn encode_all(&self) -> Vec<(AlignedBuf, u64)> {
        (0..1usize << self.piece.order)
            .map(|i| self.encode_block(i))
            .collect()
    }

    /// The map in `bytes` (its whole piece, as read); why it cannot serve
    /// otherwise.
    pub fn decode(
        bytes: &[u8],
        piece: Piece,
        store_id: u64,
        stamp: u64,
    ) -> Result<ChangeMap, String> {
        let mut map = ChangeMap::new(piece, store_id, stamp);
        let blocks = 1usize << piece.order;
        if bytes.len() < blocks * BLOCK_SIZE {
            return Err("change map truncated".into());
        }
        for (i, b) in bytes.chunks_exact(BLOCK_SIZE).take(blocks).enumerate() {
            let why = |m: &str| format!("change map block {i}: {m}");
            if !b.starts_with(MAP_MAGIC) {
                return Err(why("no map magic"));
            }
            if get_u32(b, M_CRC) != Some(block_crc(b)) {
                return Err(why("checksum mismatch"));
            }
            if get_u64(b, M_STORE_ID) != Some(store_id) {
                return Err(why("belongs to another store"));
            }
            if get_u64(b, M_STAMP) != Some(stamp) {
                return Err(why("belongs to another index image"));
            }
            if get_u32(b, M_INDEX) != Some(i as u32) {
                return Err(why("out of place"));
            }
            let (Some(to), Some(from)) = (
                map.bits.get_mut(i * BITS_LEN..(i + 1) * BITS_LEN),
                b.get(M_BITS..),
            ) else {
                return Err(why("truncated"));
            };
            to.copy_from_slice(from);
        }
        map.marked = map.bits.iter().map(|b| b.count_ones() as usize).sum();
        Ok(map)
    }
}

/// CRC32C of a map block but its checksum field.
fn block_crc(b: &[u8]) -> u32 {
    let head = b.get(..M_CRC).unwrap_or_default();
    let rest = b.get(M_CRC + 4..BLOCK_SIZE).unwrap_or_default();
    crc32c::crc32c_append(crc32c::crc32c(head), rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(order: u8) -> Piece {
        Piece { start: 64, order }
    }

    fn bytes(map: &ChangeMap) -> Vec<u8> {
        map.encode_all()
            .into_iter()
            .flat_map(|(b, _)| b.as_slice().to_vec())
            .collect()
    }

    #[test]
    fn marks_round_trip_and_each_mark_names_its_map_block() {
        let mut m = ChangeMap::new(piece(1), 7, 42);
        assert_eq!(m.capacity(), 2 * BLOCKS_PER_MAP_BLOCK);
        assert_eq!(m.mark(3), Ok(Some(0)));
        assert_eq!(m.mark(3), Ok(None));
        assert_eq!(m.mark(BLOCKS_PER_MAP_BLOCK as u32 + 1), Ok(Some(1)));
        assert_eq!(m.mark(2 * BLOCKS_PER_MAP_BLOCK as u32), Err(()));
        let back = ChangeMap::decode(&bytes(&m), piece(1), 7, 42).unwrap();
        assert_eq!(
            back.marked().collect::<Vec<_>>(),
            vec![3, BLOCKS_PER_MAP_BLOCK as u32 + 1]
        );
        assert_eq!(back.marked_count(), 2);
        assert!(back.is_marked(3) && !back.is_marked(4));
    }

    #[test]
    fn a_map_block_that_does_not_check_out_is_refused() {
        let mut m = ChangeMap::new(piece(1), 7, 42);
        m.mark(5).unwrap();
        let good = bytes(&m);
        // Every byte of either block flipped: refused (never fewer marks).
        for at in (0..good.len()).step_by(97) {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert!(
                ChangeMap::decode(&bad, piece(1), 7, 42).is_err(),
                "flip at {at}"
            );
        }
        // Another store's, another image's, or blocks swapped.
        assert!(ChangeMap::decode(&good, piece(1), 8, 42).is_err());
        assert!(ChangeMap::decode(&good, piece(1), 7, 41).is_err());
        let mut swapped = good[BLOCK_SIZE..].to_vec();
        swapped.extend_from_slice(&good[..BLOCK_SIZE]);
        assert!(ChangeMap::decode(&swapped, piece(1), 7, 42).is_err());
        assert!(ChangeMap::decode(&good[..BLOCK_SIZE], piece(1), 7, 42).is_err());
    }

    #[test]
    fn map_block_offsets_match_format_md() {
        crate::format::doc_tables::assert_matches(
            "### Change map",
            &[
                ("MAP_MAGIC", 0, "8"),
                ("M_STORE_ID", M_STORE_ID, "8"),
                ("M_STAMP", M_STAMP, "8"),
                ("M_INDEX", M_INDEX, "4"),
                ("M_CRC", M_CRC, "4"),
                ("M_BITS", M_BITS, &BITS_LEN.to_string()),
            ],
        );
    }

    #[test]
    fn a_map_has_room_for_twice_the_blocks() {
        assert_eq!(map_order(1), 0);
        assert_eq!(map_order(BLOCKS_PER_MAP_BLOCK / 2), 0);
        assert_eq!(map_order(BLOCKS_PER_MAP_BLOCK), 1);
        assert_eq!(map_order(330_000), 5);
    }
}
