//! A tuple: the complete metadata of one committed object version.
//!
//! Encoding (little endian), self-delimiting so tuples pack back to back:
//!
//! ```text
//! key_len u16 | kind u8 | version u64 | created_micros u64 | size u64
//! kind 0 (heap):   piece_count u16 | piece u64 * piece_count
//! kind 2 (heap, checksummed): as kind 0, then crc32c u32 of the object
//! kind 1 (inline): value bytes * size
//! key bytes * key_len
//! ```
//!
//! A piece is `start_block | order << 56`: the first block (absolute) and the
//! buddy order of a heap piece. Pieces are listed in object byte order.

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{get_u16, get_u64, put_u16, put_u64, BLOCK_SHIFT};

/// Longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
/// Fixed part of an encoded tuple.
pub const TUPLE_HEADER_LEN: usize = 2 + 1 + 8 + 8 + 8;
const KIND_HEAP: u8 = 0;
const KIND_INLINE: u8 = 1;
const KIND_HEAP_CRC: u8 = 2;

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
    /// Stored inside the tuple (small-value path).
    Inline(Bytes),
    /// Stored in heap pieces, in object byte order. `crc` is the CRC32C of
    /// the object's bytes when its data was not synced before the tuple
    /// (recovery verifies it for the last group written; see FORMAT.md).
    Heap {
        /// Pieces in object byte order.
        pieces: Vec<Piece>,
        /// CRC32C of the object bytes, if the tuple carries one.
        crc: Option<u32>,
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
    /// Where the bytes are.
    pub value: TupleValue,
}

/// Encoded length of a tuple with these parts (used to check fit up front).
pub fn encoded_len(key_len: usize, value: &TupleValue) -> usize {
    TUPLE_HEADER_LEN
        + key_len
        + match value {
            TupleValue::Inline(b) => b.len(),
            TupleValue::Heap { pieces, crc } => {
                2 + 8 * pieces.len() + if crc.is_some() { 4 } else { 0 }
            }
        }
}

impl Tuple {
    /// Encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.key.len(), &self.value)
    }

    /// Appends the encoding to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + self.encoded_len(), 0);
        let b = &mut out[start..];
        put_u16(b, 0, self.key.len() as u16);
        put_u64(b, 3, self.version);
        put_u64(b, 11, self.created_micros);
        put_u64(b, 19, self.size);
        let mut at = TUPLE_HEADER_LEN;
        match &self.value {
            TupleValue::Inline(v) => {
                b[2] = KIND_INLINE;
                b[at..at + v.len()].copy_from_slice(v);
                at += v.len();
            }
            TupleValue::Heap { pieces, crc } => {
                b[2] = if crc.is_some() {
                    KIND_HEAP_CRC
                } else {
                    KIND_HEAP
                };
                put_u16(b, at, pieces.len() as u16);
                at += 2;
                for p in pieces {
                    put_u64(b, at, p.pack());
                    at += 8;
                }
                if let Some(c) = crc {
                    b[at..at + 4].copy_from_slice(&c.to_le_bytes());
                    at += 4;
                }
            }
        }
        b[at..at + self.key.len()].copy_from_slice(&self.key);
    }

    /// Decodes one tuple from the front of `b`; returns it and its length.
    /// Structural checks only: the caller checks pieces against the geometry.
    pub fn decode(b: &[u8]) -> Result<(Tuple, usize)> {
        let corrupt = |what: &str| Error::new(ErrorKind::Corrupt, format!("tuple: {what}"));
        if b.len() < TUPLE_HEADER_LEN {
            return Err(corrupt("truncated header"));
        }
        let key_len = get_u16(b, 0) as usize;
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return Err(corrupt("key length out of range"));
        }
        let version = get_u64(b, 3);
        let created_micros = get_u64(b, 11);
        let size = get_u64(b, 19);
        let mut at = TUPLE_HEADER_LEN;
        let value = match b[2] {
            KIND_INLINE => {
                let len = usize::try_from(size).map_err(|_| corrupt("inline size"))?;
                let end = at.checked_add(len).filter(|&e| e <= b.len());
                let end = end.ok_or_else(|| corrupt("inline value truncated"))?;
                let v = Bytes::copy_from_slice(&b[at..end]);
                at = end;
                TupleValue::Inline(v)
            }
            kind @ (KIND_HEAP | KIND_HEAP_CRC) => {
                if at + 2 > b.len() {
                    return Err(corrupt("piece count truncated"));
                }
                let n = get_u16(b, at) as usize;
                at += 2;
                if at + 8 * n > b.len() {
                    return Err(corrupt("piece list truncated"));
                }
                let mut pieces = Vec::with_capacity(n);
                let mut covered: u64 = 0;
                for _ in 0..n {
                    let p = Piece::unpack(get_u64(b, at));
                    if p.order > 40 {
                        return Err(corrupt("piece order out of range"));
                    }
                    covered = covered.saturating_add(p.len_bytes());
                    pieces.push(p);
                    at += 8;
                }
                // Pieces cover the object with less than one block of slack
                // per piece; anything else is not a tuple we wrote.
                if covered < size {
                    return Err(corrupt("pieces shorter than the object"));
                }
                let crc = if kind == KIND_HEAP_CRC {
                    let c = b
                        .get(at..at + 4)
                        .ok_or_else(|| corrupt("checksum truncated"))?;
                    at += 4;
                    Some(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                } else {
                    None
                };
                TupleValue::Heap { pieces, crc }
            }
            _ => return Err(corrupt("unknown kind")),
        };
        if at + key_len > b.len() {
            return Err(corrupt("key truncated"));
        }
        let key: Box<[u8]> = b[at..at + key_len].into();
        at += key_len;
        Ok((
            Tuple {
                key,
                version,
                created_micros,
                size,
                value,
            },
            at,
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
                crc: Some(0xfeed_f00d),
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
            value: TupleValue::Inline(Bytes::from_static(b"abc")),
        };
        let mut unchecked = heap_tuple();
        unchecked.value = TupleValue::Heap {
            pieces: vec![Piece { start: 9, order: 3 }],
            crc: None,
        };
        for t in [heap_tuple(), unchecked, inline] {
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
        let mut out = vec![];
        heap_tuple().encode_into(&mut out);
        for cut in 0..out.len() {
            assert_eq!(
                Tuple::decode(&out[..cut]).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
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
