//! Scrub: every byte of every object read back against its checksums
//! (`blobcask check --data`).
//!
//! Keys come from a fresh scan of the metadata area (the hash index cannot
//! list); each live object is then verified through its index entry, which
//! pins its pieces for the duration (invariant 2), so a scrub may run next
//! to writers without mistaking reused space for damage.

use super::{data, Store};
use crate::error::{show_key, Result};
use crate::meta::block::SlotContent;
use crate::meta::recovery;
use crate::meta::tuple::{Checksums, Tuple, TupleValue};

/// What a scrub found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrubReport {
    /// Objects read back.
    pub objects: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects written by format 1 without any checksum (served unverified).
    pub unverified: u64,
    /// Objects whose bytes do not match their checksums: key and where
    /// (and a damaged copy of the metadata extent table, whose other copy
    /// still serves).
    pub damaged: Vec<String>,
}

impl Store {
    /// Reads every object back and checks every byte against its checksums.
    /// Damage is listed in the report, not returned as an error; errors are
    /// for I/O failures and a closed store.
    pub async fn scrub(&self) -> Result<ScrubReport> {
        self.check_open()?;
        let shared = self.shared();
        let mut report = ScrubReport::default();
        // The metadata area as the device holds it now, read by recovery's
        // own scan.
        let (table_damage, blocks) = recovery::scan_live(shared.engine.as_ref()).await?;
        if let Some(why) = table_damage {
            report.damaged.push(format!(
                "metadata extent table {why} (the other copy is whole)"
            ));
        }
        for (no, b) in blocks.into_iter().enumerate() {
            let no = no as u32;
            // The slot readers use (inline values are read from it), as
            // scanned; read again if it did not decode (it may have been
            // written during the scan).
            let current = shared.state.read().slot_of(no);
            let Some((at, _)) = current else {
                // Never written since open: empty, or not this store's.
                let newest = b
                    .slots
                    .iter()
                    .filter_map(|(_, s)| s.seq().map(|q| (q, s)))
                    .max_by_key(|(q, _)| *q);
                if let Some((_, SlotContent::Valid { tuples, .. })) = newest {
                    for t in tuples {
                        self.scrub_one(t, &mut report).await?;
                    }
                }
                continue;
            };
            let tuples = match b.slots.into_iter().find(|(o, _)| *o == at) {
                Some((_, SlotContent::Valid { tuples, .. })) => tuples,
                _ => match self.current_block(no).await? {
                    Ok(tuples) => tuples,
                    Err(why) => {
                        report.damaged.push(format!(
                            "tuple block {no} (slot at byte {at}): {why}; the objects it \
                             lists cannot be read"
                        ));
                        continue;
                    }
                },
            };
            for t in &tuples {
                self.scrub_one(t, &mut report).await?;
            }
        }
        Ok(report)
    }

    async fn scrub_one(&self, t: &Tuple, report: &mut ScrubReport) -> Result<()> {
        // Only the live version, pinned through its entry.
        let live = {
            let st = self.shared().state.read();
            st.lookup(&t.key)
                .filter(|e| e.version == t.version)
                .map(|e| (e.size(), e.data.heap().cloned()))
        };
        let Some((size, data)) = live else {
            return Ok(());
        };
        report.objects += 1;
        report.bytes += size;
        // Inline values are checked with their slot, at open and at
        // every read.
        let Some(super::HeapValue { extent, sums, .. }) = data else {
            return Ok(());
        };
        if sums == Checksums::None {
            report.unverified += 1;
            return Ok(());
        }
        let pinned = Tuple {
            key: t.key.clone(),
            version: t.version,
            created_micros: t.created_micros,
            size,
            expires_micros: t.expires_micros,
            value: TupleValue::Heap {
                pieces: extent.pieces.clone(),
                sums,
                unsynced: false,
            },
        };
        if let Some(why) = data::verify_object(self.shared().engine.as_ref(), &pinned).await? {
            report.damaged.push(format!("{}: {why}", show_key(&t.key)));
        }
        drop(extent);
        Ok(())
    }
}
