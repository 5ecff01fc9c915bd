//! Recovery: reading the metadata area and deciding, block by block, which
//! state is the store's. One implementation, [`recover`], run read-write by
//! open and read-only by `check` and a salvage open (both through a
//! read-only open), so they cannot disagree. It returns one value,
//! [`Recovered`], which open turns into the store's state.
//!
//! Every extent is read with large sequential reads; each logical block's
//! copies are decoded: its two slots (format 3), or its home slot and every
//! image of it in the metadata journal (format 4). Then:
//!
//! * `scan` (and `journal`, for the journal's slots) reads the copies;
//! * `plan` decides **which copy holds each block's state**: the valid copy
//!   with the largest sequence, unless another copy is damaged and may have
//!   held newer state. A damaged copy is classified by the sequence it
//!   still claims (`SlotContent::Invalid`): older than the state — a
//!   superseded copy, nothing lost; newer, and written by a group no older
//!   than the newest group the store shows (and after the last clean close)
//!   — a write torn by the crash; anything else — **corruption**
//!   (invariant 6): open refuses with `Corrupt` naming the block, never
//!   falls back silently. Then **whether the newest group stays.** Only it
//!   can have been cut before its sync. It rolls back as a whole when fewer
//!   of its blocks landed than it declares (or one of them was torn).
//!   Otherwise every object it wrote without a data sync (`unsynced`) is
//!   read back against its checksums; one that fails rolls back alone to
//!   its previous version (an intact object is not lost because another
//!   one's bytes did not land), except in all-or-nothing groups (bulk
//!   loads, buffered mode), which roll back as a whole;
//! * `resolve` settles what lies between blocks: the largest version of
//!   each key wins (the others' blocks are rewritten), and the allocator,
//!   all free but the metadata, claims every live piece again (a piece
//!   claimed twice is `Corrupt`).
//!
//! Keeps invariant 4 (the state rebuilt is exactly the last acknowledged
//! one: one entry per key, every version below the next to assign, both
//! asserted at the boundary), invariant 6 (see `plan`) and invariant 7
//! (nothing here writes: open applies the [`Recovered`] value, and a
//! read-only open never does).
//!
//! Everything rolled back or repaired is listed in the [`RecoveryReport`].

use std::collections::BTreeSet;

use crate::alloc::BuddyAllocator;
use crate::error::Result;
use crate::format::{Layout, Superblock, SUPER_BLOCKS};
use crate::io::IoEngine;
use crate::meta::table::TupleBlockTable;
use crate::meta::tuple::Tuple;

/// The journal's side of recovery lives beside the journal.
pub(crate) use crate::meta::journal::recovery as journal;
pub(crate) mod checkpoint;
pub(crate) mod plan;
mod resolve;
pub(crate) mod scan;

pub(crate) use resolve::claim_metadata;
pub(crate) use scan::scan_live;

/// Most object names listed in a report (the counts are exact).
const REPORT_NAMES: usize = 100;

/// What recovery found when the store was opened: what it rolled back and
/// what damage it repaired. Empty after a clean close of an intact store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The store had been closed cleanly, or had never committed anything
    /// (a store just created): nothing could be torn.
    pub clean: bool,
    /// Commit groups rolled back whole (cut by a crash before their sync,
    /// or bulk-load groups with an object whose bytes did not land).
    pub rolled_back_groups: u64,
    /// Objects whose newest version was rolled back to the previous one
    /// (or removed, when new).
    pub rolled_back_objects: u64,
    /// Damage found that lost nothing, and what was done about it.
    pub repaired: Vec<String>,
    /// Human-readable lines: what was rolled back and why (at most 100
    /// object names; the counts above are exact).
    pub details: Vec<String>,
    /// Damaged tuple blocks a salvage open skipped
    /// ([`Options::salvage`](crate::Options::salvage)): their objects are
    /// missing. Always empty otherwise (such damage refuses the open).
    pub skipped: Vec<String>,
    /// The state was loaded from the index image the last clean close
    /// wrote: no tuple block was read (format 6, `core/FORMAT.md`).
    pub from_image: bool,
}

impl RecoveryReport {
    /// Whether recovery had to do anything at all.
    pub fn is_empty(&self) -> bool {
        self.rolled_back_groups == 0
            && self.rolled_back_objects == 0
            && self.repaired.is_empty()
            && self.skipped.is_empty()
    }

    /// Whether recovery rolled anything back (a group or an object).
    pub(crate) fn rolled_back(&self) -> bool {
        self.rolled_back_groups > 0 || self.rolled_back_objects > 0
    }

    fn object(&mut self, line: String) {
        self.rolled_back_objects += 1;
        if self.details.len() < REPORT_NAMES {
            self.details.push(line);
        }
    }
}

/// The store's state as recovery rebuilt it, for open to serve (read-write
/// or read-only) and `check` to report. Nothing of it is on the device yet
/// where it differs from what is there (`dirty`, `replay`).
pub(crate) struct Recovered {
    /// The heap allocator: the metadata extents, the journal, the extent
    /// table and every live object's pieces claimed, the rest free.
    pub alloc: BuddyAllocator,
    /// Bytes of the metadata pieces claimed.
    pub metadata_bytes: u64,
    /// The committer's block table: every block, its next slot, how full
    /// it is, and the tuples of each `dirty` block (its image to write).
    pub table: TupleBlockTable,
    /// The live version of each key with its block, in key order: one per
    /// key, its heap pieces claimed in `alloc`.
    pub tuples: Vec<(u32, Tuple)>,
    /// Per block, where readers find its state until it is rewritten.
    pub state_at: Vec<Option<u64>>,
    /// Journaled blocks whose state is a journal image: (block, home slot,
    /// image), copied home by a read-write open
    /// ([`journal::restore_homes`]).
    pub replay: Vec<(u32, u64, u64)>,
    /// Journal slots recovery's edits still need: kept when the journal is
    /// erased ([`journal::erase`]) and by the committer until rewritten.
    pub pinned: Vec<u64>,
    /// Blocks to rewrite before the store is served.
    pub dirty: BTreeSet<u32>,
    /// The next version (and sequence) to assign: above every one seen.
    pub next_version: u64,
    pub report: RecoveryReport,
    /// The index image's pieces, claimed in `alloc`, when the state was
    /// loaded from it: freed once a read-write open has dropped it from
    /// the superblock.
    pub image_pieces: Vec<crate::meta::tuple::Piece>,
    /// The image's change map (format 7), claimed in `alloc` with it: the
    /// superblock keeps naming both while the store runs.
    pub change_map: Option<crate::meta::image::changes::ChangeMap>,
}

/// What recovery does with an index image the superblock names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageUse {
    /// Load it instead of scanning when it is current and whole; scan
    /// (and report why) otherwise.
    Load,
    /// Scan, then load it too and report any difference (`check`).
    Verify,
}

/// Recovers the store `sb` describes (its extent table read): scan, plan,
/// resolve. `verify` reads one object of the newest group back against its
/// checksums (`Some(why)` when its bytes are not what its tuple promises);
/// `salvage` skips blocks whose state is lost instead of refusing;
/// `fingerprints`: the index opened holds key fingerprints (the hash
/// index), so an image of fingerprints can serve it. When an image serves,
/// its objects went to `sink` and the `Recovered` has no `tuples`
/// (`report.from_image`).
pub(crate) async fn recover<V, F>(
    engine: &dyn IoEngine,
    sb: &Superblock,
    salvage: bool,
    image: ImageUse,
    fingerprints: bool,
    sink: &mut dyn crate::meta::image::ImageSink,
    mut verify: V,
) -> Result<Recovered>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    // A salvage open reads every block: it is for stores already damaged.
    let mut image_damage = None;
    if sb.index_image.is_some() && !salvage && image == ImageUse::Load {
        let loaded = match sb.change_map {
            // A checkpoint: the image and the blocks written since.
            Some(_) => checkpoint::recover(engine, sb, fingerprints, sink, &mut verify).await,
            None => crate::meta::image::load(engine, sb, fingerprints, sink, None).await,
        };
        match loaded {
            Ok(r) => return Ok(r),
            Err(why) => {
                sink.discard();
                image_damage = Some(why);
            }
        }
    }
    let mut recovered = scan_and_resolve(engine, sb, salvage, &mut verify).await?;
    if sb.index_image.is_some() && image == ImageUse::Verify {
        image_damage = verify_image(engine, sb, fingerprints, &recovered).await;
    }
    if let Some(why) = image_damage {
        recovered.report.repaired.push(format!(
            "index image {why}: the state was rebuilt from the tuple blocks, nothing lost; \
             a read-write open drops the image and the next clean close writes a new one"
        ));
    }
    Ok(recovered)
}

/// `check`'s comparison of the index image with the state a scan of every
/// block rebuilt (`scanned`): the first difference, or why the image
/// cannot be read. With a change map, the blocks it marks were written
/// since the image and are left out of the comparison.
async fn verify_image(
    engine: &dyn IoEngine,
    sb: &Superblock,
    fingerprints: bool,
    scanned: &Recovered,
) -> Option<String> {
    let mut objects = crate::meta::image::Collected::default();
    // With a change map: the blocks an open from the checkpoint reads
    // (the rest it takes from the image), and the keys they hold now.
    let mut read = Vec::new();
    if let (Some(_), Layout::Journaled(journal)) = (sb.change_map, sb.layout()) {
        let map = match checkpoint::read_map(engine, sb).await {
            Ok(map) => map,
            Err(why) => return Some(why),
        };
        let mut blocks = checkpoint::unread_blocks(sb);
        match checkpoint::blocks_read(engine, sb, &journal, &map, &mut blocks).await {
            Ok(r) => read = r,
            Err(why) => return Some(why),
        }
    }
    let is_read = |b: u32| read.get(b as usize).copied().unwrap_or(false);
    let since = match sb.change_map {
        Some(m) => {
            let mut alloc =
                BuddyAllocator::new(SUPER_BLOCKS, sb.total_blocks() - SUPER_BLOCKS, sb.max_order);
            let metadata_bytes = match resolve::claim_metadata(&mut alloc, sb) {
                Ok(b) => b,
                Err(e) => return Some(e.to_string()),
            };
            Some(crate::meta::image::Since {
                alloc,
                metadata_bytes,
                read: &read,
                keys: scanned
                    .tuples
                    .iter()
                    .filter(|(b, _)| is_read(*b))
                    .map(|(_, t)| &*t.key)
                    .collect(),
                map: crate::meta::tuple::Piece {
                    start: m.start,
                    order: m.order,
                },
            })
        }
        None => None,
    };
    match crate::meta::image::load(engine, sb, fingerprints, &mut objects, since).await {
        Ok(i) => crate::meta::image::compare(scanned, &i, &objects, &read),
        Err(why) => Some(why),
    }
}

/// Recovery from the tuple blocks themselves: scan, plan, resolve.
async fn scan_and_resolve<V, F>(
    engine: &dyn IoEngine,
    sb: &Superblock,
    salvage: bool,
    verify: V,
) -> Result<Recovered>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    let mut alloc =
        BuddyAllocator::new(SUPER_BLOCKS, sb.total_blocks() - SUPER_BLOCKS, sb.max_order);
    let metadata_bytes = resolve::claim_metadata(&mut alloc, sb)?;
    let layout = sb.layout();
    let mut scanned = scan::scan(engine, sb.store_id, &sb.meta_extents, layout).await?;
    let plan = plan::plan(&mut scanned, sb.clean_seq, layout, salvage, verify).await?;
    resolve::resolve(scanned, plan, layout, alloc, metadata_bytes)
}
