//! Choosing copies: which slot or journal image of each tuple block holds
//! its state, how every damaged copy relates to that state, which copy a
//! block falls back to when its newest group is rolled back, and where its
//! next write goes.
//!
//! Keeps invariant 6: a damaged copy is classified by the sequence it still
//! claims; only one claiming the newest group (and, after a clean close,
//! newer than it) is a torn write. Anything else that may have held newer
//! state is corruption: refused, or in a salvage open the block is skipped
//! and reported, never silently replaced by an older copy.

use std::collections::BTreeSet;

use super::{corrupt, salvage, Horizon};
use crate::error::{Error, ErrorKind, Result};
use crate::format::Layout;
use crate::meta::block::{SlotContent, SLOT_FIRST};
use crate::meta::recovery::scan::ScannedBlock;
use crate::meta::recovery::RecoveryReport;

impl ScannedBlock {
    /// The valid copy with the largest sequence: two valid slots of a
    /// two-slot block never share one (`Corrupt`); a journaled block's home
    /// and journal image do once its home is rewritten (the home is taken).
    fn newest(&self, layout: Layout) -> Result<Option<usize>> {
        let mut best: Option<(usize, u64)> = None;
        for (i, (_, s)) in self.slots.iter().enumerate() {
            let Some(seq) = s.seq() else { continue };
            match best {
                Some((_, b)) if b == seq && layout == Layout::Paired => {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        "both slots of a tuple block carry the same sequence",
                    ))
                }
                Some((_, b)) if b >= seq => {}
                _ => best = Some((i, seq)),
            }
        }
        Ok(best.map(|(i, _)| i))
    }

    /// The copy a block falls back to when its state at index `w` (written
    /// by the group of sequence `seq`) is rolled back: the valid copy with
    /// the largest sequence below `seq` (its state before that group);
    /// `None` when the block had no state before.
    pub(super) fn fallback(&self, w: usize, seq: u64, layout: Layout) -> Result<Option<usize>> {
        let older = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, (_, s))| s.seq().filter(|&x| x < seq).map(|x| (i, x)))
            .max_by_key(|&(_, x)| x)
            .map(|(i, _)| i);
        let damaged = self
            .slots
            .iter()
            .enumerate()
            .find_map(|(i, (_, s))| match s {
                SlotContent::Invalid { why, .. } if i != w => Some(why.clone()),
                _ => None,
            });
        match layout {
            Layout::Paired => match (older, damaged) {
                (Some(i), _) => Ok(Some(i)),
                (None, None) => Ok(None),
                (None, Some(why)) => Err(corrupt(format!(
                    "its newest slot is from an interrupted group and the other is damaged ({why})"
                ))),
            },
            // A home slot holding the group being rolled back: written
            // there straight (FIRST: the block had no state before), or
            // rewritten after the group's sync, which a group that must be
            // rolled back did not reach; then what came before is not
            // known, and nothing is guessed.
            Layout::Journaled(_) if w == 0 => match self.slot(0) {
                Some(SlotContent::Valid { group_flags, .. }) if group_flags & SLOT_FIRST != 0 => {
                    Ok(None)
                }
                _ => Err(corrupt(
                    "its home slot holds a group that must be rolled back but had been synced"
                        .into(),
                )),
            },
            // A journal image rolled back: the state before it is its home
            // slot or an older journal image (the journal keeps a block's
            // image until a newer one is synced or its home write is).
            Layout::Journaled(_) => Ok(older),
        }
    }
}

/// How a damaged slot relates to the block's state.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Damage {
    /// It held an older state: nothing lost.
    Superseded,
    /// It was being written by a group no older than the newest one (whose
    /// sequence is given, when known) when the process stopped.
    Torn(u64),
    /// It held newer state that is now lost.
    Lost,
}

/// Classifies a damaged copy of a block whose state has sequence `y` (0
/// when it has none). A torn write claims a sequence of at least
/// `tear_floor`. In a two-slot block the sibling never shares the state's
/// sequence; a journaled block's home and journal image may (`same_ok`).
pub(super) fn classify(slot: &SlotContent, y: u64, tear_floor: u64, same_ok: bool) -> Damage {
    let SlotContent::Invalid { seq, split, .. } = slot else {
        return Damage::Superseded;
    };
    let older = |c: u64| c < y || (same_ok && c == y);
    match (seq, split) {
        // Both copies agree: one flipped byte cannot forge that.
        (Some(c), _) if older(*c) => Damage::Superseded,
        (Some(c), _) if *c > y && *c >= tear_floor => Damage::Torn(*c),
        (Some(_), _) => Damage::Lost,
        (None, Some((a, b))) => {
            let (lo, hi) = ((*a).min(*b), (*a).max(*b));
            if older(hi) {
                Damage::Superseded
            } else if lo <= y {
                // New head and old tail (or the reverse) of a torn write, or
                // one damaged copy: only the newest group can be torn.
                if hi >= tear_floor {
                    Damage::Torn(hi)
                } else {
                    Damage::Lost
                }
            } else if lo >= tear_floor {
                // Both copies are newer than the state; either may be the
                // true one, and both say "newest group".
                Damage::Torn(hi)
            } else {
                Damage::Lost
            }
        }
        // Nothing readable (format-1 slot, or no sequence at all): only a
        // block that was never written before may have been torn.
        (None, None) if y == 0 => Damage::Torn(u64::MAX),
        (None, None) => Damage::Lost,
    }
}

/// What choosing copies decided, before the newest group is judged.
pub(super) struct Choice {
    /// Per block, the copy holding its state (`None`: empty or skipped).
    pub chosen: Vec<Option<usize>>,
    /// Groups seen only through torn copies.
    pub torn_groups: BTreeSet<u64>,
    /// Salvage: the newest group a skipped (lost) copy proves was synced.
    /// A lost copy held acknowledged state, so its group and every older
    /// one had been synced: none of them is rolled back for looking short
    /// of a block that was only skipped.
    pub synced_floor: u64,
}

/// Chooses each block's state copy and weighs its damaged copies: a
/// superseded one is repaired (`dirty`, listed in `report` after a clean
/// close), a torn one names its group, a lost one refuses the open (or,
/// salvaging, skips the block).
pub(super) fn choose(
    scanned: &[ScannedBlock],
    h: &Horizon,
    report: &mut RecoveryReport,
    dirty: &mut BTreeSet<u32>,
) -> Result<Choice> {
    let mut chosen = Vec::with_capacity(scanned.len());
    let mut torn_groups = BTreeSet::new();
    let mut synced_floor = 0u64;
    for (no, b) in scanned.iter().enumerate() {
        let at = |e: Error| e.context(format!("tuple block {no} at byte {}", b.offset));
        let w = b.newest(h.layout).map_err(at)?;
        let y = w
            .and_then(|w| b.slot(w))
            .and_then(SlotContent::seq)
            .unwrap_or(0);
        let damaged: Vec<(usize, &SlotContent)> = b
            .slots
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| matches!(s, SlotContent::Invalid { .. }))
            .map(|(i, (_, s))| (i, s))
            .collect();
        // A salvage open skips a block whose state is lost: no tuple of it
        // is served, from that copy or an older one.
        let mut skip = |why: String| report.skipped.push(salvage::skipped(no, b.offset, &why));
        if h.layout == Layout::Paired && w.is_none() && damaged.len() > 1 {
            let whys: Vec<String> = damaged
                .iter()
                .filter_map(|(_, s)| match s {
                    SlotContent::Invalid { why, .. } => Some(why.clone()),
                    _ => None,
                })
                .collect();
            let why = format!(
                "both slots of a tuple block are damaged ({})",
                whys.join("; ")
            );
            if h.salvage {
                skip(why);
                chosen.push(None);
                continue;
            }
            return Err(at(corrupt(why)));
        }
        let mut lost = false;
        for (i, d) in damaged {
            let SlotContent::Invalid { why, .. } = d else {
                continue;
            };
            match classify(d, y, h.tear_floor, h.journaled) {
                // A stale journal image needs nothing: the journal is
                // written over in turn.
                Damage::Superseded if h.journaled && i > 0 => {}
                Damage::Superseded => {
                    if h.clean {
                        let what = if h.journaled {
                            "its home slot was damaged"
                        } else {
                            "its superseded copy was damaged"
                        };
                        let fix = if h.journaled {
                            "its journal image holds the same state; nothing lost; copied back"
                        } else {
                            "nothing lost; rewritten"
                        };
                        report.repaired.push(format!(
                            "tuple block {no} (byte {}): {what} ({why}); {fix}",
                            b.offset
                        ));
                    }
                    // A journaled home is restored from the journal image
                    // that is its state (open copies it back).
                    if !h.journaled {
                        dirty.insert(no as u32);
                    }
                }
                Damage::Torn(seq) => {
                    torn_groups.insert(seq);
                }
                Damage::Lost if h.salvage => {
                    synced_floor = synced_floor.max(salvage::proven_synced(d, h));
                    if !lost {
                        skip(format!(
                            "its newer copy is damaged ({why}){}",
                            salvage::older_names(w.and_then(|w| b.slot(w)))
                        ));
                    }
                    lost = true;
                }
                Damage::Lost => {
                    return Err(at(corrupt(format!(
                        "its newer copy is damaged ({why}) and was not being written when the store \
                         was last stopped: the block's latest tuples are lost. Nothing was changed; \
                         restore the store from a backup, or copy out what still reads with \
                         `blobcask --salvage get` (`Options::salvage`)"
                    ))));
                }
            }
        }
        chosen.push(if lost { None } else { w });
    }
    Ok(Choice {
        chosen,
        torn_groups,
        synced_floor,
    })
}

/// Per block, the slot its next write goes to: in a two-slot block, the
/// slot just rejected (what it held is gone) or else the one not holding
/// its state, so a torn write cannot destroy that state (invariant 1).
/// Always the home slot (0) in a journaled store.
pub(super) fn next_slots(
    layout: Layout,
    rejected: &[Option<usize>],
    chosen: &[Option<usize>],
) -> Vec<u8> {
    match layout {
        Layout::Paired => rejected
            .iter()
            .zip(chosen)
            .map(|(rejected, chosen)| match rejected {
                Some(w) => *w as u8,
                None => chosen.map_or(0, |w| 1 - w as u8),
            })
            .collect(),
        Layout::Journaled(_) => vec![0; chosen.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::recovery::plan::tests::invalid;

    #[test]
    fn damaged_copies_are_classified_by_what_they_claim() {
        // Sibling at 10, newest group 20, unclean.
        let f = 20;
        assert_eq!(
            classify(&invalid(Some(5), None), 10, f, false),
            Damage::Superseded
        );
        assert_eq!(
            classify(&invalid(Some(20), None), 10, f, false),
            Damage::Torn(20)
        );
        assert_eq!(
            classify(&invalid(Some(25), None), 10, f, false),
            Damage::Torn(25)
        );
        // A newer copy from an older group: its state is lost.
        assert_eq!(
            classify(&invalid(Some(15), None), 10, f, false),
            Damage::Lost
        );
        assert_eq!(
            classify(&invalid(Some(10), None), 10, f, false),
            Damage::Lost
        );
        // Torn: new head, old tail.
        assert_eq!(
            classify(&invalid(None, Some((21, 4))), 10, f, false),
            Damage::Torn(21)
        );
        // A newer copy (15) with one copy flipped either way: never torn.
        assert_eq!(
            classify(&invalid(None, Some((15, 3))), 10, f, false),
            Damage::Lost
        );
        assert_eq!(
            classify(&invalid(None, Some((15, 1 << 40))), 10, f, false),
            Damage::Lost
        );
        // An older copy with a copy flipped high: falling back is right.
        assert_eq!(
            classify(&invalid(None, Some((4, 1 << 40))), 10, f, false),
            Damage::Torn(1 << 40)
        );
        assert_eq!(
            classify(&invalid(None, Some((4, 6))), 10, f, false),
            Damage::Superseded
        );
        // After a clean close at 20 the floor is 21: group 20 cannot be torn.
        assert_eq!(
            classify(&invalid(Some(20), None), 10, 21, false),
            Damage::Lost
        );
        // A block's first write, torn (old content zero).
        assert_eq!(
            classify(&invalid(None, Some((21, 0))), 0, f, false),
            Damage::Torn(21)
        );
        assert_eq!(classify(&invalid(Some(7), None), 0, f, false), Damage::Lost);
    }
}
