//! Hash backend: `hashbrown` map with its default (foldhash) hasher.

use std::ops::Bound;

use hashbrown::HashMap;

use super::{EntryId, KeyIndex};
use crate::error::{Error, ErrorKind, Result};

/// Unordered, fastest point lookups.
#[derive(Default)]
pub struct HashIndex {
    map: HashMap<Box<[u8]>, EntryId>,
}

impl KeyIndex for HashIndex {
    fn get(&self, key: &[u8]) -> Option<EntryId> {
        self.map.get(key).copied()
    }

    fn insert(&mut self, key: &[u8], id: EntryId) -> Option<EntryId> {
        match self.map.get_mut(key) {
            Some(slot) => Some(std::mem::replace(slot, id)),
            None => {
                self.map.insert(key.into(), id);
                None
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Option<EntryId> {
        self.map.remove(key)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn load(&mut self, entries: Vec<(Box<[u8]>, EntryId)>) {
        self.map.reserve(entries.len());
        for (k, id) in entries {
            self.map.insert(k, id);
        }
    }

    fn all(&self, out: &mut Vec<(Box<[u8]>, EntryId)>) -> Result<()> {
        out.extend(self.map.iter().map(|(k, id)| (k.clone(), *id)));
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
            "the hash index cannot list keys in order; open the store with \
             Options::index(IndexKind::BTree) or IndexKind::Fst",
        ))
    }
}
