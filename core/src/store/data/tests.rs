//! How an object range is cut into device requests (`spans`).

use super::*;
use crate::alloc::BuddyAllocator;
use crate::meta::tuple::Piece;
use crate::store::Extent;
use crate::sync::Mutex;

#[test]
fn back_to_back_pieces_are_one_span() {
    let alloc = crate::sync::Arc::new(Mutex::new(BuddyAllocator::new(0, 1 << 14, 12)));
    // 16 KiB + 4 KiB adjacent, then a 4 KiB piece elsewhere.
    let ext = Extent {
        pieces: vec![
            Piece {
                start: 64,
                order: 2,
            },
            Piece {
                start: 68,
                order: 0,
            },
            Piece { start: 8, order: 0 },
        ],
        alloc,
    };
    let s = spans(&ext.pieces, 0, 6 * 4096);
    assert_eq!(
        s.len(),
        2,
        "{:?}",
        s.iter().map(|x| (x.dev, x.len)).collect::<Vec<_>>()
    );
    assert_eq!((s[0].dev, s[0].len), (64 * 4096, 5 * 4096));
    assert_eq!((s[1].dev, s[1].len), (8 * 4096, 4096));
    // A range inside the merged pieces is one span too.
    let r = spans(&ext.pieces, 3 * 4096 + 100, 4096);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].dev, 67 * 4096 + 100);
    std::mem::forget(ext);
}

#[test]
fn spans_cover_the_range_in_order_and_respect_chunks() {
    let alloc = crate::sync::Arc::new(Mutex::new(BuddyAllocator::new(0, 1 << 14, 12)));
    let pieces = vec![
        Piece {
            start: 4096,
            order: 9,
        },
        Piece {
            start: 16,
            order: 1,
        },
    ];
    let ext = Extent {
        pieces: pieces.clone(),
        alloc: alloc.clone(),
    };
    let total = (2 << 20) + 8192;
    for (off, len) in [(0, total), (5, 100), ((2 << 20) - 10, 20), (1 << 20, 1)] {
        let s = spans(&ext.pieces, off, len);
        assert_eq!(s.iter().map(|x| x.len).sum::<u64>(), len);
        assert_eq!(s[0].obj_pos, off);
        for w in s.windows(2) {
            assert_eq!(w[0].obj_pos + w[0].len, w[1].obj_pos);
        }
        assert!(s.iter().all(|x| x.len <= IO_CHUNK));
    }
    // Keep the allocator from freeing pieces it never handed out.
    std::mem::forget(ext);
}
