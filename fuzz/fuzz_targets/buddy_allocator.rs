//! Allocator operation sequences against a simple model: no block is ever
//! handed out twice, frees restore the space, and the free count is exact.
#![no_main]
use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use blobcask::internals::BuddyAllocator;
use blobcask::internals::tuple::Piece;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Alloc(u8),
    AllocObject(u32),
    Free(u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    base: u8,
    total: u16,
    max_order: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let total = (input.total as u64 % 5000) + 1;
    let max_order = input.max_order % 10;
    let base = input.base as u64;
    let mut a = BuddyAllocator::new(base, total, max_order);
    let mut held: Vec<Piece> = Vec::new();
    let mut used: BTreeSet<u64> = BTreeSet::new();
    let claim = |p: &Piece, used: &mut BTreeSet<u64>| {
        assert!(p.start >= base && p.start + (1 << p.order) <= base + total, "{p:?} outside the heap");
        for b in p.start..p.start + (1 << p.order) {
            assert!(used.insert(b), "block {b} handed out twice");
        }
    };
    for op in input.ops.into_iter().take(500) {
        match op {
            Op::Alloc(order) => {
                if let Some(p) = a.alloc(order % 12) {
                    claim(&p, &mut used);
                    held.push(p);
                }
            }
            Op::AllocObject(size) => {
                let free_before = a.free_blocks();
                match a.alloc_object(size as u64 % (1 << 24)) {
                    Ok(ps) => {
                        for p in &ps {
                            claim(p, &mut used);
                        }
                        held.extend(ps);
                    }
                    Err(_) => assert_eq!(a.free_blocks(), free_before, "failed allocation kept space"),
                }
            }
            Op::Free(i) => {
                if !held.is_empty() {
                    let p = held.swap_remove(i as usize % held.len());
                    for b in p.start..p.start + (1 << p.order) {
                        used.remove(&b);
                    }
                    a.free(p);
                }
            }
        }
        assert_eq!(a.free_blocks() + used.len() as u64, total, "free count drifted");
    }
});
