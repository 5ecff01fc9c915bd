//! Judging the newest group: whether the last commit group the chosen
//! copies show stays, rolls back as a whole, or loses only the objects
//! whose bytes did not land.
//!
//! Keeps invariant 6: only the newest group can have been cut by a crash
//! (a group is written only once the one before it is synced), so at most
//! one group is rolled back; an older group that looks cut too is damage
//! and refuses the open. Rolling back loses no object whose own bytes are
//! intact (a non-atomic group rolls back object by object), and nothing is
//! judged after a clean close at the newest group (invariant 4).

use std::collections::BTreeSet;

use super::{corrupt, Horizon};
use crate::error::{Error, Result};
use crate::meta::block::{SlotContent, GROUP_ATOMIC};
use crate::meta::recovery::scan::ScannedBlock;
use crate::meta::recovery::RecoveryReport;
use crate::meta::tuple::{Tuple, TupleValue};

/// What a state copy says of the group that wrote it: (sequence, blocks
/// declared, first version, flags).
type Stamp = (u64, u32, u64, u32);

/// The stamp of block `b`'s state copy `w`.
fn winner(b: &ScannedBlock, w: Option<usize>) -> Option<Stamp> {
    match w.and_then(|w| b.slot(w)) {
        Some(SlotContent::Valid {
            seq,
            group_blocks,
            group_first,
            group_flags,
            ..
        }) => Some((*seq, *group_blocks, *group_first, *group_flags)),
        _ => None,
    }
}

/// A group torn entirely (none of its blocks landed) was never
/// acknowledged and left nothing to undo; the report says so.
pub(super) fn report_torn_groups(
    torn_groups: &BTreeSet<u64>,
    h: &Horizon,
    report: &mut RecoveryReport,
) {
    for &seq in torn_groups {
        if seq > h.max_seq {
            report.rolled_back_groups += 1;
            // After a clean close nothing newer landed: a process that
            // opened the store since may have been cut in its first group,
            // or one byte of a sequence field is damaged. The two look the
            // same; say both.
            let or_damage = if h.clean {
                " (or, as the store had been closed cleanly and nothing newer landed, a \
                 damaged sequence field in a tuple block; either way nothing acknowledged \
                 is lost)"
            } else {
                ""
            };
            report.details.push(format!(
                "a commit group interrupted before any of its tuple blocks landed was dropped{or_damage}"
            ));
        }
    }
}

/// What judging the newest group changes besides the chosen copies.
pub(super) struct Judged<'a> {
    pub report: &'a mut RecoveryReport,
    pub dirty: &'a mut BTreeSet<u32>,
    pub edited: &'a mut BTreeSet<u32>,
}

/// Judges the newest group (see the module docs), editing `chosen` (and,
/// for a per-object rollback, the state copies in `scanned`). Returns, per
/// block, the copy rejected by a rollback.
pub(super) async fn judge<V, F>(
    scanned: &mut [ScannedBlock],
    chosen: &mut [Option<usize>],
    torn_groups: &BTreeSet<u64>,
    synced_floor: u64,
    h: &Horizon,
    out: Judged<'_>,
    mut verify: V,
) -> Result<Vec<Option<usize>>>
where
    V: FnMut(Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    let Judged {
        report,
        dirty,
        edited,
    } = out;
    let layout = h.layout;
    let mut rejected: Vec<Option<usize>> = vec![None; scanned.len()];
    // The group the loop below rolled back, if any (at most one).
    let mut rolled_back_seq: Option<u64> = None;
    while let Some(last_seq) = scanned
        .iter()
        .zip(chosen.iter())
        .filter_map(|(b, w)| winner(b, *w).map(|g| g.0))
        .max()
    {
        if (h.clean && last_seq == h.clean_seq)
            || last_seq <= synced_floor
            || last_seq <= h.checkpoint
        {
            break;
        }
        // The group's blocks, with what their state slot says of it.
        let members: Vec<(usize, Stamp)> = scanned
            .iter()
            .zip(chosen.iter())
            .enumerate()
            .filter_map(|(no, (b, w))| winner(b, *w).map(|g| (no, g)))
            .filter(|(_, g)| g.0 == last_seq)
            .collect();
        let stamp = |f: fn(&Stamp) -> u64| members.iter().map(|(_, g)| f(g)).max().unwrap_or(0);
        let declared = stamp(|g| g.1 as u64);
        let group_first = stamp(|g| g.2);
        let atomic = stamp(|g| (g.3 & GROUP_ATOMIC) as u64) != 0;
        let complete = members.len() as u64 >= declared && !torn_groups.contains(&last_seq);
        let mut failed = Vec::new();
        if complete {
            for &(no, _) in &members {
                let (Some(b), Some(&Some(w))) = (scanned.get(no), chosen.get(no)) else {
                    continue;
                };
                let Some(SlotContent::Valid { tuples, .. }) = b.slot(w) else {
                    continue;
                };
                for t in tuples.iter().filter(|t| t.version >= group_first) {
                    let unsynced = matches!(t.value, TupleValue::Heap { unsynced: true, .. });
                    if unsynced {
                        if let Some(why) = verify(t.clone()).await? {
                            failed.push((no, t.key.clone(), why));
                        }
                    }
                }
            }
            if failed.is_empty() {
                break;
            }
            if !atomic {
                // Roll back only the objects whose bytes did not land: each
                // gets its previous version back (from the block's state
                // before the group, or its not yet removed copy in another
                // block).
                for (no, key, why) in failed {
                    let (Some(b), Some(&Some(w))) = (scanned.get_mut(no), chosen.get(no)) else {
                        continue;
                    };
                    let before = match b.fallback(w, last_seq, layout) {
                        Ok(before) => before,
                        // A journaled home rewritten by the group itself:
                        // the group had been synced (homes are rewritten
                        // only after it), so this version was acknowledged
                        // and its bytes were damaged since. It stays, and
                        // reads of it report Corrupt.
                        Err(_) => {
                            report.details.push(format!(
                                "{}: its bytes do not match its checksums ({why}); its commit group had been \
                                 synced, so it stays and reads of it report Corrupt",
                                crate::error::show_key(&key)
                            ));
                            continue;
                        }
                    };
                    let previous = match before.and_then(|p| b.slot(p)) {
                        Some(SlotContent::Valid { tuples, .. }) => tuples
                            .iter()
                            .find(|t| t.key == key && t.version < group_first)
                            .cloned(),
                        _ => None,
                    };
                    if let Some((_, SlotContent::Valid { tuples, .. })) = b.slots.get_mut(w) {
                        tuples.retain(|t| !(t.key == key && t.version >= group_first));
                        tuples.extend(previous);
                    }
                    dirty.insert(no as u32);
                    edited.insert(no as u32);
                    report.object(format!(
                        "{}: rolled back to its previous version; its new bytes did not reach the disk ({why})",
                        crate::error::show_key(&key)
                    ));
                }
                break;
            }
        }
        // Roll the group back as a whole: each of its blocks falls back to
        // its state before the group, which was synced. Only the newest
        // group can have been cut by a crash (a group is written only once
        // the one before it is synced): an older group that looks cut too
        // is damage, and rolling it back would drop acknowledged objects.
        if let Some(newest) = rolled_back_seq {
            return Err(corrupt(format!(
                "commit group {last_seq} looks {} after the newest group, {newest}, was \
                 rolled back; only the newest group can be cut by a crash, so a tuple block \
                 of group {last_seq} is damaged. Nothing was changed; restore the store from \
                 a backup",
                if complete {
                    "to have lost bytes"
                } else {
                    "cut"
                }
            )));
        }
        rolled_back_seq = Some(last_seq);
        report.rolled_back_groups += 1;
        let why = if !complete {
            "interrupted by a crash before its sync (tuple blocks missing or torn)"
        } else {
            "all-or-nothing (a bulk load, or buffered durability) and one of its objects' bytes did not reach the disk"
        };
        for &(no, _) in &members {
            let (Some(b), Some(chosen_no), Some(rejected_no)) =
                (scanned.get(no), chosen.get_mut(no), rejected.get_mut(no))
            else {
                continue;
            };
            let at = |e: Error| e.context(format!("tuple block {no} at byte {}", b.offset));
            let (Some(w), None) = (*chosen_no, *rejected_no) else {
                return Err(at(corrupt(
                    "both slots belong to interrupted groups".into(),
                )));
            };
            if let Some(SlotContent::Valid { tuples, .. }) = b.slot(w) {
                for t in tuples.iter().filter(|t| t.version >= group_first) {
                    report.object(format!(
                        "{}: its newest version was rolled back: the commit group was {why}",
                        crate::error::show_key(&t.key)
                    ));
                }
            }
            *chosen_no = b.fallback(w, last_seq, layout).map_err(at)?;
            *rejected_no = Some(w);
            // A journaled block falling back to a state on the device keeps
            // it (open restores a journal image to the home slot and erases
            // the journal); one left empty has its home rewritten empty.
            if !h.journaled || chosen_no.is_none() {
                dirty.insert(no as u32);
            }
        }
    }
    Ok(rejected)
}
