//! Scan: every tuple block of the metadata extents read with large
//! sequential reads, and each of its copies decoded. Nothing is decided
//! here; `plan` weighs the copies.
//!
//! Keeps: block numbers follow the extents' order, one [`ScannedBlock`] per
//! logical block, so a short read is an error rather than a shift of every
//! later block's number (invariant 4); only reads are issued, so `check`
//! and a read-only open write nothing (invariant 7).

use crate::error::{Error, ErrorKind, Result};
use crate::format::{Layout, MetaExtent, BLOCK_SIZE, SUPER_BLOCKS};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::superblock::{choose_superblock, read_extent_table};

/// Most bytes read by one I/O while scanning.
const SCAN_CHUNK: usize = 1 << 20;

/// Every copy of one logical tuple block found on the device.
pub(crate) struct ScannedBlock {
    /// Byte offset of slot 0 (two-slot stores) or of the home slot.
    pub offset: u64,
    /// Each copy with its byte offset. Two-slot stores: both slots, in
    /// order. Journaled stores: the home slot, then every journal slot
    /// holding an image of this block.
    pub slots: Vec<(u64, SlotContent)>,
}

impl ScannedBlock {
    /// The copy at index `w`.
    pub fn slot(&self, w: usize) -> Option<&SlotContent> {
        self.slots.get(w).map(|(_, s)| s)
    }
}

/// Reads and decodes every tuple block of `extents`, and (journaled
/// stores) every image in the journal.
pub(crate) async fn scan(
    engine: &dyn IoEngine,
    store_id: u64,
    extents: &[MetaExtent],
    layout: Layout,
) -> Result<Vec<ScannedBlock>> {
    let mut out: Vec<ScannedBlock> = Vec::new();
    let step = layout.slots_per_block() as usize;
    for extent in extents {
        read_extent(engine, extent, |offset, slots| {
            for (i, group) in slots.chunks_exact(step).enumerate() {
                let id = SlotIdentity {
                    store_id,
                    block_no: out.len() as u32,
                };
                let at = offset + (i * step * BLOCK_SIZE) as u64;
                let slots = group
                    .iter()
                    .enumerate()
                    .map(|(k, b)| (at + (k * BLOCK_SIZE) as u64, decode_slot(id, b)))
                    .collect();
                out.push(ScannedBlock { offset: at, slots });
            }
        })
        .await?;
    }
    if let Layout::Journaled(journal) = layout {
        super::journal::scan_journal(engine, store_id, &journal, &mut out).await?;
    }
    Ok(out)
}

/// The metadata area as the device holds it now, under a store that is
/// open: what is wrong with one copy of its extent table
/// (the other serving), and every tuple block's copies. For a scrub, which
/// lists keys from the device (the hash index cannot list them); open
/// reads the superblock itself, as a head that may be blank.
pub(crate) async fn scan_live(
    engine: &dyn IoEngine,
) -> Result<(Option<String>, Vec<ScannedBlock>)> {
    let (r, head) = engine
        .read_at(AlignedBuf::zeroed(SUPER_BLOCKS as usize * BLOCK_SIZE), 0)
        .await;
    r.map_err(|e| Error::io("reading the superblock", e))?;
    let mut sb = choose_superblock(head.as_slice())?
        .ok_or_else(|| Error::new(ErrorKind::Corrupt, "superblock vanished"))?
        .sb;
    // Extents beyond the superblock's list (format 5), from the table as
    // the device holds it now.
    let table_damage = read_extent_table(engine, &mut sb).await?;
    let blocks = scan(engine, sb.store_id, &sb.meta_extents, sb.layout()).await?;
    Ok((table_damage, blocks))
}

/// Reads `extent` in large chunks, handing each chunk's blocks (and the
/// byte offset of the first) to `f`.
pub(crate) async fn read_extent(
    engine: &dyn IoEngine,
    extent: &MetaExtent,
    mut f: impl FnMut(u64, &[[u8; BLOCK_SIZE]]),
) -> Result<()> {
    let start = extent.offset();
    let total = extent.len_bytes() as usize;
    let mut done = 0usize;
    while done < total {
        let len = SCAN_CHUNK.min(total - done);
        let (r, buf) = engine
            .read_at(AlignedBuf::zeroed(len), start + done as u64)
            .await;
        r.map_err(|e| Error::io("reading tuple blocks", e))?;
        // A short buffer would shift every later block's number.
        let bytes = buf
            .as_slice()
            .get(..len)
            .ok_or_else(|| Error::new(ErrorKind::Io, "reading tuple blocks: short read"))?;
        f(start + done as u64, bytes.as_chunks::<BLOCK_SIZE>().0);
        done += len;
    }
    Ok(())
}
