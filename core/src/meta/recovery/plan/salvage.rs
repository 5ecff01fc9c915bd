//! Salvage ([`Options::salvage`](crate::Options::salvage), read-only): a
//! block whose state is lost is skipped and reported instead of refusing
//! the open, so what still reads can be copied out.
//!
//! Keeps invariant 6 even then: a skipped block is listed, never replaced
//! by an older copy; a lost copy proves its group was synced only if that
//! group cannot be the one a crash cut; and a salvage that would roll a
//! group back next to a skipped block is refused, since the state rolled
//! back to could serve an older version of an object lost with the block.

use super::{corrupt, Horizon};
use crate::error::Result;
use crate::meta::block::SlotContent;
use crate::meta::recovery::RecoveryReport;

/// Most object names an older copy lists in a skipped block's line.
const OLDER_NAMES: usize = 10;

/// The report line of a skipped block.
pub(super) fn skipped(no: usize, offset: u64, why: &str) -> String {
    format!("tuple block {no} (byte {offset}): {why}; its objects are skipped")
}

/// The newest group a lost copy `d` proves was synced.
pub(super) fn proven_synced(d: &SlotContent, h: &Horizon) -> u64 {
    let SlotContent::Invalid { seq, split, .. } = d else {
        return 0;
    };
    // Of two disagreeing sequence copies one is damaged: the smaller is a
    // bound either way.
    let proven = seq.or(split.map(|(a, b)| a.min(b))).unwrap_or(0);
    // The newest group may be the one a crash cut: a damaged copy claiming
    // it proves its sync only if the store was closed cleanly after it.
    if h.clean_seq >= proven {
        proven
    } else {
        proven.min(h.max_seq.saturating_sub(1))
    }
}

/// The keys an older copy of a skipped block names (the objects most
/// likely lost with it), for the salvage report: at most ten, and the count.
pub(super) fn older_names(older: Option<&SlotContent>) -> String {
    let Some(SlotContent::Valid { tuples, .. }) = older else {
        return String::new();
    };
    let names: Vec<String> = tuples
        .iter()
        .take(OLDER_NAMES)
        .map(|t| crate::error::show_key(&t.key))
        .collect();
    let more = if tuples.len() > names.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "; its older copy names {} object(s) (some may live in other blocks since): {}{more}",
        tuples.len(),
        names.join(", ")
    )
}

/// Once the newest group is judged: a salvage that skipped blocks is exact
/// only if nothing was rolled back; whether the store counts as cleanly
/// closed then looks past the groups the lost copies prove synced.
pub(super) fn settle(report: &mut RecoveryReport, h: &Horizon, synced_floor: u64) -> Result<()> {
    if report.skipped.is_empty() {
        return Ok(());
    }
    // A block skipped next to a rollback: the rolled-back state may hold
    // an older version of a key whose newer one was in the skipped
    // block (a leftover the interrupted group was removing), and
    // nothing tells it from a current one. Refuse rather than serve it.
    if report.rolled_back_groups > 0 || report.rolled_back_objects > 0 {
        return Err(corrupt(format!(
            "a salvage open cannot be exact here: a commit group interrupted by a crash \
             would be rolled back next to the skipped tuple block(s) ({}), and the state it \
             goes back to could hold an older version of an object lost with them. Nothing \
             was changed; restore the store from a backup",
            report.skipped.join("; ")
        )));
    }
    // Closed cleanly after the group the lost copies prove synced.
    report.clean = h.clean_seq == h.max_seq.max(synced_floor) && (h.clean_seq != 0 || h.blank);
    Ok(())
}
