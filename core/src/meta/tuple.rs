//! A tuple: the complete metadata of one committed object version.
//!
//! Encoding (little endian), self-delimiting so tuples pack back to back:
//!
//! ```text
//! key_len u16 | kind u8 | version u64 | created_micros u64 | size u64
//!   [expires_micros u64, when kind bit 7 EXPIRES is set (format 3)]
//! kind 1 (inline): value bytes * size
//! kind 3 (heap, format 2): piece_count u16 | piece u64 * piece_count
//!         | flags u8 | sums
//!   flags bit 0 TABLE: the per-block checksums are a table stored after the
//!                 data (the trailer); sums = crc32c u32 of that table
//!                 otherwise sums = crc32c u32 of each 4 KiB data block
//!                 (at most MAX_TUPLE_SUMS of them)
//!   flags bit 1 UNSYNCED: the data was made durable by the same sync as
//!                 the tuple (recovery reads it back for the newest group)
//! kind 0 (heap, format 1, no checksum): piece_count u16 | pieces
//! kind 2 (heap, format 1): as kind 0, then crc32c u32 of the whole object
//! key bytes * key_len
//! ```
//!
//! A piece is `start_block | order << 56`: the first block (absolute) and the
//! buddy order of a heap piece. Pieces are listed in object byte order.
//! Formats 2 and 3 write kinds 1 and 3 only (3 with the EXPIRES bit when the
//! object has a time to live); kinds 0 and 2 are read so stores written by
//! format 1 keep working.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{RecordReader, RecordWriter, BLOCK_SHIFT, BLOCK_SIZE};

/// Longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// Fixed part of an encoded tuple.
pub const TUPLE_HEADER_LEN: usize = 2 + 1 + 8 + 8 + 8;
/// Objects of at most this many 4 KiB data blocks carry their block
/// checksums in the tuple (and in RAM); larger ones in a trailer table.
pub const MAX_TUPLE_SUMS: usize = 16;
const KIND_HEAP_V1: u8 = 0;
const KIND_INLINE: u8 = 1;
const KIND_HEAP_V1_CRC: u8 = 2;
const KIND_HEAP: u8 = 3;
/// Kind bit: an expiry time follows the fixed header (format 3).
const KIND_EXPIRES: u8 = 0x80;
/// Bytes the expiry adds to a tuple.
pub const EXPIRY_LEN: usize = 8;
const FLAG_TABLE: u8 = 1;
const FLAG_UNSYNCED: u8 = 2;

/// Number of 4 KiB data blocks of a `size`-byte object: the unit of its
/// checksums.
pub fn data_blocks(size: u64) -> u64 {
    size.div_ceil(BLOCK_SIZE as u64)
}

/// Bytes of the checksum table of a `size`-byte object kept in its trailer
/// (0 when the checksums fit in the tuple).
pub fn table_len(size: u64) -> u64 {
    let n = data_blocks(size);
    if n as usize > MAX_TUPLE_SUMS {
        n.saturating_mul(4)
    } else {
        0
    }
}

/// Object offset of the trailer table: the data rounded up to a block.
pub fn table_offset(size: u64) -> u64 {
    data_blocks(size).saturating_mul(BLOCK_SIZE as u64)
}

/// Heap bytes an object occupies: its data padded to a block, then the
/// trailer table if it has one.
/// Saturates for sizes no store can hold (a damaged tuple may claim any).
pub fn stored_len(size: u64) -> u64 {
    table_offset(size).saturating_add(table_len(size))
}

/// CRC32C of every 4 KiB block of `data` (the last one may be short).
pub fn block_sums(data: &[u8]) -> Vec<u32> {
    data.chunks(BLOCK_SIZE).map(crc32c::crc32c).collect()
}

/// The trailer table's bytes: each block checksum, little endian.
pub fn encode_table(sums: &[u32]) -> Vec<u8> {
    sums.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// Block checksums from a trailer table's bytes.
pub fn decode_table(b: &[u8]) -> Vec<u32> {
    let (sums, _) = b.as_chunks::<4>();
    sums.iter().map(|c| u32::from_le_bytes(*c)).collect()
}

/// What an object's bytes are checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksums {
    /// Written by format 1 without a checksum (uploads, puts over 1 MiB):
    /// served unverified; `blobcask check` counts them.
    None,
    /// Format 1: CRC32C of the whole object.
    Whole(u32),
    /// CRC32C of each 4 KiB data block, carried in the tuple.
    Blocks(Arc<[u32]>),
    /// CRC32C of the trailer table that holds each block's CRC32C.
    Table(u32),
}

/// A buddy piece of the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Piece {
    /// First block, counted from the start of the file.
    pub start: u64,
    /// The piece spans `1 << order` blocks.
    pub order: u8,
}

impl Piece {
    /// Length in bytes.
    pub fn len_bytes(&self) -> u64 {
        1u64 << (self.order as u32 + BLOCK_SHIFT)
    }
    /// Byte offset in the file.
    pub fn offset(&self) -> u64 {
        self.start << BLOCK_SHIFT
    }
    fn pack(&self) -> u64 {
        self.start | (self.order as u64) << 56
    }
    fn unpack(v: u64) -> Piece {
        Piece {
            start: v & ((1 << 56) - 1),
            order: (v >> 56) as u8,
        }
    }
}

/// Where an object's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TupleValue {
    /// Stored inside the tuple (small-value path); covered by the slot's
    /// checksum.
    Inline(Bytes),
    /// Stored in heap pieces, in object byte order.
    Heap {
        /// Pieces in object byte order (data, then the trailer table).
        pieces: Vec<Piece>,
        /// What the bytes are checked against.
        sums: Checksums,
        /// The data was not synced before the tuple: recovery reads it back
        /// when the tuple belongs to the newest group (see FORMAT.md).
        unsynced: bool,
    },
}

/// The decoded form of a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuple {
    /// The object's key.
    pub key: Box<[u8]>,
    /// Commit version (unique per key, larger wins).
    pub version: u64,
    /// Commit time, microseconds since the Unix epoch.
    pub created_micros: u64,
    /// Object size in bytes.
    pub size: u64,
    /// When the object expires, microseconds since the Unix epoch (`None`:
    /// never). An expired object is invisible and its tuple removed by the
    /// store's reaper.
    pub expires_micros: Option<u64>,
    /// Where the bytes are.
    pub value: TupleValue,
}

/// Encoded length of a tuple with these parts (used to check fit up front).
pub fn encoded_len(key_len: usize, value: &TupleValue, expires: bool) -> usize {
    match value {
        TupleValue::Inline(b) => inline_len(key_len, b.len() as u64, expires),
        TupleValue::Heap { pieces, sums, .. } => heap_len(key_len, pieces.len(), sums, expires),
    }
}

/// Encoded length of an inline tuple of a `size`-byte value.
pub fn inline_len(key_len: usize, size: u64, expires: bool) -> usize {
    fixed_len(key_len, expires) + size as usize
}

/// Encoded length of a heap tuple listing `pieces` pieces.
pub fn heap_len(key_len: usize, pieces: usize, sums: &Checksums, expires: bool) -> usize {
    fixed_len(key_len, expires)
        + 2
        + 8 * pieces
        + match sums {
            Checksums::None => 0,
            Checksums::Whole(_) => 4,
            Checksums::Table(_) => 1 + 4,
            Checksums::Blocks(b) => 1 + 4 * b.len(),
        }
}

fn fixed_len(key_len: usize, expires: bool) -> usize {
    TUPLE_HEADER_LEN + if expires { EXPIRY_LEN } else { 0 } + key_len
}

impl Tuple {
    /// Encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.key.len(), &self.value, self.expires_micros.is_some())
    }

    /// Appends the encoding to `out`. Format-1 heap tuples (read from old
    /// stores) are written back in their own kind.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut w = RecordWriter::new(out);
        let kind = match &self.value {
            TupleValue::Inline(_) => KIND_INLINE,
            TupleValue::Heap { sums, .. } => match sums {
                Checksums::None => KIND_HEAP_V1,
                Checksums::Whole(_) => KIND_HEAP_V1_CRC,
                _ => KIND_HEAP,
            },
        };
        let kind = match self.expires_micros {
            Some(_) => kind | KIND_EXPIRES,
            None => kind,
        };
        w.u16(self.key.len() as u16)
            .u8(kind)
            .u64(self.version)
            .u64(self.created_micros)
            .u64(self.size);
        if let Some(at) = self.expires_micros {
            w.u64(at);
        }
        match &self.value {
            TupleValue::Inline(v) => {
                w.bytes(v);
            }
            TupleValue::Heap {
                pieces,
                sums,
                unsynced,
            } => {
                w.u16(pieces.len() as u16);
                for p in pieces {
                    w.u64(p.pack());
                }
                let flags = if *unsynced { FLAG_UNSYNCED } else { 0 };
                match sums {
                    Checksums::None => {}
                    Checksums::Whole(c) => {
                        w.u32(*c);
                    }
                    Checksums::Table(c) => {
                        w.u8(flags | FLAG_TABLE).u32(*c);
                    }
                    Checksums::Blocks(list) => {
                        w.u8(flags);
                        for c in list.iter() {
                            w.u32(*c);
                        }
                    }
                }
            }
        }
        w.bytes(&self.key);
        debug_assert_eq!(w.len(), self.encoded_len());
    }

    /// Decodes one tuple from the front of `b`; returns it and its length.
    /// Structural checks only: the caller checks pieces against the geometry.
    pub fn decode(b: &[u8]) -> Result<(Tuple, usize)> {
        Self::decode_with(b, Bytes::copy_from_slice)
    }

    /// [`decode`](Self::decode) of bytes inside `owner` (from `at`), an
    /// inline value a slice of `owner` rather than a copy: decoding a
    /// block allocates once, not once per value (an open of a million
    /// small values would otherwise allocate, and free, a million).
    pub fn decode_shared(owner: &Bytes, at: usize) -> Result<(Tuple, usize)> {
        let b = owner.get(at..).unwrap_or_default();
        Self::decode_with(b, |v| owner.slice_ref(v))
    }

    fn decode_with(b: &[u8], inline: impl FnOnce(&[u8]) -> Bytes) -> Result<(Tuple, usize)> {
        let corrupt = |what: &str| Error::new(ErrorKind::Corrupt, format!("tuple: {what}"));
        let mut r = RecordReader::new(b);
        let (Some(key_len), Some(kind), Some(version), Some(created_micros), Some(size)) =
            (r.u16(), r.u8(), r.u64(), r.u64(), r.u64())
        else {
            return Err(corrupt("truncated header"));
        };
        let key_len = key_len as usize;
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return Err(corrupt("key length out of range"));
        }
        let expires_micros = if kind & KIND_EXPIRES != 0 {
            Some(r.u64().ok_or_else(|| corrupt("expiry truncated"))?)
        } else {
            None
        };
        let kind = kind & !KIND_EXPIRES;
        if expires_micros.is_some() && !matches!(kind, KIND_INLINE | KIND_HEAP) {
            return Err(corrupt("expiry on a format-1 tuple"));
        }
        let value = match kind {
            KIND_INLINE => {
                let len = usize::try_from(size).map_err(|_| corrupt("inline size"))?;
                let v = r
                    .bytes(len)
                    .ok_or_else(|| corrupt("inline value truncated"))?;
                TupleValue::Inline(inline(v))
            }
            kind @ (KIND_HEAP_V1 | KIND_HEAP_V1_CRC | KIND_HEAP) => {
                let n = r.u16().ok_or_else(|| corrupt("piece count truncated"))? as usize;
                let list = r
                    .bytes(8 * n)
                    .ok_or_else(|| corrupt("piece list truncated"))?;
                let mut pieces = Vec::with_capacity(n);
                let mut covered: u64 = 0;
                for p in list.as_chunks::<8>().0 {
                    let p = Piece::unpack(u64::from_le_bytes(*p));
                    if p.order > 40 {
                        return Err(corrupt("piece order out of range"));
                    }
                    covered = covered.saturating_add(p.len_bytes());
                    pieces.push(p);
                }
                let (sums, unsynced, need) = match kind {
                    KIND_HEAP_V1 => (Checksums::None, false, size),
                    KIND_HEAP_V1_CRC => {
                        let c = r.u32().ok_or_else(|| corrupt("checksum truncated"))?;
                        (Checksums::Whole(c), true, size)
                    }
                    _ => {
                        let flags = r.u8().ok_or_else(|| corrupt("flags truncated"))?;
                        if flags & !(FLAG_TABLE | FLAG_UNSYNCED) != 0 {
                            return Err(corrupt("unknown flags"));
                        }
                        let mut checksum = || r.u32().ok_or_else(|| corrupt("checksum truncated"));
                        let blocks = data_blocks(size);
                        let sums = if flags & FLAG_TABLE != 0 {
                            if blocks as usize <= MAX_TUPLE_SUMS {
                                return Err(corrupt("checksum table on a small object"));
                            }
                            Checksums::Table(checksum()?)
                        } else {
                            if blocks as usize > MAX_TUPLE_SUMS {
                                return Err(corrupt("large object without a checksum table"));
                            }
                            let list = (0..blocks)
                                .map(|_| checksum())
                                .collect::<Result<Vec<u32>>>()?;
                            Checksums::Blocks(list.into())
                        };
                        (sums, flags & FLAG_UNSYNCED != 0, stored_len(size))
                    }
                };
                // Pieces cover the object (and its table); anything else is
                // not a tuple we wrote.
                if covered < need {
                    return Err(corrupt("pieces shorter than the object"));
                }
                TupleValue::Heap {
                    pieces,
                    sums,
                    unsynced,
                }
            }
            _ => return Err(corrupt("unknown kind")),
        };
        let key: Box<[u8]> = r
            .bytes(key_len)
            .ok_or_else(|| corrupt("key truncated"))?
            .into();
        Ok((
            Tuple {
                key,
                version,
                created_micros,
                size,
                expires_micros,
                value,
            },
            r.pos(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn heap_tuple() -> Tuple {
        Tuple {
            key: (*b"videos/cat.mp4").into(),
            version: 42,
            created_micros: 7,
            size: 20_000,
            expires_micros: None,
            value: TupleValue::Heap {
                pieces: vec![
                    Piece {
                        start: 64,
                        order: 2,
                    },
                    Piece {
                        start: 80,
                        order: 0,
                    },
                ],
                sums: Checksums::Blocks(vec![0xfeed_f00d; 5].into()),
                unsynced: true,
            },
        }
    }

    #[test]
    fn tuples_round_trip() {
        let inline = Tuple {
            key: (*b"k").into(),
            version: 1,
            created_micros: 2,
            size: 3,
            expires_micros: None,
            value: TupleValue::Inline(Bytes::from_static(b"abc")),
        };
        let mut inline_ttl = inline.clone();
        inline_ttl.expires_micros = Some(u64::MAX - 1);
        let mut heap_ttl = heap_tuple();
        heap_ttl.expires_micros = Some(1_800_000_000_000_000);
        let mut table = heap_tuple();
        table.size = 300_000;
        table.value = TupleValue::Heap {
            pieces: vec![Piece {
                start: 128,
                order: 7,
            }],
            sums: Checksums::Table(7),
            unsynced: false,
        };
        let mut v1 = heap_tuple();
        v1.value = TupleValue::Heap {
            pieces: vec![Piece { start: 9, order: 3 }],
            sums: Checksums::None,
            unsynced: false,
        };
        let mut v1_crc = v1.clone();
        v1_crc.value = TupleValue::Heap {
            pieces: vec![Piece { start: 9, order: 3 }],
            sums: Checksums::Whole(3),
            unsynced: true,
        };
        for t in [
            heap_tuple(),
            table,
            v1,
            v1_crc,
            inline,
            inline_ttl,
            heap_ttl,
        ] {
            let mut out = vec![];
            t.encode_into(&mut out);
            assert_eq!(out.len(), t.encoded_len());
            let (d, n) = Tuple::decode(&out).unwrap();
            assert_eq!(n, out.len());
            assert_eq!(d, t);
        }
    }

    #[test]
    fn truncated_tuple_is_corrupt_never_panics() {
        let mut with_ttl = heap_tuple();
        with_ttl.expires_micros = Some(99);
        for t in [heap_tuple(), with_ttl] {
            let mut out = vec![];
            t.encode_into(&mut out);
            for cut in 0..out.len() {
                assert_eq!(
                    Tuple::decode(&out[..cut]).unwrap_err().kind(),
                    ErrorKind::Corrupt
                );
            }
        }
    }

    #[test]
    fn an_expiry_on_a_format_1_tuple_is_corrupt() {
        let mut t = heap_tuple();
        t.value = TupleValue::Heap {
            pieces: vec![Piece { start: 9, order: 3 }],
            sums: Checksums::None,
            unsynced: false,
        };
        let mut out = vec![];
        t.encode_into(&mut out);
        // Set the EXPIRES bit by hand and insert an expiry: no build writes
        // this, so it is damage.
        out[2] |= KIND_EXPIRES;
        out.splice(TUPLE_HEADER_LEN..TUPLE_HEADER_LEN, 5u64.to_le_bytes());
        let e = Tuple::decode(&out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(e.to_string().contains("expiry"), "{e}");
    }

    #[test]
    fn absurd_sizes_are_corrupt_never_overflow() {
        // Found by the tuple_block_decode fuzz target: a heap tuple claiming
        // a size near u64::MAX overflowed the stored length.
        for size in [u64::MAX, u64::MAX - 4095, 1 << 63] {
            let mut t = heap_tuple();
            t.size = size;
            t.value = TupleValue::Heap {
                pieces: vec![Piece { start: 1, order: 0 }],
                sums: Checksums::Table(1),
                unsynced: false,
            };
            let mut out = vec![];
            t.encode_into(&mut out);
            let e = Tuple::decode(&out).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt);
        }
    }

    #[test]
    fn flipped_bytes_never_panic() {
        let mut out = vec![];
        heap_tuple().encode_into(&mut out);
        for at in 0..out.len() {
            for bit in 0..8 {
                let mut b = out.clone();
                b[at] ^= 1 << bit;
                let _ = Tuple::decode(&b);
            }
        }
    }
}
