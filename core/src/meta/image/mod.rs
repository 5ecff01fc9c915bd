//! The index image: the store's state as a clean close left it, written
//! beside the tuple blocks so the next open reads it instead of every
//! tuple block (format 6; `core/FORMAT.md`, "Index image").
//!
//! It holds what open would otherwise rebuild from the tuple blocks: each
//! live object's tuple fields and its block (an inline value's bytes stay
//! in its block, read on demand as always), which blocks have state, and
//! the next version. Its pieces come from the heap like an object's; the
//! superblock names its first piece and the clean sequence it reflects.
//!
//! Invariant 10 (derived state costs time, never objects):
//! * it is used only when it reflects the tuple blocks exactly: the
//!   superblock names it (only a clean close does), its stamp equals the
//!   superblock's clean sequence, and a read-write open drops it from the
//!   superblock (synced) before anything can change, so a crash after that
//!   open finds no image and scans;
//! * every byte is covered by a checksum (the header's, the payload's),
//!   and its structure is checked on the way in (keys, or in an image of
//!   fingerprints the fingerprints, in strictly ascending order, blocks and pieces inside the store, pieces claimed
//!   once); anything wrong and open scans the tuple blocks instead and
//!   reports it (`RecoveryReport::repaired`): it costs time, never an
//!   object;
//! * `check` (`Options::scan_metadata`) scans and compares the two.
//!
//! `write.rs` writes one at close; `load.rs` reads one at open.

use crate::format::{get_u32, get_u64, RecordReader, RecordWriter, BLOCK_SIZE};
use crate::index::Fingerprint;
use crate::meta::tuple::{self, Checksums, Piece, Tuple, TupleValue, MAX_KEY_LEN};

pub(crate) mod changes;
mod load;
mod write;

pub(crate) use load::{compare, load, Collected, Since};

/// Where an image's objects go as it is read: open builds its state from
/// them as they come (no transient copy of every object), `check` collects
/// them. Records come before the payload's checksum is known: when `load`
/// fails, what the sink took must be dropped (`recover` calls `discard`).
pub(crate) trait ImageSink {
    /// The image holds `objects` records; `secret`: a fingerprint image's.
    fn begin(&mut self, objects: usize, secret: Option<[u8; 16]>);
    /// One record: its tuple block, the object as a tuple (see
    /// [`Record`]), and in a fingerprint image its key's fingerprint and
    /// length.
    fn object(&mut self, block: u32, tuple: Tuple, fp: Option<(Fingerprint, u16)>);
    /// The common record: an inline object that does not expire, in an
    /// image of fingerprints. By default it goes to [`object`](Self::object)
    /// as a tuple; open takes it as it is.
    fn inline_fp(&mut self, o: InlineFp) {
        self.object(o.block, o.tuple(), Some((o.fp, o.key_len)));
    }
    /// Drops everything taken so far (the image did not serve).
    fn discard(&mut self);
}

/// Length of an [`InlineFp`] record: flags, key length, block, version,
/// creation time, size and fingerprint.
pub(crate) const INLINE_FP_LEN: usize = 1 + 2 + 4 + 8 + 8 + 8 + 16;

/// A fingerprint image's record of an inline object that does not expire
/// (flags 0), the most common record: decoded without building a tuple.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InlineFp {
    pub block: u32,
    pub key_len: u16,
    pub version: u64,
    pub created_micros: u64,
    pub size: u64,
    pub fp: Fingerprint,
}

impl InlineFp {
    /// The record at the front of `b` if it is one of these (flags 0) and
    /// whole; `None` sends it to [`decode_record`].
    pub fn decode(b: &[u8]) -> Option<InlineFp> {
        let b: &[u8; INLINE_FP_LEN] = b.get(..INLINE_FP_LEN)?.try_into().ok()?;
        let (&[flags], rest) = b.split_first_chunk::<1>()?;
        if flags != 0 {
            return None;
        }
        let (key_len, rest) = rest.split_first_chunk::<2>()?;
        let (block, rest) = rest.split_first_chunk::<4>()?;
        let (version, rest) = rest.split_first_chunk::<8>()?;
        let (created, rest) = rest.split_first_chunk::<8>()?;
        let (size, rest) = rest.split_first_chunk::<8>()?;
        let fp: &[u8; 16] = rest.try_into().ok()?;
        Some(InlineFp {
            block: u32::from_le_bytes(*block),
            key_len: u16::from_le_bytes(*key_len),
            version: u64::from_le_bytes(*version),
            created_micros: u64::from_le_bytes(*created),
            size: u64::from_le_bytes(*size),
            fp: Fingerprint::from_le_bytes(*fp),
        })
    }

    /// The record as [`decode_record`] gives it: a tuple without its key
    /// and its inline bytes.
    pub fn tuple(&self) -> Tuple {
        Tuple {
            key: Box::default(),
            version: self.version,
            created_micros: self.created_micros,
            size: self.size,
            expires_micros: None,
            value: TupleValue::Inline(bytes::Bytes::new()),
        }
    }

    /// The checks [`decode_record`] and the loader make of every record:
    /// a key of 1 to `MAX_KEY_LEN` bytes, an inline size, a block of the
    /// image, a version below the next, a tuple that fits a block, and a
    /// fingerprint that is not zero.
    pub fn check(&self, header: &Header) -> std::result::Result<(), String> {
        let key_len = self.key_len as usize;
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return Err(format!("record with a key of {key_len} bytes"));
        }
        if self.size > crate::options::MAX_INLINE_THRESHOLD as u64 {
            return Err(format!("inline record of {} bytes", self.size));
        }
        if self.block >= header.blocks {
            return Err(format!(
                "record in block {} of {}",
                self.block, header.blocks
            ));
        }
        if self.version == 0 || self.version >= header.next_version {
            return Err(format!("version {} not below the next", self.version));
        }
        let len = tuple::inline_len(key_len, self.size, false);
        if len > crate::meta::block::BLOCK_PAYLOAD {
            return Err(format!("a tuple of {len} bytes"));
        }
        if self.fp == 0 {
            return Err("a fingerprint of zero".into());
        }
        Ok(())
    }
}
pub(crate) use write::{ImageObject, ImageWriter};

/// Header magic (8 bytes) of an image whose records hold keys, in key
/// order (the ordered indexes').
pub(crate) const IMAGE_MAGIC: &[u8; 8] = b"BCINDEX1";

/// Header magic of an image whose records hold the hash index's key
/// fingerprints, in fingerprint order (keys only of objects that expire);
/// its payload starts with the fingerprints' secret.
pub(crate) const IMAGE_MAGIC_FINGERPRINTS: &[u8; 8] = b"BCINDEX2";

/// Bytes of the fingerprints' secret at the start of a fingerprint image's
/// payload.
pub(crate) const SECRET_LEN: usize = 16;

// Header field offsets (the first block of the image).
const H_STORE_ID: usize = 8;
const H_STAMP: usize = 16;
const H_NEXT_VERSION: usize = 24;
const H_OBJECTS: usize = 32;
const H_BLOCKS: usize = 40;
const H_PIECE_COUNT: usize = 44;
const H_PAYLOAD_LEN: usize = 48;
const H_PAYLOAD_CRC: usize = 56;
const H_PIECES: usize = 64;
const H_PIECE_LEN: usize = 9;
const H_CRC: usize = BLOCK_SIZE - 4;

/// Most pieces an image can span (the header lists them all): 447, so at
/// least 447 × 16 MiB with the default largest piece when free space is
/// not fragmented. A larger image is not written (open then scans).
pub(crate) const MAX_IMAGE_PIECES: usize = (H_CRC - H_PIECES) / H_PIECE_LEN;

/// Bytes per tuple block at the payload's start: a state byte (1: the
/// block has state, in its home slot; 0: never written) and the payload
/// bytes its tuples use (u16).
pub(crate) const BLOCK_STATE_LEN: usize = 3;

// Record flags.
const R_HEAP: u8 = 1;
const R_EXPIRES: u8 = 2;
const R_UNSYNCED: u8 = 4;

// Checksum kinds of a heap record.
const S_NONE: u8 = 0;
const S_WHOLE: u8 = 1;
const S_TABLE: u8 = 2;
const S_BLOCKS: u8 = 3;

/// The image's first block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// Records hold key fingerprints (`IMAGE_MAGIC_FINGERPRINTS`), not keys.
    pub fingerprints: bool,
    pub store_id: u64,
    /// The clean sequence the image reflects.
    pub stamp: u64,
    /// The next version to assign.
    pub next_version: u64,
    /// Object records in the payload.
    pub objects: u64,
    /// Tuple blocks of the store (`BLOCK_STATE_LEN` bytes each at the
    /// payload's start).
    pub blocks: u32,
    /// Every piece of the image in order, the header's own first.
    pub pieces: Vec<Piece>,
    /// Bytes after the header block.
    pub payload_len: u64,
    /// CRC32C of those bytes.
    pub payload_crc: u32,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK_SIZE);
        let mut w = RecordWriter::new(&mut b);
        w.bytes(if self.fingerprints {
            IMAGE_MAGIC_FINGERPRINTS
        } else {
            IMAGE_MAGIC
        });
        w.at(H_STORE_ID).u64(self.store_id);
        w.at(H_STAMP).u64(self.stamp);
        w.at(H_NEXT_VERSION).u64(self.next_version);
        w.at(H_OBJECTS).u64(self.objects);
        w.at(H_BLOCKS).u32(self.blocks);
        w.at(H_PIECE_COUNT).u32(self.pieces.len() as u32);
        w.at(H_PAYLOAD_LEN).u64(self.payload_len);
        w.at(H_PAYLOAD_CRC).u32(self.payload_crc);
        debug_assert!(self.pieces.len() <= MAX_IMAGE_PIECES);
        for (i, p) in self.pieces.iter().enumerate() {
            w.at(H_PIECES + i * H_PIECE_LEN).u64(p.start).u8(p.order);
        }
        w.at(H_CRC);
        let crc = crc32c::crc32c(&b);
        RecordWriter::new(&mut b).u32(crc);
        b
    }

    /// Decodes the first block of an image; why it is not one of this
    /// store's otherwise.
    pub fn decode(b: &[u8], store_id: u64) -> std::result::Result<Header, String> {
        let (body, crc) = b
            .get(..BLOCK_SIZE)
            .and_then(|b| b.split_at_checked(H_CRC))
            .ok_or("header truncated")?;
        let fingerprints = if body.starts_with(IMAGE_MAGIC) {
            false
        } else if body.starts_with(IMAGE_MAGIC_FINGERPRINTS) {
            true
        } else {
            return Err("header has no image magic".into());
        };
        if get_u32(crc, 0) != Some(crc32c::crc32c(body)) {
            return Err("header checksum mismatch".into());
        }
        let u64_at = |at| get_u64(body, at).ok_or("header truncated");
        let u32_at = |at| get_u32(body, at).ok_or("header truncated");
        if u64_at(H_STORE_ID)? != store_id {
            return Err("header belongs to another store".into());
        }
        let count = u32_at(H_PIECE_COUNT)? as usize;
        if count == 0 || count > MAX_IMAGE_PIECES {
            return Err(format!("header lists {count} pieces"));
        }
        let mut r = RecordReader::new(body.get(H_PIECES..).unwrap_or_default());
        let mut pieces = Vec::with_capacity(count);
        for _ in 0..count {
            let (Some(start), Some(order)) = (r.u64(), r.u8()) else {
                return Err("header truncated".into());
            };
            pieces.push(Piece { start, order });
        }
        Ok(Header {
            fingerprints,
            store_id,
            stamp: u64_at(H_STAMP)?,
            next_version: u64_at(H_NEXT_VERSION)?,
            objects: u64_at(H_OBJECTS)?,
            blocks: u32_at(H_BLOCKS)?,
            pieces,
            payload_len: u64_at(H_PAYLOAD_LEN)?,
            payload_crc: u32_at(H_PAYLOAD_CRC)?,
        })
    }
}

/// Encoded length of an object's record.
pub(crate) fn record_len(o: &ImageObject<'_>) -> usize {
    let fixed = 1 + 2 + 4 + 8 + 8 + 8 + if o.expires_micros.is_some() { 8 } else { 0 };
    let key = match o.fp {
        None => o.key.len(),
        Some(_) => {
            16 + if o.expires_micros.is_some() {
                o.key_len
            } else {
                0
            }
        }
    };
    fixed
        + key
        + match o.heap {
            None => 0,
            Some((pieces, sums, _)) => {
                2 + pieces.len() * 9
                    + 1
                    + match sums {
                        Checksums::None => 0,
                        Checksums::Whole(_) | Checksums::Table(_) => 4,
                        Checksums::Blocks(b) => 2 + 4 * b.len(),
                    }
            }
        }
}

/// Appends an object's record to `out`.
pub(crate) fn encode_record(o: &ImageObject<'_>, out: &mut Vec<u8>) {
    let mut flags = 0;
    if o.heap.is_some() {
        flags |= R_HEAP;
    }
    if o.expires_micros.is_some() {
        flags |= R_EXPIRES;
    }
    if matches!(o.heap, Some((_, _, true))) {
        flags |= R_UNSYNCED;
    }
    debug_assert!(o.fp.is_some() || o.key.len() == o.key_len);
    debug_assert!(o.fp.is_none() || o.expires_micros.is_none() || o.key.len() == o.key_len);
    let mut w = RecordWriter::new(out);
    w.u8(flags)
        .u16(o.key_len as u16)
        .u32(o.block)
        .u64(o.version)
        .u64(o.created_micros)
        .u64(o.size);
    if let Some(at) = o.expires_micros {
        w.u64(at);
    }
    match o.fp {
        None => {
            w.bytes(o.key);
        }
        Some(fp) => {
            w.bytes(&fp.to_le_bytes());
            if o.expires_micros.is_some() {
                w.bytes(o.key);
            }
        }
    }
    if let Some((pieces, sums, _)) = o.heap {
        w.u16(pieces.len() as u16);
        for p in pieces {
            w.u64(p.start).u8(p.order);
        }
        match sums {
            Checksums::None => {
                w.u8(S_NONE);
            }
            Checksums::Whole(c) => {
                w.u8(S_WHOLE).u32(*c);
            }
            Checksums::Table(c) => {
                w.u8(S_TABLE).u32(*c);
            }
            Checksums::Blocks(list) => {
                w.u8(S_BLOCKS).u16(list.len() as u16);
                for c in list.iter() {
                    w.u32(*c);
                }
            }
        }
    }
    debug_assert_eq!(w.len(), record_len(o));
}

/// A decoded record.
pub(crate) struct Record {
    /// The tuple block holding the object's tuple.
    pub block: u32,
    /// The object as a tuple (an inline value's bytes are not in the
    /// image: `Inline` holds none, `size` says how many there are). In a
    /// fingerprint image, the key is empty unless the object expires.
    pub tuple: Tuple,
    /// The tuple's encoded length in its block.
    pub tuple_len: usize,
    /// The key's length.
    pub key_len: u16,
    /// The key's fingerprint (fingerprint images).
    pub fp: Option<Fingerprint>,
}

/// Decodes the record at the front of `b` (of a fingerprint image when
/// `fingerprints`); `Ok(None)` when `b` ends inside the record (more bytes
/// are needed), and the record's length.
pub(crate) fn decode_record(
    b: &[u8],
    fingerprints: bool,
) -> std::result::Result<Option<(Record, usize)>, String> {
    let mut r = RecordReader::new(b);
    let (Some(flags), Some(key_len), Some(block), Some(version), Some(created_micros), Some(size)) =
        (r.u8(), r.u16(), r.u32(), r.u64(), r.u64(), r.u64())
    else {
        return Ok(None);
    };
    if flags & !(R_HEAP | R_EXPIRES | R_UNSYNCED) != 0 {
        return Err(format!("record with unknown flags {flags:#x}"));
    }
    let key_len = key_len as usize;
    if key_len == 0 || key_len > MAX_KEY_LEN {
        return Err(format!("record with a key of {key_len} bytes"));
    }
    let expires_micros = match flags & R_EXPIRES {
        0 => None,
        _ => match r.u64() {
            Some(at) => Some(at),
            None => return Ok(None),
        },
    };
    let expires = expires_micros.is_some();
    let fp = match fingerprints {
        false => None,
        true => match r.bytes(16) {
            Some(b) => {
                let mut fp = [0u8; 16];
                fp.copy_from_slice(b);
                Some(Fingerprint::from_le_bytes(fp))
            }
            None => return Ok(None),
        },
    };
    let key: Box<[u8]> = if fp.is_none() || expires {
        let Some(key) = r.bytes(key_len) else {
            return Ok(None);
        };
        key.into()
    } else {
        Box::default()
    };
    let (value, tuple_len) = if flags & R_HEAP == 0 {
        if flags & R_UNSYNCED != 0 {
            return Err("inline record marked unsynced".into());
        }
        let len = usize::try_from(size).map_err(|_| "inline size out of range")?;
        if len > crate::options::MAX_INLINE_THRESHOLD {
            return Err(format!("inline record of {size} bytes"));
        }
        (
            TupleValue::Inline(bytes::Bytes::new()),
            tuple::inline_len(key_len, size, expires),
        )
    } else {
        let Some(n) = r.u16() else { return Ok(None) };
        let mut pieces = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let (Some(start), Some(order)) = (r.u64(), r.u8()) else {
                return Ok(None);
            };
            if order > 40 {
                return Err("piece order out of range".into());
            }
            pieces.push(Piece { start, order });
        }
        let Some(kind) = r.u8() else { return Ok(None) };
        let sums = match kind {
            S_NONE => Checksums::None,
            S_WHOLE | S_TABLE => {
                let Some(c) = r.u32() else { return Ok(None) };
                if kind == S_WHOLE {
                    Checksums::Whole(c)
                } else {
                    Checksums::Table(c)
                }
            }
            S_BLOCKS => {
                let Some(n) = r.u16() else { return Ok(None) };
                if n as usize > tuple::MAX_TUPLE_SUMS {
                    return Err(format!("record with {n} block checksums"));
                }
                let mut list = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let Some(c) = r.u32() else { return Ok(None) };
                    list.push(c);
                }
                Checksums::Blocks(list.into())
            }
            k => return Err(format!("record with checksum kind {k}")),
        };
        let len = tuple::heap_len(key_len, pieces.len(), &sums, expires);
        (
            TupleValue::Heap {
                pieces,
                sums,
                unsynced: flags & R_UNSYNCED != 0,
            },
            len,
        )
    };
    let at = r.pos();
    Ok(Some((
        Record {
            block,
            tuple: Tuple {
                key,
                version,
                created_micros,
                size,
                expires_micros,
                value,
            },
            tuple_len,
            key_len: key_len as u16,
            fp,
        },
        at,
    )))
}

/// The image's bytes, logical offset → device offset, over its pieces in
/// order.
pub(crate) fn device_offset(pieces: &[Piece], mut at: u64) -> Option<(u64, u64)> {
    for p in pieces {
        if at < p.len_bytes() {
            return Some((p.offset() + at, p.len_bytes() - at));
        }
        at -= p.len_bytes();
    }
    None
}

/// Total bytes of `pieces`.
pub(crate) fn pieces_len(pieces: &[Piece]) -> u64 {
    pieces.iter().map(Piece::len_bytes).sum()
}

#[cfg(test)]
mod tests;
