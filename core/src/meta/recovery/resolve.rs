//! Resolve: what lies between blocks once each block's state is chosen.
//! The largest version of each key wins and the blocks holding the others
//! are marked for rewriting; the allocator, all free at first, claims the
//! metadata pieces and then every live object's pieces again.
//!
//! Keeps invariant 4: one live version per key (two tuples of one key with
//! one version are `Corrupt`), every version at most the largest sequence
//! seen (so the next version assigned is new), and no piece claimed twice
//! (`Corrupt`): both asserted on the way out where they are obviously
//! true by construction. Invariant 9 follows from the claims: a piece a
//! live object holds is never handed out as free.

use super::plan::{corrupt, Plan};
use super::scan::ScannedBlock;
use super::Recovered;
use crate::alloc::BuddyAllocator;
use crate::error::Result;
use crate::format::{Layout, Superblock};
use crate::meta::block::SlotContent;
use crate::meta::table::TupleBlockTable;
use crate::meta::tuple::{Piece, Tuple, TupleValue};

/// Claims the metadata extents, the journal and the extent table in
/// `alloc`; returns their bytes. A piece claimed twice is `Corrupt`.
pub(crate) fn claim_metadata(alloc: &mut BuddyAllocator, sb: &Superblock) -> Result<u64> {
    let mut metadata_bytes = 0;
    for e in sb
        .meta_extents
        .iter()
        .chain(&sb.journal)
        .chain(&sb.extent_table)
    {
        if e.order == 0 {
            return Err(corrupt(
                "metadata extent smaller than one tuple block".into(),
            ));
        }
        let piece = Piece {
            start: e.start,
            order: e.order,
        };
        alloc.mark_allocated(piece)?;
        metadata_bytes += piece.len_bytes();
    }
    Ok(metadata_bytes)
}

/// Turns the chosen copies into the store's state (see the module docs).
pub(super) fn resolve(
    mut scanned: Vec<ScannedBlock>,
    plan: Plan,
    layout: Layout,
    mut alloc: BuddyAllocator,
    metadata_bytes: u64,
) -> Result<Recovered> {
    let Plan {
        chosen,
        next_slots,
        mut dirty,
        edited,
        max_seq,
        report,
    } = plan;
    // Resolve duplicates: the largest version of each key wins. Sorting all
    // tuples by key puts duplicates side by side without a second copy of
    // every key, and hands the index its keys in order (entry ids follow
    // key order too, which the FST stores more compactly).
    let mut table = TupleBlockTable::new(layout);
    let mut all: Vec<(u32, Tuple)> = Vec::new();
    // Where readers find each block's state, until it is rewritten.
    let mut state_at: Vec<Option<u64>> = Vec::with_capacity(scanned.len());
    // Journaled blocks whose state is a journal image (home, image offset),
    // and the journal slots that recovery's edits still need.
    let mut replay: Vec<(u32, u64, u64)> = Vec::new();
    let mut pinned: Vec<u64> = Vec::new();
    // One entry per block, for the store's life: no doubling slack.
    table.blocks.reserve_exact(scanned.len());
    // The plan holds one entry per scanned block, in order.
    for (no, ((block, next_slot), chosen)) in
        scanned.iter_mut().zip(next_slots).zip(chosen).enumerate()
    {
        // A journaled block with state is written through the journal next;
        // one without (never written, or its first write rolled back) goes
        // straight to its home slot, which holds nothing to lose.
        table.push_block(block.offset, next_slot, chosen.is_some());
        if let Layout::Journaled(_) = layout {
            if edited.contains(&(no as u32)) {
                // The copies its edit came from: its state, and the state
                // before it (the newest older copy).
                let seq = |i: usize| block.slot(i).and_then(SlotContent::seq);
                let state = chosen.and_then(seq).unwrap_or(0);
                let before = (0..block.slots.len())
                    .filter(|&i| seq(i).is_some_and(|q| q < state))
                    .max_by_key(|&i| seq(i));
                for i in chosen.into_iter().chain(before) {
                    pinned.extend(block.slots.get(i).map(|(at, _)| *at));
                }
            } else if let Some(w) = chosen.filter(|&w| w > 0) {
                if let Some((at, _)) = block.slots.get(w) {
                    replay.push((no as u32, block.offset, *at));
                }
            }
        }
        let slot = chosen.and_then(|w| block.slots.get_mut(w));
        state_at.push(slot.as_ref().map(|(at, _)| *at));
        if let Some((_, slot)) = slot {
            if let SlotContent::Valid { tuples, .. } = std::mem::replace(slot, SlotContent::Empty) {
                all.extend(tuples.into_iter().map(|t| (no as u32, t)));
            }
        }
    }
    drop(scanned);
    all.sort_unstable_by(|(_, a), (_, b)| a.key.cmp(&b.key).then(b.version.cmp(&a.version)));
    let mut winners: Vec<(u32, Tuple)> = Vec::with_capacity(all.len());
    for (no, t) in all {
        match winners.last() {
            Some((wb, w)) if w.key == t.key => {
                if w.version == t.version {
                    return Err(corrupt(format!(
                        "two tuples of one key carry version {} (blocks {wb} and {no})",
                        t.version
                    )));
                }
                // Sorted newest first: this one lost.
                dirty.insert(no);
            }
            last => {
                // Invariant 4: one live version per key, in key order (the
                // index is loaded in this order).
                assert!(
                    last.is_none_or(|(_, w)| w.key < t.key),
                    "invariant 4: keys resolved out of order"
                );
                // Invariant 4: a valid slot holds no version above its
                // sequence, so the next version assigned is new.
                assert!(
                    t.version <= max_seq,
                    "invariant 4: version above every sequence"
                );
                winners.push((no, t));
            }
        }
    }
    // Blocks rewritten by open hold exactly their winning tuples.
    for &b in &dirty {
        table.images.insert(b, Vec::new());
    }
    let mut used = vec![0usize; table.blocks.len()];
    for (block, t) in &winners {
        if let Some(image) = table.images.get_mut(block) {
            image.push(t.clone());
        }
        if let TupleValue::Heap { pieces, .. } = &t.value {
            claim_pieces(&mut alloc, pieces, &t.key)?;
        }
        // One entry per block of the table, which `block` is from.
        if let Some(used) = used.get_mut(*block as usize) {
            *used += t.encoded_len();
        }
    }
    for (block, bytes) in used.into_iter().enumerate() {
        if bytes > 0 {
            table.grow_used(block as u32, bytes, false);
        }
    }
    Ok(Recovered {
        alloc,
        metadata_bytes,
        table,
        tuples: winners,
        state_at,
        replay,
        pinned,
        dirty,
        next_version: max_seq + 1,
        report,
        image_pieces: Vec::new(),
        change_map: None,
    })
}

/// Claims one live object's pieces; on a piece already claimed (by the
/// metadata or another object: `Corrupt`), gives back the ones it took.
fn claim_pieces(alloc: &mut BuddyAllocator, pieces: &[Piece], key: &[u8]) -> Result<()> {
    for (i, p) in pieces.iter().enumerate() {
        if let Err(e) = alloc.mark_allocated(*p) {
            for q in pieces.iter().take(i) {
                alloc.free(*q);
            }
            return Err(e.context(format!("object {}", crate::error::show_key(key))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A heap tuple of one 4 KiB piece at `start` (plan's test tuple:
    /// resolve never reads its `unsynced` flag).
    fn heap(key: &str, version: u64, start: u64) -> Tuple {
        crate::meta::recovery::plan::tests::tuple(key, version, start)
    }

    fn block(offset: u64, seq: u64, tuples: Vec<Tuple>) -> ScannedBlock {
        let slot = SlotContent::Valid {
            seq,
            group_first: seq,
            group_blocks: 1,
            group_flags: 0,
            tuples,
        };
        ScannedBlock {
            offset,
            slots: vec![(offset, slot)],
        }
    }

    fn plan_of(blocks: usize, max_seq: u64) -> Plan {
        Plan {
            chosen: vec![Some(0); blocks],
            next_slots: vec![0; blocks],
            dirty: BTreeSet::new(),
            edited: BTreeSet::new(),
            max_seq,
            report: Default::default(),
        }
    }

    #[test]
    fn the_largest_version_of_a_key_wins_and_the_loser_block_is_rewritten() {
        let scanned = vec![
            block(0, 3, vec![heap("a", 3, 100), heap("b", 2, 101)]),
            block(4096, 1, vec![heap("a", 1, 102)]),
        ];
        let alloc = BuddyAllocator::new(2, 1024, 4);
        let r = resolve(scanned, plan_of(2, 3), Layout::Paired, alloc, 0).unwrap();
        let won: Vec<(u32, &[u8], u64)> = r
            .tuples
            .iter()
            .map(|(b, t)| (*b, &*t.key, t.version))
            .collect();
        assert_eq!(won, vec![(0, &b"a"[..], 3), (0, &b"b"[..], 2)]);
        assert_eq!(r.dirty.into_iter().collect::<Vec<_>>(), vec![1]);
        assert_eq!(r.next_version, 4);
        // Only the winners' pieces are claimed.
        let mut alloc = r.alloc;
        assert!(alloc
            .mark_allocated(Piece {
                start: 102,
                order: 0
            })
            .is_ok());
        assert!(alloc
            .mark_allocated(Piece {
                start: 100,
                order: 0
            })
            .is_err());
    }

    #[test]
    fn two_tuples_of_one_key_and_version_are_corrupt() {
        let scanned = vec![
            block(0, 2, vec![heap("a", 2, 100)]),
            block(4096, 2, vec![heap("a", 2, 101)]),
        ];
        let alloc = BuddyAllocator::new(2, 1024, 4);
        let err = resolve(scanned, plan_of(2, 2), Layout::Paired, alloc, 0)
            .err()
            .expect("must refuse");
        assert_eq!(err.kind(), crate::error::ErrorKind::Corrupt);
    }

    #[test]
    fn a_piece_claimed_twice_is_corrupt() {
        let scanned = vec![block(0, 2, vec![heap("a", 2, 100), heap("b", 1, 100)])];
        let alloc = BuddyAllocator::new(2, 1024, 4);
        let err = resolve(scanned, plan_of(1, 2), Layout::Paired, alloc, 0)
            .err()
            .expect("must refuse");
        assert_eq!(err.kind(), crate::error::ErrorKind::Corrupt);
    }
}
