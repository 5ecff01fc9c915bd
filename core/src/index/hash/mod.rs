//! Hash backend: no key bytes in memory. Each key is a 128-bit
//! fingerprint (SipHash-1-3 under a secret drawn when the index is made,
//! or the one its index image recorded), held with its entry id in an
//! ordered linear-probing table (`table.rs`): 20 bytes a slot (24 once an
//! id needs more than 32 bits, see `Ids`), about 24 bytes per key at open
//! and 22–33 as it grows, where a map holding keys cost a pointer, a
//! length and an allocation of the key besides. The table keeps its
//! fingerprints in ascending order, which is the order the index image
//! records them in: open appends them as it reads them, and the image is
//! written from the table without a sort.
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

use siphasher::sip128::SipHasher13;

use self::table::{Narrow, Slot, Table, Wide};
use super::{EntryId, Fingerprint, Fingerprints, KeyIndex};
use crate::error::{Error, ErrorKind, Result};

mod table;

/// Unordered, fastest point lookups, keys not in memory.
pub struct HashIndex {
    /// Each key's fingerprint with its entry id, ordered (`table.rs`).
    table: Ids,
    /// The secret the fingerprints are made under.
    secret: [u8; 16],
    sip: SipHasher13,
}

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

/// The table's slots: 20 bytes each while every id fits in four (a store
/// of fewer than 4 billion objects: the engine's ids are dense, freed ones
/// reused), 24 from the first id that does not.
enum Ids {
    Narrow(Table<Narrow>),
    Wide(Table<Wide>),
}

impl Default for Ids {
    fn default() -> Self {
        Ids::Narrow(Table::default())
    }
}

/// Runs `$body` with `$t` the table, whichever its slots.
macro_rules! each_table {
    ($table:expr, $t:ident, $body:expr) => {
        match $table {
            Ids::Narrow($t) => $body,
            Ids::Wide($t) => $body,
        }
    };
}

impl HashIndex {
    /// An empty index whose fingerprints are made under `secret`.
    pub(crate) fn with_secret(secret: [u8; 16]) -> Self {
        HashIndex {
            table: Ids::default(),
            secret,
            sip: SipHasher13::new_with_key(&secret),
        }
    }

    /// Room for `n` keys with ids up to `top`, exactly (open, a bulk
    /// load).
    pub(crate) fn reserve_for(&mut self, n: usize, top: EntryId) {
        let n = n.saturating_add(self.len());
        self.table = match (&self.table, Narrow::fits(top)) {
            (Ids::Narrow(t), true) => t.rebuilt(n).map_or_else(Ids::default, Ids::Narrow),
            (Ids::Narrow(t), false) => Ids::Wide(t.rebuilt(n).unwrap_or_default()),
            (Ids::Wide(t), _) => Ids::Wide(t.rebuilt(n).unwrap_or_default()),
        };
    }

    /// Adds fingerprints known to be distinct from each other and from
    /// every one in the index, each with an id that names no key yet; in
    /// ascending order (an image's) they are appended without a search.
    pub(crate) fn load_distinct(&mut self, batch: &[(Fingerprint, EntryId)]) {
        for &(fp, id) in batch {
            debug_assert!(fp != 0 && self.get_fp(fp).is_none());
            let appended = each_table!(&mut self.table, t, t.append(fp, id));
            if appended.is_err() {
                self.insert_fp(fp, id);
            }
        }
    }

    fn get_fp(&self, fp: Fingerprint) -> Option<EntryId> {
        each_table!(&self.table, t, t.get(fp))
    }

    /// `key`'s fingerprint (never 0: an empty slot).
    pub(crate) fn of(&self, key: &[u8]) -> Fingerprint {
        self.sip.hash(key).as_u128().max(1)
    }

    /// Sets `fp`'s id, growing the table or widening its slots first when
    /// it must; returns the id replaced.
    fn insert_fp(&mut self, fp: Fingerprint, id: EntryId) -> Option<EntryId> {
        loop {
            if let Ok(old) = each_table!(&mut self.table, t, t.insert(fp, id)) {
                return old;
            }
            self.table = match &self.table {
                Ids::Narrow(t) if !Narrow::fits(id) => {
                    Ids::Wide(t.rebuilt(t.len()).unwrap_or_default())
                }
                Ids::Narrow(t) => Ids::Narrow(t.grown()),
                Ids::Wide(t) => Ids::Wide(t.grown()),
            };
        }
    }

    /// Loads ascending fingerprints into this empty index, refusing a
    /// zero or a repeated one.
    fn load_sorted(&mut self, ids: &[(Fingerprint, EntryId)]) -> Result<()> {
        let top = ids.iter().map(|&(_, id)| id).max().unwrap_or(0);
        self.reserve_for(ids.len(), top);
        for &(fp, id) in ids {
            if fp == 0 {
                return Err(Error::new(ErrorKind::Corrupt, "a fingerprint of zero"));
            }
            let appended = each_table!(&mut self.table, t, t.append(fp, id));
            if appended.is_err() && self.insert_fp(fp, id).is_some() {
                return Err(Error::new(ErrorKind::Corrupt, "a fingerprint twice"));
            }
        }
        Ok(())
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
        each_table!(&mut self.table, t, t.remove(fp))
    }

    fn len(&self) -> usize {
        each_table!(&self.table, t, t.len())
    }

    fn load(&mut self, entries: Vec<(Box<[u8]>, EntryId)>) {
        let mut fps: Vec<(Fingerprint, EntryId)> = entries
            .into_iter()
            .map(|(k, id)| (self.of(&k), id))
            .collect();
        // Stable, by fingerprint only: a key given twice keeps its last
        // id, as every backend's `load` does.
        fps.sort_by_key(|&(fp, _)| fp);
        if self.is_empty() && self.load_sorted(&fps).is_ok() {
            return;
        }
        // Into a table that has keys, or keys given twice: one by one.
        for (fp, id) in fps {
            self.insert_fp(fp, id);
        }
    }

    fn holds_keys(&self) -> bool {
        false
    }

    fn fingerprints(&self) -> Option<Fingerprints> {
        // The table iterates in ascending fingerprint order.
        let ids = each_table!(&self.table, t, t.iter().collect());
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
        let mut ids = f.ids;
        if !ids.is_sorted_by(|a, b| a.0 < b.0) {
            ids.sort_unstable();
        }
        self.load_sorted(&ids)
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
    /// id freed), against a `HashMap`, across several table growths, the
    /// table's invariants T1 and T2 checked as it goes.
    #[test]
    fn matches_a_hashmap_under_the_engines_id_protocol() {
        matches_a_hashmap(false);
    }

    /// The same with 24-byte slots (as after an id beyond `u32::MAX`).
    #[test]
    fn a_widened_table_matches_a_hashmap_too() {
        matches_a_hashmap(true);
    }

    fn check(ix: &HashIndex) {
        each_table!(&ix.table, t, t.check());
    }

    #[test]
    fn an_id_past_32_bits_widens_the_slots_and_keeps_every_key() {
        let mut ix = HashIndex::default();
        for i in 0..5000u64 {
            ix.insert(format!("k{i}").as_bytes(), i);
        }
        assert!(matches!(ix.table, Ids::Narrow(_)));
        let far = u64::from(u32::MAX) + 7;
        assert_eq!(ix.insert(b"far", far), None);
        assert!(matches!(ix.table, Ids::Wide(_)));
        assert_eq!(ix.len(), 5001);
        assert_eq!(ix.get(b"far"), Some(far));
        for i in 0..5000u64 {
            assert_eq!(ix.get(format!("k{i}").as_bytes()), Some(i));
        }
        check(&ix);
    }

    /// Open's path: ascending fingerprints appended in batches to a table
    /// reserved for them, then ordinary changes; the same lookups as
    /// inserting them one by one, and the appends really appended (no
    /// search: the table still says only appends filled it).
    #[test]
    fn ascending_fingerprints_are_appended_and_found() {
        let mut model = HashIndex::default();
        for i in 0..20_000u64 {
            model.insert(format!("key/{i}").as_bytes(), i);
        }
        let f = model.fingerprints().unwrap();
        let mut ix = HashIndex::with_secret(f.secret);
        ix.reserve_for(f.ids.len(), 19_999);
        for batch in f.ids.chunks(1000) {
            ix.load_distinct(batch);
        }
        match &ix.table {
            Ids::Narrow(t) => assert!(t.only_appended()),
            Ids::Wide(_) => panic!("ids fit in 32 bits"),
        }
        check(&ix);
        for i in 0..20_000u64 {
            assert_eq!(ix.get(format!("key/{i}").as_bytes()), Some(i));
        }
        assert_eq!(ix.get(b"key/none"), None);
        for i in (0..20_000u64).step_by(3) {
            assert_eq!(ix.remove(format!("key/{i}").as_bytes()), Some(i));
        }
        for i in 20_000..30_000u64 {
            assert_eq!(ix.insert(format!("key/{i}").as_bytes(), i), None);
        }
        check(&ix);
        for i in 0..30_000u64 {
            let want = (i >= 20_000 || i % 3 != 0).then_some(i);
            assert_eq!(ix.get(format!("key/{i}").as_bytes()), want, "key/{i}");
        }
    }

    /// `load` with a key given twice keeps the id given last, as the
    /// ordered backends do (found by a hostile review: it kept the larger).
    #[test]
    fn a_key_loaded_twice_keeps_its_last_id() {
        let mut ix = HashIndex::default();
        ix.load(vec![
            (b"a".to_vec().into_boxed_slice(), 9),
            (b"b".to_vec().into_boxed_slice(), 1),
            (b"a".to_vec().into_boxed_slice(), 3),
        ]);
        assert_eq!(
            (ix.get(b"a"), ix.get(b"b"), ix.len()),
            (Some(3), Some(1), 2)
        );
        check(&ix);
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
        // A fingerprint twice, or a zero, is refused (an image that says
        // so is damaged).
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
        let mut zero = ix.fingerprints().unwrap();
        zero.ids.insert(0, (0, 5000));
        assert_eq!(
            HashIndex::default()
                .load_fingerprints(zero)
                .unwrap_err()
                .kind(),
            ErrorKind::Corrupt
        );
    }

    fn matches_a_hashmap(wide: bool) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut ix = HashIndex::default();
        if wide {
            ix.table = Ids::Wide(Table::default());
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
            if step % 10_000 == 0 {
                check(&ix);
            }
        }
        check(&ix);
        assert_eq!(ix.len(), model.len());
        assert_eq!(matches!(ix.table, Ids::Wide(_)), wide);
        for (k, id) in &model {
            assert_eq!(ix.get(k), Some(*id));
        }
        assert_eq!(ix.get(b"key/none"), None);
        // Open's bulk load (keys in any order, into an empty table) finds
        // the same.
        let sorted: Vec<(Box<[u8]>, EntryId)> = model
            .iter()
            .map(|(k, id)| (k.clone().into_boxed_slice(), *id))
            .collect();
        let mut loaded = HashIndex::default();
        loaded.load(sorted);
        check(&loaded);
        assert_eq!(loaded.len(), model.len());
        for (k, id) in &model {
            assert_eq!(loaded.get(k), Some(*id));
        }
        // Every key with its id, in ascending fingerprint order.
        let f = ix.fingerprints().unwrap();
        assert!(f.ids.is_sorted_by(|a, b| a.0 < b.0));
        let mut want: Vec<(Fingerprint, EntryId)> =
            model.iter().map(|(k, id)| (ix.of(k), *id)).collect();
        want.sort_unstable();
        assert_eq!(f.ids, want);
    }
}
