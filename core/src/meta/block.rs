//! Tuple block slots: the unit of every metadata write.
//!
//! A logical tuple block owns two physical slots (adjacent blocks). Writes
//! alternate between them, so while one slot is being written the other
//! still holds the block's last synced state; a write torn at any byte
//! therefore loses nothing that was acknowledged. At open the valid slot
//! with the larger sequence number is the block's state.
//!
//! Slot layout, format 2 (one `BLOCK_SIZE` block, little endian):
//!
//! ```text
//! 0  magic u32 "BCT2"     4  block_no u32     8  store_id u64
//! 16 seq u64              24 count u16        26 payload_len u16
//! 28 crc32c u32 over bytes [0,28) ++ [32,48+payload_len) ++ [4088,4096)
//! 32 group_first u64: first version assigned by the group that wrote it
//! 40 group_blocks u32: how many blocks that group wrote
//! 44 group_flags u32: bit 0 ATOMIC (a bulk-load group: all or nothing)
//! 48 payload: `count` tuples back to back (at most 4040 bytes)
//! 4088 seq u64 again
//! ```
//!
//! Format 1 slots (magic "BCTB") have no second sequence and a payload of
//! up to 4048 bytes; they are still read, and written back in format 1 only
//! when their payload does not fit format 2.
//!
//! The second copy of the sequence lets recovery tell what a damaged slot
//! was: one flipped byte cannot change both copies, so a slot whose copies
//! agree says which group wrote it even when its checksum fails, and a slot
//! whose copies disagree is a torn write (new head, old tail or the other
//! way round) or has a damaged copy (see `recovery`).

use crate::error::{Error, ErrorKind, Result};
use crate::format::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, BLOCK_SIZE};
use crate::meta::tuple::Tuple;

/// Slot magic, format 2.
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"BCT2");
/// Slot magic, format 1.
pub const BLOCK_MAGIC_V1: u32 = u32::from_le_bytes(*b"BCTB");
/// Header bytes before the tuples.
pub const BLOCK_HEADER_LEN: usize = 48;
/// Where the second copy of the sequence lives (format 2).
const SEQ_COPY: usize = BLOCK_SIZE - 8;
/// Room for tuples in one format-2 slot.
pub const BLOCK_PAYLOAD: usize = SEQ_COPY - BLOCK_HEADER_LEN;
/// Room for tuples in one format-1 slot.
pub const BLOCK_PAYLOAD_V1: usize = BLOCK_SIZE - BLOCK_HEADER_LEN;
/// Group flag: the group is all-or-nothing (bulk load).
pub const GROUP_ATOMIC: u32 = 1;

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
    /// `GROUP_ATOMIC` or 0.
    pub flags: u32,
}

/// Encodes a slot image from already encoded tuples: format 2 when the
/// payload fits, else format 1 (a block carried over from a format-1 store).
pub fn encode_slot(
    id: SlotIdentity,
    stamp: GroupStamp,
    count: usize,
    payload: &[u8],
    out: &mut [u8],
) {
    assert!(payload.len() <= BLOCK_PAYLOAD_V1 && out.len() == BLOCK_SIZE);
    let v2 = payload.len() <= BLOCK_PAYLOAD;
    out.fill(0);
    put_u32(out, 0, if v2 { BLOCK_MAGIC } else { BLOCK_MAGIC_V1 });
    put_u32(out, 4, id.block_no);
    put_u64(out, 8, id.store_id);
    put_u64(out, 16, stamp.seq);
    put_u16(out, 24, count as u16);
    put_u16(out, 26, payload.len() as u16);
    put_u64(out, 32, stamp.first);
    put_u32(out, 40, stamp.blocks);
    put_u32(out, 44, stamp.flags);
    out[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload.len()].copy_from_slice(payload);
    if v2 {
        put_u64(out, SEQ_COPY, stamp.seq);
    }
    let crc = slot_crc(out, payload.len(), v2);
    put_u32(out, 28, crc);
}

fn slot_crc(b: &[u8], payload_len: usize, v2: bool) -> u32 {
    let head = crc32c::crc32c(&b[..28]);
    let body = crc32c::crc32c_append(head, &b[32..BLOCK_HEADER_LEN + payload_len]);
    if v2 {
        crc32c::crc32c_append(body, &b[SEQ_COPY..])
    } else {
        body
    }
}

/// What one physical slot holds.
#[derive(Debug)]
pub enum SlotContent {
    /// Never written (all zero): an empty block.
    Empty,
    /// Not a valid slot of this block: torn write, foreign bytes, flipped bit.
    Invalid {
        /// What is wrong, for messages.
        why: String,
        /// The sequence the slot still claims, when it can be read: both
        /// copies agree (format 2) and magic, store id and block number are
        /// intact. `None` when nothing can be read from it.
        seq: Option<u64>,
        /// The two sequence copies when they differ (format 2): a torn
        /// write or one damaged copy.
        split: Option<(u64, u64)>,
    },
    /// A valid slot.
    Valid {
        /// Sequence of the group that wrote it.
        seq: u64,
        /// First version that group assigned: tuples at or above it are
        /// that group's own commits.
        group_first: u64,
        /// How many blocks that group wrote.
        group_blocks: u32,
        /// The group's flags (`GROUP_ATOMIC`).
        group_flags: u32,
        /// Its tuples, in slot order.
        tuples: Vec<Tuple>,
    },
}

/// Decodes one slot. Never panics, whatever the bytes.
pub fn decode_slot(id: SlotIdentity, b: &[u8]) -> SlotContent {
    if b.len() < BLOCK_SIZE {
        return invalid("slot truncated", None, None);
    }
    if b.iter().all(|&x| x == 0) {
        return SlotContent::Empty;
    }
    let magic = get_u32(b, 0);
    let v2 = magic == BLOCK_MAGIC;
    let ours = get_u64(b, 8) == id.store_id && get_u32(b, 4) == id.block_no;
    let seq = get_u64(b, 16);
    // What a damaged slot still tells: its sequence, when both copies
    // agree (one flipped byte cannot forge that), or both copies. Read even
    // when the magic or the identity is damaged; not from format-1 slots,
    // which have no second copy.
    let (claim, split) = if magic == BLOCK_MAGIC_V1 {
        (None, None)
    } else if get_u64(b, SEQ_COPY) == seq {
        (Some(seq), None)
    } else {
        (None, Some((seq, get_u64(b, SEQ_COPY))))
    };
    if !v2 && magic != BLOCK_MAGIC_V1 {
        return invalid("bad magic", claim, split);
    }
    let room = if v2 { BLOCK_PAYLOAD } else { BLOCK_PAYLOAD_V1 };
    let payload_len = get_u16(b, 26) as usize;
    if payload_len > room {
        return invalid("payload length out of range", claim, split);
    }
    if get_u32(b, 28) != slot_crc(b, payload_len, v2) {
        return invalid("checksum mismatch", claim, split);
    }
    if !ours {
        return invalid("slot belongs to another store or place", claim, split);
    }
    let group_first = get_u64(b, 32);
    let group_blocks = get_u32(b, 40);
    let group_flags = get_u32(b, 44);
    let count = get_u16(b, 24) as usize;
    let payload = &b[BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload_len];
    let mut tuples = Vec::with_capacity(count);
    let mut at = 0;
    for _ in 0..count {
        match Tuple::decode(&payload[at..]) {
            Ok((t, n)) => {
                if t.version > seq {
                    return invalid("tuple version above block sequence", Some(seq), None);
                }
                tuples.push(t);
                at += n;
            }
            Err(e) => return invalid(e.message(), Some(seq), None),
        }
    }
    if at != payload_len {
        return invalid("payload length disagrees with tuples", Some(seq), None);
    }
    SlotContent::Valid {
        seq,
        group_first,
        group_blocks,
        group_flags,
        tuples,
    }
}

fn invalid(why: &str, seq: Option<u64>, split: Option<(u64, u64)>) -> SlotContent {
    SlotContent::Invalid {
        why: why.to_string(),
        seq,
        split,
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

/// Picks which slot holds a logical block's state when nothing else is
/// known: the valid one with the larger sequence; `None` for an empty
/// block; `Corrupt` when both are damaged or both claim one sequence.
/// Whether falling back past a damaged slot is legitimate is decided by
/// recovery, which sees every block (`meta::recovery`).
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
        [Empty, Empty] | [Empty, Invalid { .. }] | [Invalid { .. }, Empty] => Ok(None),
        [Invalid { why: ea, .. }, Invalid { why: eb, .. }] => Err(Error::new(
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
                    sums: crate::meta::tuple::Checksums::Blocks(vec![1].into()),
                    unsynced: false,
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
            flags: 0,
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
                matches!(decode_slot(ID, &b), SlotContent::Invalid { .. }),
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
            SlotContent::Invalid { .. }
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
            SlotContent::Invalid { .. }
        ));
    }
}
