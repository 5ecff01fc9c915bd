//! Tuple block slots: the unit of every metadata write.
//!
//! A logical tuple block owns two physical slots (adjacent blocks). Writes
//! alternate between them, so while one slot is being written the other
//! still holds the block's last synced state; a write torn at any byte
//! therefore loses nothing that was acknowledged. At open the valid slot
//! with the larger sequence number is the block's state.
//!
//! Slot layout (one `BLOCK_SIZE` block, little endian):
//!
//! ```text
//! 0  magic u32 "BCTB"     4  block_no u32     8  store_id u64
//! 16 seq u64              24 count u16        26 payload_len u16
//! 28 crc32c u32 over bytes [0,28) ++ [32,48) ++ payload
//! 32 group_first u64: first version assigned by the group that wrote it
//! 40 group_blocks u32: how many blocks that group wrote   44 reserved u32
//! 48 payload: `count` tuples back to back
//!
//! `group_blocks` makes a group atomic: at open, a newest group with fewer
//! landed slots than it declares was cut before its sync and is rolled back
//! as a whole (each of its blocks falls back to its other slot).
//! ```

use crate::error::{Error, ErrorKind, Result};
use crate::format::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, BLOCK_SIZE};
use crate::meta::tuple::Tuple;

/// Slot magic.
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"BCTB");
/// Header bytes before the tuples.
pub const BLOCK_HEADER_LEN: usize = 48;
/// Room for tuples in one block.
pub const BLOCK_PAYLOAD: usize = BLOCK_SIZE - BLOCK_HEADER_LEN;

/// Identity a slot must carry to belong to this place of this store.
#[derive(Debug, Clone, Copy)]
pub struct SlotIdentity {
    /// Random id of the store, from its superblock.
    pub store_id: u64,
    /// Logical tuple block number (its place in the metadata area).
    pub block_no: u32,
}

/// What a slot records about the commit group that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupStamp {
    /// The group's sequence (its last version).
    pub seq: u64,
    /// The group's first version.
    pub first: u64,
    /// How many tuple blocks the group wrote.
    pub blocks: u32,
}

/// Encodes a slot image from already encoded tuples.
pub fn encode_slot(
    id: SlotIdentity,
    stamp: GroupStamp,
    count: usize,
    payload: &[u8],
    out: &mut [u8],
) {
    assert!(payload.len() <= BLOCK_PAYLOAD && out.len() == BLOCK_SIZE);
    out.fill(0);
    put_u32(out, 0, BLOCK_MAGIC);
    put_u32(out, 4, id.block_no);
    put_u64(out, 8, id.store_id);
    put_u64(out, 16, stamp.seq);
    put_u16(out, 24, count as u16);
    put_u16(out, 26, payload.len() as u16);
    put_u64(out, 32, stamp.first);
    put_u32(out, 40, stamp.blocks);
    out[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload.len()].copy_from_slice(payload);
    let crc = slot_crc(out, payload.len());
    put_u32(out, 28, crc);
}

fn slot_crc(b: &[u8], payload_len: usize) -> u32 {
    let head = crc32c::crc32c(&b[..28]);
    crc32c::crc32c_append(head, &b[32..BLOCK_HEADER_LEN + payload_len])
}

/// What one physical slot holds.
#[derive(Debug)]
pub enum SlotContent {
    /// Never written (all zero): an empty block.
    Empty,
    /// Not a valid slot of this block: torn write, foreign bytes, flipped bit.
    Invalid(String),
    /// A valid slot.
    Valid {
        /// Sequence of the group that wrote it.
        seq: u64,
        /// First version that group assigned: tuples at or above it are
        /// that group's own commits.
        group_first: u64,
        /// How many blocks that group wrote.
        group_blocks: u32,
        /// Its tuples, in slot order.
        tuples: Vec<Tuple>,
    },
}

/// Decodes one slot. Never panics, whatever the bytes.
pub fn decode_slot(id: SlotIdentity, b: &[u8]) -> SlotContent {
    if b.len() < BLOCK_SIZE {
        return SlotContent::Invalid("slot truncated".into());
    }
    if b.iter().all(|&x| x == 0) {
        return SlotContent::Empty;
    }
    if get_u32(b, 0) != BLOCK_MAGIC {
        return SlotContent::Invalid("bad magic".into());
    }
    let payload_len = get_u16(b, 26) as usize;
    if payload_len > BLOCK_PAYLOAD {
        return SlotContent::Invalid("payload length out of range".into());
    }
    if get_u32(b, 28) != slot_crc(b, payload_len) {
        return SlotContent::Invalid("checksum mismatch".into());
    }
    if get_u64(b, 8) != id.store_id || get_u32(b, 4) != id.block_no {
        return SlotContent::Invalid("slot belongs to another store or place".into());
    }
    let seq = get_u64(b, 16);
    let group_first = get_u64(b, 32);
    let group_blocks = get_u32(b, 40);
    let count = get_u16(b, 24) as usize;
    let payload = &b[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload_len];
    let mut tuples = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        match Tuple::decode(&payload[at..]) {
            Ok((t, n)) => {
                if t.version > seq {
                    return SlotContent::Invalid("tuple version above block sequence".into());
                }
                tuples.push(t);
                at += n;
            }
            Err(e) => return SlotContent::Invalid(e.message().to_string()),
        }
    }
    if at != payload_len {
        return SlotContent::Invalid("payload length disagrees with tuples".into());
    }
    SlotContent::Valid {
        seq,
        group_first,
        group_blocks,
        tuples,
    }
}

impl SlotContent {
    /// Sequence of a valid slot.
    pub fn seq(&self) -> Option<u64> {
        match self {
            SlotContent::Valid { seq, .. } => Some(*seq),
            _ => None,
        }
    }
}

/// Picks which slot holds a logical block's state: the valid one with the
/// larger sequence; `None` for an empty block (never written, or its first
/// write torn before it was acknowledged); `Corrupt` when both are damaged.
pub fn choose_slot(slots: &[SlotContent; 2]) -> Result<Option<usize>> {
    use SlotContent::*;
    match slots {
        [Valid { seq: sa, .. }, Valid { seq: sb, .. }] => {
            if sa == sb {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    "both slots of a tuple block carry the same sequence",
                ));
            }
            Ok(Some(if sa > sb { 0 } else { 1 }))
        }
        [Valid { .. }, _] => Ok(Some(0)),
        [_, Valid { .. }] => Ok(Some(1)),
        [Empty, Empty] | [Empty, Invalid(_)] | [Invalid(_), Empty] => Ok(None),
        [Invalid(ea), Invalid(eb)] => Err(Error::new(
            ErrorKind::Corrupt,
            format!("both slots of a tuple block are damaged ({ea}; {eb})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::tuple::{Piece, TupleValue};

    const ID: SlotIdentity = SlotIdentity {
        store_id: 99,
        block_no: 5,
    };

    fn tuples() -> Vec<Tuple> {
        (0..10)
            .map(|i| Tuple {
                key: format!("key-{i}").into_bytes().into(),
                version: i + 1,
                created_micros: 0,
                size: 4096,
                value: TupleValue::Heap {
                    pieces: vec![Piece {
                        start: 100 + i,
                        order: 0,
                    }],
                    crc: None,
                },
            })
            .collect()
    }

    fn slot(seq: u64) -> Vec<u8> {
        let mut payload = vec![];
        for t in tuples() {
            t.encode_into(&mut payload);
        }
        let mut out = vec![0u8; BLOCK_SIZE];
        let stamp = GroupStamp {
            seq,
            first: seq,
            blocks: 1,
        };
        encode_slot(ID, stamp, 10, &payload, &mut out);
        out
    }

    #[test]
    fn slot_round_trips() {
        match decode_slot(ID, &slot(20)) {
            SlotContent::Valid { seq, tuples: t, .. } => {
                assert_eq!(seq, 20);
                assert_eq!(t, tuples());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn any_flipped_byte_invalidates_slot() {
        let s = slot(20);
        for at in (0..BLOCK_HEADER_LEN + 300).step_by(7) {
            let mut b = s.clone();
            b[at] ^= 0x10;
            assert!(
                matches!(decode_slot(ID, &b), SlotContent::Invalid(_)),
                "byte {at}"
            );
        }
    }

    #[test]
    fn slot_of_another_store_is_invalid() {
        let other = SlotIdentity {
            store_id: 1,
            block_no: 5,
        };
        assert!(matches!(
            decode_slot(other, &slot(3)),
            SlotContent::Invalid(_)
        ));
    }

    #[test]
    fn torn_write_keeps_previous_slot() {
        let old = slot(20);
        let new = slot(30);
        for tear in (1..BLOCK_SIZE).step_by(97) {
            // The new image was written over an older copy (seq 10) of slot A.
            let mut torn = slot(10);
            torn[..tear].copy_from_slice(&new[..tear]);
            let slots = [decode_slot(ID, &torn), decode_slot(ID, &old)];
            let winner = choose_slot(&slots).unwrap().unwrap();
            let SlotContent::Valid { seq, tuples: t, .. } = &slots[winner] else {
                panic!("winner is not valid")
            };
            assert!(*seq == 20 || *seq == 30, "tear at {tear} gave seq {seq}");
            assert_eq!(t, &tuples());
        }
    }

    #[test]
    fn truncated_slot_is_invalid() {
        assert!(matches!(
            decode_slot(ID, &slot(1)[..100]),
            SlotContent::Invalid(_)
        ));
    }
}
