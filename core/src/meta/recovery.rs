//! Reading the metadata area at open.
//!
//! Every extent is read with large sequential reads; each logical block's
//! two slots are decoded and the valid one with the larger sequence is its
//! state. Resolution between blocks (duplicate keys, heap overlap) happens
//! in the store's open path, which owns the allocator and the index.

use crate::error::{Error, Result};
use crate::format::{MetaExtent, BLOCK_SIZE};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{choose_slot, decode_slot, SlotIdentity};
use crate::meta::tuple::Tuple;

/// Most bytes read by one I/O while scanning.
const SCAN_CHUNK: usize = 1 << 20;

/// The recovered state of one logical tuple block.
pub(crate) struct ScannedBlock {
    pub offset: u64,
    /// Slot holding the state, `None` when the block is empty.
    pub slot: Option<usize>,
    pub seq: u64,
    pub tuples: Vec<Tuple>,
}

/// Reads and decodes every tuple block of `extents`.
pub(crate) async fn scan(
    engine: &dyn IoEngine,
    store_id: u64,
    extents: &[MetaExtent],
) -> Result<Vec<ScannedBlock>> {
    let mut out = Vec::new();
    for extent in extents {
        let start = extent.start * BLOCK_SIZE as u64;
        let total = (1usize << extent.order) * BLOCK_SIZE;
        let mut done = 0usize;
        while done < total {
            let len = SCAN_CHUNK.min(total - done);
            let (r, buf) = engine
                .read_at(AlignedBuf::zeroed(len), start + done as u64)
                .await;
            r.map_err(|e| Error::io("reading tuple blocks", e))?;
            for (i, pair) in buf.as_slice()[..len]
                .chunks_exact(2 * BLOCK_SIZE)
                .enumerate()
            {
                let offset = start + (done + i * 2 * BLOCK_SIZE) as u64;
                let id = SlotIdentity {
                    store_id,
                    block_no: out.len() as u32,
                };
                let a = decode_slot(id, &pair[..BLOCK_SIZE]);
                let b = decode_slot(id, &pair[BLOCK_SIZE..]);
                let (slot, seq, tuples) = choose_slot(a, b)
                    .map_err(|e| e.context(format!("tuple block at byte {offset}")))?;
                out.push(ScannedBlock {
                    offset,
                    slot,
                    seq,
                    tuples,
                });
            }
            done += len;
        }
    }
    Ok(out)
}
