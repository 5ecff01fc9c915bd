//! FST backend: the least memory per key.
//!
//! Keys live in an immutable finite state transducer (`fst::Map`, shared
//! prefixes and suffixes stored once) plus a small ordered overlay of recent
//! changes (`Some(id)` for a put, `None` for a tombstone). When the overlay
//! grows past a fraction of the FST it is frozen (a sorted vector) and
//! merged with the FST into a new one on a background thread; lookups
//! meanwhile consult the overlay, then the frozen layer, then the FST. The
//! finished FST is swapped in on the next change or the maintenance thread's next
//! idle tick, an O(1) step, so neither readers nor writers wait for a
//! merge. At open every key arrives at once: they serve lookups from the
//! frozen layer while the first FST is built behind them. A merge still
//! running when the index is dropped is stopped and its thread joined: no
//! thread of a store outlives it.
//!
//! Invariant: for any key, the newest of (overlay, frozen, base) that
//! mentions it is its state; `len` counts keys whose state is `Some`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use fst::{IntoStreamer, Map, MapBuilder, Streamer};

use super::{EntryId, KeyIndex};
use crate::error::Result;

/// Overlay size that always triggers a merge...
const MIN_MERGE: usize = 4096;
/// ...or this fraction (1/n) of the FST, whichever is larger.
const MERGE_FRACTION: usize = 8;

type Overlay = BTreeMap<Box<[u8]>, Option<EntryId>>;
/// A frozen overlay: sorted by key, unique keys.
type Frozen = Vec<(Box<[u8]>, Option<EntryId>)>;

/// Compressed, ordered key index.
pub struct FstIndex {
    base: Arc<Map<Vec<u8>>>,
    frozen: Arc<Frozen>,
    overlay: Overlay,
    len: usize,
    merge: Option<JoinHandle<Option<Map<Vec<u8>>>>>,
    /// Set when the index is dropped: a running merge stops early.
    cancel: Arc<AtomicBool>,
}

impl Drop for FstIndex {
    fn drop(&mut self) {
        if let Some(merge) = self.merge.take() {
            self.cancel.store(true, Ordering::Relaxed);
            let _ = merge.join();
        }
    }
}

impl Default for FstIndex {
    fn default() -> Self {
        FstIndex {
            base: Arc::new(Map::default()),
            frozen: Arc::default(),
            overlay: Overlay::new(),
            len: 0,
            merge: None,
            cancel: Arc::default(),
        }
    }
}

impl FstIndex {
    fn lookup(&self, key: &[u8]) -> Option<EntryId> {
        if let Some(state) = self.overlay.get(key) {
            return *state;
        }
        let found = self.frozen.binary_search_by(|(k, _)| (**k).cmp(key));
        if let Some((_, state)) = found.ok().and_then(|i| self.frozen.get(i)) {
            return *state;
        }
        self.base.get(key)
    }

    /// Swaps in a finished merge; starts one when the overlay is large.
    fn maintain_now(&mut self) {
        if self.merge.as_ref().is_some_and(JoinHandle::is_finished) {
            let done = self.merge.take().and_then(|h| h.join().ok()).flatten();
            match done {
                Some(map) => self.base = Arc::new(map),
                // A failed merge keeps its changes: put them back under the
                // newer ones.
                None => {
                    for (k, v) in self.frozen.iter() {
                        self.overlay.entry(k.clone()).or_insert(*v);
                    }
                }
            }
            self.frozen = Arc::default();
        }
        let threshold = MIN_MERGE.max(self.base.len() / MERGE_FRACTION);
        if self.merge.is_none() && self.overlay.len() >= threshold {
            let frozen: Frozen = std::mem::take(&mut self.overlay).into_iter().collect();
            self.start_merge(frozen);
        }
    }

    /// Freezes `changes` and merges them into a new FST in the background.
    fn start_merge(&mut self, changes: Frozen) {
        self.frozen = Arc::new(changes);
        let (base, frozen) = (self.base.clone(), self.frozen.clone());
        let cancel = self.cancel.clone();
        self.merge = std::thread::Builder::new()
            .name("blobcask-fst-merge".into())
            .spawn(move || merge(&base, &frozen, &cancel))
            .ok();
        if self.merge.is_none() {
            // No thread: keep the changes in the overlay.
            for (k, v) in std::mem::take(&mut self.frozen).iter() {
                self.overlay.entry(k.clone()).or_insert(*v);
            }
        }
    }
}

/// A new FST holding `base` updated by `changes`; `None` when it failed
/// or `cancel` was set (looked at every `CANCEL_EVERY` keys).
fn merge(base: &Map<Vec<u8>>, changes: &Frozen, cancel: &AtomicBool) -> Option<Map<Vec<u8>>> {
    const CANCEL_EVERY: usize = 4096;
    let mut out = MapBuilder::memory();
    let mut changes = changes.iter().peekable();
    let mut stream = base.stream();
    let mut seen = 0usize;
    while let Some((k, v)) = stream.next() {
        seen += 1;
        if seen.is_multiple_of(CANCEL_EVERY) && cancel.load(Ordering::Relaxed) {
            return None;
        }
        while let Some((ck, cv)) = changes.next_if(|(ck, _)| &**ck < k) {
            if let Some(id) = cv {
                out.insert(ck, *id).ok()?;
            }
        }
        match changes.next_if(|(ck, _)| &**ck == k) {
            Some((_, Some(id))) => out.insert(k, *id).ok()?,
            Some((_, None)) => {}
            None => out.insert(k, v).ok()?,
        }
    }
    for (ck, cv) in changes {
        if let Some(id) = cv {
            out.insert(ck, *id).ok()?;
        }
    }
    let mut bytes = out.into_inner().ok()?;
    bytes.shrink_to_fit();
    Map::new(bytes).ok()
}

impl KeyIndex for FstIndex {
    fn get(&self, key: &[u8]) -> Option<EntryId> {
        self.lookup(key)
    }

    fn insert(&mut self, key: &[u8], id: EntryId) -> Option<EntryId> {
        let prev = self.lookup(key);
        self.overlay.insert(key.into(), Some(id));
        if prev.is_none() {
            self.len += 1;
        }
        self.maintain_now();
        prev
    }

    fn remove(&mut self, key: &[u8]) -> Option<EntryId> {
        let prev = self.lookup(key)?;
        self.overlay.insert(key.into(), None);
        self.len -= 1;
        self.maintain_now();
        Some(prev)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn load(&mut self, mut entries: Vec<(Box<[u8]>, EntryId)>) {
        if self.len > 0 || self.merge.is_some() {
            for (k, id) in entries {
                self.insert(&k, id);
            }
            return;
        }
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|a, b| a.0 == b.0);
        }
        self.len = entries.len();
        let frozen = entries.into_iter().map(|(k, id)| (k, Some(id))).collect();
        self.start_merge(frozen);
    }

    fn needs_maintenance(&self) -> bool {
        self.merge.as_ref().is_some_and(JoinHandle::is_finished)
    }

    fn maintain(&mut self) {
        self.maintain_now();
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
        // Three sorted sources, newest first on equal keys.
        let mut builder = self.base.range();
        builder = match start {
            Bound::Included(s) => builder.ge(s),
            Bound::Excluded(s) => builder.gt(s),
            Bound::Unbounded => builder,
        };
        builder = match end {
            Bound::Included(e) => builder.le(e),
            Bound::Excluded(e) => builder.lt(e),
            Bound::Unbounded => builder,
        };
        let mut base = builder.into_stream();
        let mut base_next = || base.next().map(|(k, v)| (Box::<[u8]>::from(k), Some(v)));
        let mut b = base_next();
        let from = match start {
            Bound::Included(s) => self.frozen.partition_point(|(k, _)| &**k < s),
            Bound::Excluded(s) => self.frozen.partition_point(|(k, _)| &**k <= s),
            Bound::Unbounded => 0,
        };
        // `partition_point` returns at most the length: never empty by error.
        let mut f = self
            .frozen
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|(k, _)| match end {
                Bound::Included(e) => &**k <= e,
                Bound::Excluded(e) => &**k < e,
                Bound::Unbounded => true,
            })
            .peekable();
        let mut o = self.overlay.range::<[u8], _>((start, end)).peekable();
        let limit = out.len() + limit;
        while out.len() < limit {
            let candidates = [
                o.peek().map(|(k, _)| &***k),
                f.peek().map(|(k, _)| &**k),
                b.as_ref().map(|(k, _)| &**k),
            ];
            let Some(smallest) = candidates.iter().flatten().min().map(|k| k.to_vec()) else {
                break;
            };
            // The newest layer that has the key decides its state.
            let mut state: Option<Option<EntryId>> = None;
            if let Some((_, v)) = o.next_if(|(k, _)| ***k == *smallest) {
                state = Some(*v);
            }
            if let Some((_, v)) = f.next_if(|(k, _)| **k == *smallest) {
                state.get_or_insert(*v);
            }
            if b.as_ref().is_some_and(|(k, _)| **k == *smallest) {
                let (_, v) = b.take().unwrap_or_default();
                state.get_or_insert(v);
                b = base_next();
            }
            if let Some(Some(id)) = state {
                out.push((smallest.into_boxed_slice(), id));
            }
        }
        Ok(())
    }
}
