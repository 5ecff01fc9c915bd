//! Plan: from every scanned copy of every tuple block, the decision of
//! which state is the store's, in three steps, each its own file:
//!
//! 1. `copies`: which copy holds each block's state, and what each damaged
//!    copy was (superseded, torn by the crash, or lost: corruption);
//! 2. `newest`: whether the newest group stays, rolls back whole, or loses
//!    only the objects whose bytes did not land;
//! 3. `salvage`: what a salvage open skips instead of refusing, and when
//!    even it must refuse.
//!
//! Keeps invariant 6 (only the newest, never-acknowledged group may be
//! rolled back; damage anywhere else is refused or, salvaging, reported)
//! and invariant 4 (after a clean close at the newest group nothing is
//! rolled back). Pure over the scanned copies: nothing here writes.

use std::collections::BTreeSet;

use crate::error::{Error, ErrorKind, Result};
use crate::format::Layout;
use crate::meta::block::SlotContent;
use crate::meta::recovery::scan::ScannedBlock;
use crate::meta::recovery::RecoveryReport;
use crate::meta::tuple::Tuple;

mod copies;
mod newest;
mod salvage;
#[cfg(test)]
pub(crate) mod tests;

/// What recovery decided, for open to apply (or `check` to report).
pub(crate) struct Plan {
    /// Per block, the slot holding its state (`None`: empty block).
    pub chosen: Vec<Option<usize>>,
    /// Per block, the slot the next write goes to.
    pub next_slots: Vec<u8>,
    /// Blocks to rewrite before the store is served: rolled back, edited
    /// (per-object rollback) or holding a damaged superseded copy.
    pub dirty: BTreeSet<u32>,
    /// Blocks whose state recovery changed in memory (per-object rollback):
    /// no copy on the device holds it.
    pub edited: BTreeSet<u32>,
    /// Largest sequence seen in any valid slot.
    pub max_seq: u64,
    pub report: RecoveryReport,
}

/// What the scan as a whole says before any block is judged.
pub(super) struct Horizon {
    pub layout: Layout,
    /// One home slot per block, images in the journal (format 4).
    pub journaled: bool,
    pub salvage: bool,
    /// The sequence the superblock records at the last clean close (0: none).
    pub clean_seq: u64,
    /// Largest sequence in any valid copy.
    pub max_seq: u64,
    /// Closed cleanly after the newest group: nothing can be torn.
    pub clean: bool,
    /// No copy of any tuple block was ever written (and no checkpoint
    /// stands for unread ones): a store that never committed, whose
    /// clean sequence of 0 is then its newest too. Nothing can be torn.
    pub blank: bool,
    /// The least sequence a torn write may claim: the newest group, and
    /// after a clean close only a group newer than it.
    pub tear_floor: u64,
    /// The stamp of the checkpoint (index image) the unread blocks are
    /// taken from, when only the blocks changed since were read (0: every
    /// block was): every group up to it was synced before the image was
    /// written, so none of them is judged, and the newest sequence is at
    /// least it.
    pub checkpoint: u64,
}

impl Horizon {
    fn new(
        scanned: &[ScannedBlock],
        clean_seq: u64,
        layout: Layout,
        salvage: bool,
        checkpoint: u64,
    ) -> Self {
        let max_seq = scanned
            .iter()
            .flat_map(|b| b.slots.iter().filter_map(|(_, s)| s.seq()))
            .max()
            .unwrap_or(0)
            .max(checkpoint);
        let blank = checkpoint == 0
            && scanned
                .iter()
                .all(|b| b.slots.iter().all(|(_, s)| matches!(s, SlotContent::Empty)));
        let tear_floor = if clean_seq == 0 {
            max_seq
        } else {
            max_seq.max(clean_seq + 1)
        };
        Horizon {
            layout,
            journaled: matches!(layout, Layout::Journaled(_)),
            salvage,
            clean_seq,
            max_seq,
            clean: clean_seq == max_seq && (clean_seq != 0 || blank),
            blank,
            tear_floor,
            checkpoint,
        }
    }
}

pub(super) fn corrupt(msg: String) -> Error {
    Error::new(ErrorKind::Corrupt, msg)
}

/// Decides the state of every block (see the module docs). `verify` reads
/// one object back against its checksums: `Some(why)` when its bytes are
/// not what its tuple promises.
pub(crate) async fn plan<V, F>(
    scanned: &mut [ScannedBlock],
    clean_seq: u64,
    layout: Layout,
    salvage: bool,
    verify: V,
) -> Result<Plan>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    plan_since(scanned, clean_seq, layout, salvage, verify, 0).await
}

/// [`plan`] over the blocks written since the checkpoint stamped
/// `checkpoint` (the others' copies left out of `scanned`: no slots).
pub(crate) async fn plan_since<V, F>(
    scanned: &mut [ScannedBlock],
    clean_seq: u64,
    layout: Layout,
    salvage: bool,
    verify: V,
    checkpoint: u64,
) -> Result<Plan>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    let h = Horizon::new(scanned, clean_seq, layout, salvage, checkpoint);
    let mut report = RecoveryReport {
        clean: h.clean,
        ..RecoveryReport::default()
    };
    let mut dirty = BTreeSet::new();
    let mut edited = BTreeSet::new();
    let copies::Choice {
        mut chosen,
        torn_groups,
        synced_floor,
    } = copies::choose(scanned, &h, &mut report, &mut dirty)?;
    newest::report_torn_groups(&torn_groups, &h, &mut report);
    let judged = newest::Judged {
        report: &mut report,
        dirty: &mut dirty,
        edited: &mut edited,
    };
    let rejected = newest::judge(
        scanned,
        &mut chosen,
        &torn_groups,
        synced_floor,
        &h,
        judged,
        verify,
    )
    .await?;
    // A two-slot block recovery edited (per-object rollback) is rewritten
    // over its cut group's copy, never over the state before that group:
    // that slot is the only copy of the versions rolled back to until the
    // rewrite is synced, and a cut tearing it would lose them.
    let mut rejected = rejected;
    for &no in &edited {
        if let (Some(r), Some(&w)) = (rejected.get_mut(no as usize), chosen.get(no as usize)) {
            r.get_or_insert(w.unwrap_or(0));
        }
    }
    let next_slots = copies::next_slots(layout, &rejected, &chosen);
    salvage::settle(&mut report, &h, synced_floor)?;
    // One decision per scanned block (invariant 4: no block is dropped or
    // invented on the way).
    assert_eq!(chosen.len(), scanned.len(), "invariant 4: a plan per block");
    assert_eq!(
        next_slots.len(),
        scanned.len(),
        "invariant 4: a plan per block"
    );
    Ok(Plan {
        chosen,
        next_slots,
        dirty,
        edited,
        max_seq: h.max_seq,
        report,
    })
}
