//! Ordered backend: the standard B-tree map.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{EntryId, KeyIndex};
use crate::error::Result;

/// Ordered map of keys; enables listing.
#[derive(Default)]
pub struct BTreeIndex {
    map: BTreeMap<Box<[u8]>, EntryId>,
}

impl KeyIndex for BTreeIndex {
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
        if self.map.is_empty() {
            // Bulk build (sorted input is built in linear time).
            self.map = entries.into_iter().collect();
        } else {
            for (k, id) in entries {
                self.map.insert(k, id);
            }
        }
    }

    fn range(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        out: &mut Vec<(Box<[u8]>, EntryId)>,
    ) -> Result<()> {
        if !super::nonempty_range(start, end) {
            return Ok(());
        }
        let range = self
            .map
            .range::<[u8], _>((start, end))
            .take(limit)
            .map(|(k, v)| (k.clone(), *v));
        out.extend(range);
        Ok(())
    }
}
