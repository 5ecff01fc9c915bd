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
/// The newest format version this build reads: 7, a journaled store whose
/// superblock names an index image (`meta::image`) and the change map of
/// the tuple blocks written since (`meta::image::changes`). The image stays
/// named while the store runs; a build that does not know the map would
/// load the image and miss every change since, so such builds must refuse
/// it.
pub const FORMAT_VERSION: u32 = 7;
/// The version of a store whose superblock names an index image without a
/// change map (written by builds before the map): a read-write open drops
/// that image before anything changes.
pub const IMAGE_FORMAT_VERSION: u32 = 6;
/// The version of a journaled store whose metadata extents outgrew the
/// superblock's list (the rest are in an extent table). A store is written
/// as 5 only from then on, so builds that read up to 4 keep opening every
/// store that does not need it.
pub const EXTENT_TABLE_FORMAT_VERSION: u32 = 5;
/// The version of a new store (one slot per tuple block and a metadata
/// journal), until its extent table is first written.
pub const JOURNALED_FORMAT_VERSION: u32 = 4;
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
/// Most metadata extents the superblock itself lists; more go to the
/// extent table (format 5).
pub const MAX_META_EXTENTS: usize = 200;
/// Most metadata extents a store can have (the superblock's count field is
/// 16 bits): 200 in the superblock, the rest in the extent table.
pub const MAX_TOTAL_META_EXTENTS: usize = u16::MAX as usize;

/// A journaled store's metadata area grows by at most this fraction of its
/// size at a time (`Superblock::next_extent_order`)...
const EXTENT_STEP_FRACTION: u64 = 8;
/// ... and by at least a piece of this order (256 KiB), so a small store
/// does not grow (and publish its superblock) every few tuple blocks.
const MIN_EXTENT_STEP_ORDER: u8 = 6;
/// Extent table magic (8 bytes).
pub const EXTENT_TABLE_MAGIC: &[u8; 8] = b"BCXTABLE";
/// Extent table header: magic, store id, entry count, checksum, reserved.
const XT_STORE_ID: usize = 8;
const XT_COUNT: usize = 16;
const XT_CRC: usize = 20;
const XT_ENTRIES: usize = 32;

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
    /// Where the metadata extents beyond the first `MAX_META_EXTENTS` are
    /// listed (format 5): a piece holding two copies of the extent table
    /// (see `encode_extent_table`).
    pub extent_table: Option<MetaExtent>,
    /// The index image written at the last clean close (format 6): its
    /// first piece and the clean sequence it reflects (see `meta::image`).
    pub index_image: Option<ImageRef>,
    /// The change map beside the index image (format 7): which tuple blocks
    /// were written since the image's stamp (see `meta::image::changes`).
    /// Named only together with an image.
    pub change_map: Option<MetaExtent>,
    /// Extents listed in the extent table that are not in `meta_extents`
    /// yet: set by [`decode`](Self::decode), cleared once the table is read
    /// ([`Self::add_table`]). A superblock is encoded only with none
    /// outstanding.
    pub unread_extents: usize,
}

/// Where a store's index image starts and which state it reflects: the
/// superblock's reference to it (format 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRef {
    /// The image's first piece, whose first block is the image header.
    pub start: u64,
    /// That piece's buddy order.
    pub order: u8,
    /// The clean sequence the image reflects (the superblock's
    /// `clean_seq` when it was written).
    pub seq: u64,
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
/// The extent table's piece (format 5): start u64, order u8.
const SB_EXTENT_TABLE: usize = SB_JOURNAL + 9;
/// The index image (format 6): first piece start u64, order u8, the clean
/// sequence it reflects u64.
const SB_INDEX_IMAGE: usize = SB_EXTENT_TABLE + 9;
/// The change map (format 7): start block u64, order u8.
const SB_CHANGE_MAP: usize = SB_INDEX_IMAGE + 17;
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
        assert!(self.unread_extents == 0, "the extent table was never read");
        assert!(self.meta_extents.len() <= MAX_TOTAL_META_EXTENTS);
        assert!(self.meta_extents.len() <= MAX_META_EXTENTS || self.extent_table.is_some());
        w.at(SB_EXTENT_COUNT).u16(self.meta_extents.len() as u16);
        w.at(SB_CLEAN_SEQ).u64(self.clean_seq);
        for (i, e) in self.meta_extents.iter().take(MAX_META_EXTENTS).enumerate() {
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
        if let Some(t) = &self.extent_table {
            w.at(SB_EXTENT_TABLE).u64(t.start).u8(t.order);
        }
        if let Some(i) = &self.index_image {
            w.at(SB_INDEX_IMAGE).u64(i.start).u8(i.order).u64(i.seq);
        }
        if let Some(m) = &self.change_map {
            w.at(SB_CHANGE_MAP).u64(m.start).u8(m.order);
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
        if count > MAX_META_EXTENTS && format_version < 5 {
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
        let meta_extents = (0..count.min(MAX_META_EXTENTS))
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
        let table = MetaExtent {
            start: u64_at(SB_EXTENT_TABLE)?,
            order: u8_at(SB_EXTENT_TABLE + 8)?,
        };
        let extent_table = match (format_version >= 5, table.start, count > MAX_META_EXTENTS) {
            (_, 0, false) => None,
            (false, _, _) => return Err(corrupt("of a version before 5 names an extent table")),
            (true, 0, true) => {
                return Err(corrupt("lists more extents than it holds, and no table"))
            }
            (true, s, _)
                if s < SUPER_BLOCKS
                    || table.order > max_order
                    || table.order
                        != Superblock::extent_table_order(
                            count.saturating_sub(MAX_META_EXTENTS),
                        ) =>
            {
                return Err(corrupt("extent table out of range"))
            }
            (true, _, _) => Some(table),
        };
        let image = ImageRef {
            start: u64_at(SB_INDEX_IMAGE)?,
            order: u8_at(SB_INDEX_IMAGE + 8)?,
            seq: u64_at(SB_INDEX_IMAGE + 9)?,
        };
        let index_image = match (format_version >= 6, image.start) {
            (false, 0) => None,
            (false, _) => return Err(corrupt("of a version before 6 names an index image")),
            (true, 0) => return Err(corrupt("of version 6 names no index image")),
            (true, s) if s < SUPER_BLOCKS || image.order > max_order => {
                return Err(corrupt("index image out of range"))
            }
            (true, _) => Some(image),
        };
        let map = MetaExtent {
            start: u64_at(SB_CHANGE_MAP)?,
            order: u8_at(SB_CHANGE_MAP + 8)?,
        };
        let change_map = match (format_version >= FORMAT_VERSION, map.start) {
            (false, 0) => None,
            (false, _) => return Err(corrupt("of a version before 7 names a change map")),
            (true, 0) => return Err(corrupt("of version 7 names no change map")),
            (true, _) if index_image.is_none() => {
                return Err(corrupt("names a change map without an index image"))
            }
            (true, s) if s < SUPER_BLOCKS || map.order > max_order => {
                return Err(corrupt("change map out of range"))
            }
            (true, _) => Some(map),
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
            extent_table,
            index_image,
            change_map,
            unread_extents: count.saturating_sub(MAX_META_EXTENTS),
        }))
    }

    /// Adds the extents the extent table lists (the two copies of the table
    /// piece, as read): the first copy that checks out is used, and what was
    /// wrong with a damaged one is returned. A table that does not hold what
    /// the superblock says it does is `Corrupt`.
    pub fn add_table(&mut self, piece: &[u8]) -> Result<Option<String>> {
        if self.unread_extents == 0 {
            return Ok(None);
        }
        let half = piece.len() / 2;
        let copies = [piece.get(..half), piece.get(half..)];
        let mut why = Vec::new();
        let mut good = None;
        // Both copies are checked, so a damaged one is found (and
        // rewritten) while the other still serves.
        for (i, copy) in copies.into_iter().enumerate() {
            match copy.map(|c| decode_extent_table(c, self.store_id, self.unread_extents)) {
                Some(Ok(extents)) => {
                    good.get_or_insert(extents);
                }
                Some(Err(e)) => why.push(format!("copy {i}: {e}")),
                None => why.push(format!("copy {i}: truncated")),
            }
        }
        if let Some(extents) = good {
            self.meta_extents.extend(extents);
            self.unread_extents = 0;
            return Ok(why.pop());
        }
        Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "metadata extent table damaged ({}); restore the store from a backup",
                why.join("; ")
            ),
        ))
    }

    /// The order of a piece holding two copies of a table of `n` extents.
    pub fn extent_table_order(n: usize) -> u8 {
        let blocks = (XT_ENTRIES + n * SB_EXTENT_LEN).div_ceil(BLOCK_SIZE) * 2;
        (usize::BITS - (blocks.max(1) - 1).leading_zeros()) as u8
    }

    /// The order the next metadata extent asks for (the allocator may give
    /// a smaller one on a fragmented or full heap). A journaled store grows
    /// its metadata area by the largest power of two at most an eighth of its
    /// size (at least 256 KiB, or a 64th of a smaller store), so the newest
    /// extent, the only one not yet
    /// full, is at most about a ninth of the area: stores do not
    /// keep up to half their metadata area empty, as doubling did. Two-slot
    /// (version-3) stores still double, as their superblock's list of 200
    /// extents is all they have. Both are capped at the largest piece;
    /// never below order 1.
    pub fn next_extent_order(&self) -> u8 {
        let order = match self.layout() {
            Layout::Paired => self
                .meta_extents
                .last()
                .map_or(1, |e| e.order.saturating_add(1)),
            Layout::Journaled(_) => {
                let blocks: u64 = self.meta_extents.iter().map(|e| 1u64 << e.order).sum();
                // The least step, but never more than a 64th of the store: a
                // small fixed store keeps its room for data.
                let least = (self.total_blocks() / 64)
                    .checked_ilog2()
                    .map_or(1, |o| o as u8)
                    .min(MIN_EXTENT_STEP_ORDER);
                (blocks / EXTENT_STEP_FRACTION)
                    .checked_ilog2()
                    .map_or(0, |o| o as u8)
                    .max(least)
            }
        };
        order.clamp(1, self.max_order.max(1))
    }

    /// How the store's tuple blocks are laid out.
    pub fn layout(&self) -> Layout {
        self.journal.map_or(Layout::Paired, Layout::Journaled)
    }

    /// The format version this build writes for this store: 7 while it
    /// names an index image and its change map, 6 an image alone, 5 once
    /// it has an extent table, 4 with a journal, else 3 (two-slot stores
    /// are not converted).
    pub fn current_version(&self) -> u32 {
        match (self.layout(), self.extent_table, self.index_image) {
            (_, _, Some(_)) if self.change_map.is_some() => FORMAT_VERSION,
            (_, _, Some(_)) => IMAGE_FORMAT_VERSION,
            (_, Some(_), None) => EXTENT_TABLE_FORMAT_VERSION,
            (Layout::Paired, None, None) => PAIRED_FORMAT_VERSION,
            (Layout::Journaled(_), None, None) => JOURNALED_FORMAT_VERSION,
        }
    }

    /// Total blocks covered by the store.
    pub fn total_blocks(&self) -> u64 {
        self.capacity >> BLOCK_SHIFT
    }
}

/// The extent table's piece for the extents beyond the superblock's list:
/// two identical copies, one per half of a piece of `order`, each a header
/// (magic, store id, count, CRC32C of the copy with its CRC field zeroed)
/// and the entries (start u64, order u8), zero-filled to the half's end.
pub fn encode_extent_table(extents: &[MetaExtent], store_id: u64, order: u8) -> Vec<u8> {
    let half = (BLOCK_SIZE << order) / 2;
    let mut copy = Vec::with_capacity(half);
    let mut w = RecordWriter::new(&mut copy);
    w.bytes(EXTENT_TABLE_MAGIC);
    w.at(XT_STORE_ID).u64(store_id);
    w.at(XT_COUNT).u32(extents.len() as u32);
    w.at(XT_ENTRIES);
    for e in extents {
        w.u64(e.start).u8(e.order);
    }
    assert!(copy.len() <= half, "extent table larger than its piece");
    copy.resize(half, 0);
    let crc = crc32c::crc32c(&copy);
    if let Some(f) = copy.get_mut(XT_CRC..XT_CRC + 4) {
        f.copy_from_slice(&crc.to_le_bytes());
    }
    let mut piece = copy.clone();
    piece.extend_from_slice(&copy);
    piece
}

/// One copy of the extent table: its `count` entries, checked.
fn decode_extent_table(
    copy: &[u8],
    store_id: u64,
    count: usize,
) -> std::result::Result<Vec<MetaExtent>, String> {
    if !copy.starts_with(EXTENT_TABLE_MAGIC) {
        return Err("no extent table magic".into());
    }
    let mut zeroed = copy.to_vec();
    let crc = get_u32(copy, XT_CRC).ok_or("truncated")?;
    if let Some(f) = zeroed.get_mut(XT_CRC..XT_CRC + 4) {
        f.fill(0);
    }
    if crc32c::crc32c(&zeroed) != crc {
        return Err("checksum mismatch".into());
    }
    if get_u64(copy, XT_STORE_ID) != Some(store_id) {
        return Err("another store's table".into());
    }
    if get_u32(copy, XT_COUNT) != Some(count as u32) {
        return Err(format!(
            "lists {:?} extents, the superblock {count}",
            get_u32(copy, XT_COUNT)
        ));
    }
    (0..count)
        .map(|i| {
            let at = XT_ENTRIES + i * SB_EXTENT_LEN;
            match (get_u64(copy, at), copy.get(at + 8)) {
                (Some(start), Some(&order)) if start >= SUPER_BLOCKS && order > 0 => {
                    Ok(MetaExtent { start, order })
                }
                _ => Err(format!("entry {i} out of range")),
            }
        })
        .collect()
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
pub(crate) mod doc_tables;
#[cfg(test)]
mod tests;
