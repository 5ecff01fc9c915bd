//! The metadata journal (format 4) as recovery sees it: each journal slot
//! read and attributed to the tuple block it is an image of, and, after a
//! crash, the images that are state copied back to their home slots and
//! the rest erased.
//!
//! Keeps: a torn journal slot is weighed by what both its sequence copies
//! and its three block numbers say, never by one field alone, so one
//! flipped byte is not taken for a torn write (invariant 6); an image of a
//! group recovery rolled back cannot come back once newer groups follow
//! (invariant 4: the erase is synced before anything is served).
//!
//! The journal's writer is `meta::journal`; this file only reads it and
//! puts it back in order at open.

use crate::error::{Error, Result};
use crate::format::{get_u32, get_u64, MetaExtent, BLOCK_SIZE};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{
    decode_slot, journal_block, SlotContent, SlotIdentity, BLOCK_COPIES, SEQ_COPY, SLOT_BLOCK_NO,
};

use crate::meta::recovery::scan::{read_extent, ScannedBlock};

/// Reads every journal slot and adds each image to the copies of the
/// block it names (`out`, indexed by block number).
pub(crate) async fn scan_journal(
    engine: &dyn IoEngine,
    store_id: u64,
    journal: &MetaExtent,
    out: &mut [ScannedBlock],
) -> Result<()> {
    read_extent(engine, journal, |offset, slots| {
        for (i, b) in slots.iter().enumerate() {
            if b.iter().all(|&x| x == 0) {
                continue;
            }
            // Whose image it is (a torn or damaged one too); an image
            // of no block of the store is a stale one of no consequence.
            let Some(block) = journal_block(b) else {
                continue;
            };
            let Some(home) = out.get_mut(block as usize) else {
                continue;
            };
            let id = SlotIdentity {
                store_id,
                block_no: block,
            };
            let at = offset + (i * BLOCK_SIZE) as u64;
            home.slots.push((at, journal_copy(decode_slot(id, b), b)));
        }
    })
    .await
}

/// A journal slot as recovery weighs it. A write torn in a journal slot may
/// leave the head of one block's image over the tail of another block's:
/// its older sequence copy then says nothing about this block. When its
/// block numbers disagree as well as its sequence copies (two fields: not
/// one flipped byte), it is a torn write claiming the newer sequence.
fn journal_copy(slot: SlotContent, b: &[u8]) -> SlotContent {
    // A tail still zero: a write torn over a slot never used (its group
    // then lacks this block and rolls back whole), or zeros torn over an
    // image by recovery's erase (an image already restored): either way it
    // claims nothing. One flipped byte cannot zero the sequence copy.
    if get_u64(b, SEQ_COPY) == Some(0) {
        return SlotContent::Empty;
    }
    let copies = [
        get_u32(b, SLOT_BLOCK_NO),
        get_u32(b, BLOCK_COPIES),
        get_u32(b, BLOCK_COPIES + 4),
    ];
    let unanimous = copies.iter().all(|c| Some(c) == copies.first());
    match slot {
        SlotContent::Invalid {
            why,
            seq: None,
            split: Some((x, y)),
        } if !unanimous => SlotContent::Invalid {
            why: format!("{why} (a torn write: block numbers and sequences disagree)"),
            seq: Some(x.max(y)),
            split: None,
        },
        other => other,
    }
}

/// After a crash, the first half of a journaled store's repair: each block
/// whose state is a journal image (`replay`: block, home slot, image) gets
/// that image copied to its home slot as it is, synced. A cut here leaves
/// the homes copied so far equal to their images: recovery decides again
/// as before.
pub(crate) async fn restore_homes(engine: &dyn IoEngine, replay: &[(u32, u64, u64)]) -> Result<()> {
    for &(_, home, at) in replay {
        let (r, buf) = engine.read_at(AlignedBuf::zeroed(BLOCK_SIZE), at).await;
        r.map_err(|e| Error::io("reading a tuple block's journal image", e))?;
        let (r, _) = engine.write_at(buf, home).await;
        r.map_err(|e| Error::io("restoring a tuple block from the journal", e))?;
    }
    engine
        .sync()
        .await
        .map_err(|e| Error::io("syncing restored tuple blocks", e))
}

/// The second half, once the homes are synced: every journal slot but
/// those recovery's edits still need (`pinned`) is zeroed and synced, so no
/// image of a group recovery rolled back can come back once newer groups
/// follow. A cut leaves the images not yet zeroed, each equal to its home
/// or of no consequence.
pub(crate) async fn erase(
    engine: &dyn IoEngine,
    journal: MetaExtent,
    pinned: &[u64],
) -> Result<()> {
    // Runs of slots between pinned ones, one write each.
    let mut run_start = journal.offset();
    let end = journal.offset() + journal.len_bytes();
    let mut cuts: Vec<u64> = pinned
        .iter()
        .copied()
        .filter(|at| (run_start..end).contains(at))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts.push(end);
    for at in cuts {
        if at > run_start {
            let (r, _) = engine
                .write_at(AlignedBuf::zeroed((at - run_start) as usize), run_start)
                .await;
            r.map_err(|e| Error::io("erasing the metadata journal", e))?;
        }
        run_start = at + BLOCK_SIZE as u64;
    }
    engine
        .sync()
        .await
        .map_err(|e| Error::io("syncing the erased metadata journal", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::recovery::plan::tests::{journaled_image, tuple, STORE};

    #[test]
    fn a_journal_slot_whose_tail_is_still_zero_claims_nothing() {
        // An image torn over zeros (a never used slot, or recovery's erase
        // torn over an image): its head names block 1, its tail nothing.
        let image = journaled_image(1, 9, 1, &[tuple("b", 9, 11)]);
        let mut torn = vec![0u8; BLOCK_SIZE];
        torn[..2048].copy_from_slice(&image[..2048]);
        let id = SlotIdentity {
            store_id: STORE,
            block_no: 0,
        };
        assert!(matches!(
            journal_copy(decode_slot(id, &torn), &torn),
            SlotContent::Empty
        ));
        // Block numbers and sequences both split (two images): a torn write
        // claiming the newer sequence.
        let other = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
        let mut mixed = other.clone();
        mixed[..4082].copy_from_slice(&image[..4082]);
        match journal_copy(decode_slot(id, &mixed), &mixed) {
            SlotContent::Invalid { seq, split, .. } => assert_eq!((seq, split), (Some(9), None)),
            other => panic!("unexpected {other:?}"),
        }
    }
}
