//! Recovery from a checkpoint (format 7): the index image and its change
//! map. Only the tuple blocks the map marks, and those the metadata journal
//! holds an image of, are read and decided as a scan decides every block
//! (`plan`, `resolve`: the same rules); every other block's state is the
//! image's. So an open after a crash costs the image's load plus the blocks
//! written since the last clean close, not a read of every block.
//!
//! Why that is the state a full scan would find (invariant 10): a block not
//! marked was not written since the image's stamp (the commit path marks a
//! block durably before its home slot can hold newer state, and a block
//! written through the journal is found in the journal whatever the map
//! says: `store::commit::checkpoint`); every group up to the stamp was
//! synced before the image was written, so only groups after it are
//! judged, and each of those wrote only blocks read here.
//!
//! Anything that does not fit — a map that does not check out, a damaged
//! image, a key both in a block read here and in the image's other blocks,
//! a piece claimed twice, damage the plan refuses — and the caller reads
//! every block instead, reporting why: it costs time, never an object.

use super::{plan, resolve, scan::ScannedBlock, Recovered};
use crate::alloc::BuddyAllocator;
use crate::format::{Layout, Superblock, BLOCK_SIZE, SUPER_BLOCKS};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::image::changes::ChangeMap;
use crate::meta::image::{ImageSink, Since};
use crate::meta::tuple::{Piece, Tuple};

/// Most bytes one read of home slots covers.
const RUN: usize = 1 << 20;

/// Reads of home slots in flight at once.
const READS_IN_FLIGHT: usize = 32;

/// Reads the change map `sb` names; why it cannot serve otherwise.
pub(crate) async fn read_map(
    engine: &dyn IoEngine,
    sb: &Superblock,
) -> std::result::Result<ChangeMap, String> {
    let (Some(image), Some(m)) = (sb.index_image, sb.change_map) else {
        return Err("no change map named".into());
    };
    if m.start.saturating_add(1 << m.order) > sb.total_blocks() || m.start < SUPER_BLOCKS {
        return Err("change map lies beyond the end of the store".into());
    }
    let piece = Piece {
        start: m.start,
        order: m.order,
    };
    let (r, buf) = engine
        .read_at(
            AlignedBuf::zeroed(piece.len_bytes() as usize),
            piece.offset(),
        )
        .await;
    r.map_err(|e| format!("change map unreadable: {e}"))?;
    ChangeMap::decode(buf.as_slice(), piece, sb.store_id, image.seq)
}

/// Recovers from the checkpoint `sb` names (see the module docs); the
/// image's objects go to `sink`, those of the blocks read come back in
/// `tuples`. `Err(why)`: it does not serve, and the caller scans.
pub(crate) async fn recover<V, F>(
    engine: &dyn IoEngine,
    sb: &Superblock,
    fingerprints: bool,
    sink: &mut dyn ImageSink,
    verify: V,
) -> std::result::Result<Recovered, String>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = crate::error::Result<Option<String>>>,
{
    let map = read_map(engine, sb).await?;
    let Layout::Journaled(journal) = sb.layout() else {
        return Err("named by a store with two slots per tuple block".into());
    };
    let image = sb.index_image.ok_or("no index image named")?;
    let layout = sb.layout();
    let store_id = sb.store_id;
    let mut scanned = unread_blocks(sb);
    let read = blocks_read(engine, sb, &journal, &map, &mut scanned).await?;
    read_homes(engine, store_id, &mut scanned, &read).await?;
    let mut alloc =
        BuddyAllocator::new(SUPER_BLOCKS, sb.total_blocks() - SUPER_BLOCKS, sb.max_order);
    let metadata_bytes =
        resolve::claim_metadata(&mut alloc, sb).map_err(|e| format!("metadata: {e}"))?;
    let plan = plan::plan_since(&mut scanned, sb.clean_seq, layout, false, verify, image.seq)
        .await
        .map_err(|e| format!("the blocks written since: {e}"))?;
    let resolved = resolve::resolve(scanned, plan, layout, alloc, metadata_bytes)
        .map_err(|e| format!("the blocks written since: {e}"))?;
    let Recovered {
        alloc,
        metadata_bytes,
        table: read_table,
        tuples,
        state_at: read_state_at,
        replay,
        pinned,
        dirty,
        next_version,
        mut report,
        ..
    } = resolved;
    let since = Since {
        alloc,
        metadata_bytes,
        read: &read,
        keys: tuples.iter().map(|(_, t)| &*t.key).collect(),
        map: map.piece,
    };
    let mut loaded = crate::meta::image::load(engine, sb, fingerprints, sink, Some(since)).await?;
    // Each block read takes its state from the device, the others keep the
    // image's.
    let mut table = crate::meta::table::TupleBlockTable::new(layout);
    table.blocks.reserve_exact(read.len());
    let mut state_at = Vec::with_capacity(read.len());
    let mut blocks = Vec::with_capacity(read.len());
    for (no, &was_read) in read.iter().enumerate() {
        let (from, at) = match was_read {
            true => (&read_table, read_state_at.get(no).copied().flatten()),
            false => (&loaded.table, loaded.state_at.get(no).copied().flatten()),
        };
        let Some(b) = from.blocks.get(no) else {
            return Err(format!("tuple block {no} missing from the rebuilt table"));
        };
        blocks.push((b.offset, b.next_slot, b.has_state, b.used));
        state_at.push(at);
    }
    table.push_described(blocks);
    table.images = read_table.images;
    report.from_image = true;
    report.repaired.append(&mut loaded.report.repaired);
    Ok(Recovered {
        alloc: loaded.alloc,
        metadata_bytes: loaded.metadata_bytes,
        table,
        tuples,
        state_at,
        replay,
        pinned,
        dirty,
        next_version: next_version.max(loaded.next_version),
        report,
        image_pieces: loaded.image_pieces,
        change_map: Some(map),
    })
}

/// Every tuple block of `sb`, none of its copies read yet.
pub(crate) fn unread_blocks(sb: &Superblock) -> Vec<ScannedBlock> {
    let layout = sb.layout();
    sb.meta_extents
        .iter()
        .flat_map(|e| (0..e.tuple_blocks(layout)).map(move |i| (e.start + i) * BLOCK_SIZE as u64))
        .map(|offset| ScannedBlock {
            offset,
            slots: Vec::new(),
        })
        .collect()
}

/// Which blocks an open from the checkpoint reads from the device (it
/// takes the others' state from the image): after a crash that followed
/// changes, every block the change map marks and every block the metadata
/// journal holds an image of (read whole, into `scanned`), so a block's
/// copies are weighed as a scan of every block weighs them (a damaged home
/// beside a whole journal image is repaired from it); when nothing was
/// written since the image, none. `check` compares the image with the
/// blocks this leaves out.
pub(crate) async fn blocks_read(
    engine: &dyn IoEngine,
    sb: &Superblock,
    journal: &crate::format::MetaExtent,
    map: &ChangeMap,
    scanned: &mut [ScannedBlock],
) -> std::result::Result<Vec<bool>, String> {
    if scanned.len() > map.capacity() {
        return Err(format!(
            "change map covers {} tuple blocks, the store has {}",
            map.capacity(),
            scanned.len()
        ));
    }
    super::journal::scan_journal(engine, sb.store_id, journal, scanned)
        .await
        .map_err(|e| format!("metadata journal: {e}"))?;
    // Nothing written since the image (no mark; every journal image whole
    // and no newer than its stamp, from before the clean close that wrote
    // it): the image stands for every block, and no block is read — as
    // after a clean close, damage to one is found by the reads of its
    // objects and by `check`.
    let stamp = sb.index_image.map_or(0, |i| i.seq);
    let since = map.marked_count() > 0
        || scanned.iter().any(|b| {
            b.slots.iter().any(|(_, s)| match s {
                SlotContent::Empty => false,
                SlotContent::Valid { seq, .. } => *seq > stamp,
                SlotContent::Invalid { .. } => true,
            })
        });
    if !since {
        scanned.iter_mut().for_each(|b| b.slots.clear());
    }
    let mut read: Vec<bool> = scanned.iter().map(|b| !b.slots.is_empty()).collect();
    for b in map.marked() {
        if let Some(r) = read.get_mut(b as usize) {
            *r = true;
        }
    }
    Ok(read)
}

/// Reads the home slot of every block `read` marks, in runs of adjacent
/// blocks, several at once, and puts it first among the block's copies.
async fn read_homes(
    engine: &dyn IoEngine,
    store_id: u64,
    scanned: &mut [ScannedBlock],
    read: &[bool],
) -> std::result::Result<(), String> {
    use futures::{StreamExt, TryStreamExt};
    // (first block, blocks, byte offset) of each run.
    let mut runs: Vec<(usize, usize, u64)> = Vec::new();
    let mut no = 0usize;
    while no < scanned.len() {
        if !read.get(no).copied().unwrap_or(false) {
            no += 1;
            continue;
        }
        // A run: adjacent on the device and all to be read.
        let first = no;
        let start = scanned.get(no).map_or(0, |b| b.offset);
        let mut end = no + 1;
        while end < scanned.len()
            && (end - first) * BLOCK_SIZE < RUN
            && read.get(end).copied().unwrap_or(false)
            && scanned
                .get(end)
                .is_some_and(|b| b.offset == start + ((end - first) * BLOCK_SIZE) as u64)
        {
            end += 1;
        }
        runs.push((first, end - first, start));
        no = end;
    }
    let done: Vec<(usize, AlignedBuf)> = futures::stream::iter(runs)
        .map(|(first, n, start)| async move {
            let (r, buf) = engine
                .read_at(AlignedBuf::zeroed(n * BLOCK_SIZE), start)
                .await;
            r.map_err(|e| format!("tuple blocks unreadable: {e}"))?;
            if buf.as_slice().len() < n * BLOCK_SIZE {
                return Err("tuple blocks: short read".to_owned());
            }
            Ok((first, buf))
        })
        .buffer_unordered(READS_IN_FLIGHT)
        .try_collect()
        .await?;
    for (first, buf) in done {
        for (i, slot) in buf.as_slice().chunks_exact(BLOCK_SIZE).enumerate() {
            let block_no = (first + i) as u32;
            let id = SlotIdentity { store_id, block_no };
            if let Some(b) = scanned.get_mut(first + i) {
                b.slots.insert(0, (b.offset, decode_slot(id, slot)));
            }
        }
    }
    Ok(())
}
