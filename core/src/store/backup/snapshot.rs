//! Step 1, the snapshot: every live object version pinned under one read
//! lock of the index, and the inline values read from their tuple blocks
//! (or from the values kept aside meanwhile, `Retired`).

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::{Pinned, READS_IN_FLIGHT};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::store::{ObjectData, Store};

/// Inline values removed from their tuple blocks (replaced or deleted)
/// while a snapshot is being filled, by version: what the snapshot reads
/// there may no longer hold them. Kept only while someone holds it
/// (`hold`); the commit path adds to it (`keep`).
#[derive(Default)]
pub(crate) struct Retired(pub(super) Mutex<(usize, std::collections::HashMap<u64, Bytes>)>);

impl Retired {
    /// Keeps `gone`'s value, if inline and a snapshot is being filled.
    pub fn keep(&self, gone: crate::meta::tuple::Tuple) {
        if let crate::meta::tuple::TupleValue::Inline(b) = gone.value {
            let mut g = self.0.lock();
            if g.0 > 0 {
                g.1.insert(gone.version, b);
            }
        }
    }

    fn get(&self, version: u64) -> Option<Bytes> {
        self.0.lock().1.get(&version).cloned()
    }

    /// Keeps removed values until the guard drops.
    pub(super) fn hold(&self) -> RetiredHold<'_> {
        self.0.lock().0 += 1;
        RetiredHold(self)
    }
}

pub(super) struct RetiredHold<'a>(&'a Retired);

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
        self.fill_inline(&snapshot).await?;
        Ok(snapshot)
    }

    /// Every live object version, pinned, in source heap order; inline
    /// values in their tuple blocks still to read (`fill_inline`).
    pub(super) fn pin_live(&self) -> Result<Vec<Pinned>> {
        let st = self.shared().state.read();
        let mut keys = Vec::new();
        st.index.all(&mut keys)?;
        let mut out: Vec<Pinned> = keys
            .into_iter()
            .filter_map(|(key, id)| {
                let e = st.entry(id).filter(|e| e.live())?;
                let data = e.data.at_hand();
                Some(Pinned {
                    key,
                    size: e.size,
                    version: e.version,
                    expires: e.expires_micros(),
                    block: data.is_none().then_some(e.block),
                    data: Mutex::new(data),
                })
            })
            .collect();
        drop(st);
        out.sort_by_key(Pinned::heap_offset);
        Ok(out)
    }

    /// Reads the inline values of the snapshot from their tuple blocks, one
    /// read per block, many at once. A value its block no longer holds was
    /// removed after the snapshot, so `Retired` has it; a block rewritten
    /// during its read is read again. Otherwise a missing value is
    /// `Corrupt` (as a read of it would be).
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
        self.check_not_closing()?;
        let damaged = |why: String| {
            Error::new(
                ErrorKind::Corrupt,
                format!("tuple block {block} cannot be read: {why}"),
            )
        };
        let tuples = self.current_block(block).await?.map_err(damaged)?;
        for p in pins.iter().filter_map(|&i| snapshot.get(i)) {
            // Not in the block as read: removed before that write, so kept
            // aside (`Retired`).
            let found = crate::store::inline_in(&tuples, &p.key, p.version)
                .or_else(|| self.shared().retired.get(p.version))
                .filter(|b| b.len() as u64 == p.size);
            let Some(b) = found else {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "tuple block {block} does not hold the value of {} (version {})",
                        show_key(&p.key),
                        p.version
                    ),
                ));
            };
            *p.data.lock() = Some(ObjectData::Inline(b));
        }
        Ok(())
    }
}
