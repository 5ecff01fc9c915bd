//! The superblock's two copies: which one holds the store's geometry at
//! open, and how a new superblock is published so that both stay current
//! (a torn or damaged copy always leaves a whole one). The codec itself is
//! `format::Superblock`; the tuple blocks' slots are `meta::block` and the
//! decisions over them `meta::recovery`.

use crate::error::{Error, ErrorKind, Result};
use crate::format::{MetaExtent, Superblock, BLOCK_SIZE, MAX_META_EXTENTS, SUPER_MAGIC};
use crate::io::{AlignedBuf, IoEngine};

/// The superblock chosen at open, and whether its two copies must be
/// rewritten (one damaged, stale or missing, or an older format).
pub(crate) struct Head {
    pub sb: Superblock,
    pub republish: bool,
    pub repaired: Vec<String>,
}

/// Picks the superblock from its two copies. Both copies are kept current
/// (see [`publish_superblock`]), so one damaged copy loses nothing: the
/// other is used and the damage reported (invariant 6). `Ok(None)`: blank.
pub(crate) fn choose_superblock(head: &[u8]) -> Result<Option<Head>> {
    let Some((a, b)) = head.split_at_checked(BLOCK_SIZE) else {
        return Err(Error::new(ErrorKind::Corrupt, "superblock truncated"));
    };
    let blank = |s: &[u8]| s.iter().all(|&x| x == 0);
    let decoded = [Superblock::decode(a), Superblock::decode(b)];
    for d in &decoded {
        if let Err(e) = d {
            if e.kind() == ErrorKind::Unsupported {
                return Err(Error::new(e.kind(), e.message().to_string()));
            }
        }
    }
    let raw = [a, b];
    let mut valid = Vec::new();
    let mut damaged = Vec::new();
    for (i, (d, raw)) in decoded.into_iter().zip(raw).enumerate() {
        match d {
            Ok(Some(sb)) => valid.push(sb),
            Ok(None) if blank(raw) => {}
            Ok(None) => damaged.push(format!("superblock copy {i}: no magic")),
            Err(e) => damaged.push(format!("superblock copy {i}: {}", e.message())),
        }
    }
    if valid.is_empty() {
        if damaged.is_empty() {
            return Ok(None);
        }
        if damaged.len() == 2 && !raw.iter().any(|r| r.starts_with(SUPER_MAGIC)) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                "not a blobcask store (no superblock); nothing was written",
            ));
        }
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "both superblock copies are damaged ({}); restore the store from a backup",
                damaged.join("; ")
            ),
        ));
    }
    valid.sort_by_key(|s| s.seq);
    let same = |x: &Superblock, y: &Superblock| {
        let mut y = y.clone();
        y.seq = x.seq;
        *x == y
    };
    let republish = match valid.as_slice() {
        [older, newer] => !same(older, newer),
        _ => true,
    };
    let sb = valid
        .pop()
        .ok_or_else(|| Error::new(ErrorKind::Corrupt, "no superblock"))?;
    let repaired = damaged
        .into_iter()
        .map(|d| format!("{d}; the other copy is current, nothing lost; rewritten from it"))
        .collect();
    Ok(Some(Head {
        republish: republish || sb.format_version < sb.current_version(),
        sb,
        repaired,
    }))
}

/// Makes `sb` the store's superblock: written to one slot and synced, then
/// to the other and synced, so both copies are current and a torn or
/// damaged copy always leaves a whole one. Returns it with its new sequence.
///
/// Blocking, on the calling thread: publishes are rare (creation, metadata
/// and heap growth, a clean close) and, after open, made under the store's
/// superblock lock, which a plain mutex can hold across blocking calls only.
pub(crate) fn publish_superblock(engine: &dyn IoEngine, sb: &Superblock) -> Result<Superblock> {
    let mut sb = sb.clone();
    for _ in 0..2 {
        sb.seq += 1;
        let at = (sb.seq % 2) * BLOCK_SIZE as u64;
        let (r, _) = engine.write_at_blocking(AlignedBuf::copy_from(&sb.encode()), at);
        r.map_err(|e| Error::io("writing the superblock", e))?;
        engine
            .sync_blocking()
            .map_err(|e| Error::io("syncing the superblock", e))?;
    }
    Ok(sb)
}

/// Reads the extent table `sb` names (format 5) into `sb.meta_extents`,
/// when it has not been read yet; what was wrong with a damaged copy, if
/// one was (`Superblock::add_table`). Open and scrub read it this way.
pub(crate) async fn read_extent_table(
    engine: &dyn IoEngine,
    sb: &mut Superblock,
) -> Result<Option<String>> {
    let Some(t) = sb.extent_table.filter(|_| sb.unread_extents > 0) else {
        return Ok(None);
    };
    if t.start.saturating_add(1 << t.order) > sb.total_blocks() {
        return Err(Error::new(
            ErrorKind::Corrupt,
            "metadata extent table lies beyond the store",
        ));
    }
    let (r, piece) = engine
        .read_at(AlignedBuf::zeroed(BLOCK_SIZE << t.order), t.offset())
        .await;
    r.map_err(|e| Error::io("reading the metadata extent table", e))?;
    sb.add_table(piece.as_slice())
}

/// Writes the extent table for `sb`'s extents beyond the superblock's own
/// list into the new piece `to` (not synced, not yet named by any
/// superblock). Growth and open's repair write it this
/// way, then sync and publish the superblock naming `to`.
pub(crate) async fn write_extent_table(
    engine: &dyn IoEngine,
    sb: &Superblock,
    to: MetaExtent,
) -> Result<()> {
    let rest = sb.meta_extents.get(MAX_META_EXTENTS..).unwrap_or_default();
    let bytes = crate::format::encode_extent_table(rest, sb.store_id, to.order);
    let (r, _) = engine
        .write_at(AlignedBuf::copy_from(&bytes), to.offset())
        .await;
    r.map_err(|e| Error::io("writing the metadata extent table", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{MetaExtent, JOURNALED_FORMAT_VERSION};

    fn sb(seq: u64, extents: usize) -> Superblock {
        Superblock {
            format_version: JOURNALED_FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            capacity: 1 << 30,
            max_order: 12,
            store_id: 5,
            seq,
            created_micros: 1,
            clean_seq: 0,
            settings: None,
            journal: Some(MetaExtent { start: 2, order: 4 }),
            extent_table: None,
            index_image: None,
            change_map: None,
            unread_extents: 0,
            meta_extents: (0..extents)
                .map(|i| MetaExtent {
                    start: 64 << i,
                    order: 6,
                })
                .collect(),
        }
    }

    fn head(a: &[u8], b: &[u8]) -> Vec<u8> {
        [a, b].concat()
    }

    #[test]
    fn both_copies_current_is_quiet() {
        let h = choose_superblock(&head(&sb(2, 2).encode(), &sb(1, 2).encode()))
            .unwrap()
            .unwrap();
        assert_eq!(h.sb.seq, 2);
        assert!(!h.republish && h.repaired.is_empty());
    }

    #[test]
    fn a_damaged_copy_is_replaced_from_the_other_and_reported() {
        // The newer copy (more extents) is the one damaged: the other is
        // current too (publishing writes both), so nothing is lost.
        let mut newer = sb(4, 3).encode();
        newer[40] ^= 1;
        let h = choose_superblock(&head(&sb(3, 3).encode(), &newer))
            .unwrap()
            .unwrap();
        assert_eq!(h.sb.meta_extents.len(), 3);
        assert!(h.republish);
        assert_eq!(h.repaired.len(), 1, "{:?}", h.repaired);
        // A flipped magic byte is damage too, not "no superblock".
        let mut nomagic = sb(4, 3).encode();
        nomagic[0] ^= 1;
        let h = choose_superblock(&head(&nomagic, &sb(3, 3).encode()))
            .unwrap()
            .unwrap();
        assert_eq!(h.repaired.len(), 1);
    }

    #[test]
    fn a_publish_cut_between_the_copies_keeps_the_newer_and_republishes() {
        let h = choose_superblock(&head(&sb(3, 3).encode(), &sb(2, 2).encode()))
            .unwrap()
            .unwrap();
        assert_eq!(h.sb.meta_extents.len(), 3);
        assert!(h.republish && h.repaired.is_empty());
    }

    #[test]
    fn a_head_shorter_than_a_block_is_corrupt_not_a_panic() {
        for len in [0, 100, BLOCK_SIZE - 1] {
            let e = choose_superblock(&sb(1, 1).encode()[..len]).err().unwrap();
            assert_eq!(e.kind(), ErrorKind::Corrupt);
        }
    }

    #[test]
    fn blank_foreign_and_doubly_damaged_heads() {
        let zero = vec![0u8; BLOCK_SIZE];
        assert!(choose_superblock(&head(&zero, &zero)).unwrap().is_none());
        let foreign = vec![0x42u8; BLOCK_SIZE];
        let e = choose_superblock(&head(&foreign, &foreign)).err().unwrap();
        assert!(e.to_string().contains("not a blobcask store"), "{e}");
        let (mut a, mut b) = (sb(2, 1).encode(), sb(1, 1).encode());
        a[100] ^= 1;
        b[100] ^= 1;
        let e = choose_superblock(&head(&a, &b)).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(e.to_string().contains("both superblock copies"), "{e}");
    }
}
