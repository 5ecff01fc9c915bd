//! The keys of the live entries, read from their tuple blocks: what a
//! listing needs when the index holds fingerprints instead of keys (the
//! hash index), in one pass of large reads.
//!
//! Keeps (invariant 2's "Keys" paragraph in INVARIANTS.md): every entry
//! live when the pass starts is found by its version, in its block as the
//! block holds it now or, for a tuple removed since, in `Retired`, whose
//! hold is taken before the versions are; the pass reads after a `sync`,
//! so every group that linked one of those entries (an entry is linked
//! before its group writes its block) has written its blocks.
//!
//! The blocks' current slots are read in order of their place on the
//! device, neighbours joined into one read of up to `READ_SPAN` bytes (the
//! slots between them read too, when the gap is small). Reading each block
//! alone, as `Store::tuples_in_block` does, took 4.0 s for the keys of the
//! million objects `list-bench` stores; these reads took 0.54 s, at the
//! same load. A slot moved while it was read is read again alone.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use super::Store;
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::tuple::Tuple;

/// Most bytes one read covers.
const READ_SPAN: u64 = 1 << 20;

/// Largest run of unneeded slots read through rather than starting
/// another read.
const GAP: u64 = 16 * BLOCK_SIZE as u64;

/// Reads in flight at once.
const READS_IN_FLIGHT: usize = 4;

/// Passes before a version missing from its block is reported as damage
/// (see `keys_from_blocks`).
const PASSES: usize = 3;

/// One block of the pass: where its slot was when the reads were planned
/// (offset, and the block's write count), and the versions to find in it.
struct Wanted {
    block: u32,
    slot: (u64, u64),
    versions: Vec<u64>,
}

/// One read: the bytes from `at` up to the end of its last block's slot.
struct Read {
    at: u64,
    len: u64,
    blocks: Vec<Wanted>,
}

impl Store {
    /// Every key of a live entry that `keep` accepts, in no particular
    /// order. Memory: the keys kept, plus, while the pass runs, each live
    /// entry's version by block (8 to 16 bytes) and `READS_IN_FLIGHT`
    /// buffers of up to `READ_SPAN` bytes.
    pub(crate) async fn keys_from_blocks(
        &self,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<Vec<Box<[u8]>>> {
        let mut attempt = 0;
        loop {
            match self.keys_pass(keep).await? {
                Ok(keys) => return Ok(keys),
                // A version not found where it should be: a commit
                // replaced its tuple in the block's image just before the
                // pass took its hold and linked the new version just after
                // the pass read the entries (the replaced tuple was kept by
                // nobody). The next pass sees the new version; a version
                // missing pass after pass is damage.
                Err(missing) if attempt + 1 >= PASSES => return Err(missing),
                Err(_) => attempt += 1,
            }
        }
    }

    /// One pass: the keys, or (inner `Err`) the `Corrupt` error of a
    /// version not found in its block.
    async fn keys_pass(
        &self,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<std::result::Result<Vec<Box<[u8]>>, Error>> {
        let _hold = self.shared().retired.hold();
        let mut live: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        {
            let st = self.shared().state.read();
            for (_, e) in st.iter().filter(|(_, e)| e.live()) {
                live.entry(e.block).or_default().push(e.version);
            }
        }
        self.sync().await?;
        let reads = self.plan_reads(live);
        let found: Vec<std::result::Result<Vec<Box<[u8]>>, Error>> = futures::stream::iter(reads)
            .map(|read| self.keys_of_read(read, keep))
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut keys = Vec::new();
        for f in found {
            match f {
                Ok(k) => keys.extend(k),
                Err(missing) => return Ok(Err(missing)),
            }
        }
        Ok(Ok(keys))
    }

    /// The reads that cover the current slot of every block of `live`
    /// (its versions by block), in device order.
    fn plan_reads(&self, live: BTreeMap<u32, Vec<u64>>) -> Vec<Read> {
        let mut wanted: Vec<Wanted> = {
            let st = self.shared().state.read();
            live.into_iter()
                .map(|(block, versions)| Wanted {
                    block,
                    // A block without a slot holds nothing: its versions
                    // end up as not found, as in `tuples_in_block`.
                    slot: st.slot_of(block).unwrap_or((u64::MAX, 0)),
                    versions,
                })
                .collect()
        };
        wanted.sort_unstable_by_key(|w| w.slot.0);
        let mut reads: Vec<Read> = Vec::new();
        let block = BLOCK_SIZE as u64;
        for w in wanted {
            let at = w.slot.0;
            match reads.last_mut() {
                // (Slots without a place sort last and stay alone.)
                Some(r)
                    if at != u64::MAX
                        && at >= r.at + r.len
                        && at - (r.at + r.len) <= GAP
                        && at + block - r.at <= READ_SPAN =>
                {
                    r.len = at + block - r.at;
                    r.blocks.push(w);
                }
                _ => reads.push(Read {
                    at,
                    len: block,
                    blocks: vec![w],
                }),
            }
        }
        reads
    }

    /// The kept keys of one read's blocks.
    async fn keys_of_read(
        &self,
        read: Read,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<std::result::Result<Vec<Box<[u8]>>, Error>> {
        let s = self.shared();
        let mut out = Vec::new();
        let buf = if read.at == u64::MAX {
            None
        } else {
            self.check_not_closing()?;
            let len = usize::try_from(read.len).unwrap_or(usize::MAX);
            let (r, buf) = s.engine.read_at(AlignedBuf::zeroed(len), read.at).await;
            r.map_err(|e| Error::io("reading tuple blocks", e))?;
            Some(buf)
        };
        for w in read.blocks {
            let bytes = buf.as_ref().and_then(|b| {
                let from = usize::try_from(w.slot.0 - read.at).ok()?;
                b.as_slice().get(from..from + BLOCK_SIZE)
            });
            let tuples = match bytes.map(|b| {
                decode_slot(
                    SlotIdentity {
                        store_id: s.geometry.store_id,
                        block_no: w.block,
                    },
                    b,
                )
            }) {
                // Still the block's slot once read: its content as of now.
                Some(SlotContent::Valid { tuples, .. })
                    if s.state.read().slot_of(w.block) == Some(w.slot) =>
                {
                    tuples
                }
                // Moved meanwhile, or not readable: the one-block read
                // (which reads it again while it moves, and tells
                // damage from a move).
                _ => match self.tuples_in_block(w.block, &w.versions).await {
                    Ok(found) => {
                        out.extend(found.into_iter().map(|(k, _)| k).filter(|k| keep(k)));
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::Corrupt => return Ok(Err(e)),
                    Err(e) => return Err(e),
                },
            };
            for v in w.versions {
                let Some(key) = key_of(&tuples, v).or_else(|| s.retired.get(v).map(|(k, _)| k))
                else {
                    return Ok(Err(Error::new(
                        ErrorKind::Corrupt,
                        format!("tuple block {} does not hold version {v}", w.block),
                    )));
                };
                if keep(&key) {
                    out.push(key);
                }
            }
        }
        Ok(Ok(out))
    }
}

/// The key of the tuple of `version` among `tuples`, if there.
fn key_of(tuples: &[Tuple], version: u64) -> Option<Box<[u8]>> {
    tuples
        .iter()
        .find(|t| t.version == version)
        .map(|t| t.key.clone())
}
