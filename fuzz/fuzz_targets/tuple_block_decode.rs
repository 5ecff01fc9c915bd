//! Any bytes: decoding tuples and tuple-block slots never panics; a valid
//! slot's tuples re-encode to the same payload.
#![no_main]
use blobcask::internals::block::{decode_slot, encode_slot, GroupStamp, SlotContent, SlotIdentity};
use blobcask::internals::tuple::Tuple;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Tuple::decode(data);
    let id = SlotIdentity {
        store_id: 7,
        block_no: 3,
    };
    let mut block = vec![0u8; 4096];
    let n = data.len().min(4096);
    block[..n].copy_from_slice(&data[..n]);
    if let SlotContent::Valid {
        seq,
        group_first,
        group_blocks,
        group_flags,
        tuples,
    } = decode_slot(id, &block)
    {
        let mut payload = Vec::new();
        for t in &tuples {
            t.encode_into(&mut payload);
        }
        let mut out = vec![0u8; 4096];
        let stamp = GroupStamp {
            seq,
            first: group_first,
            blocks: group_blocks,
            flags: group_flags,
        };
        // A slot that decoded holds no more than a slot's room.
        encode_slot(id, stamp, tuples.len(), &payload, &mut out).expect("a decoded slot fits");
        match decode_slot(id, &out) {
            SlotContent::Valid { tuples: again, .. } => assert_eq!(again, tuples),
            other => panic!("re-encoded slot does not decode: {other:?}"),
        }
    }
    // A valid slot encoded from fuzz-chosen tuples must survive any single
    // flipped byte as Invalid (or, if the flip is a no-op, Valid).
    if data.len() > 8 {
        if let Ok((t, _)) = Tuple::decode(&data[8..]) {
            let mut payload = Vec::new();
            t.encode_into(&mut payload);
            if payload.len() <= blobcask::internals::block::BLOCK_PAYLOAD {
                let mut out = vec![0u8; 4096];
                let stamp = GroupStamp {
                    seq: u64::MAX,
                    first: 0,
                    blocks: 1,
                    flags: 0,
                };
                encode_slot(id, stamp, 1, &payload, &mut out).expect("checked to fit");
                let at = data[0] as usize * 16 + data[1] as usize % 16;
                out[at % (payload.len() + 48)] ^= data[2] | 1;
                assert!(
                    !matches!(decode_slot(id, &out), SlotContent::Valid { .. }) || data[2] | 1 == 0
                );
            }
        }
    }
});
