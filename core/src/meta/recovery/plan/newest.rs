//! Judging the newest group: whether the last commit group the chosen
//! copies show stays, rolls back as a whole, or loses only the objects
//! whose bytes did not land.
//!
//! Keeps invariant 6: only the newest group can have been cut by a crash
//! (a group is written only once the one before it is synced), so at most
//! one group is rolled back; an older group that looks cut too is damage
//! and refuses the open. Rolling back loses no object whose own bytes are
//! intact (a non-atomic group rolls back object by object; the commit path
//! keeps the room that takes in each block), and nothing is judged after a
//! clean close at the newest group (invariant 4). A group an older build
//! wrote without that room, whose per-object rollback would over-fill a
//! block, rolls back whole: never a block that cannot be written.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use super::{corrupt, Horizon};
use crate::error::{Error, Result};
use crate::format::Layout;
use crate::meta::block::{slot_room, SlotContent, GROUP_ATOMIC};
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
        // A block a per-object rollback would over-fill (see below).
        let mut overfull: Option<usize> = None;
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
                match roll_back_objects(scanned, chosen, failed, last_seq, group_first, layout) {
                    Ok(rolled) => {
                        for line in rolled.kept {
                            report.details.push(line);
                        }
                        for (no, line) in rolled.objects {
                            dirty.insert(no as u32);
                            edited.insert(no as u32);
                            report.object(line);
                        }
                        break;
                    }
                    // Rolled back alone, its objects' previous versions
                    // would not fit their block beside the group's other
                    // changes: the group rolls back whole below.
                    Err(block) => overfull = Some(block),
                }
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
        let why = match overfull {
            _ if !complete => {
                "interrupted by a crash before its sync (tuple blocks missing or torn)".to_string()
            }
            Some(block) => format!(
                "cut before its sync with an object's bytes missing, and rolling back only that \
                 object would over-fill tuple block {block} (its previous version is larger, and \
                 the group had used the room its smaller new tuple freed)"
            ),
            None => "all-or-nothing (a bulk load, or buffered durability) and one of its objects' \
                     bytes did not reach the disk"
                .to_string(),
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

/// What rolling back a group's failed objects one by one changes.
struct ObjectRollback {
    /// Per object rolled back: its block, and the report's line.
    objects: Vec<(usize, String)>,
    /// Objects kept though their bytes fail (their group proved synced).
    kept: Vec<String>,
}

/// Rolls back each of `failed` (block, key, why) alone to its previous
/// version (from the block's state before the group of `last_seq`, or its
/// not yet removed copy in another block), editing the state copies in
/// `scanned`. The edits are made on copies first: when one edited block's
/// tuples would no longer fit a slot (`slot_room`) — the group filled the
/// room an object's smaller new tuple freed, and its larger previous
/// version comes back — nothing is edited and that block is returned: the
/// caller rolls the group back whole, which is exactly its state before
/// the group (which fitted), rather than write a block that cannot be.
fn roll_back_objects(
    scanned: &mut [ScannedBlock],
    chosen: &[Option<usize>],
    failed: Vec<(usize, Box<[u8]>, String)>,
    last_seq: u64,
    group_first: u64,
    layout: Layout,
) -> std::result::Result<ObjectRollback, usize> {
    let mut out = ObjectRollback {
        objects: Vec::new(),
        kept: Vec::new(),
    };
    // Per edited block: its state copy and its tuples as edited.
    let mut edits: BTreeMap<usize, (usize, Vec<Tuple>)> = BTreeMap::new();
    for (no, key, why) in failed {
        let (Some(b), Some(&Some(w))) = (scanned.get(no), chosen.get(no)) else {
            continue;
        };
        let before = match b.fallback(w, last_seq, layout) {
            Ok(before) => before,
            // A journaled home rewritten by the group itself: the group had
            // been synced (homes are rewritten only after it), so this
            // version was acknowledged and its bytes were damaged since. It
            // stays, and reads of it report Corrupt.
            Err(_) => {
                out.kept.push(format!(
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
        let tuples = match edits.entry(no) {
            Entry::Occupied(e) => &mut e.into_mut().1,
            Entry::Vacant(e) => match b.slot(w) {
                Some(SlotContent::Valid { tuples, .. }) => &mut e.insert((w, tuples.clone())).1,
                _ => continue,
            },
        };
        tuples.retain(|t| !(t.key == key && t.version >= group_first));
        tuples.extend(previous);
        out.objects.push((
            no,
            format!(
                "{}: rolled back to its previous version; its new bytes did not reach the disk ({why})",
                crate::error::show_key(&key)
            ),
        ));
    }
    let room = slot_room(layout);
    let payload = |tuples: &[Tuple]| tuples.iter().map(Tuple::encoded_len).sum::<usize>();
    if let Some((&no, _)) = edits.iter().find(|(_, (_, t))| payload(t) > room) {
        return Err(no);
    }
    for (no, (w, edited)) in edits {
        if let Some((_, SlotContent::Valid { tuples, .. })) =
            scanned.get_mut(no).and_then(|b| b.slots.get_mut(w))
        {
            *tuples = edited;
        }
    }
    Ok(out)
}
