//! The image's codecs: header and records round trip, every flipped header
//! byte is caught, a record cut anywhere asks for more bytes.

use super::*;
use std::sync::Arc;

fn header() -> Header {
    Header {
        fingerprints: false,
        store_id: 0xfeed,
        stamp: 41,
        next_version: 42,
        objects: 3,
        blocks: 9,
        pieces: vec![
            Piece {
                start: 100,
                order: 4,
            },
            Piece {
                start: 300,
                order: 2,
            },
        ],
        payload_len: 12345,
        payload_crc: 0xabcd_ef01,
    }
}

#[test]
fn the_header_round_trips_and_every_flipped_byte_is_caught() {
    for fingerprints in [false, true] {
        header_round_trips(Header {
            fingerprints,
            ..header()
        });
    }
}

fn header_round_trips(h: Header) {
    let b = h.encode();
    assert_eq!(b.len(), BLOCK_SIZE);
    assert_eq!(Header::decode(&b, 0xfeed).unwrap(), h);
    assert!(Header::decode(&b, 0xbeef)
        .unwrap_err()
        .contains("another store"));
    for i in 0..BLOCK_SIZE {
        let mut bad = b.clone();
        bad[i] ^= 0x04;
        assert!(Header::decode(&bad, 0xfeed).is_err(), "byte {i}");
    }
}

/// A key, its heap value if any (pieces, checksums, unsynced), its expiry.
type Sample = (Vec<u8>, Option<(Vec<Piece>, Checksums, bool)>, Option<u64>);

fn sample_objects() -> Vec<Sample> {
    let p = |start, order| Piece { start, order };
    vec![
        (b"a/inline".to_vec(), None, None),
        (b"b/expiring".to_vec(), None, Some(1_900_000_000_000_000)),
        (
            b"c/blocks".to_vec(),
            Some((
                vec![p(64, 1)],
                Checksums::Blocks(Arc::from(vec![1u32, 2])),
                true,
            )),
            None,
        ),
        (
            b"d/table".to_vec(),
            Some((vec![p(128, 5), p(160, 0)], Checksums::Table(7), false)),
            Some(5),
        ),
        (
            b"e/format-1".to_vec(),
            Some((vec![p(200, 0)], Checksums::Whole(9), false)),
            None,
        ),
        (
            b"f/none".to_vec(),
            Some((vec![p(201, 0)], Checksums::None, false)),
            None,
        ),
    ]
}

/// Both kinds of record: with the key (ordered indexes' images), and with
/// the key's fingerprint (the hash index's), which carries the key too only
/// for an object that expires.
#[test]
fn records_round_trip_and_a_cut_record_asks_for_more() {
    for fingerprints in [false, true] {
        for (i, (key, heap, expires)) in sample_objects().into_iter().enumerate() {
            let fp = fingerprints.then_some(0x0123_4567_89ab_cdef_u128 << 40 | i as u128);
            let stored_key: &[u8] = if fp.is_some() && expires.is_none() {
                &[]
            } else {
                &key
            };
            let o = ImageObject {
                key: stored_key,
                key_len: key.len(),
                fp,
                block: i as u32,
                version: 10 + i as u64,
                created_micros: 77,
                size: if heap.is_some() { 5000 } else { 300 },
                expires_micros: expires,
                heap: heap.as_ref().map(|(p, s, u)| (p.as_slice(), s, *u)),
            };
            let mut b = Vec::new();
            encode_record(&o, &mut b);
            assert_eq!(b.len(), record_len(&o));
            let (r, n) = decode_record(&b, fingerprints).unwrap().unwrap();
            let (block, t, tuple_len) = (r.block, r.tuple, r.tuple_len);
            assert_eq!((block, n), (i as u32, b.len()));
            assert_eq!(&*t.key, stored_key);
            assert_eq!((r.fp, r.key_len as usize), (fp, key.len()));
            assert_eq!(
                (t.version, t.created_micros, t.size, t.expires_micros),
                (o.version, 77, o.size, expires)
            );
            match (&t.value, &heap) {
                (TupleValue::Inline(v), None) => {
                    assert!(v.is_empty());
                    assert_eq!(
                        tuple_len,
                        tuple::inline_len(key.len(), 300, expires.is_some())
                    );
                }
                (
                    TupleValue::Heap {
                        pieces,
                        sums,
                        unsynced,
                    },
                    Some((p, s, u)),
                ) => {
                    assert_eq!((pieces, sums, unsynced), (p, s, u));
                    let full = Tuple {
                        key: key.clone().into(),
                        ..t.clone()
                    };
                    assert_eq!(tuple_len, full.encoded_len());
                }
                _ => panic!("record {i} changed kind"),
            }
            for cut in 0..b.len() {
                assert!(
                    decode_record(&b[..cut], fingerprints).unwrap().is_none(),
                    "record {i} cut at {cut}"
                );
            }
        }
    }
}

#[test]
fn records_the_store_never_writes_are_refused() {
    let key = b"k".to_vec();
    let o = ImageObject {
        key: &key,
        key_len: key.len(),
        fp: None,
        block: 0,
        version: 1,
        created_micros: 0,
        size: 10,
        expires_micros: None,
        heap: None,
    };
    let mut b = Vec::new();
    encode_record(&o, &mut b);
    // Unknown flags; an empty key; an inline value above the threshold.
    let mut flags = b.clone();
    flags[0] = 0x80;
    assert!(decode_record(&flags, false).is_err());
    let mut empty = b.clone();
    empty[1..3].copy_from_slice(&0u16.to_le_bytes());
    assert!(decode_record(&empty, false).is_err());
    let mut huge = b.clone();
    huge[23..31].copy_from_slice(&1_000_000u64.to_le_bytes());
    assert!(decode_record(&huge, false).is_err());
}

#[test]
fn logical_offsets_map_across_pieces() {
    let pieces = header().pieces;
    assert_eq!(pieces_len(&pieces), (16 + 4) * BLOCK_SIZE as u64);
    assert_eq!(device_offset(&pieces, 0), Some((100 * 4096, 16 * 4096)));
    assert_eq!(
        device_offset(&pieces, 16 * 4096 + 5),
        Some((300 * 4096 + 5, 4 * 4096 - 5))
    );
    assert_eq!(device_offset(&pieces, 20 * 4096), None);
}

#[test]
fn header_offsets_match_format_md() {
    let pieces = format!("{H_PIECE_LEN} × n");
    crate::format::doc_tables::assert_matches(
        "## Index image",
        &[
            ("IMAGE_MAGIC", 0, "8"),
            ("H_STORE_ID", H_STORE_ID, "8"),
            ("H_STAMP", H_STAMP, "8"),
            ("H_NEXT_VERSION", H_NEXT_VERSION, "8"),
            ("H_OBJECTS", H_OBJECTS, "8"),
            ("H_BLOCKS", H_BLOCKS, "4"),
            ("H_PIECE_COUNT", H_PIECE_COUNT, "4"),
            ("H_PAYLOAD_LEN", H_PAYLOAD_LEN, "8"),
            ("H_PAYLOAD_CRC", H_PAYLOAD_CRC, "4"),
            ("H_PIECES", H_PIECES, &pieces),
            ("H_CRC", H_CRC, "4"),
        ],
    );
    assert_eq!(MAX_IMAGE_PIECES, 447, "FORMAT.md says 1 to 447 pieces");
}
