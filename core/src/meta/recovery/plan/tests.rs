//! Plan's unit tests, on byte images of tuple-block slots: which copy is
//! chosen, when the newest group rolls back (whole or object by object),
//! and when damage is refused (invariant 6) — for two-slot and journaled
//! stores. The fixtures here serve the tests of `copies` and `journal` too.

use super::*;
use crate::format::{MetaExtent, BLOCK_SIZE};
use crate::meta::block::{decode_slot, journal_block, SlotContent, SlotIdentity};

pub(crate) fn invalid(seq: Option<u64>, split: Option<(u64, u64)>) -> SlotContent {
    SlotContent::Invalid {
        why: "test".into(),
        seq,
        split,
    }
}

use crate::meta::block::{encode_slot, GroupStamp};
use crate::meta::tuple::{Checksums, Piece, Tuple, TupleValue};

pub(crate) const STORE: u64 = 77;

pub(crate) fn tuple(key: &str, version: u64, start: u64) -> Tuple {
    Tuple {
        key: key.as_bytes().into(),
        version,
        created_micros: 0,
        size: 4096,
        expires_micros: None,
        value: TupleValue::Heap {
            pieces: vec![Piece { start, order: 0 }],
            sums: Checksums::Blocks(vec![0].into()),
            unsynced: true,
        },
    }
}

/// One slot image of block `no` written by group (`seq`, `first`,
/// `blocks`, `flags`) holding `tuples`: format 2, or format 4 when
/// `journaled`.
fn encoded(journaled: bool, no: u32, stamp: GroupStamp, tuples: &[Tuple]) -> Vec<u8> {
    let mut payload = Vec::new();
    for t in tuples {
        t.encode_into(&mut payload);
    }
    let mut out = vec![0u8; BLOCK_SIZE];
    let id = SlotIdentity {
        store_id: STORE,
        block_no: no,
    };
    let encode = if journaled {
        crate::meta::block::encode_journaled_slot
    } else {
        encode_slot
    };
    encode(id, stamp, tuples.len(), &payload, &mut out).unwrap();
    out
}

fn image(no: u32, seq: u64, first: u64, blocks: u32, tuples: &[Tuple]) -> Vec<u8> {
    let stamp = GroupStamp {
        seq,
        first,
        blocks,
        flags: 0,
    };
    encoded(false, no, stamp, tuples)
}

fn scanned(no: u32, a: &[u8], b: &[u8]) -> ScannedBlock {
    let id = SlotIdentity {
        store_id: STORE,
        block_no: no,
    };
    let offset = no as u64 * 2 * BLOCK_SIZE as u64;
    ScannedBlock {
        offset,
        slots: vec![
            (offset, decode_slot(id, a)),
            (offset + BLOCK_SIZE as u64, decode_slot(id, b)),
        ],
    }
}

fn run(blocks: &mut [ScannedBlock], clean_seq: u64, bad: &'static str) -> Result<Plan> {
    crate::io::block_on(plan(
        blocks,
        clean_seq,
        Layout::Paired,
        false,
        |t: Tuple| async move { Ok((&*t.key == bad.as_bytes()).then(|| "test mismatch".to_string())) },
    ))
}

/// Block 0 written by groups 1 and 3, block 1 by group 2 and then by
/// group 4 (which wrote blocks 0 and 1... here only 1, declaring 2).
fn store(last_group_blocks: u32) -> Vec<ScannedBlock> {
    let b0 = [
        image(0, 1, 1, 1, &[tuple("a", 1, 10)]),
        image(0, 3, 3, 1, &[tuple("a", 3, 11)]),
    ];
    let b1 = [
        image(1, 4, 4, last_group_blocks, &[tuple("b", 4, 13)]),
        image(1, 2, 2, 1, &[tuple("b", 2, 12)]),
    ];
    vec![scanned(0, &b0[0], &b0[1]), scanned(1, &b1[0], &b1[1])]
}

#[test]
fn a_complete_newest_group_stays() {
    let p = run(&mut store(1), 0, "").unwrap();
    assert_eq!(p.chosen, vec![Some(1), Some(0)]);
    assert!(p.report.is_empty() && p.dirty.is_empty());
    assert_eq!(p.max_seq, 4);
}

#[test]
fn a_newest_group_missing_a_block_rolls_back_whole() {
    let p = run(&mut store(2), 0, "").unwrap();
    // Block 1 falls back to group 2; block 0 (group 3) stays.
    assert_eq!(p.chosen, vec![Some(1), Some(1)]);
    assert_eq!(p.report.rolled_back_groups, 1);
    assert_eq!(p.next_slots[1], 0, "the rejected slot is written next");
    assert!(p.dirty.contains(&1));
}

#[test]
fn after_a_clean_close_nothing_is_checked() {
    let p = run(&mut store(2), 4, "b").unwrap();
    assert_eq!(p.chosen, vec![Some(1), Some(0)]);
    assert!(p.report.clean && p.report.is_empty());
}

#[test]
fn an_object_whose_bytes_did_not_land_rolls_back_alone() {
    let mut blocks = store(1);
    let p = run(&mut blocks, 0, "b").unwrap();
    assert_eq!(p.report.rolled_back_objects, 1);
    assert_eq!(p.report.rolled_back_groups, 0);
    let SlotContent::Valid { tuples, .. } = &blocks[1].slots[0].1 else {
        panic!("block 1 lost its state")
    };
    assert_eq!(tuples[0].version, 2, "b is back at its previous version");
    // Rewritten over the cut group's slot: the other one (group 2) is the
    // only copy of b's previous version until the rewrite is synced.
    assert_eq!(p.next_slots[1], 0);
}

#[test]
fn a_damaged_newer_slot_of_an_older_group_is_corrupt() {
    // Block 0's newer slot (group 3) damaged in its payload: both
    // sequence copies still say 3, older than the newest group (4).
    let b0_new = {
        let mut s = image(0, 3, 3, 1, &[tuple("a", 3, 11)]);
        s[60] ^= 1;
        s
    };
    let b0_old = image(0, 1, 1, 1, &[tuple("a", 1, 10)]);
    let b1 = [
        image(1, 4, 4, 1, &[tuple("b", 4, 13)]),
        image(1, 2, 2, 1, &[tuple("b", 2, 12)]),
    ];
    let mut blocks = vec![scanned(0, &b0_old, &b0_new), scanned(1, &b1[0], &b1[1])];
    let err = run(&mut blocks, 0, "").err().expect("must refuse");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("tuple block 0"), "{err}");
}

/// A salvage open takes a lost copy as proof that its group was
/// synced, but not a copy claiming the newest group of a store not
/// closed after it: that group may be the one a crash cut. Here group 4
/// (three blocks) landed in blocks 0 and 1 but not in block 2, and
/// block 0's other slot is a damaged copy also claiming group 4 (a
/// misdirected image). Taken as proof, it kept group 4, which was never
/// acknowledged, and served `b` at version 4.
#[test]
fn a_salvage_never_takes_a_copy_of_the_newest_group_as_proof_of_its_sync() {
    let b0 = image(0, 4, 4, 3, &[tuple("a", 4, 14)]);
    let mut b0_copy = b0.clone();
    b0_copy[60] ^= 1;
    let b1 = [
        image(1, 4, 4, 3, &[tuple("b", 4, 24)]),
        image(1, 2, 2, 1, &[tuple("b", 2, 22)]),
    ];
    let b2 = [
        image(2, 2, 2, 1, &[tuple("c", 2, 32)]),
        image(2, 1, 1, 1, &[tuple("c", 1, 31)]),
    ];
    let mut blocks = vec![
        scanned(0, &b0, &b0_copy),
        scanned(1, &b1[0], &b1[1]),
        scanned(2, &b2[0], &b2[1]),
    ];
    let salvaged = crate::io::block_on(plan(
        &mut blocks,
        0,
        Layout::Paired,
        true,
        |_: Tuple| async move { Ok(None) },
    ));
    match salvaged {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}"),
        Ok(p) => {
            let b = p.chosen.get(1).copied().flatten().and_then(|slot| {
                match &blocks[1].slots[slot].1 {
                    SlotContent::Valid { tuples, .. } => Some(tuples[0].version),
                    _ => None,
                }
            });
            assert_ne!(b, Some(4), "group 4 was never acknowledged: {:?}", p.report);
        }
    }
}

#[test]
fn a_torn_newest_write_rolls_back_and_a_damaged_superseded_copy_is_repaired() {
    // Block 1's group-4 write torn: new head, old tail.
    let mut torn = image(1, 2, 2, 1, &[tuple("b", 2, 12)]);
    let new = image(1, 4, 4, 1, &[tuple("b", 4, 13)]);
    torn[..2048].copy_from_slice(&new[..2048]);
    let b1_old = image(1, 2, 2, 1, &[tuple("b", 2, 12)]);
    // Block 0's superseded copy (group 1) damaged: nothing lost.
    let mut b0_old = image(0, 1, 1, 1, &[tuple("a", 1, 10)]);
    b0_old[60] ^= 0x10;
    let b0_new = image(0, 3, 3, 1, &[tuple("a", 3, 11)]);
    let mut blocks = vec![scanned(0, &b0_old, &b0_new), scanned(1, &torn, &b1_old)];
    let p = run(&mut blocks, 0, "").unwrap();
    assert_eq!(p.chosen, vec![Some(1), Some(1)]);
    assert_eq!(p.report.rolled_back_groups, 1, "{:?}", p.report);
    assert!(p.dirty.contains(&0), "the damaged copy is rewritten");
}

// Journaled stores (format 4): one home slot per block, images in the
// journal.

const JOURNAL: MetaExtent = MetaExtent {
    start: 1000,
    order: 3,
};

pub(crate) fn journaled_image(no: u32, seq: u64, blocks: u32, tuples: &[Tuple]) -> Vec<u8> {
    let stamp = GroupStamp {
        seq,
        first: seq,
        blocks,
        flags: 0,
    };
    encoded(true, no, stamp, tuples)
}

/// Block `no` with its home slot and the journal slots given (slot
/// index, bytes); a journal slot is attributed as `scan` does.
fn journaled(no: u32, home: &[u8], journal: &[(u32, Vec<u8>)]) -> ScannedBlock {
    let id = SlotIdentity {
        store_id: STORE,
        block_no: no,
    };
    let offset = no as u64 * BLOCK_SIZE as u64;
    let mut slots = vec![(offset, decode_slot(id, home))];
    for (j, b) in journal {
        assert_eq!(
            journal_block(b),
            Some(no),
            "journal slot {j} is not block {no}'s"
        );
        let at = JOURNAL.offset() + *j as u64 * BLOCK_SIZE as u64;
        slots.push((at, decode_slot(id, b)));
    }
    ScannedBlock { offset, slots }
}

fn run_journaled(blocks: &mut [ScannedBlock], bad: &'static str) -> Result<Plan> {
    crate::io::block_on(plan(
        blocks,
        0,
        Layout::Journaled(JOURNAL),
        false,
        |t: Tuple| async move { Ok((&*t.key == bad.as_bytes()).then(|| "test mismatch".to_string())) },
    ))
}

#[test]
fn a_journal_image_newer_than_its_home_is_the_state_and_its_home_the_fallback() {
    let home = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
    let newer = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
    let mut blocks = vec![journaled(0, &home, &[(3, newer.clone())])];
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![Some(1)]);
    // The group declared two blocks and only this one landed: rolled
    // back to the home slot.
    let newer = journaled_image(0, 4, 2, &[tuple("a", 4, 11)]);
    let mut blocks = vec![journaled(0, &home, &[(3, newer)])];
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![Some(0)]);
    assert_eq!(p.report.rolled_back_groups, 1);
}

#[test]
fn a_home_rewritten_from_its_journal_image_is_the_state_and_a_torn_one_is_superseded() {
    let image = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
    // Home rewritten: the same sequence in both places, the home wins.
    let mut blocks = vec![journaled(0, &image, &[(5, image.clone())])];
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![Some(0)]);
    assert!(p.dirty.is_empty());
    // Home torn while being rewritten (new head, old tail): the
    // journal image is the state, the home is rewritten.
    let old = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
    let mut torn = old.clone();
    torn[..1000].copy_from_slice(&image[..1000]);
    let mut blocks = vec![journaled(0, &torn, &[(5, image)])];
    let p = run_journaled(&mut blocks, "").unwrap();
    // Open copies the image back to the home slot; no new write.
    assert_eq!(p.chosen, vec![Some(1)]);
    assert!(p.dirty.is_empty());
}

#[test]
fn a_damaged_home_without_a_journal_copy_is_corrupt() {
    let mut home = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
    home[60] ^= 1;
    // Group 4 elsewhere is the newest: group 3 cannot have been torn.
    let other = journaled_image(1, 4, 1, &[tuple("b", 4, 11)]);
    let mut blocks = vec![journaled(0, &home, &[]), journaled(1, &other, &[])];
    let err = run_journaled(&mut blocks, "").err().expect("must refuse");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("tuple block 0"), "{err}");
    // With its journal image still there, nothing is lost.
    let copy = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
    let mut blocks = vec![journaled(0, &home, &[(2, copy)]), journaled(1, &other, &[])];
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![Some(1), Some(0)]);
    assert!(p.dirty.is_empty());
}

#[test]
fn a_damaged_journal_image_whose_home_was_not_yet_rewritten_is_corrupt() {
    // Block 0's group-3 image is only in the journal (its home write
    // was lost with the crash), and damaged; group 4 is the newest.
    let home = journaled_image(0, 1, 1, &[tuple("a", 1, 10)]);
    let mut image = journaled_image(0, 3, 1, &[tuple("a", 3, 11)]);
    image[70] ^= 4;
    let other = journaled_image(1, 4, 1, &[tuple("b", 4, 12)]);
    let mut blocks = vec![
        journaled(0, &home, &[(6, image)]),
        journaled(1, &other, &[]),
    ];
    let err = run_journaled(&mut blocks, "").err().expect("must refuse");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}

#[test]
fn a_torn_first_write_of_a_block_leaves_it_empty() {
    // Never written before: the home write tore (new head, zero tail).
    let image = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
    let mut torn = vec![0u8; BLOCK_SIZE];
    torn[..2000].copy_from_slice(&image[..2000]);
    let mut blocks = vec![journaled(0, &torn, &[])];
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![None]);
}

#[test]
fn a_torn_journal_slot_belongs_to_the_block_its_majority_names() {
    // Block 1's new image written over block 0's old one in a journal
    // slot, torn: the head says block 1, both tail copies block 0.
    let old = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
    let new = journaled_image(1, 5, 1, &[tuple("b", 5, 11)]);
    let mut torn = old.clone();
    torn[..3000].copy_from_slice(&new[..3000]);
    assert_eq!(journal_block(&torn), Some(0));
    let home0 = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
    let home1 = journaled_image(1, 3, 1, &[tuple("b", 3, 12)]);
    let mut blocks = vec![
        journaled(0, &home0, &[(1, torn)]),
        journaled(1, &home1, &[]),
    ];
    // The torn slot claims sequences 5 and 2: the newest group's tear.
    let p = run_journaled(&mut blocks, "").unwrap();
    assert_eq!(p.chosen, vec![Some(0), Some(0)]);
}

#[test]
fn a_home_slot_of_a_rolled_back_group_falls_back_to_empty_only_when_it_was_a_first_write() {
    // Group 4 declares two blocks; only block 0's home image landed.
    let image = |flags: u32| {
        let stamp = GroupStamp {
            seq: 4,
            first: 4,
            blocks: 2,
            flags,
        };
        encoded(true, 0, stamp, &[tuple("a", 4, 11)])
    };
    let first = image(crate::meta::block::SLOT_FIRST);
    let p = run_journaled(&mut [journaled(0, &first, &[])], "").unwrap();
    assert_eq!(p.chosen, vec![None]);
    assert_eq!(p.report.rolled_back_groups, 1);
    // Not a first write: its home was rewritten after a sync the group
    // must then have reached; what came before is unknown: refused.
    let rewritten = image(0);
    let err = run_journaled(&mut [journaled(0, &rewritten, &[])], "")
        .err()
        .expect("must refuse");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}

/// An inline tuple of `len` value bytes.
fn inline(key: &str, version: u64, len: usize) -> Tuple {
    Tuple {
        key: key.as_bytes().into(),
        version,
        created_micros: 0,
        size: len as u64,
        expires_micros: None,
        value: TupleValue::Inline(vec![7u8; len].into()),
    }
}

/// A group, as a build before the kept room wrote it, in which `a`
/// shrank in place (inline, 2,068 bytes of tuple, to an UNSYNCED heap
/// tuple of 43) and `c` (2,028) took the room: `a`'s bytes did not land,
/// and rolled back alone its old tuple would not fit beside `f` and `c`
/// (5,124 bytes). The group rolls back whole instead, to the state
/// before it, which fitted; nothing is edited and nothing panics.
#[test]
fn a_rollback_alone_that_would_over_fill_its_block_rolls_the_group_back_whole() {
    let before = [inline("a", 1, 2040), inline("f", 2, 1000)];
    let group = [
        inline("f", 2, 1000),
        tuple("a", 3, 10),
        inline("c", 4, 2000),
    ];
    let over: usize = [&before[..], &group[2..]]
        .concat()
        .iter()
        .map(Tuple::encoded_len)
        .sum();
    assert!(
        over > crate::meta::block::BLOCK_PAYLOAD_V1,
        "{over} bytes fit"
    );
    let stamp = |seq, first| GroupStamp {
        seq,
        first,
        blocks: 1,
        flags: 0,
    };
    for journaled_layout in [false, true] {
        let old = encoded(journaled_layout, 0, stamp(2, 1), &before);
        let new = encoded(journaled_layout, 0, stamp(4, 3), &group);
        let mut blocks = if journaled_layout {
            vec![journaled(0, &old, &[(2, new)])]
        } else {
            vec![scanned(0, &old, &new)]
        };
        let p = if journaled_layout {
            run_journaled(&mut blocks, "a")
        } else {
            run(&mut blocks, 0, "a")
        }
        .unwrap();
        assert_eq!(
            p.chosen,
            vec![Some(0)],
            "back to the state before the group"
        );
        assert_eq!(p.report.rolled_back_groups, 1, "{:?}", p.report);
        assert_eq!(p.report.rolled_back_objects, 2, "a and c: {:?}", p.report);
        assert!(
            p.report
                .details
                .iter()
                .any(|d| d.contains("over-fill tuple block 0")),
            "{:?}",
            p.report
        );
        assert!(p.edited.is_empty(), "nothing edited");
        let Some(SlotContent::Valid { tuples, .. }) = blocks[0].slot(1) else {
            panic!("the group's copy was changed")
        };
        assert_eq!(tuples.len(), 3, "the group's copy is left as it was read");
    }
}
