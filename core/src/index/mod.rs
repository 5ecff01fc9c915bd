//! The in-memory key index: key → entry id.
//!
//! The index only maps keys to ids of entries in the engine's entry table;
//! everything else about an object lives in the entry. That keeps the trait
//! small enough for a hash map, an ordered map, or an FST with an overlay.
//! Backends are picked with [`IndexKind`] and built by [`build`] behind the
//! [`KeyIndex`] trait; the same store file opens with any backend because the
//! index is rebuilt from the tuple blocks at open.

mod hash;

pub use hash::HashIndex;

/// Id of an entry in the engine's entry table.
pub type EntryId = u64;

/// Which index backend to build.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexKind {
    /// Hash map: fastest point lookups, no ordered listing. The default.
    #[default]
    Hash,
}

/// What every index backend provides.
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
    /// Whether keys can be listed in order.
    fn is_ordered(&self) -> bool;
}

/// Builds the backend `kind` asks for.
pub fn build(kind: IndexKind) -> Box<dyn KeyIndex> {
    match kind {
        IndexKind::Hash => Box::new(HashIndex::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_maps_inserts_replaces_and_removes() {
        {
            let kind = IndexKind::Hash;
            let mut ix = build(kind);
            assert!(ix.is_empty());
            assert_eq!(ix.insert(b"a", 1), None);
            assert_eq!(ix.insert(b"b", 2), None);
            assert_eq!(ix.insert(b"a", 3), Some(1));
            assert_eq!(ix.get(b"a"), Some(3));
            assert_eq!(ix.get(b"zz"), None);
            assert_eq!(ix.remove(b"b"), Some(2));
            assert_eq!(ix.remove(b"b"), None);
            assert_eq!(ix.len(), 1);
        }
    }
}
