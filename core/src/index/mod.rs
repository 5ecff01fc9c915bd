//! The in-memory key index: key → entry id.
//!
//! The index only maps keys to ids of entries in the engine's entry table;
//! everything else about an object lives in the entry, and the key itself
//! lives only here (and in its tuple on disk). That keeps the trait small
//! enough for a hash map, an ordered map, or an FST with an overlay, and
//! lets a compressing backend really save the keys' memory. Backends are
//! picked with [`IndexKind`] and built by [`build`] behind the [`KeyIndex`]
//! trait; the same store file opens with any backend because the index is
//! built at open from the tuple blocks, or from the index image a clean
//! close wrote (`meta::image`): the ordered backends' images hold sorted
//! keys, the hash backend's its keys' fingerprints (it holds no keys in
//! memory), and an image of the other kind is not used (open scans).

mod btree;
mod fst;
mod hash;

use std::ops::Bound;

pub use self::btree::BTreeIndex;
pub use self::fst::FstIndex;
pub use self::hash::HashIndex;
use crate::error::Result;

/// Id of an entry in the engine's entry table.
pub type EntryId = u64;

/// A key's fingerprint in the hash index (`hash.rs` gives the arithmetic).
pub type Fingerprint = u128;

/// Every key of a hash index as its fingerprint: what its index image
/// records instead of the keys, sorted by fingerprint.
pub struct Fingerprints {
    /// The secret the fingerprints were made under.
    pub secret: [u8; 16],
    /// (fingerprint, entry id), in ascending fingerprint order.
    pub ids: Vec<(Fingerprint, EntryId)>,
}

/// Which index backend to build.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexKind {
    /// Hash map: fastest point lookups, the least memory per key (no keys
    /// in memory, only fingerprints). The default. Lists in byte order
    /// too, but each listing reads the keys from the tuple blocks (see
    /// `Store::list`).
    #[default]
    Hash,
    /// Ordered map: listing by prefix or range from memory, a page at a
    /// time; lookups a little slower, keys held in memory.
    BTree,
    /// Finite state transducer of the keys plus a small mutable overlay,
    /// merged in the background: the least memory per key, ordered.
    Fst,
}

impl IndexKind {
    /// Every backend, for suites that run against all of them.
    pub const ALL: [IndexKind; 3] = [IndexKind::Hash, IndexKind::BTree, IndexKind::Fst];

    /// Lower-case name (`hash`, `btree`, `fst`), as the bindings spell it.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Hash => "hash",
            IndexKind::BTree => "btree",
            IndexKind::Fst => "fst",
        }
    }

    /// Whether it holds key fingerprints instead of keys (its index image
    /// records fingerprints).
    pub(crate) fn holds_fingerprints(self) -> bool {
        matches!(self, IndexKind::Hash)
    }

    /// Whether it holds its keys in byte order, so that `Store::list` and
    /// `range` page through it (the others read the keys from the tuple
    /// blocks for each listing).
    pub fn is_ordered(self) -> bool {
        !matches!(self, IndexKind::Hash)
    }
}

impl std::str::FromStr for IndexKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        IndexKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                crate::Error::new(
                    crate::ErrorKind::InvalidArgument,
                    format!("unknown index {s:?}: expected hash, btree or fst"),
                )
            })
    }
}

/// What every index backend provides.
///
/// Ids are the engine's entry ids: each names one key at a time (an id is
/// inserted again only after its key was removed or moved to another id),
/// and they are dense (the engine reuses freed ones), which the hash
/// backend relies on (its memory grows with the largest id).
pub trait KeyIndex: Send + Sync {
    /// The entry of `key`, if present.
    fn get(&self, key: &[u8]) -> Option<EntryId>;
    /// Maps `key` to `id`, returning the id it replaced.
    fn insert(&mut self, key: &[u8], id: EntryId) -> Option<EntryId>;
    /// Removes `key`, returning its id.
    fn remove(&mut self, key: &[u8]) -> Option<EntryId>;
    /// Number of keys.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Adds many keys at once (at open); backends that build in bulk (FST)
    /// override it.
    fn load(&mut self, entries: Vec<(Box<[u8]>, EntryId)>) {
        for (k, id) in entries {
            self.insert(&k, id);
        }
    }
    /// Whether the keys are held in memory ([`all`](Self::all) gives them);
    /// the hash backend holds only fingerprints.
    fn holds_keys(&self) -> bool {
        true
    }
    /// A backend that holds fingerprints instead of keys: all of them and
    /// its secret (the index image records them).
    fn fingerprints(&self) -> Option<Fingerprints> {
        None
    }
    /// Loads the fingerprints an index image recorded into an empty index
    /// that holds fingerprints; `Unsupported` in the others, `Corrupt`
    /// when one is twice.
    fn load_fingerprints(&mut self, _: Fingerprints) -> Result<()> {
        Err(crate::Error::new(
            crate::ErrorKind::Unsupported,
            "this index holds keys, not fingerprints",
        ))
    }
    /// Whether background work has finished and waits for [`maintain`](Self::maintain).
    fn needs_maintenance(&self) -> bool {
        false
    }
    /// Folds finished background work in (a short step under the write lock).
    fn maintain(&mut self) {}
    /// Every key with its entry, in no particular order, appended to `out`.
    /// Ordered backends list their whole range; one that does not hold
    /// keys gives `Unsupported`.
    fn all(&self, out: &mut Vec<(Box<[u8]>, EntryId)>) -> Result<()> {
        out.reserve(self.len());
        self.range(Bound::Unbounded, Bound::Unbounded, self.len(), out)
    }
    /// Up to `limit` keys in `(start, end)`, in order, appended to `out`.
    /// Unordered backends return `Unsupported`.
    fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        out: &mut Vec<(Box<[u8]>, EntryId)>,
    ) -> Result<()>;
}

/// Builds the backend `kind` asks for.
pub fn build(kind: IndexKind) -> Box<dyn KeyIndex> {
    match kind {
        IndexKind::Hash => Box::new(HashIndex::default()),
        IndexKind::BTree => Box::new(BTreeIndex::default()),
        IndexKind::Fst => Box::new(FstIndex::default()),
    }
}

/// Whether `(start, end)` can hold any key (ordered maps panic on ranges
/// that end before they start).
pub(crate) fn nonempty_range(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s <= e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s < e,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn every_backend_maps_inserts_replaces_and_removes() {
        for kind in IndexKind::ALL {
            let mut ix = build(kind);
            assert!(ix.is_empty());
            assert_eq!(ix.insert(b"a", 1), None);
            assert_eq!(ix.insert(b"b", 2), None);
            assert_eq!(ix.insert(b"a", 3), Some(1));
            assert_eq!(ix.get(b"a"), Some(3));
            assert_eq!(ix.get(b"zz"), None);
            assert_eq!(ix.remove(b"b"), Some(2));
            assert_eq!(ix.remove(b"b"), None);
            assert_eq!(ix.len(), 1, "{kind:?}");
        }
    }

    #[test]
    fn hash_index_refuses_ranges_of_the_keys_it_does_not_hold() {
        let err = build(IndexKind::Hash)
            .range(Bound::Unbounded, Bound::Unbounded, 10, &mut vec![])
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Unsupported);
        assert!(err.to_string().contains("tuple blocks"), "{err}");
    }

    /// Random operations on the ordered backends against a BTreeMap,
    /// including ranges; enough operations to make the FST merge its
    /// overlay several times.
    #[test]
    fn ordered_backends_match_a_btreemap() {
        for kind in [IndexKind::BTree, IndexKind::Fst] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(5);
            let mut ix = build(kind);
            let mut model = BTreeMap::<Vec<u8>, EntryId>::new();
            for step in 0..60_000u64 {
                let key = format!("k/{:05}", rng.random_range(0..20_000)).into_bytes();
                if rng.random_bool(0.7) {
                    assert_eq!(
                        ix.insert(&key, step),
                        model.insert(key, step),
                        "{kind:?} insert"
                    );
                } else {
                    assert_eq!(ix.remove(&key), model.remove(&key), "{kind:?} remove");
                }
                if step % 5000 == 0 {
                    let lo = format!("k/{:05}", rng.random_range(0..20_000)).into_bytes();
                    let mut got = vec![];
                    ix.range(Bound::Included(&lo), Bound::Unbounded, 300, &mut got)
                        .unwrap();
                    let want: Vec<_> = model
                        .range(lo.clone()..)
                        .take(300)
                        .map(|(k, v)| (k.clone().into_boxed_slice(), *v))
                        .collect();
                    assert_eq!(got, want, "{kind:?} range at step {step}");
                }
            }
            assert_eq!(ix.len(), model.len());
            for (k, v) in &model {
                assert_eq!(ix.get(k), Some(*v));
            }
        }
    }
}
