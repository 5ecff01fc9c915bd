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
//! 44 group_flags u32: bit 0 ATOMIC (all or nothing: a bulk load, or a
//!    group of a store in buffered durability mode); bit 1 FIRST (format
//!    4: the block's first write, made straight to its home slot)
//! 48 payload: `count` tuples back to back (at most 4040 bytes)
//! 4088 seq u64 again
//! ```
//!
//! Format 1 slots (magic "BCTB") have no second sequence and a payload of
//! up to 4048 bytes; they are still read, and written back in format 1 only
//! when their payload does not fit format 2.
//!
//! Format 4 slots (magic "BCT4", stores with one slot per tuple block and a
//! metadata journal) keep the block number three times, so a journal slot
//! (which may hold any block) says whose image it is even when one of them
//! is damaged or a write tore it:
//!
//! ```text
//! 0 .. 48  as format 2, magic "BCT4"
//! 48       payload (at most 4032 bytes)
//! 4080 block_no u32 again    4084 block_no u32 again    4088 seq u64 again
//! crc32c over bytes [0,28) ++ [32,48+payload_len) ++ [4080,4096)
//! ```
//!
//! The second copy of the sequence lets recovery tell what a damaged slot
//! was: one flipped byte cannot change both copies, so a slot whose copies
//! agree says which group wrote it even when its checksum fails, and a slot
//! whose copies disagree is a torn write (new head, old tail or the other
//! way round) or has a damaged copy (see `recovery`).

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{get_u16, get_u32, get_u64, Layout, RecordWriter, BLOCK_SIZE};
use crate::meta::tuple::Tuple;

/// Slot magic, format 2.
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"BCT2");
/// Slot magic, format 1.
pub const BLOCK_MAGIC_V1: u32 = u32::from_le_bytes(*b"BCTB");
/// Slot magic, format 4 (journaled stores).
pub const BLOCK_MAGIC_V4: u32 = u32::from_le_bytes(*b"BCT4");
// Slot layout: each field's offset, declared once (FORMAT.md, "Tuple
// blocks"; `slot_offsets_match_format_md` holds the two together).
/// Where the slot magic lives.
const SLOT_MAGIC: usize = 0;
/// Where the logical block number lives.
pub(crate) const SLOT_BLOCK_NO: usize = 4;
/// Where the store id lives.
const SLOT_STORE_ID: usize = 8;
/// Where the sequence (the writing group's largest version) lives.
const SLOT_SEQ: usize = 16;
/// Where the tuple count lives.
const SLOT_COUNT: usize = 24;
/// Where the payload length lives.
const SLOT_PAYLOAD_LEN: usize = 26;
/// Where the slot checksum lives; it covers every byte before it.
const SLOT_CRC: usize = 28;
/// Where the group stamp starts (the group's first version); the
/// checksummed body runs from here to the end of the payload.
const SLOT_GROUP: usize = 32;
/// Where the group stamp's block count lives.
const SLOT_GROUP_BLOCKS: usize = 40;
/// Where the group stamp's flags live.
const SLOT_GROUP_FLAGS: usize = 44;
/// Header bytes before the tuples.
pub const BLOCK_HEADER_LEN: usize = 48;
/// Where the second copy of the sequence lives (formats 2 and 4).
pub(crate) const SEQ_COPY: usize = BLOCK_SIZE - 8;
/// Where the two more copies of the block number live (format 4), one
/// after the other.
pub(crate) const BLOCK_COPIES: usize = BLOCK_SIZE - 16;
/// Room for tuples in one format-2 slot.
const BLOCK_PAYLOAD_V2: usize = SEQ_COPY - BLOCK_HEADER_LEN;
/// Room for tuples in one tuple block, whatever its format: the format-4
/// room, which every newer slot format has too.
pub const BLOCK_PAYLOAD: usize = BLOCK_COPIES - BLOCK_HEADER_LEN;
/// Room for tuples in one format-1 slot.
pub const BLOCK_PAYLOAD_V1: usize = BLOCK_SIZE - BLOCK_HEADER_LEN;
/// Group flag: the group is all-or-nothing (a bulk load, or buffered
/// durability, whose changes were acknowledged before the group was
/// written: a crash keeps a prefix of them).
pub const GROUP_ATOMIC: u32 = 1;
/// Slot flag (format 4, beside the group's flags): this image is its
/// block's first write, made straight to its home slot; the block had no
/// state before it.
pub const SLOT_FIRST: u32 = 2;

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

/// The most payload bytes one slot holds in `layout`: a journaled store's
/// (format 4), or a two-slot store's (format 2, or format 1 for a block
/// carried over from a version-1 store whose payload does not fit format
/// 2). What [`encode_slot`] and [`encode_journaled_slot`] accept.
pub fn slot_room(layout: Layout) -> usize {
    match layout {
        Layout::Journaled(_) => BLOCK_PAYLOAD,
        Layout::Paired => BLOCK_PAYLOAD_V1,
    }
}

/// Encodes a slot image of a two-slot store from already encoded tuples:
/// format 2 when the payload fits, else format 1 (a block carried over
/// from a format-1 store). A payload over [`slot_room`] (or an `out` that
/// is not one block) is refused, nothing encoded: the caller's state is
/// wrong, and it reports that rather than panicking.
pub fn encode_slot(
    id: SlotIdentity,
    stamp: GroupStamp,
    count: usize,
    payload: &[u8],
    out: &mut [u8],
) -> Result<()> {
    fits(id, payload, BLOCK_PAYLOAD_V1, out)?;
    let magic = if payload.len() <= BLOCK_PAYLOAD_V2 {
        BLOCK_MAGIC
    } else {
        BLOCK_MAGIC_V1
    };
    encode(magic, id, stamp, count, payload, out);
    Ok(())
}

/// Encodes a format-4 slot image (a journaled store's home slot or journal
/// slot) from already encoded tuples of at most [`BLOCK_PAYLOAD`] bytes;
/// more is refused as [`encode_slot`] refuses it.
pub fn encode_journaled_slot(
    id: SlotIdentity,
    stamp: GroupStamp,
    count: usize,
    payload: &[u8],
    out: &mut [u8],
) -> Result<()> {
    fits(id, payload, BLOCK_PAYLOAD, out)?;
    encode(BLOCK_MAGIC_V4, id, stamp, count, payload, out);
    Ok(())
}

/// Whether `payload` fits a slot of `room` bytes and `out` is one block.
fn fits(id: SlotIdentity, payload: &[u8], room: usize, out: &[u8]) -> Result<()> {
    if payload.len() <= room && out.len() == BLOCK_SIZE {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Corrupt,
        format!(
            "tuple block {}: its tuples take {} bytes, more than a slot holds ({room}); \
             nothing was written",
            id.block_no,
            payload.len()
        ),
    ))
}

fn encode(
    magic: u32,
    id: SlotIdentity,
    stamp: GroupStamp,
    count: usize,
    payload: &[u8],
    out: &mut [u8],
) {
    let mut head = Vec::with_capacity(SLOT_CRC);
    let mut w = RecordWriter::new(&mut head);
    w.at(SLOT_MAGIC).u32(magic);
    w.at(SLOT_BLOCK_NO).u32(id.block_no);
    w.at(SLOT_STORE_ID).u64(id.store_id);
    w.at(SLOT_SEQ).u64(stamp.seq);
    w.at(SLOT_COUNT).u16(count as u16);
    w.at(SLOT_PAYLOAD_LEN).u16(payload.len() as u16);
    debug_assert_eq!(head.len(), SLOT_CRC);
    // The body is its own record: its offsets are relative to SLOT_GROUP.
    let mut body = Vec::with_capacity(BLOCK_HEADER_LEN - SLOT_GROUP + payload.len());
    let mut w = RecordWriter::new(&mut body);
    w.u64(stamp.first);
    w.at(SLOT_GROUP_BLOCKS - SLOT_GROUP).u32(stamp.blocks);
    w.at(SLOT_GROUP_FLAGS - SLOT_GROUP).u32(stamp.flags);
    w.at(BLOCK_HEADER_LEN - SLOT_GROUP).bytes(payload);
    let mut tail = Vec::with_capacity(BLOCK_SIZE - BLOCK_COPIES);
    if magic == BLOCK_MAGIC_V4 {
        RecordWriter::new(&mut tail)
            .u32(id.block_no)
            .u32(id.block_no);
    }
    if magic != BLOCK_MAGIC_V1 {
        RecordWriter::new(&mut tail).u64(stamp.seq);
    }
    let tail = &tail[..];
    let crc = slot_crc(&head, &body, tail);
    let mut image = Vec::with_capacity(BLOCK_SIZE);
    let mut w = RecordWriter::new(&mut image);
    w.bytes(&head).u32(crc).bytes(&body);
    w.at(BLOCK_SIZE - tail.len()).bytes(tail);
    debug_assert_eq!(image.len(), BLOCK_SIZE);
    // Same length as `out` (checked by the callers): every byte is
    // overwritten.
    for (o, i) in out.iter_mut().zip(&image) {
        *o = *i;
    }
}

/// CRC32C over what a slot's checksum covers: the header before the
/// checksum field, the group stamp and payload, and the copies at the end
/// of the block (format 2: the sequence; format 4: block number twice and
/// the sequence).
fn slot_crc(head: &[u8], body: &[u8], seq_copy: &[u8]) -> u32 {
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, body);
    crc32c::crc32c_append(crc, seq_copy)
}

/// The fixed header of a slot, as read (not yet checked).
struct SlotHeader {
    magic: u32,
    block_no: u32,
    store_id: u64,
    seq: u64,
    count: u16,
    payload_len: u16,
    crc: u32,
    group_first: u64,
    group_blocks: u32,
    group_flags: u32,
}

impl SlotHeader {
    fn read(b: &[u8]) -> Option<SlotHeader> {
        Some(SlotHeader {
            magic: get_u32(b, SLOT_MAGIC)?,
            block_no: get_u32(b, SLOT_BLOCK_NO)?,
            store_id: get_u64(b, SLOT_STORE_ID)?,
            seq: get_u64(b, SLOT_SEQ)?,
            count: get_u16(b, SLOT_COUNT)?,
            payload_len: get_u16(b, SLOT_PAYLOAD_LEN)?,
            crc: get_u32(b, SLOT_CRC)?,
            group_first: get_u64(b, SLOT_GROUP)?,
            group_blocks: get_u32(b, SLOT_GROUP_BLOCKS)?,
            group_flags: get_u32(b, SLOT_GROUP_FLAGS)?,
        })
    }
}

/// What one physical slot holds.
#[derive(Debug, Clone)]
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
    let Some(b) = b.get(..BLOCK_SIZE) else {
        return invalid("slot truncated", None, None);
    };
    if b.iter().all(|&x| x == 0) {
        return SlotContent::Empty;
    }
    // Both reads lie inside the block just taken: they cannot fail.
    let (Some(h), Some(seq_copy)) = (SlotHeader::read(b), get_u64(b, SEQ_COPY)) else {
        return invalid("slot truncated", None, None);
    };
    let v4 = h.magic == BLOCK_MAGIC_V4;
    let v2 = h.magic == BLOCK_MAGIC || v4;
    let ours = h.store_id == id.store_id && h.block_no == id.block_no;
    let seq = h.seq;
    // What a damaged slot still tells: its sequence, when both copies
    // agree (one flipped byte cannot forge that), or both copies. Read even
    // when the magic or the identity is damaged; not from format-1 slots,
    // which have no second copy.
    let (claim, split) = if h.magic == BLOCK_MAGIC_V1 {
        (None, None)
    } else if seq_copy == seq {
        (Some(seq), None)
    } else {
        (None, Some((seq, seq_copy)))
    };
    if !v2 && h.magic != BLOCK_MAGIC_V1 {
        return invalid("bad magic", claim, split);
    }
    let (room, tail_at) = if v4 {
        (BLOCK_PAYLOAD, BLOCK_COPIES)
    } else if v2 {
        (BLOCK_PAYLOAD_V2, SEQ_COPY)
    } else {
        (BLOCK_PAYLOAD_V1, BLOCK_SIZE)
    };
    let payload_len = h.payload_len as usize;
    if payload_len > room {
        return invalid("payload length out of range", claim, split);
    }
    // In range: the payload fits the room checked just above.
    let covered = (
        b.get(..SLOT_CRC),
        b.get(SLOT_GROUP..BLOCK_HEADER_LEN + payload_len),
        b.get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + payload_len),
        b.get(tail_at..),
    );
    let (Some(head), Some(body), Some(payload), Some(tail)) = covered else {
        return invalid("payload length out of range", claim, split);
    };
    if h.crc != slot_crc(head, body, tail) {
        return invalid("checksum mismatch", claim, split);
    }
    if !ours {
        return invalid("slot belongs to another store or place", claim, split);
    }
    let count = h.count as usize;
    let mut tuples = Vec::with_capacity(count);
    // Inline values are slices of one copy of the payload.
    let payload = Bytes::copy_from_slice(payload);
    let mut at = 0;
    for _ in 0..count {
        match Tuple::decode_shared(&payload, at) {
            Ok((t, n)) => {
                if t.version > seq {
                    return invalid("tuple version above block sequence", Some(seq), None);
                }
                tuples.push(t);
                at += n;
                if at > payload.len() {
                    return invalid("tuple runs past the payload", Some(seq), None);
                }
            }
            Err(e) => return invalid(e.message(), Some(seq), None),
        }
    }
    if at != payload.len() {
        return invalid("payload length disagrees with tuples", Some(seq), None);
    }
    SlotContent::Valid {
        seq,
        group_first: h.group_first,
        group_blocks: h.group_blocks,
        group_flags: h.group_flags,
        tuples,
    }
}

/// The tuple block a format-4 slot holds, by the majority of its three
/// block numbers (one damaged copy or a torn write cannot change it);
/// `None` when no two copies agree.
pub fn journal_block(b: &[u8]) -> Option<u32> {
    let (x, y, z) = (
        get_u32(b, SLOT_BLOCK_NO)?,
        get_u32(b, BLOCK_COPIES)?,
        get_u32(b, BLOCK_COPIES + 4)?,
    );
    if x == y || x == z {
        Some(x)
    } else if y == z {
        Some(y)
    } else {
        None
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
    use crate::format::doc_tables::assert_matches;
    use crate::meta::tuple::{Piece, TupleValue};

    #[test]
    fn slot_offsets_match_format_md() {
        assert_matches(
            "Slot layout",
            &[
                ("SLOT_MAGIC", SLOT_MAGIC, "4"),
                ("SLOT_BLOCK_NO", SLOT_BLOCK_NO, "4"),
                ("SLOT_STORE_ID", SLOT_STORE_ID, "8"),
                ("SLOT_SEQ", SLOT_SEQ, "8"),
                ("SLOT_COUNT", SLOT_COUNT, "2"),
                ("SLOT_PAYLOAD_LEN", SLOT_PAYLOAD_LEN, "2"),
                ("SLOT_CRC", SLOT_CRC, "4"),
                ("SLOT_GROUP", SLOT_GROUP, "8"),
                ("SLOT_GROUP_BLOCKS", SLOT_GROUP_BLOCKS, "4"),
                ("SLOT_GROUP_FLAGS", SLOT_GROUP_FLAGS, "4"),
                ("BLOCK_HEADER_LEN", BLOCK_HEADER_LEN, "…"),
                ("BLOCK_COPIES", BLOCK_COPIES, "4"),
                ("BLOCK_COPIES + 4", BLOCK_COPIES + 4, "4"),
                ("SEQ_COPY", SEQ_COPY, "8"),
            ],
        );
    }

    #[test]
    fn an_encoded_slot_holds_each_field_at_its_named_offset() {
        let stamp = GroupStamp {
            seq: 0x1111_2222_3333_4444,
            first: 0x5555_6666_7777_8888,
            blocks: 0x99aa_bbcc,
            flags: GROUP_ATOMIC,
        };
        let payload = [7u8; 40];
        let mut out = vec![0u8; BLOCK_SIZE];
        encode_journaled_slot(ID, stamp, 3, &payload, &mut out).unwrap();
        assert_eq!(get_u32(&out, SLOT_MAGIC), Some(BLOCK_MAGIC_V4));
        assert_eq!(get_u32(&out, SLOT_BLOCK_NO), Some(ID.block_no));
        assert_eq!(get_u64(&out, SLOT_STORE_ID), Some(ID.store_id));
        assert_eq!(get_u64(&out, SLOT_SEQ), Some(stamp.seq));
        assert_eq!(get_u16(&out, SLOT_COUNT), Some(3));
        assert_eq!(get_u16(&out, SLOT_PAYLOAD_LEN), Some(40));
        assert_eq!(get_u64(&out, SLOT_GROUP), Some(stamp.first));
        assert_eq!(get_u32(&out, SLOT_GROUP_BLOCKS), Some(stamp.blocks));
        assert_eq!(get_u32(&out, SLOT_GROUP_FLAGS), Some(stamp.flags));
        assert_eq!(
            out.get(BLOCK_HEADER_LEN..BLOCK_HEADER_LEN + 40),
            Some(&payload[..])
        );
        assert_eq!(get_u32(&out, BLOCK_COPIES), Some(ID.block_no));
        assert_eq!(get_u32(&out, BLOCK_COPIES + 4), Some(ID.block_no));
        assert_eq!(get_u64(&out, SEQ_COPY), Some(stamp.seq));
    }

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
                expires_micros: None,
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
        encode_slot(ID, stamp, 10, &payload, &mut out).unwrap();
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
    fn a_payload_over_a_slots_room_is_refused_not_a_panic() {
        let stamp = GroupStamp {
            seq: 2,
            first: 2,
            blocks: 1,
            flags: 0,
        };
        let mut out = vec![0u8; BLOCK_SIZE];
        let journaled = Layout::Journaled(crate::format::MetaExtent { start: 2, order: 1 });
        for (layout, room) in [
            (journaled, BLOCK_PAYLOAD),
            (Layout::Paired, BLOCK_PAYLOAD_V1),
        ] {
            assert_eq!(slot_room(layout), room);
            let encode = match layout {
                Layout::Journaled(_) => encode_journaled_slot,
                Layout::Paired => encode_slot,
            };
            assert!(encode(ID, stamp, 1, &vec![1u8; room], &mut out).is_ok());
            let err = encode(ID, stamp, 1, &vec![1u8; room + 1], &mut out).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert!(err.to_string().contains("tuple block 5"), "{err}");
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
