//! Hash backend: no key bytes in memory. Each entry id has a 128-bit
//! fingerprint of its key (SipHash-1-3 under a secret drawn when the index
//! is made, or the one its index image recorded), and a `hashbrown` table
//! of entry ids is placed by the fingerprint's low 64 bits.
//!
//! Per key that is 16 bytes of fingerprint (in `fps`, indexed by entry id:
//! the engine's ids are dense, it reuses freed ones) and 4 bytes per bucket
//! of the table (8 once an id needs more, see `Ids`), where a map holding
//! keys cost a pointer, a length and an allocation of the key besides.
//!
//! A fingerprint stands for its key. Two keys share one only by chance:
//! for n keys the chance that any two of them do is at most n² / 2¹²⁹,
//! about 1.5 × 10⁻²³ for 10⁸ keys and 1.5 × 10⁻¹⁹ for 10¹⁰, far below the
//! device's own rate of undetected errors; and because the secret is
//! random and never leaves the store, keys cannot be chosen to collide.
//! (Were two keys to share one, the index would take them for one key: a
//! put of one would replace the other. Inline values are still matched by
//! key in their tuple block, so a read of one of those fails rather than
//! serve the other's bytes; a heap value has no such check.) The keys themselves
//! are on the device, in the tuples: what needs them (a backup, listing a
//! hash store's keys) reads them from the tuple blocks.

use std::ops::Bound;

use hashbrown::HashTable;
use siphasher::sip128::SipHasher13;

use super::{EntryId, Fingerprint, Fingerprints, KeyIndex};
use crate::error::{Error, ErrorKind, Result};

/// Unordered, fastest point lookups, keys not in memory.
///
/// An id names one key at a time, and memory grows with the largest id
/// (as the engine hands them out: dense, freed ones reused).
pub struct HashIndex {
    /// Entry ids, placed by the low 64 bits of their key's fingerprint.
    table: Ids,
    /// Each id's fingerprint, at index id (`NONE` for an id without a key).
    fps: Vec<Fingerprint>,
    /// The secret the fingerprints are made under.
    secret: [u8; 16],
    sip: SipHasher13,
}

/// `fps` of an id without a key (no key's fingerprint is 0: see `of`).
const NONE: Fingerprint = 0;

impl Default for HashIndex {
    fn default() -> Self {
        let mut secret = [0u8; 16];
        if getrandom::fill(&mut secret).is_err() {
            // No OS randomness (never seen on Linux): the process's own
            // random hasher keys, still unknown outside it.
            use std::hash::BuildHasher;
            let s = std::collections::hash_map::RandomState::new();
            secret[..8].copy_from_slice(&s.hash_one(1u8).to_le_bytes());
            secret[8..].copy_from_slice(&s.hash_one(2u8).to_le_bytes());
        }
        HashIndex::with_secret(secret)
    }
}

/// The table's entry ids: four bytes each while every id fits (a store of
/// fewer than 4 billion objects: ids are dense), eight from the first id
/// that does not. A table is a power of two of buckets, so at some counts
/// it is half empty: 4-byte ids save up to 8 bytes per key there.
enum Ids {
    Narrow(HashTable<u32>),
    Wide(HashTable<EntryId>),
}

impl Default for Ids {
    fn default() -> Self {
        Ids::Narrow(HashTable::new())
    }
}

/// Runs `$body` with `$t` the table and `$to` turning an entry id into the
/// table's id type (in `Narrow`, only ids that fit are ever given: `put`
/// and `load` widen first).
macro_rules! each_table {
    ($table:expr, $t:ident, $to:ident, $body:expr) => {
        match $table {
            Ids::Narrow($t) => {
                #[allow(clippy::cast_possible_truncation)]
                let $to = |id: EntryId| id as u32;
                $body
            }
            Ids::Wide($t) => {
                let $to = |id: EntryId| id;
                $body
            }
        }
    };
}

/// `id`'s fingerprint in `fps` (`NONE` for an id without one).
fn fp_of(fps: &[Fingerprint], id: EntryId) -> Fingerprint {
    usize::try_from(id)
        .ok()
        .and_then(|i| fps.get(i))
        .copied()
        .unwrap_or(NONE)
}

/// Where a fingerprint goes in the table.
#[expect(clippy::cast_possible_truncation, reason = "the low 64 bits place it")]
fn place(fp: Fingerprint) -> u64 {
    fp as u64
}

impl HashIndex {
    /// An empty index whose fingerprints are made under `secret`.
    pub(crate) fn with_secret(secret: [u8; 16]) -> Self {
        HashIndex {
            table: Ids::default(),
            fps: Vec::new(),
            secret,
            sip: SipHasher13::new_with_key(&secret),
        }
    }

    /// Room for `n` keys with ids up to `top`, exactly (a bulk load).
    pub(crate) fn reserve_for(&mut self, n: usize, top: EntryId) {
        self.reserve(n, Some(top));
    }

    /// Adds fingerprints known to be distinct from each other and from
    /// every one in the index (an image's, which ascend strictly), each
    /// with an id that names no key yet: no lookup before each insert.
    pub(crate) fn load_distinct(&mut self, batch: &[(Fingerprint, EntryId)]) {
        for &(fp, id) in batch {
            self.fit(id);
            debug_assert!(fp != NONE && self.get_fp(fp).is_none());
            self.insert_new(fp, id);
        }
    }

    fn get_fp(&self, fp: Fingerprint) -> Option<EntryId> {
        let fps = &self.fps;
        each_table!(&self.table, t, _to, {
            t.find(place(fp), |&id| fp_of(fps, EntryId::from(id)) == fp)
                .map(|&id| EntryId::from(id))
        })
    }

    /// `key`'s fingerprint (never `NONE`).
    pub(crate) fn of(&self, key: &[u8]) -> Fingerprint {
        self.sip.hash(key).as_u128().max(1)
    }

    fn slot(&mut self, id: EntryId) -> &mut Fingerprint {
        let i = usize::try_from(id).unwrap_or(usize::MAX);
        if self.fps.len() <= i {
            self.fps.resize(i + 1, NONE);
        }
        // Just made long enough (an id beyond memory failed the resize).
        #[expect(clippy::indexing_slicing, reason = "resized to hold `i` above")]
        &mut self.fps[i]
    }

    /// Makes the table hold `id`: 8-byte ids from the first that does not
    /// fit in four.
    fn fit(&mut self, id: EntryId) {
        if u32::try_from(id).is_ok() {
            return;
        }
        if let Ids::Narrow(narrow) = &self.table {
            let fps = &self.fps;
            let mut wide = HashTable::with_capacity(narrow.len());
            for &i in narrow {
                let i = EntryId::from(i);
                wide.insert_unique(place(fp_of(fps, i)), i, |&j| place(fp_of(fps, j)));
            }
            self.table = Ids::Wide(wide);
        }
    }

    /// Inserts a fingerprint known not to be in the table.
    fn insert_new(&mut self, fp: Fingerprint, id: EntryId) {
        *self.slot(id) = fp;
        let Self { table, fps, .. } = self;
        each_table!(table, t, to, {
            t.insert_unique(place(fp), to(id), |&i| place(fp_of(fps, EntryId::from(i))));
        });
    }

    /// Room for `n` more ids up to `top`, exactly.
    fn reserve(&mut self, n: usize, top: Option<EntryId>) {
        if let Some(top) = top {
            self.fit(top);
            if let Ok(top) = usize::try_from(top) {
                self.fps
                    .reserve_exact((top + 1).saturating_sub(self.fps.len()));
            }
        }
        let Self { table, fps, .. } = self;
        each_table!(table, t, _to, {
            t.reserve(n, |&i| place(fp_of(fps, EntryId::from(i))))
        });
    }

    fn insert_fp(&mut self, fp: Fingerprint, id: EntryId) -> Option<EntryId> {
        self.fit(id);
        let fps = &self.fps;
        let old = each_table!(&mut self.table, t, to, {
            t.find_mut(place(fp), |&i| fp_of(fps, EntryId::from(i)) == fp)
                .map(|slot| EntryId::from(std::mem::replace(slot, to(id))))
        });
        if let Some(old) = old {
            *self.slot(old) = NONE;
            *self.slot(id) = fp;
            return Some(old);
        }
        debug_assert_eq!(
            fp_of(&self.fps, id),
            NONE,
            "entry id {id} already names a key"
        );
        self.insert_new(fp, id);
        None
    }
}

impl KeyIndex for HashIndex {
    fn insert(&mut self, key: &[u8], id: EntryId) -> Option<EntryId> {
        let fp = self.of(key);
        self.insert_fp(fp, id)
    }

    fn get(&self, key: &[u8]) -> Option<EntryId> {
        self.get_fp(self.of(key))
    }

    fn remove(&mut self, key: &[u8]) -> Option<EntryId> {
        let fp = self.of(key);
        let fps = &self.fps;
        let id = each_table!(&mut self.table, t, _to, {
            let found = t
                .find_entry(place(fp), |&i| fp_of(fps, EntryId::from(i)) == fp)
                .ok()?;
            EntryId::from(found.remove().0)
        });
        *self.slot(id) = NONE;
        Some(id)
    }

    fn len(&self) -> usize {
        each_table!(&self.table, t, _to, t.len())
    }

    fn load(&mut self, entries: Vec<(Box<[u8]>, EntryId)>) {
        let top = entries.iter().map(|&(_, id)| id).max();
        self.reserve(entries.len(), top);
        // Into an empty table, keys in strictly increasing order (as open
        // gives them) are distinct: no lookup before each insert.
        let empty = self.is_empty();
        let distinct = empty && entries.is_sorted_by(|a, b| a.0 < b.0);
        for (k, id) in entries {
            let fp = self.of(&k);
            drop(k);
            if distinct {
                self.insert_new(fp, id);
            } else {
                self.insert_fp(fp, id);
            }
        }
    }

    fn holds_keys(&self) -> bool {
        false
    }

    fn fingerprints(&self) -> Option<Fingerprints> {
        let fps = &self.fps;
        let mut ids: Vec<(Fingerprint, EntryId)> = each_table!(&self.table, t, _to, {
            t.iter()
                .map(|&id| (fp_of(fps, EntryId::from(id)), EntryId::from(id)))
                .collect()
        });
        ids.sort_unstable();
        Some(Fingerprints {
            secret: self.secret,
            ids,
        })
    }

    fn load_fingerprints(&mut self, f: Fingerprints) -> Result<()> {
        if !self.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "fingerprints load only into an empty index",
            ));
        }
        *self = HashIndex::with_secret(f.secret);
        let top = f.ids.iter().map(|&(_, id)| id).max();
        self.reserve(f.ids.len(), top);
        // Strictly ascending fingerprints are distinct: no lookup first.
        let distinct = f.ids.is_sorted_by(|a, b| a.0 < b.0);
        for (fp, id) in f.ids {
            if fp == NONE {
                return Err(Error::new(ErrorKind::Corrupt, "a fingerprint of zero"));
            }
            if distinct {
                self.insert_new(fp, id);
            } else if self.insert_fp(fp, id).is_some() {
                return Err(Error::new(ErrorKind::Corrupt, "a fingerprint twice"));
            }
        }
        Ok(())
    }

    fn all(&self, _: &mut Vec<(Box<[u8]>, EntryId)>) -> Result<()> {
        Err(Error::new(
            ErrorKind::Unsupported,
            "the hash index holds no keys in memory (they are read from the tuple blocks)",
        ))
    }

    fn range(
        &self,
        _: Bound<&[u8]>,
        _: Bound<&[u8]>,
        _: usize,
        _: &mut Vec<(Box<[u8]>, EntryId)>,
    ) -> Result<()> {
        Err(Error::new(
            ErrorKind::Unsupported,
            "the hash index holds no keys to range over (a listing reads \
             them from the tuple blocks)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    /// Random inserts, replacements and removals as the engine makes them
    /// (each insert with a fresh or freed id; a replaced or removed key's
    /// id freed), against a `HashMap`, across several table growths.
    #[test]
    fn matches_a_hashmap_under_the_engines_id_protocol() {
        matches_a_hashmap(false);
    }

    /// The same with 8-byte ids in the table (as after an id beyond
    /// `u32::MAX`, which the fingerprint vector cannot hold in a test).
    #[test]
    fn a_widened_table_matches_a_hashmap_too() {
        matches_a_hashmap(true);
    }

    #[test]
    fn widening_keeps_every_key() {
        let mut ix = HashIndex::default();
        for i in 0..5000u64 {
            ix.insert(format!("k{i}").as_bytes(), i);
        }
        assert!(matches!(ix.table, Ids::Narrow(_)));
        ix.fit(u64::from(u32::MAX) + 1);
        assert!(matches!(ix.table, Ids::Wide(_)));
        assert_eq!(ix.len(), 5000);
        for i in 0..5000u64 {
            assert_eq!(ix.get(format!("k{i}").as_bytes()), Some(i));
        }
    }

    /// No key bytes are kept: the index lists none, and two indexes made
    /// apart fingerprint the same key differently (their secrets differ),
    /// while one loaded from another's fingerprints finds every key.
    #[test]
    fn holds_fingerprints_under_its_own_secret_not_keys() {
        let mut ix = HashIndex::default();
        for i in 0..1000u64 {
            ix.insert(format!("key/{i}").as_bytes(), i);
        }
        assert!(!ix.holds_keys());
        let err = ix.all(&mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        let other = HashIndex::default();
        assert_ne!(ix.of(b"key/1"), other.of(b"key/1"));
        let f = ix.fingerprints().unwrap();
        assert_eq!(f.ids.len(), 1000);
        assert!(f.ids.is_sorted_by(|a, b| a.0 < b.0));
        let mut loaded = HashIndex::default();
        loaded.load_fingerprints(f).unwrap();
        for i in 0..1000u64 {
            assert_eq!(loaded.get(format!("key/{i}").as_bytes()), Some(i));
        }
        assert_eq!(loaded.get(b"key/none"), None);
        // A fingerprint twice is refused (an image that says so is damaged).
        let mut twice = ix.fingerprints().unwrap();
        let first = twice.ids[0];
        twice.ids.push((first.0, 5000));
        assert_eq!(
            HashIndex::default()
                .load_fingerprints(twice)
                .unwrap_err()
                .kind(),
            ErrorKind::Corrupt
        );
    }

    fn matches_a_hashmap(wide: bool) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut ix = HashIndex::default();
        if wide {
            ix.fit(1 << 33);
        }
        let mut model = HashMap::<Vec<u8>, EntryId>::new();
        let mut free: Vec<EntryId> = Vec::new();
        let mut next: EntryId = 0;
        for step in 0..80_000u32 {
            let key = format!("key/{}", rng.random_range(0..30_000)).into_bytes();
            if rng.random_bool(0.7) {
                let id = free.pop().unwrap_or_else(|| {
                    next += 1;
                    next - 1
                });
                let old = ix.insert(&key, id);
                assert_eq!(old, model.insert(key, id), "insert at {step}");
                free.extend(old);
            } else {
                let gone = ix.remove(&key);
                assert_eq!(gone, model.remove(&key), "remove at {step}");
                free.extend(gone);
            }
        }
        assert_eq!(ix.len(), model.len());
        for (k, id) in &model {
            assert_eq!(ix.get(k), Some(*id));
        }
        assert_eq!(ix.get(b"key/none"), None);
        // Open's bulk load (sorted, distinct keys, into an empty table)
        // finds the same.
        let mut sorted: Vec<(Box<[u8]>, EntryId)> = model
            .iter()
            .map(|(k, id)| (k.clone().into_boxed_slice(), *id))
            .collect();
        sorted.sort();
        let mut loaded = HashIndex::default();
        if wide {
            loaded.fit(1 << 33);
        }
        loaded.load(sorted);
        assert_eq!(loaded.len(), model.len());
        for (k, id) in &model {
            assert_eq!(loaded.get(k), Some(*id));
        }
        // Every id the model holds, each with its key's fingerprint.
        let mut ids: Vec<EntryId> = ix.fingerprints().unwrap().ids.iter().map(|p| p.1).collect();
        ids.sort_unstable();
        let mut want: Vec<EntryId> = model.values().copied().collect();
        want.sort_unstable();
        assert_eq!(ids, want);
        for (k, id) in &model {
            assert_eq!(fp_of(&ix.fps, *id), ix.of(k));
        }
        // Ids are reused, so the fingerprint vector stays near the most
        // keys held.
        assert!(ix.fps.len() <= 30_000, "{}", ix.fps.len());
    }
}
