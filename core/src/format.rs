//! Byte-level format constants and the superblock codec.
//!
//! Layout of a store (see `core/FORMAT.md` for the full description):
//!
//! ```text
//! block 0   superblock slot A      } two slots, the valid one with the
//! block 1   superblock slot B      } higher sequence number wins
//! block 2.. heap: buddy-allocated pieces holding object data and the
//!           metadata extents (tuple blocks), listed in the superblock
//! ```
//!
//! All integers are little endian. Every block-sized structure starts with a
//! magic, carries a CRC32C and the store id, so a block of another store or
//! of user data is never mistaken for metadata.

use crate::error::{Error, ErrorKind, Result};

/// The device block: unit of direct I/O, allocation and metadata writes.
pub const BLOCK_SIZE: usize = 4096;
/// log2 of [`BLOCK_SIZE`].
pub const BLOCK_SHIFT: u32 = 12;
/// Superblock magic (8 bytes).
pub const SUPER_MAGIC: &[u8; 8] = b"BLOBCASK";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;
/// Oldest format version this build opens (and upgrades on first write).
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Blocks reserved at the start of the file for the two superblock slots.
pub const SUPER_BLOCKS: u64 = 2;
/// Most metadata extents the superblock can list.
pub const MAX_META_EXTENTS: usize = 200;

/// A metadata extent: a buddy piece holding tuple blocks (two slots each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaExtent {
    /// First block of the extent (absolute, in blocks from file start).
    pub start: u64,
    /// Buddy order: the extent spans `1 << order` blocks.
    pub order: u8,
}

impl MetaExtent {
    /// Number of logical tuple blocks (two physical slots each).
    pub fn tuple_blocks(&self) -> u64 {
        (1u64 << self.order) / 2
    }
}

/// The store's geometry and identity, written at creation and rewritten
/// only when the metadata area grows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Format version the store was written with.
    pub format_version: u32,
    /// Block size in bytes (always [`BLOCK_SIZE`]).
    pub block_size: u32,
    /// Total bytes of the file or device covered by the store.
    pub capacity: u64,
    /// Largest buddy order (a piece of `BLOCK_SIZE << max_order` bytes).
    pub max_order: u8,
    /// Random id stamped into every tuple block.
    pub store_id: u64,
    /// Incremented at each rewrite; the valid slot with the larger wins.
    pub seq: u64,
    /// Creation time, microseconds since the Unix epoch.
    pub created_micros: u64,
    /// Sequence of the last tuple-block group when the store was closed
    /// cleanly (0 otherwise): open skips verifying that group's objects
    /// when the newest tuple blocks still carry it.
    pub clean_seq: u64,
    /// Metadata extents in allocation order.
    pub meta_extents: Vec<MetaExtent>,
}

// Superblock field offsets.
const SB_VERSION: usize = 8;
const SB_BLOCK_SIZE: usize = 12;
const SB_CAPACITY: usize = 16;
const SB_MAX_ORDER: usize = 24;
const SB_STORE_ID: usize = 32;
const SB_SEQ: usize = 40;
const SB_CREATED: usize = 48;
const SB_EXTENT_COUNT: usize = 56;
const SB_CLEAN_SEQ: usize = 64;
const SB_EXTENTS: usize = 72;
const SB_EXTENT_LEN: usize = 9;
const SB_CRC: usize = BLOCK_SIZE - 4;

impl Superblock {
    /// Encodes into one block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK_SIZE];
        b[..8].copy_from_slice(SUPER_MAGIC);
        put_u32(&mut b, SB_VERSION, self.format_version);
        put_u32(&mut b, SB_BLOCK_SIZE, self.block_size);
        put_u64(&mut b, SB_CAPACITY, self.capacity);
        b[SB_MAX_ORDER] = self.max_order;
        put_u64(&mut b, SB_STORE_ID, self.store_id);
        put_u64(&mut b, SB_SEQ, self.seq);
        put_u64(&mut b, SB_CREATED, self.created_micros);
        assert!(self.meta_extents.len() <= MAX_META_EXTENTS);
        put_u16(&mut b, SB_EXTENT_COUNT, self.meta_extents.len() as u16);
        put_u64(&mut b, SB_CLEAN_SEQ, self.clean_seq);
        for (i, e) in self.meta_extents.iter().enumerate() {
            let at = SB_EXTENTS + i * SB_EXTENT_LEN;
            put_u64(&mut b, at, e.start);
            b[at + 8] = e.order;
        }
        let crc = crc32c::crc32c(&b[..SB_CRC]);
        put_u32(&mut b, SB_CRC, crc);
        b
    }

    /// Decodes one slot. `Ok(None)` means the slot holds no superblock at all
    /// (never written); a slot with our magic but a bad checksum or an
    /// impossible field is `Corrupt`; a newer format is `Unsupported`.
    pub fn decode(b: &[u8]) -> Result<Option<Superblock>> {
        if b.len() < BLOCK_SIZE {
            return Err(Error::new(ErrorKind::Corrupt, "superblock truncated"));
        }
        if &b[..8] != SUPER_MAGIC {
            return Ok(None);
        }
        if get_u32(b, SB_CRC) != crc32c::crc32c(&b[..SB_CRC]) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock checksum mismatch",
            ));
        }
        let format_version = get_u32(b, SB_VERSION);
        if format_version > FORMAT_VERSION {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "store has format version {format_version}; this build reads up to {FORMAT_VERSION}"
                ),
            ));
        }
        if format_version < MIN_FORMAT_VERSION {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("superblock format version {format_version} is not a version blobcask ever wrote"),
            ));
        }
        let block_size = get_u32(b, SB_BLOCK_SIZE);
        if block_size as usize != BLOCK_SIZE {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("store block size {block_size} differs from {BLOCK_SIZE}"),
            ));
        }
        let count = get_u16(b, SB_EXTENT_COUNT) as usize;
        if count > MAX_META_EXTENTS {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock lists too many metadata extents",
            ));
        }
        let max_order = b[SB_MAX_ORDER];
        if max_order > 40 {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock max order out of range",
            ));
        }
        let meta_extents = (0..count)
            .map(|i| {
                let at = SB_EXTENTS + i * SB_EXTENT_LEN;
                MetaExtent {
                    start: get_u64(b, at),
                    order: b[at + 8],
                }
            })
            .collect();
        Ok(Some(Superblock {
            format_version,
            block_size,
            capacity: get_u64(b, SB_CAPACITY),
            max_order,
            store_id: get_u64(b, SB_STORE_ID),
            seq: get_u64(b, SB_SEQ),
            created_micros: get_u64(b, SB_CREATED),
            clean_seq: get_u64(b, SB_CLEAN_SEQ),
            meta_extents,
        }))
    }

    /// Total blocks covered by the store.
    pub fn total_blocks(&self) -> u64 {
        self.capacity >> BLOCK_SHIFT
    }
}

pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Superblock {
        Superblock {
            format_version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            capacity: 1 << 30,
            max_order: 12,
            store_id: 0xdead_beef,
            seq: 3,
            created_micros: 1_700_000_000_000_000,
            clean_seq: 2,
            meta_extents: vec![MetaExtent {
                start: 64,
                order: 6,
            }],
        }
    }

    #[test]
    fn superblock_round_trips() {
        let sb = sample();
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), Some(sb));
    }

    #[test]
    fn superblock_flipped_byte_is_corrupt() {
        let enc = sample().encode();
        for at in [9, 20, 40, 70, BLOCK_SIZE - 1] {
            let mut b = enc.clone();
            b[at] ^= 0x40;
            assert_eq!(
                Superblock::decode(&b).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
    }

    #[test]
    fn superblock_truncated_is_corrupt() {
        let enc = sample().encode();
        assert_eq!(
            Superblock::decode(&enc[..100]).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }

    #[test]
    fn foreign_block_is_not_a_superblock() {
        assert_eq!(Superblock::decode(&[0x7fu8; BLOCK_SIZE]).unwrap(), None);
    }

    #[test]
    fn newer_format_is_unsupported() {
        let mut sb = sample();
        sb.format_version = FORMAT_VERSION + 1;
        assert_eq!(
            Superblock::decode(&sb.encode()).unwrap_err().kind(),
            ErrorKind::Unsupported
        );
    }
}
