//! Reading the metadata area at open.
//!
//! Every extent is read with large sequential reads; each logical block's
//! two slots are decoded and the valid one with the larger sequence is its
//! state. Resolution between blocks (duplicate keys, heap overlap) happens
//! in the store's open path, which owns the allocator and the index.

use crate::error::{Error, Result};
use crate::format::{MetaExtent, BLOCK_SIZE};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};

/// Most bytes read by one I/O while scanning.
const SCAN_CHUNK: usize = 1 << 20;

/// Both decoded slots of one logical tuple block.
pub(crate) struct ScannedBlock {
    /// Byte offset of slot 0.
    pub offset: u64,
    pub slots: [SlotContent; 2],
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
                let slots = [
                    decode_slot(id, &pair[..BLOCK_SIZE]),
                    decode_slot(id, &pair[BLOCK_SIZE..]),
                ];
                out.push(ScannedBlock { offset, slots });
            }
            done += len;
        }
    }
    Ok(out)
}
