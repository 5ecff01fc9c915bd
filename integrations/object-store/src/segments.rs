//! How a completed multipart upload (its parts' chunks, in order) is cut
//! into blobcask upload parts: independent of the object_store version.

use blobcask::PART_ALIGN;
use bytes::{Bytes, BytesMut};

/// How a completed multipart upload is cut into blobcask upload parts
/// (a multiple of `PART_ALIGN`).
const SEGMENT: usize = 4 << 20;

/// Cuts the object (the chunks in order) into upload parts at multiples of
/// `PART_ALIGN`: a chunk that already is one part is passed on without a
/// copy, others are joined.
pub(crate) fn segments(chunks: Vec<Bytes>) -> Vec<(u64, Bytes)> {
    let align = PART_ALIGN as usize;
    let mut out = Vec::new();
    let mut offset = 0u64;
    let mut pending = BytesMut::new();
    for mut chunk in chunks {
        if pending.is_empty() && chunk.len() >= align {
            // Pass the aligned prefix straight through.
            let whole = chunk.len() - chunk.len() % align;
            let head = chunk.split_to(whole);
            out.push((offset, head));
            offset += whole as u64;
        }
        while !chunk.is_empty() {
            let room = SEGMENT - pending.len();
            let take = room.min(chunk.len());
            pending.extend_from_slice(&chunk.split_to(take));
            if pending.len() == SEGMENT {
                let len = pending.len() as u64;
                out.push((offset, pending.split().freeze()));
                offset += len;
            }
        }
        // Flush what is aligned so a later large chunk can pass uncopied.
        let whole = pending.len() - pending.len() % align;
        if whole > 0 && whole == pending.len() {
            out.push((offset, pending.split().freeze()));
            offset += whole as u64;
        }
    }
    if !pending.is_empty() {
        out.push((offset, pending.freeze()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(parts: &[(u64, Bytes)]) -> Vec<u8> {
        let mut all = Vec::new();
        for (off, b) in parts {
            assert_eq!(*off, all.len() as u64, "parts are contiguous");
            all.extend_from_slice(b);
        }
        all
    }

    #[test]
    fn segments_are_aligned_contiguous_and_keep_every_byte() {
        let align = PART_ALIGN as usize;
        for sizes in [
            vec![5_300_002usize; 5],
            vec![1, 2, 3],
            vec![align, align, 7],
            vec![align + 1, align - 1, 3 * align],
            vec![SEGMENT * 2 + 5, 10, SEGMENT],
        ] {
            let chunks: Vec<Bytes> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| Bytes::from((0..n).map(|j| (i * 31 + j) as u8).collect::<Vec<_>>()))
                .collect();
            let expected: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
            let parts = segments(chunks);
            assert_eq!(join(&parts), expected, "sizes {sizes:?}");
            let last = parts.len() - 1;
            for (i, (off, b)) in parts.iter().enumerate() {
                assert_eq!(off % PART_ALIGN, 0);
                assert!(
                    i == last || b.len() % align == 0,
                    "sizes {sizes:?} part {i}"
                );
            }
        }
    }
}
