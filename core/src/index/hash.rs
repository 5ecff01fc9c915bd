//! Hash backend: a `hashbrown` table of entry ids, found by the hash of
//! their key (foldhash, hashbrown's default); the keys themselves sit in a
//! vector indexed by entry id.
//!
//! A key-to-id map would keep a 24-byte (key pointer, id) pair in every
//! bucket, and a table is up to half empty after it doubles: ~52 bytes per
//! key at 1M keys. Here a bucket is one id (4 bytes while ids fit, see
//! `Ids`) and each key's pointer lives once, densely, in `keys` (the
//! engine's entry ids are dense: it reuses freed ones): `benches/log/2026-11-24-ram-per-object-1k-default.md`,
//! "RAM per object".

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::ops::Bound;

use hashbrown::{DefaultHashBuilder, HashTable};

use super::{EntryId, KeyIndex};
use crate::error::{Error, ErrorKind, Result};

/// Unordered, fastest point lookups.
///
/// An id names one key at a time, and memory grows with the largest id
/// (as the engine hands them out: dense, freed ones reused).
#[derive(Default)]
pub struct HashIndex {
    /// Entry ids, placed by the hash of their key.
    table: Ids,
    /// Each id's key, at index id.
    keys: Vec<Option<Box<[u8]>>>,
    hasher: DefaultHashBuilder,
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

/// `id`'s key in `keys` (`None` for an id without one).
fn key_of(keys: &[Option<Box<[u8]>>], id: EntryId) -> Option<&[u8]> {
    usize::try_from(id)
        .ok()
        .and_then(|i| keys.get(i))
        .and_then(Option::as_deref)
}

impl HashIndex {
    fn slot(&mut self, id: EntryId) -> &mut Option<Box<[u8]>> {
        let i = usize::try_from(id).unwrap_or(usize::MAX);
        if self.keys.len() <= i {
            self.keys.resize(i + 1, None);
        }
        // Just made long enough (an id beyond memory failed the resize).
        #[expect(clippy::indexing_slicing, reason = "resized to hold `i` above")]
        &mut self.keys[i]
    }
    /// Makes the table hold `id`: 8-byte ids from the first that does not
    /// fit in four.
    fn fit(&mut self, id: EntryId) {
        if u32::try_from(id).is_ok() {
            return;
        }
        if let Ids::Narrow(narrow) = &self.table {
            let (keys, hasher) = (&self.keys, &self.hasher);
            let mut wide = HashTable::with_capacity(narrow.len());
            for &i in narrow {
                let i = EntryId::from(i);
                wide.insert_unique(
                    hasher.hash_one(key_of(keys, i).unwrap_or_default()),
                    i,
                    |&j| hasher.hash_one(key_of(keys, j).unwrap_or_default()),
                );
            }
            self.table = Ids::Wide(wide);
        }
    }

    /// [`KeyIndex::insert`]: a borrowed key is copied when new, an owned
    /// one kept as it is.
    fn put(&mut self, key: Cow<'_, [u8]>, id: EntryId) -> Option<EntryId> {
        self.fit(id);
        let hash = self.hasher.hash_one(&*key);
        let keys = &self.keys;
        let old = each_table!(&mut self.table, t, to, {
            t.find_mut(hash, |&i| key_of(keys, EntryId::from(i)) == Some(&*key))
                .map(|slot| EntryId::from(std::mem::replace(slot, to(id))))
        });
        if let Some(old) = old {
            let moved = self.slot(old).take();
            *self.slot(id) = moved;
            return Some(old);
        }
        // A `Vec` from a boxed slice has no spare capacity: no copy back.
        let slot = self.slot(id);
        debug_assert!(slot.is_none(), "entry id {id} already names a key");
        *slot = Some(key.into_owned().into_boxed_slice());
        let Self {
            table,
            keys,
            hasher,
        } = self;
        each_table!(table, t, to, {
            t.insert_unique(hash, to(id), |&i| {
                hasher.hash_one(key_of(keys, EntryId::from(i)).unwrap_or_default())
            });
        });
        None
    }
}

impl KeyIndex for HashIndex {
    fn insert(&mut self, key: &[u8], id: EntryId) -> Option<EntryId> {
        self.put(Cow::Borrowed(key), id)
    }

    fn get(&self, key: &[u8]) -> Option<EntryId> {
        let hash = self.hasher.hash_one(key);
        let keys = &self.keys;
        each_table!(&self.table, t, _to, {
            t.find(hash, |&id| key_of(keys, EntryId::from(id)) == Some(key))
                .map(|&id| EntryId::from(id))
        })
    }

    fn remove(&mut self, key: &[u8]) -> Option<EntryId> {
        let hash = self.hasher.hash_one(key);
        let keys = &self.keys;
        let id = each_table!(&mut self.table, t, _to, {
            let found = t
                .find_entry(hash, |&i| key_of(keys, EntryId::from(i)) == Some(key))
                .ok()?;
            EntryId::from(found.remove().0)
        });
        self.slot(id).take();
        Some(id)
    }

    fn len(&self) -> usize {
        each_table!(&self.table, t, _to, t.len())
    }

    fn load(&mut self, entries: Vec<(Box<[u8]>, EntryId)>) {
        if let Some(top) = entries.iter().map(|&(_, id)| id).max() {
            self.fit(top);
        }
        let Self {
            table,
            keys,
            hasher,
        } = self;
        each_table!(&mut *table, t, _to, {
            t.reserve(entries.len(), |&i| {
                hasher.hash_one(key_of(keys, EntryId::from(i)).unwrap_or_default())
            })
        });
        let top = entries.iter().map(|&(_, id)| id).max();
        if let Some(top) = top.and_then(|t| usize::try_from(t).ok()) {
            keys.reserve((top + 1).saturating_sub(keys.len()));
        }
        // Into an empty table, keys in strictly increasing order (as open
        // gives them) are distinct: no lookup before each insert.
        let empty = each_table!(&*table, t, _to, t.is_empty());
        if empty && entries.is_sorted_by(|a, b| a.0 < b.0) {
            for (k, id) in entries {
                let hash = hasher.hash_one(&*k);
                if let Some(slot) = usize::try_from(id).ok().and_then(|i| {
                    if keys.len() <= i {
                        keys.resize(i + 1, None);
                    }
                    keys.get_mut(i)
                }) {
                    *slot = Some(k);
                }
                each_table!(&mut *table, t, to, {
                    t.insert_unique(hash, to(id), |&i| {
                        hasher.hash_one(key_of(keys, EntryId::from(i)).unwrap_or_default())
                    });
                });
            }
            return;
        }
        for (k, id) in entries {
            self.put(Cow::Owned(k.into_vec()), id);
        }
    }

    fn all(&self, out: &mut Vec<(Box<[u8]>, EntryId)>) -> Result<()> {
        let keys = &self.keys;
        each_table!(&self.table, t, _to, {
            out.reserve(t.len());
            out.extend(t.iter().filter_map(|&id| {
                let id = EntryId::from(id);
                Some((key_of(keys, id)?.into(), id))
            }));
        });
        Ok(())
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
            "the hash index cannot list keys in order: that takes a store \
             created with the index \"btree\" or \"fst\"",
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
    /// `u32::MAX`, which the key vector cannot hold in a test).
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
        let mut all = Vec::new();
        ix.all(&mut all).unwrap();
        let mut all: Vec<(Vec<u8>, EntryId)> =
            all.into_iter().map(|(k, id)| (k.into_vec(), id)).collect();
        all.sort();
        let mut want: Vec<(Vec<u8>, EntryId)> = model.into_iter().collect();
        want.sort();
        assert_eq!(all, want);
        // Ids are reused, so the key vector stays near the most keys held.
        assert!(ix.keys.len() <= 30_000, "{}", ix.keys.len());
    }
}
