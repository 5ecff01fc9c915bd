//! The superblock and extent-table codecs: round trips, flipped bytes, truncation.

use super::*;

fn sample() -> Superblock {
    Superblock {
        format_version: EXTENT_TABLE_FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        capacity: 1 << 30,
        max_order: 12,
        store_id: 0xdead_beef,
        seq: 3,
        created_micros: 1_700_000_000_000_000,
        clean_seq: 2,
        meta_extents: vec![MetaExtent {
            start: 64,
            order: 6,
        }],
        settings: Some(StoredSettings {
            index: crate::index::IndexKind::BTree,
            inline_threshold: 700,
            max_capacity: 5 << 30,
            asked_capacity: 1 << 30,
        }),
        journal: Some(MetaExtent { start: 2, order: 8 }),
        extent_table: None,
        index_image: None,
        change_map: None,
        unread_extents: 0,
    }
}

/// Grows a journaled store's metadata area the way `Committer::grow`
/// does (each extent what `next_extent_order` asks for) until it holds
/// `need` blocks; returns the area's size and how many extents it took.
fn grow_until(sb: &mut Superblock, need: u64) -> (u64, usize) {
    let size = |sb: &Superblock| sb.meta_extents.iter().map(|e| 1u64 << e.order).sum::<u64>();
    while size(sb) < need {
        let order = sb.next_extent_order();
        sb.meta_extents.push(MetaExtent { start: 0, order });
    }
    (size(sb), sb.meta_extents.len())
}

#[test]
fn the_metadata_area_grows_by_an_eighth_and_is_never_much_too_large() {
    // Journaled: whatever the need, the area is at most 9/8 of it (or
    // the need plus the smallest step, 64 blocks), and the superblock's
    // own list holds the extents.
    for need in [3u64, 100, 1000, 5_461, 37_000, 100_000, 336_000] {
        let mut sb = sample();
        sb.meta_extents = vec![MetaExtent { start: 0, order: 3 }];
        let (size, count) = grow_until(&mut sb, need);
        assert!(
            size * 8 <= need * 9 || size < need + 64,
            "need {need}: area {size}"
        );
        assert!(count <= MAX_META_EXTENTS, "need {need}: {count} extents");
        assert!(sb.meta_extents.iter().all(|e| (1..=12).contains(&e.order)));
    }
    // Capped at the largest piece: from 1 GiB of tuple blocks on, 16 MiB
    // steps.
    let mut sb = sample();
    let (_, count) = grow_until(&mut sb, 1 << 18);
    assert_eq!(sb.next_extent_order(), 12);
    assert!(count <= MAX_META_EXTENTS, "{count} extents");
    // A 1 MiB store (256 blocks) grows its metadata by 4 blocks at first,
    // not by a quarter of the store.
    let mut sb = sample();
    sb.capacity = 1 << 20;
    sb.max_order = 7;
    sb.meta_extents = vec![MetaExtent { start: 0, order: 1 }];
    assert_eq!(sb.next_extent_order(), 2);
    // Two-slot stores keep doubling (their list of 200 is all they have).
    let mut sb = sample();
    sb.journal = None;
    sb.meta_extents = vec![MetaExtent { start: 0, order: 3 }];
    assert_eq!(sb.next_extent_order(), 4);
    sb.meta_extents.push(MetaExtent {
        start: 0,
        order: 12,
    });
    assert_eq!(sb.next_extent_order(), 12);
}

#[test]
fn extents_beyond_the_superblock_round_trip_through_the_table() {
    let mut sb = sample();
    sb.format_version = EXTENT_TABLE_FORMAT_VERSION;
    sb.meta_extents = (0..450u64)
        .map(|i| MetaExtent {
            start: 1000 + i * 64,
            order: 6,
        })
        .collect();
    let order = Superblock::extent_table_order(250);
    sb.extent_table = Some(MetaExtent { start: 900, order });
    assert_eq!(sb.current_version(), 5);
    let mut back = Superblock::decode(&sb.encode()).unwrap().unwrap();
    assert_eq!((back.meta_extents.len(), back.unread_extents), (200, 250));
    let extra = sb.meta_extents.get(MAX_META_EXTENTS..).unwrap();
    let mut piece = encode_extent_table(extra, sb.store_id, order);
    assert_eq!(piece.len(), BLOCK_SIZE << order);
    // One damaged copy: the other serves, and the damage is told.
    piece[40] ^= 1;
    assert!(back.add_table(&piece).unwrap().is_some());
    assert_eq!(back, sb);
    // Both damaged, another store's, or a wrong count: Corrupt.
    let mut back = Superblock::decode(&sb.encode()).unwrap().unwrap();
    let half = piece.len() / 2;
    piece[half + 40] ^= 1;
    assert_eq!(
        back.add_table(&piece).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    let foreign = encode_extent_table(extra, 7, order);
    assert_eq!(
        back.add_table(&foreign).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    let short = encode_extent_table(&extra[1..], sb.store_id, order);
    assert_eq!(
        back.add_table(&short).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    // A version-4 superblock never lists more than 200, nor a table.
    let mut b = sb.encode();
    b[SB_VERSION..SB_VERSION + 4].copy_from_slice(&4u32.to_le_bytes());
    let crc = crc32c::crc32c(&b[..SB_CRC]);
    b[SB_CRC..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        Superblock::decode(&b).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
}

#[test]
fn superblock_round_trips() {
    let sb = sample();
    assert_eq!(Superblock::decode(&sb.encode()).unwrap(), Some(sb.clone()));
    let mut old = sb;
    old.settings = None;
    assert_eq!(Superblock::decode(&old.encode()).unwrap(), Some(old));
}

#[test]
fn settings_out_of_range_are_corrupt() {
    // Bytes that pass the checksum but name nothing this build wrote.
    for (at, v) in [(SB_SETTINGS_FLAGS, 2u8), (SB_SETTINGS_INDEX, 9)] {
        let mut b = sample().encode();
        b[at] = v;
        let crc = crc32c::crc32c(&b[..SB_CRC]);
        b[SB_CRC..].copy_from_slice(&crc.to_le_bytes());
        let e = Superblock::decode(&b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    }
}

#[test]
fn superblock_flipped_byte_is_corrupt() {
    let enc = sample().encode();
    for at in [9, 20, 40, 70, BLOCK_SIZE - 1] {
        let mut b = enc.clone();
        b[at] ^= 0x40;
        assert_eq!(
            Superblock::decode(&b).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }
}

#[test]
fn superblock_truncated_is_corrupt() {
    let enc = sample().encode();
    assert_eq!(
        Superblock::decode(&enc[..100]).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
}

#[test]
fn foreign_block_is_not_a_superblock() {
    assert_eq!(Superblock::decode(&[0x7fu8; BLOCK_SIZE]).unwrap(), None);
}

#[test]
fn an_index_image_reference_round_trips_and_sets_version_6() {
    let mut sb = sample();
    sb.index_image = Some(ImageRef {
        start: 4000,
        order: 5,
        seq: 77,
    });
    sb.format_version = sb.current_version();
    assert_eq!(sb.format_version, 6);
    assert_eq!(Superblock::decode(&sb.encode()).unwrap().unwrap(), sb);
    // Version 6 without an image, and an earlier version with one, are
    // not what any build writes.
    let mut none = sb.clone();
    none.index_image = None;
    assert_eq!(
        Superblock::decode(&none.encode()).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    let mut older = sb.clone();
    older.format_version = EXTENT_TABLE_FORMAT_VERSION;
    assert_eq!(
        Superblock::decode(&older.encode()).unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    // Dropped, the store goes back to the version of its layout.
    assert_eq!(none.current_version(), JOURNALED_FORMAT_VERSION);
}

#[test]
fn newer_format_is_unsupported() {
    let mut sb = sample();
    sb.format_version = FORMAT_VERSION + 1;
    assert_eq!(
        Superblock::decode(&sb.encode()).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
}
