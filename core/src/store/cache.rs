//! The read cache: whole objects kept in RAM after a device read, so a
//! hot object is read from the device once rather than at every get.
//!
//! * **Keyed by version.** Versions are never reused (each change gets a
//!   larger one, and the cache starts empty at open), so a cached value can
//!   only ever be the bytes of the version a read looked up: a read never
//!   returns a superseded version, whatever the timing of overwrites and
//!   deletes (invariant 8 in `INVARIANTS.md`). Superseded versions are
//!   dropped when the commit that replaced them is durable (`forget`) and,
//!   if a slow read admits one after that, when `admit` sees the index has
//!   moved on.
//! * **Only checked bytes.** A value is admitted after the read path has
//!   checked every block against its checksums (invariant 5); a corrupt
//!   object is never cached, so a repaired one is read again.
//! * **Whole objects of at most `MAX_OBJECT` bytes,** admitted by reads of
//!   the whole object. A range read of a cached object is a slice of it; a
//!   range read of an uncached one reads only its range and admits nothing
//!   (reading the rest would cost device time the caller did not ask for).
//!   Larger objects bypass the cache: their reads are long device
//!   transfers anyway, and one of them would evict thousands of small ones.
//! * **Admitted at the first read while there is room,** for objects of
//!   at most one block (`SMALL_OBJECT`) and tuple blocks: until the cache
//!   is full, keeping them costs a copy of a few KiB, and the next read of
//!   a small object after open is a memory hit rather than a device read.
//! * **Otherwise admitted at the second whole read.** A doorkeeper (one bit
//!   per hashed version, cleared when an eighth of its bits are set)
//!   remembers versions read whole once; only a read of a version it has
//!   seen keeps the bytes. A larger object read once, by a scan or a cold
//!   pass, is never kept, nor is a small one once the cache is full, so a
//!   cold read costs what it cost with the cache off: keeping every first
//!   read took fresh memory whose first touch cost a 16 KiB cold read
//!   9-45 % more here (`benches/log/2026-11-23-read-cache.md`).
//! * **Eviction** is `quick_cache`'s (CLOCK-PRO with ghost entries): what
//!   is admitted but not read again leaves first, so a scan of objects read
//!   twice does not flush the hot set either.
//! * **Inline values by tuple block.** The index does not keep inline
//!   values; a read takes them from their tuple block (`Store::read_slot`).
//!   A block read twice (any of its values) is kept decoded, so its other
//!   values are served from it too. A kept block serves a read only when it
//!   holds the exact (key, version) the index names: a tuple's value never
//!   changes and versions are never reused, so a copy read before a later
//!   rewrite of the block can miss (and is replaced by the next read that
//!   admits it) but never returns another version. Keyed apart from
//!   versions (`BLOCK_KEY`).
//! * **Warmed after open.** The tuple blocks that hold inline values are
//!   read into the cache in the background after open (`store/warm.rs`)
//!   while it has room, so small objects are memory hits after a restart
//!   without a first device read each. Warm-up only ever adds blocks as a
//!   read would (`warm_block`), and only into free room.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::sync::Arc;

use bytes::Bytes;

use crate::format::BLOCK_SIZE;
use crate::io::round_up;
use crate::meta::tuple::Tuple;

/// Largest object the cache holds.
pub(crate) const MAX_OBJECT: u64 = 1 << 20;

/// Largest object admitted at its first read (while the cache has room).
const SMALL_OBJECT: u64 = BLOCK_SIZE as u64;

/// Bookkeeping bytes counted per entry beyond its buffer: the allocation's
/// header and rounding, the `Bytes`' shared part, quick_cache's slot and
/// table entry (measured: 1-byte objects under an 8 MiB bound grew the
/// resident set by ~120 B each).
const ENTRY_OVERHEAD: u64 = 128;

/// The largest power of two at most `n` (`n` ≥ 1).
fn prev_power_of_two(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

/// A kept object version's bytes or tuple block's tuples, and what keeping
/// them costs.
#[derive(Clone)]
struct Entry {
    kept: Kept,
    /// The memory kept alive plus `ENTRY_OVERHEAD`.
    weight: u64,
}

#[derive(Clone)]
enum Kept {
    Object(Bytes),
    /// A tuple block's tuples, as a valid slot of it held them.
    Block(Arc<[Tuple]>),
}

/// Set in the cache key of a tuple block (above any version: versions
/// count commits from 1 and never reach it).
const BLOCK_KEY: u64 = 1 << 63;

/// Weighs an entry by the memory it keeps alive.
#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<u64, Entry> for Weight {
    fn weight(&self, _version: &u64, entry: &Entry) -> u64 {
        entry.weight
    }
}

/// The weight of a `size`-byte object kept as the device read returned it:
/// a slice of whole blocks, all of which it keeps alive.
fn weight(size: u64) -> u64 {
    round_up(size as usize, BLOCK_SIZE) as u64 + ENTRY_OVERHEAD
}

/// What keeping a tuple block's decoded tuples costs: the payload the
/// values are slices of, and each tuple's own part.
fn block_weight(tuples: &[Tuple]) -> u64 {
    let per_tuple = std::mem::size_of::<Tuple>() as u64 + 16;
    let keys: u64 = tuples.iter().map(|t| t.key.len() as u64).sum();
    BLOCK_SIZE as u64 + tuples.len() as u64 * per_tuple + keys + ENTRY_OVERHEAD
}

/// What the cache did since open, for [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads served from the cache (objects, and inline values from kept
    /// tuple blocks).
    pub hits: u64,
    /// Reads that went to the device.
    pub misses: u64,
    /// Bytes the cache holds now (buffers and bookkeeping).
    pub bytes: u64,
    /// The cache's bound in bytes (0: no cache).
    pub capacity: u64,
    /// Tuple blocks the warm-up after open read into the cache (see
    /// [`Options::warm_up`](crate::Options::warm_up)).
    pub warmed_blocks: u64,
    /// Whether the warm-up is still reading.
    pub warming: bool,
}

/// Versions read whole once since the last clear (see the module comment):
/// one bit per hashed version.
struct Doorkeeper {
    bits: Box<[AtomicU64]>,
    /// Bits set since the last clear; cleared at `clear_at`.
    set: AtomicU64,
    clear_at: u64,
}

impl Doorkeeper {
    fn new(entries: usize) -> Doorkeeper {
        // Eight bits per entry the cache may hold; cleared when one in
        // eight is set, so a false "seen" stays under one in eight.
        let words = entries.saturating_mul(8).div_ceil(64).clamp(64, 1 << 16);
        Doorkeeper {
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            set: AtomicU64::new(0),
            clear_at: (words as u64 * 64) / 8,
        }
    }

    /// Whether `version` was marked since the last clear; marks it.
    fn seen(&self, version: u64) -> bool {
        // splitmix64's finalizer: consecutive versions land on unrelated
        // bits (a plain multiply repeats with a short period).
        let mut h = version.wrapping_add(0x9E37_79B9_7F4A_7C15);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
        let bit = (h % (self.bits.len() as u64 * 64)) as usize;
        let Some(word) = self.bits.get(bit / 64) else {
            return false;
        };
        let mask = 1u64 << (bit % 64);
        if word.fetch_or(mask, Ordering::Relaxed) & mask != 0 {
            return true;
        }
        if self.set.fetch_add(1, Ordering::Relaxed) + 1 >= self.clear_at {
            self.bits.iter().for_each(|w| w.store(0, Ordering::Relaxed));
            self.set.store(0, Ordering::Relaxed);
        }
        false
    }
}

pub(crate) struct ReadCache {
    /// `None` when the cache is off (`Options::cache_bytes(0)`).
    cache: Option<quick_cache::sync::Cache<u64, Entry, Weight>>,
    door: Doorkeeper,
    /// Largest object admitted: `MAX_OBJECT`, or less for a small cache so
    /// that no single object takes more than an eighth of a shard.
    max_object: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    warmed: AtomicU64,
    warming: AtomicBool,
}

impl ReadCache {
    pub fn new(capacity: u64) -> ReadCache {
        // quick_cache sizes its tables from an estimate of the entry count;
        // 16 KiB is a typical small object.
        let items = usize::try_from(capacity / (16 << 10)).unwrap_or(usize::MAX);
        // quick_cache splits the bound among shards, and refuses an entry
        // heavier than its shard's share: a power of two of shards (as it
        // rounds them), few enough that a shard holds eight of the largest
        // objects, and no more than four per core.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let by_size = usize::try_from(capacity / (8 * weight(MAX_OBJECT))).unwrap_or(usize::MAX);
        let shards = prev_power_of_two(by_size.min(cores * 4).max(1));
        let cache = (capacity > 0)
            .then(|| {
                quick_cache::OptionsBuilder::new()
                    .estimated_items_capacity(items.max(16))
                    .weight_capacity(capacity)
                    .shards(shards)
                    .build()
            })
            .and_then(Result::ok)
            .map(|o| {
                quick_cache::sync::Cache::with_options(
                    o,
                    Weight,
                    quick_cache::DefaultHashBuilder::default(),
                    quick_cache::sync::DefaultLifecycle::default(),
                )
            });
        // The doorkeeper remembers as many versions as the cache could hold
        // of 1 KiB objects, so a hot set of small objects that fits is not
        // forgotten between its first and second reads.
        let smallest = usize::try_from(capacity / 1024).unwrap_or(usize::MAX);
        ReadCache {
            cache,
            door: Doorkeeper::new(if capacity > 0 { smallest } else { 0 }),
            // An eighth of a shard at most (so of the cache, too).
            max_object: MAX_OBJECT.min(capacity / shards as u64 / 8),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            warmed: AtomicU64::new(0),
            warming: AtomicBool::new(false),
        }
    }

    /// Whether an entry weighing `weight` fits beside what is held now.
    fn has_room(&self, weight: u64) -> bool {
        self.cache
            .as_ref()
            .is_some_and(|c| c.weight().saturating_add(weight) <= c.capacity())
    }

    /// Whether the cache is on.
    pub fn is_on(&self) -> bool {
        self.cache.is_some()
    }

    /// Reads that went to the device since open (the warm-up yields to
    /// them).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// `[offset, offset + len)` of version `version` (an object of `size`
    /// bytes), if cached; counts a hit or a miss.
    pub fn get(&self, version: u64, offset: u64, len: u64) -> Option<Bytes> {
        let cache = self.cache.as_ref()?;
        let found = cache.get(&version).and_then(|e| {
            let Kept::Object(whole) = e.kept else {
                return None;
            };
            let (from, to) = (
                usize::try_from(offset).ok()?,
                usize::try_from(offset + len).ok()?,
            );
            (to <= whole.len()).then(|| whole.slice(from..to))
        });
        self.count(found)
    }

    /// Counts a lookup's outcome as a hit or a miss.
    fn count<T>(&self, found: Option<T>) -> Option<T> {
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether a read of `[offset, offset + len)` of version `version` (a
    /// `size`-byte object) is to be kept (`admit`): a whole read of an
    /// object the cache takes, the first while there is room for a small
    /// one, else the second since the doorkeeper's last clear.
    pub fn wants(&self, version: u64, size: u64, offset: u64, len: u64) -> bool {
        self.cache.is_some()
            && offset == 0
            && len == size
            && size > 0
            && size <= self.max_object
            && ((size <= SMALL_OBJECT && self.has_room(size + ENTRY_OVERHEAD))
                || self.door.seen(version))
    }

    /// Keeps the checked bytes of a whole object version. `current` says
    /// whether the index still points at this version; checked after the
    /// insert, so a version superseded meanwhile (its `forget` already
    /// done) does not linger. The bytes are kept as a copy when the caller
    /// owns `whole` (`owned`: it may write into it), or when `whole` is a
    /// slice of device blocks more than an eighth larger than the object (a
    /// 1 KiB object would keep a 4 KiB block alive).
    pub fn admit(&self, version: u64, whole: &Bytes, owned: bool, current: impl FnOnce() -> bool) {
        let Some(cache) = &self.cache else { return };
        let size = whole.len() as u64;
        let as_read = weight(size);
        let entry = if owned || as_read - ENTRY_OVERHEAD - size > size / 8 {
            Entry {
                kept: Kept::Object(Bytes::copy_from_slice(whole)),
                weight: size + ENTRY_OVERHEAD,
            }
        } else {
            Entry {
                kept: Kept::Object(whole.clone()),
                weight: as_read,
            }
        };
        cache.insert(version, entry);
        if !current() {
            cache.remove(&version);
        }
    }

    /// Tuple block `block`'s tuples, if kept (the caller looks for its
    /// exact version in them); counts a hit or a miss.
    pub fn block(&self, block: u32) -> Option<Arc<[Tuple]>> {
        let cache = self.cache.as_ref()?;
        let found = cache
            .get(&(BLOCK_KEY | u64::from(block)))
            .and_then(|e| match e.kept {
                Kept::Block(tuples) => Some(tuples),
                Kept::Object(_) => None,
            });
        self.count(found)
    }

    /// Whether a read of tuple block `block` is to be kept
    /// (`admit_block`): its first while there is room for a full block,
    /// else its second since the doorkeeper's last clear.
    pub fn wants_block(&self, block: u32) -> bool {
        self.cache.is_some()
            && (self.has_room(2 * BLOCK_SIZE as u64 + ENTRY_OVERHEAD)
                || self.door.seen(BLOCK_KEY | u64::from(block)))
    }

    /// Keeps tuple block `block`'s tuples, decoded from a valid slot of it
    /// (replacing any copy read before).
    pub fn admit_block(&self, block: u32, tuples: Arc<[Tuple]>) {
        let Some(cache) = &self.cache else { return };
        let weight = block_weight(&tuples);
        let entry = Entry {
            kept: Kept::Block(tuples),
            weight,
        };
        cache.insert(BLOCK_KEY | u64::from(block), entry);
    }

    /// The warm-up's [`admit_block`](Self::admit_block): only into free
    /// room (it never evicts what reads put there). False when there is
    /// none left.
    pub fn warm_block(&self, block: u32, tuples: Arc<[Tuple]>) -> bool {
        if !self.has_room(block_weight(&tuples)) {
            return false;
        }
        self.admit_block(block, tuples);
        self.warmed.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Marks the warm-up as running or done (`CacheStats::warming`).
    pub fn set_warming(&self, on: bool) {
        self.warming.store(on, Ordering::Release);
    }

    /// Drops a version that is no longer reachable (overwritten, deleted).
    pub fn forget(&self, version: u64) {
        if let Some(cache) = &self.cache {
            cache.remove(&version);
        }
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.cache.as_ref().map_or(0, |c| c.weight()),
            capacity: self.cache.as_ref().map_or(0, |c| c.capacity()),
            warmed_blocks: self.warmed.load(Ordering::Relaxed),
            warming: self.warming.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_of_a_cached_object_is_a_slice_of_it() {
        let c = ReadCache::new(1 << 20);
        let v = Bytes::from(vec![7u8; 10_000]);
        assert!(
            !c.wants(5, 10_000, 1, 9_999),
            "only whole-object reads admit"
        );
        assert!(
            !c.wants(5, 10_000, 0, 10_000),
            "the first whole read does not"
        );
        assert!(c.wants(5, 10_000, 0, 10_000), "the second does");
        c.admit(5, &v, false, || true);
        assert_eq!(c.get(5, 100, 50).as_deref(), Some(&v[100..150]));
        assert_eq!(c.get(6, 0, 10), None, "another version is a miss");
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
        assert_eq!(s.bytes, 10_000 + ENTRY_OVERHEAD, "kept as a copy");
    }

    /// A tuple block is kept from its first read while there is room,
    /// from its second once the cache is full; apart from versions.
    #[test]
    fn a_tuple_block_is_kept_at_its_first_read_while_there_is_room() {
        let c = ReadCache::new(1 << 20);
        let tuples: Arc<[Tuple]> = Vec::new().into();
        assert!(c.wants_block(7), "room: the first read admits");
        c.admit_block(7, tuples.clone());
        assert!(c.block(7).is_some());
        assert!(c.block(8).is_none(), "another block");
        assert!(c.get(BLOCK_KEY | 7, 0, 0).is_none(), "not an object");
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (1, 2));
        assert!(
            s.bytes >= BLOCK_SIZE as u64,
            "weighed as its payload at least"
        );
        // Full: the warm-up adds nothing, reads fall back to the
        // doorkeeper.
        let mut b = 100;
        while c.warm_block(b, tuples.clone()) {
            b += 1;
        }
        assert!(c.stats().bytes <= c.stats().capacity);
        assert_eq!(c.stats().warmed_blocks, u64::from(b - 100));
        assert!(!c.wants_block(9), "full: the first read does not admit");
        assert!(c.wants_block(9), "the second does");
        assert!(!c.wants(5, 2000, 0, 2000), "nor a small object's first");
        assert!(c.wants(5, 2000, 0, 2000));
    }

    #[test]
    fn small_objects_are_kept_as_copies_and_block_sized_ones_as_read() {
        let c = ReadCache::new(8 << 20);
        let addr = |b: &Bytes| b.as_ptr() as usize;
        // As a device read returns it: a slice of a 4 KiB block.
        let block = Bytes::from(vec![3u8; 4096]);
        let small = block.slice(0..1000);
        c.admit(1, &small, false, || true);
        let got = c.get(1, 0, 1000).expect("kept");
        assert_eq!(got, small);
        assert_ne!(
            addr(&got),
            addr(&small),
            "a 1000-byte object keeps its block"
        );
        assert_eq!(c.stats().bytes, 1000 + ENTRY_OVERHEAD);
        let exact = Bytes::from(vec![4u8; 16 << 10]);
        c.admit(2, &exact, false, || true);
        assert_eq!(addr(&c.get(2, 0, 16 << 10).expect("kept")), addr(&exact));
        assert_eq!(c.stats().bytes, 1000 + weight(16 << 10) + ENTRY_OVERHEAD);
        // Bytes the caller owns are never the cache's.
        let mine = Bytes::from(vec![5u8; 16 << 10]);
        c.admit(3, &mine, true, || true);
        assert_ne!(addr(&c.get(3, 0, 16 << 10).expect("kept")), addr(&mine));
    }

    #[test]
    fn a_version_superseded_during_its_read_is_not_kept() {
        let c = ReadCache::new(1 << 20);
        c.admit(5, &Bytes::from_static(b"old bytes"), false, || false);
        assert_eq!(c.get(5, 0, 9), None);
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn capacity_zero_is_off_and_large_objects_bypass() {
        let off = ReadCache::new(0);
        assert!(!off.wants(1, 100, 0, 100));
        assert_eq!(off.get(1, 0, 1), None);
        assert_eq!(off.stats(), CacheStats::default());
        let small = ReadCache::new(8 << 20);
        let twice = |c: &ReadCache, v: u64, n: u64| {
            c.wants(v, n, 0, n);
            c.wants(v, n, 0, n)
        };
        assert!(twice(&small, 1, 1 << 20));
        assert!(!twice(&small, 2, (1 << 20) + 1));
        let tiny = ReadCache::new(64 << 10);
        assert!(!twice(&tiny, 3, 16 << 10), "an eighth of the cache at most");
    }

    #[test]
    fn the_doorkeeper_forgets_after_an_eighth_of_its_bits() {
        let d = Doorkeeper::new(16);
        assert_eq!(d.bits.len(), 64, "at least 64 words");
        assert!(!d.seen(7) && d.seen(7));
        // Marks of other versions until the clear: 7 is forgotten then.
        let mut v = 100;
        while d.set.load(Ordering::Relaxed) != 0 {
            d.seen(v);
            v += 1;
        }
        assert!(!d.seen(7), "cleared");
        assert!(v - 100 >= d.clear_at - 1, "cleared after {} marks", v - 100);
    }

    #[test]
    fn versions_read_once_are_rarely_taken_for_seen() {
        // Sequential versions, each read once: the doorkeeper must say
        // "seen" for few of them (it clears at one bit in eight).
        let d = Doorkeeper::new(64 << 10);
        let seen = (1..=200_000u64).filter(|&v| d.seen(v)).count();
        assert!(seen < 200_000 / 10, "{seen} of 200000 taken for seen");
    }

    #[test]
    fn the_largest_object_fits_a_shard_whatever_the_cores() {
        for cap in [8u64 << 20, 64 << 20, 1 << 30] {
            let c = ReadCache::new(cap);
            assert_eq!(c.max_object, MAX_OBJECT, "{cap}");
            let v = Bytes::from(vec![9u8; MAX_OBJECT as usize]);
            c.admit(1, &v, false, || true);
            assert!(
                c.get(1, 0, 10).is_some(),
                "a 1 MiB object was refused at {cap}"
            );
        }
        assert_eq!(prev_power_of_two(1), 1);
        assert_eq!(prev_power_of_two(12), 8);
    }

    #[test]
    fn the_largest_bound_allocates_nothing_up_front() {
        let c = ReadCache::new(u64::MAX);
        let v = Bytes::from(vec![1u8; 5000]);
        c.admit(1, &v, false, || true);
        assert_eq!(c.get(1, 0, 5000).as_deref(), Some(&v[..]));
        assert_eq!(c.stats().bytes, 5000 + ENTRY_OVERHEAD);
    }
}
