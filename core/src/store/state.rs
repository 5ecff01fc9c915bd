//! The in-memory state readers see: one [`Entry`] per committed object
//! version in the [`State`] table that the index points into, where each
//! value is ([`Stored`], [`ObjectData`]), and the [`Extent`] handles that
//! keep a heap object's pieces allocated.
//!
//! Invariants kept here:
//! * an extent's pieces return to the allocator only when its last handle
//!   drops; the index holds one until the change that unlinked the extent
//!   is durable, and every read in flight holds one, so space is never
//!   reused under a reader nor before its tuple is gone (invariant 2);
//! * a block's slot in `State::slots` changes only together with the
//!   entries it serves (one write lock), and its write count moves with
//!   every published write of the block, so a read that saw the count
//!   unchanged read no rewrite of it (invariant 8);
//! * `State::logical_bytes` and `State::heap_bytes` are the sums over the
//!   table's entries: every way in and out of the table adjusts them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::ObjectInfo;
use crate::alloc::BuddyAllocator;
use crate::index::{EntryId, KeyIndex};
use crate::meta::tuple::{self, Checksums, Piece, TupleValue};

/// Heap pieces of one object version. Dropping the last handle returns the
/// pieces to the allocator. Handles are held by the index entry (until the
/// change that unlinks it is durable) and by every read in flight, so the
/// pieces are reused only after both let go (see `loom_models`).
pub(crate) struct Extent {
    pub pieces: Vec<Piece>,
    /// The allocator the pieces return to (the store's; a loom model's own).
    pub alloc: crate::sync::Arc<crate::sync::Mutex<BuddyAllocator>>,
}

impl Drop for Extent {
    fn drop(&mut self) {
        let mut a = self.alloc.lock();
        for p in self.pieces.drain(..) {
            a.free(p);
        }
    }
}

impl Extent {
    pub fn bytes(&self) -> u64 {
        self.pieces.iter().map(Piece::len_bytes).sum()
    }
}

/// Where an object's value is.
#[derive(Clone)]
pub(crate) enum ObjectData {
    Inline(Bytes),
    /// Heap pieces and the checksums of their bytes. `unsynced` is set when
    /// the bytes were not synced before the tuple (small puts), so recovery
    /// reads them back for the newest group.
    Heap {
        extent: Arc<Extent>,
        sums: Checksums,
        unsynced: bool,
    },
}

impl ObjectData {
    pub fn tuple_value(&self) -> TupleValue {
        match self {
            ObjectData::Inline(b) => TupleValue::Inline(b.clone()),
            ObjectData::Heap {
                extent,
                sums,
                unsynced,
            } => TupleValue::Heap {
                pieces: extent.pieces.clone(),
                sums: sums.clone(),
                unsynced: *unsynced,
            },
        }
    }
}

/// A heap object's value: its pieces and the checksums of their bytes.
pub(crate) fn heap(extent: Arc<Extent>, sums: Checksums, unsynced: bool) -> ObjectData {
    ObjectData::Heap {
        extent,
        sums,
        unsynced,
    }
}

/// One committed object version, as the index sees it. The key itself is
/// not here: it lives in the index (and on disk in the tuple), so a backend
/// that compresses keys (FST) really saves their memory. Neither is an
/// inline value once its tuple block is written: reads take it from the
/// block, through the read cache. Kept small (32 bytes, `Option<Entry>`
/// too): there is one per object; what only some objects have (a heap
/// value, bytes not yet written, an expiry) is behind `data`'s pointer.
pub(crate) struct Entry {
    pub version: u64,
    pub created_micros: u64,
    pub data: Stored,
    /// Tuple block holding this entry's tuple.
    pub block: u32,
    /// The key's length (bits 0..`KEY_BITS`: keys are 1..=`MAX_KEY_LEN`
    /// bytes, so this is never zero, which makes `Option<Entry>` no larger
    /// than an entry) and the object's size above them, or `LARGE` there
    /// for a size that does not fit, which the heap value then holds.
    small: std::num::NonZeroU32,
}

/// Bits of `Entry::small` holding the key's length (up to 2047).
const KEY_BITS: u32 = 11;
/// `Entry::small`'s size bits of an object whose size the heap value holds
/// (every inline value fits below: at most `MAX_INLINE_THRESHOLD` bytes).
const LARGE: u32 = u32::MAX >> KEY_BITS;

/// Where a committed version's value is (the entry's view of
/// [`ObjectData`]), and when it expires: one pointer, null for an inline
/// value on the device that never expires (most objects), which is read
/// from the block's current slot (`State::slots`).
pub(crate) struct Stored(Option<Box<Held>>);

/// What an entry holds behind its pointer.
struct Held {
    value: HeldValue,
    /// When it expires, µs since the epoch; 0: never.
    expires: u64,
}

/// Where the value of an entry with a [`Held`] is.
enum HeldValue {
    /// An inline value on the device (the entry has a `Held` only for its
    /// expiry).
    OnDevice,
    /// An inline value whose tuple block is not written yet: the bytes,
    /// until the commit path has written the block
    /// (`Committer::blocks_written`).
    Pending(Bytes),
    /// A heap object, with its size when the entry's bits cannot hold it
    /// (`LARGE`).
    Heap(HeapValue, u64),
}

/// A heap object's pieces and the checksums of their bytes (see
/// [`ObjectData::Heap`]).
#[derive(Clone)]
pub(crate) struct HeapValue {
    pub extent: Arc<Extent>,
    pub sums: Checksums,
    pub unsynced: bool,
}

impl Stored {
    /// An inline value in its written tuple block.
    pub const INLINE: Stored = Stored(None);

    fn held(value: HeldValue) -> Stored {
        Stored(Some(Box::new(Held { value, expires: 0 })))
    }

    /// The entry's form of a staged value: inline bytes are kept until
    /// their block is written.
    pub fn of(data: ObjectData) -> Stored {
        Stored::held(match data {
            ObjectData::Inline(b) => HeldValue::Pending(b),
            ObjectData::Heap {
                extent,
                sums,
                unsynced,
            } => HeldValue::Heap(
                HeapValue {
                    extent,
                    sums,
                    unsynced,
                },
                0,
            ),
        })
    }

    /// An inline value whose block is not written yet (open: a block
    /// recovery changed).
    pub fn pending(b: Bytes) -> Stored {
        Stored::held(HeldValue::Pending(b))
    }

    /// A heap object.
    pub fn heap_object(h: HeapValue) -> Stored {
        Stored::held(HeldValue::Heap(h, 0))
    }

    fn value(&self) -> Option<&HeldValue> {
        self.0.as_deref().map(|h| &h.value)
    }

    /// The value as staged data, when it is at hand (heap, or inline
    /// bytes not yet written); `None` for an inline value on the device.
    pub fn at_hand(&self) -> Option<ObjectData> {
        match self.value()? {
            HeldValue::OnDevice => None,
            HeldValue::Pending(b) => Some(ObjectData::Inline(b.clone())),
            HeldValue::Heap(h, _) => Some(heap(h.extent.clone(), h.sums.clone(), h.unsynced)),
        }
    }

    pub fn heap(&self) -> Option<&HeapValue> {
        match self.value() {
            Some(HeldValue::Heap(h, _)) => Some(h),
            _ => None,
        }
    }

    /// Whether the value is inline and read from its written block.
    pub fn is_inline_on_device(&self) -> bool {
        matches!(self.value(), None | Some(HeldValue::OnDevice))
    }

    /// Whether the value is inline and its block not written yet.
    pub fn is_pending(&self) -> bool {
        matches!(self.value(), Some(HeldValue::Pending(_)))
    }

    /// An inline value's block was written: it is read from there now
    /// (the pointer goes unless an expiry keeps it).
    pub fn mark_written(&mut self) {
        match self.0.as_deref_mut() {
            Some(h) if h.expires != 0 => {
                if matches!(h.value, HeldValue::Pending(_)) {
                    h.value = HeldValue::OnDevice;
                }
            }
            Some(Held {
                value: HeldValue::Pending(_),
                ..
            }) => self.0 = None,
            _ => {}
        }
    }

    /// When it expires (0: never).
    fn expires(&self) -> u64 {
        self.0.as_deref().map_or(0, |h| h.expires)
    }

    /// Sets when it expires (0: never), with a `Held` for it only when it
    /// does.
    fn set_expires(&mut self, at: u64) {
        match self.0.as_deref_mut() {
            Some(h) => h.expires = at,
            None if at != 0 => {
                self.0 = Some(Box::new(Held {
                    value: HeldValue::OnDevice,
                    expires: at,
                }))
            }
            None => {}
        }
    }

    fn heap_bytes(&self) -> u64 {
        self.heap().map_or(0, |h| h.extent.bytes())
    }
}

impl Entry {
    pub fn new(
        key_len: usize,
        version: u64,
        created_micros: u64,
        size: u64,
        expires_micros: Option<u64>,
        mut data: Stored,
        block: u32,
    ) -> Entry {
        // `check_key` and tuple decoding hold keys to 1..=1024 bytes.
        let key_bits = (key_len as u32).clamp(1, (1 << KEY_BITS) - 1);
        let size_bits = match u32::try_from(size) {
            Ok(s) if s < LARGE => s,
            // Only a heap value can be this large (inline values are at
            // most `MAX_INLINE_THRESHOLD` bytes): it holds the size.
            _ => {
                match data.0.as_deref_mut() {
                    Some(Held {
                        value: HeldValue::Heap(_, large),
                        ..
                    }) => *large = size,
                    _ => debug_assert!(false, "an inline value of {size} bytes"),
                }
                LARGE
            }
        };
        // 0 means "never": an expiry read as 0 (a hand-made tuple; the
        // store writes creation + at least 1 µs) is kept as 1, as long
        // past.
        data.set_expires(expires_micros.map_or(0, |at| at.max(1)));
        Entry {
            version,
            created_micros,
            data,
            block,
            small: std::num::NonZeroU32::new(key_bits | size_bits << KEY_BITS)
                .unwrap_or(std::num::NonZeroU32::MIN),
        }
    }

    pub fn key_len(&self) -> usize {
        (self.small.get() & ((1 << KEY_BITS) - 1)) as usize
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        match self.small.get() >> KEY_BITS {
            LARGE => match self.data.value() {
                Some(HeldValue::Heap(_, size)) => *size,
                _ => 0,
            },
            s => u64::from(s),
        }
    }

    /// When it expires, µs since the epoch (`None`: never).
    pub fn expires_micros(&self) -> Option<u64> {
        let at = self.data.expires();
        (at != 0).then_some(at)
    }

    /// Length of its encoded tuple.
    pub fn tuple_len(&self) -> usize {
        let expires = self.data.expires() != 0;
        match self.data.heap() {
            None => tuple::inline_len(self.key_len(), self.size(), expires),
            Some(h) => tuple::heap_len(self.key_len(), h.extent.pieces.len(), &h.sums, expires),
        }
    }

    /// Whether this version is visible now: not expired by the wall clock
    /// (the clock is read only for an entry that can expire).
    pub fn live(&self) -> bool {
        let at = self.data.expires();
        at == 0 || now_micros() < at
    }

    pub fn info(&self) -> ObjectInfo {
        ObjectInfo {
            size: self.size(),
            version: self.version,
            created: UNIX_EPOCH + Duration::from_micros(self.created_micros),
            inline: self.data.heap().is_none(),
            expires: self
                .expires_micros()
                .map(|at| UNIX_EPOCH + Duration::from_micros(at)),
        }
    }
}

/// Reader-visible state: the index and the entry table.
pub(crate) struct State {
    pub index: Box<dyn KeyIndex>,
    /// A cache store's eviction policy (`Options::eviction`), told of
    /// every object in and out of the table here, and of reads by
    /// [`lookup_read`](Self::lookup_read).
    pub policy: Option<super::evict::S3Fifo>,
    entries: Vec<Option<Entry>>,
    free_ids: Vec<EntryId>,
    pub logical_bytes: u64,
    pub heap_bytes: u64,
    /// Per tuple block, the device offset of the slot holding its written
    /// state (`NO_SLOT`: none yet), where inline values are read from, and
    /// how many writes of the block were published since open: a slot is
    /// rewritten only after a publish made it the spare, so a read of a
    /// block's slot during which its count did not change saw no write of
    /// it. Changed only together with the entries it serves (one write
    /// lock).
    slots: Vec<(u64, u64)>,
}

/// `State::slots` of a block without written state.
const NO_SLOT: (u64, u64) = (u64::MAX, 0);

impl State {
    pub fn new(index: Box<dyn KeyIndex>) -> Self {
        State {
            index,
            policy: None,
            entries: Vec::new(),
            free_ids: Vec::new(),
            logical_bytes: 0,
            heap_bytes: 0,
            slots: Vec::new(),
        }
    }

    /// Device offset of the slot holding `block`'s written state, and the
    /// block's write count.
    pub fn slot_of(&self, block: u32) -> Option<(u64, u64)> {
        self.slots
            .get(block as usize)
            .copied()
            .filter(|&(at, _)| at != NO_SLOT.0)
    }

    /// Room for `n` more entries, exactly (open, from an image that says
    /// how many).
    pub fn reserve_entries(&mut self, n: usize) {
        self.entries.reserve_exact(n);
    }

    /// Room for `blocks` blocks' slots, exactly (open: one per block for
    /// the store's life, no doubling slack).
    pub fn reserve_slots(&mut self, blocks: usize) {
        self.slots
            .reserve_exact(blocks.saturating_sub(self.slots.len()));
    }

    /// Records that `block`'s state is now the slot at `at` (written and
    /// synced).
    pub fn set_slot(&mut self, block: u32, at: u64) {
        let i = block as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, NO_SLOT);
        }
        if let Some(s) = self.slots.get_mut(i) {
            *s = (at, s.1 + 1);
        }
    }

    /// The entry `id` if it still holds `version`, mutably (the commit
    /// path, once the tuple block of a pending inline value is written).
    pub fn entry_mut(&mut self, id: EntryId, version: u64) -> Option<&mut Entry> {
        self.entries
            .get_mut(id as usize)
            .and_then(Option::as_mut)
            .filter(|e| e.version == version)
    }

    /// `key`'s visible entry: none when it has none or it expired.
    pub fn lookup(&self, key: &[u8]) -> Option<&Entry> {
        self.lookup_any(key).filter(|e| e.live())
    }

    /// [`lookup`](Self::lookup) for a read: counts the read with the
    /// eviction policy (a relaxed byte store at most, under the read lock
    /// the caller holds anyway).
    #[inline]
    pub fn lookup_read(&self, key: &[u8]) -> Option<&Entry> {
        let id = self.index.get(key)?;
        let e = self.entry(id).filter(|e| e.live())?;
        if let Some(p) = &self.policy {
            p.freq.touch(id);
        }
        Some(e)
    }

    /// Starts tracking every entry with the eviction `policy` (open): all
    /// in the main queue, in id order, no reads counted.
    pub fn track_all(&mut self, mut policy: super::evict::S3Fifo) {
        for (id, e) in self.entries.iter().enumerate() {
            if let Some(e) = e {
                policy.admit_existing(id as EntryId, super::evict::weight(e));
            }
        }
        self.policy = Some(policy);
    }

    /// `key`'s entry, expired or not (the commit path, which must find an
    /// expired tuple to replace or remove it).
    pub fn lookup_any(&self, key: &[u8]) -> Option<&Entry> {
        self.index.get(key).and_then(|id| self.entry(id))
    }

    pub fn entry(&self, id: EntryId) -> Option<&Entry> {
        self.entries.get(id as usize).and_then(Option::as_ref)
    }

    /// Adds an entry and points `key` at it; returns the replaced entry.
    pub fn link(&mut self, key: &[u8], entry: Entry) -> (EntryId, Option<Entry>) {
        let weight = super::evict::weight(&entry);
        let id = self.add(entry);
        if let Some(p) = &mut self.policy {
            p.admit(id, weight, key);
        }
        let old = self.index.insert(key, id).and_then(|o| self.take(o));
        (id, old)
    }

    /// Adds an entry to the table only (open links keys in bulk after).
    pub fn add(&mut self, entry: Entry) -> EntryId {
        self.logical_bytes += entry.size();
        self.heap_bytes += entry.data.heap_bytes();
        // A free id names a slot of `entries` emptied by `take`.
        let free = self
            .free_ids
            .pop()
            .and_then(|id| Some((id, self.entries.get_mut(id as usize)?)));
        match free {
            Some((id, slot)) => {
                *slot = Some(entry);
                id
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() as EntryId - 1
            }
        }
    }

    /// Puts `entry` in place of entry `id` (same key: the index does not
    /// change); returns the entry it replaces.
    pub fn replace(&mut self, id: EntryId, entry: Entry) -> Option<Entry> {
        let slot = self.entries.get_mut(id as usize)?;
        if slot.is_none() {
            // A free id: nothing to replace (the entry is dropped).
            return None;
        }
        self.logical_bytes += entry.size();
        self.heap_bytes += entry.data.heap_bytes();
        let old = slot.replace(entry)?;
        self.logical_bytes -= old.size();
        self.heap_bytes -= old.data.heap_bytes();
        Some(old)
    }

    /// Every entry with its id.
    pub fn iter(&self) -> impl Iterator<Item = (EntryId, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(id, e)| Some((id as EntryId, e.as_ref()?)))
    }

    /// Calls `mark` with the tuple block of every entry among ids
    /// `from..from + n` whose inline value is read from its block; returns
    /// the id to continue from (`None`: past the last).
    pub fn inline_blocks(&self, from: usize, n: usize, mut mark: impl FnMut(u32)) -> Option<usize> {
        let to = from.saturating_add(n).min(self.entries.len());
        for e in self
            .entries
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .flatten()
        {
            if e.data.is_inline_on_device() {
                mark(e.block);
            }
        }
        (to < self.entries.len()).then_some(to)
    }

    /// Removes `key`'s entry from the index and the table.
    pub fn unlink(&mut self, key: &[u8]) -> Option<(EntryId, Entry)> {
        let id = self.index.remove(key)?;
        self.take(id).map(|e| (id, e))
    }

    fn take(&mut self, id: EntryId) -> Option<Entry> {
        let e = self.entries.get_mut(id as usize)?.take()?;
        if let Some(p) = &mut self.policy {
            p.queues.get_mut().forget(id, super::evict::weight(&e));
        }
        self.free_ids.push(id);
        self.logical_bytes -= e.size();
        self.heap_bytes -= e.data.heap_bytes();
        Some(e)
    }
}

/// Versions that expire: (expiry µs, version) → (key, size).
pub(crate) type ExpiryQueue = std::collections::BTreeMap<(u64, u64), (Box<[u8]>, u64)>;

/// Now, in µs since the epoch: the clock of entries' creation and expiry
/// times (0 for a clock set before the epoch).
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RAM per object (issue 16): the entry table holds one `Option<Entry>`
    /// per object, so its size is the floor of every backend's cost. The
    /// inline bytes of a written block are not in it, and a heap object's
    /// pieces and sums, and an expiry, sit behind one pointer.
    #[test]
    fn an_entry_takes_32_bytes() {
        assert_eq!(std::mem::size_of::<Option<Entry>>(), 32);
        assert_eq!(std::mem::size_of::<Stored>(), 8);
    }

    /// Sizes that do not fit the entry's bits live in the heap value; the
    /// key's length and the size come back as given either way.
    #[test]
    fn sizes_and_key_lengths_round_trip() {
        let alloc =
            crate::sync::Arc::new(crate::sync::Mutex::new(BuddyAllocator::new(0, 1 << 20, 12)));
        let heap_value = || {
            Stored::heap_object(HeapValue {
                extent: Arc::new(Extent {
                    pieces: Vec::new(),
                    alloc: alloc.clone(),
                }),
                sums: Checksums::None,
                unsynced: false,
            })
        };
        for (key_len, size) in [(1, 0u64), (1024, 2048), (17, u64::from(LARGE) - 1)] {
            let e = Entry::new(key_len, 1, 2, size, None, Stored::pending(Bytes::new()), 0);
            assert_eq!((e.key_len(), e.size()), (key_len, size));
        }
        for (key_len, size) in [(1024, u64::from(LARGE)), (3, 5 << 30), (9, u64::MAX)] {
            let e = Entry::new(key_len, 1, 2, size, Some(7), heap_value(), 0);
            assert_eq!(
                (e.key_len(), e.size(), e.expires_micros()),
                (key_len, size, Some(7))
            );
        }
    }

    /// An expiry lives behind the pointer, which an inline value on the
    /// device that never expires does without: it survives the value's
    /// block being written (pending → on the device) and a relocation's
    /// new entry, and an entry without one stays pointer-free.
    #[test]
    fn expiries_survive_the_block_write_and_cost_nothing_without_one() {
        let e = Entry::new(3, 1, 2, 10, None, Stored::INLINE, 0);
        assert!(e.data.0.is_none() && e.live() && e.expires_micros().is_none());
        let mut e = Entry::new(3, 1, 2, 10, Some(9), Stored::INLINE, 0);
        assert_eq!(e.expires_micros(), Some(9));
        assert!(e.data.is_inline_on_device() && e.data.at_hand().is_none());
        assert!(!e.live(), "expired at 9 µs after the epoch");
        e.data.mark_written();
        assert_eq!(e.expires_micros(), Some(9));
        let mut p = Entry::new(
            3,
            1,
            2,
            4,
            Some(u64::MAX),
            Stored::pending(Bytes::from_static(b"abcd")),
            0,
        );
        assert!(p.data.is_pending() && p.live());
        p.data.mark_written();
        assert!(p.data.is_inline_on_device() && !p.data.is_pending());
        assert_eq!(p.expires_micros(), Some(u64::MAX));
        let mut q = Entry::new(
            3,
            1,
            2,
            4,
            None,
            Stored::pending(Bytes::from_static(b"abcd")),
            0,
        );
        q.data.mark_written();
        assert!(q.data.0.is_none(), "no pointer left once written");
        // An expiry of 0 read from a hand-made tuple is kept as long past.
        assert_eq!(
            Entry::new(3, 1, 2, 4, Some(0), Stored::INLINE, 0).expires_micros(),
            Some(1)
        );
    }
}
