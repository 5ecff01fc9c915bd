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
/// The newest format version this build writes and reads: new stores get
/// it (one slot per tuple block and a metadata journal).
pub const FORMAT_VERSION: u32 = 4;
/// The version this build keeps writing for stores with two slots per
/// tuple block (created by versions 1 to 3): they are not converted.
pub const PAIRED_FORMAT_VERSION: u32 = 3;
/// Oldest format version this build opens (and upgrades on first write).
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Blocks reserved at the start of the file for the two superblock slots.
pub const SUPER_BLOCKS: u64 = 2;
/// Largest order of the metadata journal a new store gets (256 slots);
/// a group that needs more grows it.
pub const JOURNAL_ORDER: u8 = 8;
/// Most metadata extents the superblock can list.
pub const MAX_META_EXTENTS: usize = 200;

/// A metadata extent: a buddy piece holding tuple blocks, or the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaExtent {
    /// First block of the extent (absolute, in blocks from file start).
    pub start: u64,
    /// Buddy order: the extent spans `1 << order` blocks.
    pub order: u8,
}

impl MetaExtent {
    /// Number of logical tuple blocks the extent holds in `layout`.
    pub fn tuple_blocks(&self, layout: Layout) -> u64 {
        (1u64 << self.order) / layout.slots_per_block()
    }

    /// Byte offset of the extent's first block.
    pub fn offset(&self) -> u64 {
        self.start * BLOCK_SIZE as u64
    }

    /// Length in bytes.
    pub fn len_bytes(&self) -> u64 {
        (BLOCK_SIZE as u64) << self.order
    }
}

/// How tuple blocks are kept safe from torn writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Formats 1 to 3: two adjacent slots per tuple block, written in turn.
    Paired,
    /// Format 4: one slot per tuple block (its home), and a journal extent
    /// that holds a group's new images of blocks with state until their
    /// homes are rewritten and synced.
    Journaled(MetaExtent),
}

impl Layout {
    /// Physical slots per logical tuple block in the metadata extents.
    pub fn slots_per_block(self) -> u64 {
        match self {
            Layout::Paired => 2,
            Layout::Journaled(_) => 1,
        }
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
    /// The store's own settings (index kind, inline threshold, growth
    /// limit), used at open unless the caller sets them. `None` in stores
    /// written before settings were stored: the caller's options (or the
    /// defaults) apply, and a read-write open stores them.
    pub settings: Option<StoredSettings>,
    /// The metadata journal (format 4); `None` in stores with two slots
    /// per tuple block (formats 1 to 3).
    pub journal: Option<MetaExtent>,
}

/// Settings chosen at creation (or changed explicitly at a later open) that
/// a reopen must not silently lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredSettings {
    /// Index backend built at open.
    pub index: crate::index::IndexKind,
    /// Values of at most this many bytes are stored inline.
    pub inline_threshold: u16,
    /// Largest capacity automatic growth may reach; 0: no limit but the
    /// file system.
    pub max_capacity: u64,
    /// The largest capacity a caller asked for explicitly (at creation or
    /// a later open); 0: none. A later open asking for less is refused (a
    /// store never shrinks); asking for less than the store grew to by
    /// itself is fine.
    pub asked_capacity: u64,
}

impl StoredSettings {
    fn index_code(&self) -> u8 {
        match self.index {
            crate::index::IndexKind::Hash => 1,
            crate::index::IndexKind::BTree => 2,
            crate::index::IndexKind::Fst => 3,
        }
    }
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
/// The settings record, after the largest extent list.
const SB_SETTINGS: usize = SB_EXTENTS + MAX_META_EXTENTS * SB_EXTENT_LEN;
const SB_SETTINGS_FLAGS: usize = SB_SETTINGS;
const SB_SETTINGS_INDEX: usize = SB_SETTINGS + 1;
const SB_SETTINGS_INLINE: usize = SB_SETTINGS + 2;
const SB_SETTINGS_MAX_CAPACITY: usize = SB_SETTINGS + 8;
const SB_SETTINGS_ASKED_CAPACITY: usize = SB_SETTINGS + 16;
/// The journal extent (format 4): start block u64, order u8.
const SB_JOURNAL: usize = SB_SETTINGS + 24;
/// Settings-record flag: the record is present.
const SETTINGS_PRESENT: u8 = 1;
const SB_CRC: usize = BLOCK_SIZE - 4;

impl Superblock {
    /// Encodes into one block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOCK_SIZE);
        let mut w = RecordWriter::new(&mut b);
        w.bytes(SUPER_MAGIC);
        w.at(SB_VERSION).u32(self.format_version);
        w.at(SB_BLOCK_SIZE).u32(self.block_size);
        w.at(SB_CAPACITY).u64(self.capacity);
        w.at(SB_MAX_ORDER).u8(self.max_order);
        w.at(SB_STORE_ID).u64(self.store_id);
        w.at(SB_SEQ).u64(self.seq);
        w.at(SB_CREATED).u64(self.created_micros);
        assert!(self.meta_extents.len() <= MAX_META_EXTENTS);
        w.at(SB_EXTENT_COUNT).u16(self.meta_extents.len() as u16);
        w.at(SB_CLEAN_SEQ).u64(self.clean_seq);
        for (i, e) in self.meta_extents.iter().enumerate() {
            w.at(SB_EXTENTS + i * SB_EXTENT_LEN)
                .u64(e.start)
                .u8(e.order);
        }
        if let Some(st) = &self.settings {
            w.at(SB_SETTINGS_FLAGS).u8(SETTINGS_PRESENT);
            w.at(SB_SETTINGS_INDEX).u8(st.index_code());
            w.at(SB_SETTINGS_INLINE).u16(st.inline_threshold);
            w.at(SB_SETTINGS_MAX_CAPACITY).u64(st.max_capacity);
            w.at(SB_SETTINGS_ASKED_CAPACITY).u64(st.asked_capacity);
        }
        if let Some(j) = &self.journal {
            w.at(SB_JOURNAL).u64(j.start).u8(j.order);
        }
        w.at(SB_CRC);
        let crc = crc32c::crc32c(&b);
        RecordWriter::new(&mut b).u32(crc);
        b
    }

    /// Decodes one slot. `Ok(None)` means the slot holds no superblock at all
    /// (never written); a slot with our magic but a bad checksum or an
    /// impossible field is `Corrupt`; a newer format is `Unsupported`.
    pub fn decode(b: &[u8]) -> Result<Option<Superblock>> {
        let truncated = || Error::new(ErrorKind::Corrupt, "superblock truncated");
        // Every field lies before the checksum, so a slot that holds the
        // checksum holds them all; the reads below cannot fail after this.
        let Some((body, crc)) = b.get(..BLOCK_SIZE).and_then(|b| b.split_at_checked(SB_CRC)) else {
            return Err(truncated());
        };
        if !body.starts_with(SUPER_MAGIC) {
            return Ok(None);
        }
        if get_u32(crc, 0) != Some(crc32c::crc32c(body)) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock checksum mismatch",
            ));
        }
        let u8_at = |at: usize| body.get(at).copied().ok_or_else(truncated);
        let u16_at = |at: usize| get_u16(body, at).ok_or_else(truncated);
        let u32_at = |at: usize| get_u32(body, at).ok_or_else(truncated);
        let u64_at = |at: usize| get_u64(body, at).ok_or_else(truncated);
        let format_version = u32_at(SB_VERSION)?;
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
        let block_size = u32_at(SB_BLOCK_SIZE)?;
        if block_size as usize != BLOCK_SIZE {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("store block size {block_size} differs from {BLOCK_SIZE}"),
            ));
        }
        let count = u16_at(SB_EXTENT_COUNT)? as usize;
        if count > MAX_META_EXTENTS {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock lists too many metadata extents",
            ));
        }
        let max_order = u8_at(SB_MAX_ORDER)?;
        if max_order > 40 {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "superblock max order out of range",
            ));
        }
        let meta_extents = (0..count)
            .map(|i| {
                let at = SB_EXTENTS + i * SB_EXTENT_LEN;
                Ok(MetaExtent {
                    start: u64_at(at)?,
                    order: u8_at(at + 8)?,
                })
            })
            .collect::<Result<_>>()?;
        let corrupt = |m: &str| Error::new(ErrorKind::Corrupt, format!("superblock {m}"));
        let settings = match u8_at(SB_SETTINGS_FLAGS)? {
            0 => None,
            SETTINGS_PRESENT => Some(StoredSettings {
                index: match u8_at(SB_SETTINGS_INDEX)? {
                    1 => crate::index::IndexKind::Hash,
                    2 => crate::index::IndexKind::BTree,
                    3 => crate::index::IndexKind::Fst,
                    _ => return Err(corrupt("names an unknown index kind")),
                },
                inline_threshold: match u16_at(SB_SETTINGS_INLINE)? {
                    t if t as usize <= crate::options::MAX_INLINE_THRESHOLD => t,
                    _ => return Err(corrupt("inline threshold out of range")),
                },
                max_capacity: match u64_at(SB_SETTINGS_MAX_CAPACITY)? {
                    m if m == 0 || m >= crate::options::MIN_CAPACITY => m,
                    _ => return Err(corrupt("max capacity below the smallest store")),
                },
                asked_capacity: u64_at(SB_SETTINGS_ASKED_CAPACITY)?,
            }),
            _ => return Err(corrupt("settings flags unknown")),
        };
        let journal = MetaExtent {
            start: u64_at(SB_JOURNAL)?,
            order: u8_at(SB_JOURNAL + 8)?,
        };
        let journal = match (format_version >= 4, journal.start) {
            (false, 0) => None,
            (false, _) => return Err(corrupt("of a version before 4 names a journal")),
            (true, s) if s < SUPER_BLOCKS || journal.order == 0 || journal.order > max_order => {
                return Err(corrupt("journal extent out of range"))
            }
            (true, _) => Some(journal),
        };
        Ok(Some(Superblock {
            format_version,
            block_size,
            capacity: u64_at(SB_CAPACITY)?,
            max_order,
            store_id: u64_at(SB_STORE_ID)?,
            seq: u64_at(SB_SEQ)?,
            created_micros: u64_at(SB_CREATED)?,
            clean_seq: u64_at(SB_CLEAN_SEQ)?,
            meta_extents,
            settings,
            journal,
        }))
    }

    /// How the store's tuple blocks are laid out.
    pub fn layout(&self) -> Layout {
        self.journal.map_or(Layout::Paired, Layout::Journaled)
    }

    /// The format version this build writes for this store: 4 with a
    /// journal, else 3 (two-slot stores are not converted).
    pub fn current_version(&self) -> u32 {
        match self.layout() {
            Layout::Paired => PAIRED_FORMAT_VERSION,
            Layout::Journaled(_) => FORMAT_VERSION,
        }
    }

    /// Total blocks covered by the store.
    pub fn total_blocks(&self) -> u64 {
        self.capacity >> BLOCK_SHIFT
    }
}

/// Builds a little-endian record field by field, appending to a `Vec`:
/// each field is placed at its named offset (the gap before it zero-filled),
/// so an encoder reads like the layout table in FORMAT.md and cannot write
/// out of bounds. Offsets are relative to where the record starts.
pub(crate) struct RecordWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> RecordWriter<'a> {
    /// Starts a record at the current end of `out`.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        let start = out.len();
        RecordWriter { out, start }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.out.len() - self.start
    }

    /// Moves to record offset `at`, zero-filling up to it. Fields are
    /// written in offset order: `at` is never before the end of the
    /// previous field.
    pub(crate) fn at(&mut self, at: usize) -> &mut Self {
        debug_assert!(at >= self.len(), "field at {at} overlaps the previous one");
        self.out.resize(self.start + at, 0);
        self
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.out.extend_from_slice(v);
        self
    }

    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes(&[v])
    }

    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
}

/// Reads a little-endian record field by field from the front of a slice:
/// every read is checked, `None` once the slice ends, so a decoder built on
/// it cannot panic on truncated or damaged bytes.
pub(crate) struct RecordReader<'a> {
    rest: &'a [u8],
    pos: usize,
}

impl<'a> RecordReader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        RecordReader { rest: b, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        self.pos += n;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        self.pos += N;
        Some(*head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.array().map(u8::from_le_bytes)
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
}

/// The `N` bytes at `at`; `None` when `b` ends before them.
fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The little-endian `u16` at `at`; `None` when `b` is too short.
pub(crate) fn get_u16(b: &[u8], at: usize) -> Option<u16> {
    field(b, at).map(u16::from_le_bytes)
}
/// The little-endian `u32` at `at`; `None` when `b` is too short.
pub(crate) fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    field(b, at).map(u32::from_le_bytes)
}
/// The little-endian `u64` at `at`; `None` when `b` is too short.
pub(crate) fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    field(b, at).map(u64::from_le_bytes)
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
            settings: Some(StoredSettings {
                index: crate::index::IndexKind::BTree,
                inline_threshold: 700,
                max_capacity: 5 << 30,
                asked_capacity: 1 << 30,
            }),
            journal: Some(MetaExtent { start: 2, order: 8 }),
        }
    }

    #[test]
    fn superblock_round_trips() {
        let sb = sample();
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), Some(sb.clone()));
        let mut old = sb;
        old.settings = None;
        assert_eq!(Superblock::decode(&old.encode()).unwrap(), Some(old));
    }

    #[test]
    fn settings_out_of_range_are_corrupt() {
        // Bytes that pass the checksum but name nothing this build wrote.
        for (at, v) in [(SB_SETTINGS_FLAGS, 2u8), (SB_SETTINGS_INDEX, 9)] {
            let mut b = sample().encode();
            b[at] = v;
            let crc = crc32c::crc32c(&b[..SB_CRC]);
            b[SB_CRC..].copy_from_slice(&crc.to_le_bytes());
            let e = Superblock::decode(&b).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        }
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
