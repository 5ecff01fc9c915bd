//! Step 1, the snapshot: every live object version pinned under one read
//! lock of the index, and the inline values read from their tuple blocks
//! (or from the values kept aside meanwhile, `Retired`).

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::{Pinned, READS_IN_FLIGHT};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::store::{ObjectData, Store};

/// Tuples removed from their tuple blocks (replaced or deleted) while a
/// snapshot is being filled, by version: their keys and inline values,
/// which what the snapshot reads there may no longer hold. Kept only while
/// someone holds it (`hold`); the commit path adds to it (`keep`).
#[derive(Default)]
pub(crate) struct Retired(pub(super) Mutex<(usize, RetiredTuples)>);

/// Removed tuples by version: key, and value when inline.
pub(super) type RetiredTuples = std::collections::HashMap<u64, (Box<[u8]>, Option<Bytes>)>;

impl Retired {
    /// Keeps `gone`'s key and inline value while a snapshot is being filled.
    pub fn keep(&self, gone: crate::meta::tuple::Tuple) {
        let mut g = self.0.lock();
        if g.0 > 0 {
            let value = match gone.value {
                crate::meta::tuple::TupleValue::Inline(b) => Some(b),
                crate::meta::tuple::TupleValue::Heap { .. } => None,
            };
            g.1.insert(gone.version, (gone.key, value));
        }
    }

    pub(crate) fn get(&self, version: u64) -> Option<(Box<[u8]>, Option<Bytes>)> {
        self.0.lock().1.get(&version).cloned()
    }

    /// Keeps removed values until the guard drops.
    pub(crate) fn hold(&self) -> RetiredHold<'_> {
        self.0.lock().0 += 1;
        RetiredHold(self)
    }
}

pub(crate) struct RetiredHold<'a>(&'a Retired);

impl Drop for RetiredHold<'_> {
    fn drop(&mut self) {
        let mut g = self.0 .0.lock();
        g.0 -= 1;
        if g.0 == 0 {
            g.1 = Default::default();
        }
    }
}

impl Store {
    /// Every live object version, pinned, in source heap order, with the
    /// bytes of its inline values.
    pub(super) async fn snapshot(&self) -> Result<Vec<Pinned>> {
        let _hold = self.shared().retired.hold();
        let snapshot = self.pin_live()?;
        if !self.shared().state.read().index.holds_keys() {
            // Every pin's tuple is read for its key: the groups that
            // linked them (an entry is linked before its block is
            // written) must have written their blocks.
            self.sync().await?;
        }
        self.fill_inline(&snapshot).await?;
        Ok(snapshot)
    }

    /// Every live object version, pinned, in source heap order; inline
    /// values in their tuple blocks still to read (`fill_inline`), and with
    /// an index of fingerprints, every key.
    pub(super) fn pin_live(&self) -> Result<Vec<Pinned>> {
        let st = self.shared().state.read();
        let keyless = !st.index.holds_keys();
        let mut keys = Vec::new();
        match st.index.fingerprints() {
            Some(f) => keys.extend(f.ids.into_iter().map(|(_, id)| (None, id))),
            None => {
                let mut all = Vec::new();
                st.index.all(&mut all)?;
                keys.extend(all.into_iter().map(|(k, id)| (Some(k), id)));
            }
        }
        let mut out: Vec<Pinned> = keys
            .into_iter()
            .filter_map(|(key, id)| {
                let e = st.entry(id).filter(|e| e.live())?;
                let data = e.data.at_hand();
                Some(Pinned {
                    key: key.map(std::sync::OnceLock::from).unwrap_or_default(),
                    size: e.size(),
                    version: e.version,
                    expires: e.expires_micros(),
                    block: (data.is_none() || keyless).then_some(e.block),
                    data: Mutex::new(data),
                })
            })
            .collect();
        drop(st);
        out.sort_by_key(Pinned::heap_offset);
        Ok(out)
    }

    /// Reads the inline values of the snapshot (and with an index of
    /// fingerprints, every key) from their tuple blocks, one read per
    /// block, many at once. A tuple its block no longer holds was removed
    /// after the snapshot, so `Retired` has it; a block rewritten during
    /// its read is read again. Otherwise a missing one is `Corrupt` (as a
    /// read of it would be).
    pub(super) async fn fill_inline(&self, snapshot: &[Pinned]) -> Result<()> {
        let mut by_block: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, p) in snapshot.iter().enumerate() {
            if let Some(b) = p.block {
                by_block.entry(b).or_default().push(i);
            }
        }
        stream::iter(by_block)
            .map(|(block, pins)| self.fill_block(snapshot, block, pins))
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }

    async fn fill_block(&self, snapshot: &[Pinned], block: u32, pins: Vec<usize>) -> Result<()> {
        let pins: Vec<&Pinned> = pins.iter().filter_map(|&i| snapshot.get(i)).collect();
        let versions: Vec<u64> = pins.iter().map(|p| p.version).collect();
        // Versions are never reused: the version names the tuple (and its
        // key, when the pin has none yet).
        let found = self.tuples_in_block(block, &versions).await?;
        for (p, (key, value)) in pins.into_iter().zip(found) {
            let wrong = |what: &str| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "tuple block {block} holds version {} of {} with {what}",
                        p.version,
                        show_key(&key)
                    ),
                )
            };
            match p.key.get() {
                Some(known) if *known != key => return Err(wrong("another key")),
                Some(_) => {}
                None => {
                    let _ = p.key.set(key.clone());
                }
            }
            let mut data = p.data.lock();
            if data.is_none() {
                match value.filter(|b| b.len() as u64 == p.size) {
                    Some(b) => *data = Some(ObjectData::Inline(b)),
                    None => return Err(wrong("another size")),
                }
            }
        }
        Ok(())
    }
}
