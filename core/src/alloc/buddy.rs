//! A binary buddy allocator over the heap blocks.
//!
//! Invariants:
//! * a free piece of order `k` starts at a multiple of `2^k` blocks relative
//!   to the heap base, and lies wholly inside the heap;
//! * no two free pieces overlap, and two free buddies of the same order are
//!   always merged (so a free list never holds both halves of a parent);
//! * `free_blocks` equals the sum of the sizes of all free pieces.

use std::collections::BTreeSet;

use crate::error::{Error, ErrorKind, Result};
use crate::meta::tuple::Piece;

/// Power-of-two piece allocator; positions are absolute block numbers.
#[derive(Debug)]
pub struct BuddyAllocator {
    base: u64,
    total: u64,
    max_order: u8,
    /// Free pieces per order, as heap-relative block numbers.
    free: Vec<BTreeSet<u64>>,
    free_blocks: u64,
    /// Pieces freed since it was built: whether anything changed.
    frees: u64,
}

impl BuddyAllocator {
    /// All of `[base, base + total)` free, pieces up to `2^max_order` blocks.
    pub fn new(base: u64, total: u64, max_order: u8) -> Self {
        let mut a = BuddyAllocator {
            base,
            total,
            max_order,
            free: vec![BTreeSet::new(); max_order as usize + 1],
            free_blocks: 0,
            frees: 0,
        };
        let mut pos = 0u64;
        while pos < total {
            let mut k = max_order;
            while k > 0 && (!pos.is_multiple_of(1 << k) || pos + (1 << k) > total) {
                k -= 1;
            }
            a.free_list(k).insert(pos);
            a.free_blocks += 1 << k;
            pos += 1 << k;
        }
        a
    }

    /// Extends the heap to `total` blocks (a larger store file): the new
    /// blocks become free, merged with free buddies at the old end. A
    /// smaller or equal `total` changes nothing.
    pub fn grow(&mut self, total: u64) {
        let mut pos = self.total;
        if total <= pos {
            return;
        }
        self.total = total;
        while pos < total {
            let mut k = self.max_order;
            while k > 0 && (!pos.is_multiple_of(1 << k) || pos + (1 << k) > total) {
                k -= 1;
            }
            self.free(Piece {
                start: self.base + pos,
                order: k,
            });
            pos += 1 << k;
        }
    }

    /// Largest order handed out.
    pub fn max_order(&self) -> u8 {
        self.max_order
    }

    /// Pieces freed so far (a counter: compare two readings to learn
    /// whether anything was freed between them).
    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// Blocks currently free.
    pub fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// Blocks managed in total.
    pub fn total_blocks(&self) -> u64 {
        self.total
    }

    /// Order of the largest free piece, if any.
    pub fn largest_free_order(&self) -> Option<u8> {
        (0..=self.max_order)
            .rev()
            .find(|&k| self.free.get(k as usize).is_some_and(|l| !l.is_empty()))
    }

    /// The free list of order `k`.
    #[expect(
        clippy::indexing_slicing,
        reason = "`free` holds max_order + 1 lists (built in `new`, never resized) and every \
                  caller passes k <= max_order: the orders it walks are bounded by max_order, \
                  and pieces are checked against max_order before their order is used"
    )]
    fn free_list(&mut self, k: u8) -> &mut BTreeSet<u64> {
        debug_assert!(k <= self.max_order);
        &mut self.free[k as usize]
    }

    /// Allocates one piece of `2^order` blocks (lowest address first).
    pub fn alloc(&mut self, order: u8) -> Option<Piece> {
        if order > self.max_order {
            return None;
        }
        let from = (order..=self.max_order)
            .find(|&k| self.free.get(k as usize).is_some_and(|l| !l.is_empty()))?;
        let rel = self.free_list(from).pop_first()?;
        Some(self.take(rel, from, order))
    }

    /// Takes the start of the free piece at `rel` of order `from`, already
    /// out of its list, as a piece of `order`: the upper halves split off
    /// go back to the free lists.
    fn take(&mut self, rel: u64, from: u8, order: u8) -> Piece {
        for k in (order..from).rev() {
            self.free_list(k).insert(rel + (1 << k));
        }
        self.free_blocks -= 1 << order;
        Piece {
            start: self.base + rel,
            order,
        }
    }

    /// Allocates one piece of `2^order` blocks at the lowest free address,
    /// cut from a free piece of order at most `split_at_most`, and only if
    /// it ends at or before block `limit` (absolute): where compaction
    /// moves an object's piece. `None`, with nothing taken, when no such
    /// piece is free.
    pub fn alloc_below(&mut self, order: u8, limit: u64, split_at_most: u8) -> Option<Piece> {
        if order > self.max_order {
            return None;
        }
        // The lowest free piece that can hold the order is the lowest of
        // the first pieces of the lists of that order and above; the piece
        // is cut from its start.
        let (from, rel) = (order..=split_at_most.min(self.max_order))
            .filter_map(|k| Some((k, *self.free.get(k as usize)?.first()?)))
            .min_by_key(|&(_, rel)| rel)?;
        if self.base + rel + (1u64 << order) > limit {
            return None;
        }
        self.free_list(from).remove(&rel);
        Some(self.take(rel, from, order))
    }

    /// The order `piece` (allocated) would reach if it were freed now,
    /// merged with its free buddies.
    pub fn merged_order(&self, piece: Piece) -> u8 {
        let Some(mut rel) = piece.start.checked_sub(self.base) else {
            return piece.order;
        };
        let mut k = piece.order;
        while k < self.max_order {
            let buddy = rel ^ (1 << k);
            if !self
                .free
                .get(k as usize)
                .is_some_and(|l| l.contains(&buddy))
            {
                break;
            }
            rel = rel.min(buddy);
            k += 1;
        }
        k
    }

    /// Returns a piece, merging it with its free buddies.
    /// Pieces come from `alloc` or passed `mark_allocated`; any other is
    /// ignored (a bug, caught by the debug assertion).
    pub fn free(&mut self, piece: Piece) {
        if piece.start < self.base || piece.order > self.max_order {
            debug_assert!(false, "freeing a piece outside the heap: {piece:?}");
            return;
        }
        let mut rel = piece.start - self.base;
        let mut k = piece.order;
        self.free_blocks += 1 << k;
        self.frees += 1;
        while k < self.max_order {
            let buddy = rel ^ (1 << k);
            if !self.free_list(k).remove(&buddy) {
                break;
            }
            rel = rel.min(buddy);
            k += 1;
        }
        self.free_list(k).insert(rel);
    }

    /// Marks a specific piece as allocated (rebuild at open). Fails with
    /// `Corrupt` when the piece is outside the heap, misaligned, or overlaps
    /// a piece already marked.
    pub fn mark_allocated(&mut self, piece: Piece) -> Result<()> {
        let bad = |why: &str| {
            Error::new(
                ErrorKind::Corrupt,
                format!("piece at block {} order {} {why}", piece.start, piece.order),
            )
        };
        if piece.order > self.max_order || piece.start < self.base {
            return Err(bad("is outside the heap"));
        }
        let rel = piece.start - self.base;
        let size = 1u64 << piece.order;
        if !rel.is_multiple_of(size) || rel + size > self.total {
            return Err(bad("is misaligned or past the end"));
        }
        // Find the free piece that contains it.
        let mut found = None;
        for k in piece.order..=self.max_order {
            let parent = rel & !((1u64 << k) - 1);
            if self
                .free
                .get(k as usize)
                .is_some_and(|l| l.contains(&parent))
            {
                found = Some((k, parent));
                break;
            }
        }
        let Some((mut k, mut at)) = found else {
            return Err(bad("overlaps another live piece"));
        };
        self.free_list(k).remove(&at);
        // Split towards the target, freeing the halves that do not contain it.
        while k > piece.order {
            k -= 1;
            let half = 1u64 << k;
            if rel >= at + half {
                self.free_list(k).insert(at);
                at += half;
            } else {
                self.free_list(k).insert(at + half);
            }
        }
        self.free_blocks -= size;
        Ok(())
    }

    /// Allocates the pieces for an object of `size` bytes: as many max-order
    /// pieces as fit, then the tail split into the binary digits of its block
    /// count, so waste is under one block. The tail's pieces lie back to back
    /// (one device range) whenever a piece of the next power of two is free.
    /// When a piece of some order is not
    /// available the request falls back to two of the order below, so free
    /// but fragmented space is still used. All-or-nothing: on `NoSpace`
    /// nothing stays allocated.
    pub fn alloc_object(&mut self, size: u64) -> Result<Vec<Piece>> {
        let blocks = size.div_ceil(crate::format::BLOCK_SIZE as u64);
        if blocks > self.free_blocks {
            return Err(self.no_space(size));
        }
        let mut out = Vec::new();
        let max = 1u64 << self.max_order;
        let mut wanted: Vec<u8> = Vec::new();
        for _ in 0..blocks / max {
            wanted.push(self.max_order);
        }
        let tail = blocks % max;
        let mut tail_orders: Vec<u8> = Vec::new();
        for k in (0..self.max_order).rev() {
            if tail & (1 << k) != 0 {
                tail_orders.push(k);
            }
        }
        for order in wanted {
            if !self.alloc_split(order, &mut out) {
                return Err(self.undo(out, size));
            }
        }
        if !self.alloc_tail_contiguous(tail, &tail_orders, &mut out) {
            for order in tail_orders {
                if !self.alloc_split(order, &mut out) {
                    return Err(self.undo(out, size));
                }
            }
        }
        Ok(out)
    }

    /// Places a tail of several pieces back to back, so the object's end is
    /// one device range (one read): takes one piece of the next power of
    /// two, carves the tail's pieces from its start (largest first, each
    /// aligned to its own size) and frees the rest. False, with nothing
    /// taken, when the tail is a single piece or no such piece is free; the
    /// caller then takes the pieces wherever they are (no space is lost).
    fn alloc_tail_contiguous(&mut self, tail: u64, orders: &[u8], out: &mut Vec<Piece>) -> bool {
        if orders.len() < 2 {
            return false;
        }
        let span_order = (u64::BITS - (tail - 1).leading_zeros()) as u8;
        if span_order > self.max_order {
            return false;
        }
        let Some(span) = self.alloc(span_order) else {
            return false;
        };
        let mut at = 0u64;
        for &k in orders {
            out.push(Piece {
                start: span.start + at,
                order: k,
            });
            at += 1 << k;
        }
        // Free the remainder as the largest aligned pieces that fit.
        let end = 1u64 << span_order;
        while at < end {
            let k =
                (at.trailing_zeros() as u8).min((u64::BITS - 1 - (end - at).leading_zeros()) as u8);
            self.free(Piece {
                start: span.start + at,
                order: k,
            });
            at += 1 << k;
        }
        true
    }

    fn undo(&mut self, out: Vec<Piece>, size: u64) -> Error {
        for p in out {
            self.free(p);
        }
        self.no_space(size)
    }

    fn alloc_split(&mut self, order: u8, out: &mut Vec<Piece>) -> bool {
        if let Some(p) = self.alloc(order) {
            out.push(p);
            return true;
        }
        order > 0 && self.alloc_split(order - 1, out) && self.alloc_split(order - 1, out)
    }

    fn no_space(&self, size: u64) -> Error {
        Error::new(
            ErrorKind::NoSpace,
            format!(
                "no room for {size} bytes: {} bytes free in the heap",
                self.free_blocks * crate::format::BLOCK_SIZE as u64
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn check(a: &BuddyAllocator) {
        let mut sum = 0;
        let mut spans = vec![];
        for (k, set) in a.free.iter().enumerate() {
            for &rel in set {
                assert_eq!(rel % (1 << k), 0, "misaligned free piece");
                assert!(rel + (1 << k) <= a.total);
                if k < a.max_order as usize {
                    assert!(!set.contains(&(rel ^ (1 << k))), "unmerged buddies");
                }
                sum += 1 << k;
                spans.push((rel, rel + (1 << k)));
            }
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "free pieces overlap");
        }
        assert_eq!(sum, a.free_blocks);
    }

    #[test]
    fn alloc_below_takes_the_lowest_free_place_or_nothing() {
        let mut a = BuddyAllocator::new(2, 64, 4);
        let all: Vec<Piece> = (0..64).map(|_| a.alloc(0).unwrap()).collect();
        // Free blocks 40..44 (an order-2 hole) and 10 (an order-0 one).
        for p in all
            .iter()
            .filter(|p| (42..46).contains(&p.start) || p.start == 12)
        {
            a.free(*p);
        }
        check(&a);
        // Block 13's piece would merge with the free block 12 into order 1.
        assert_eq!(a.merged_order(all[11]), 1);
        assert_eq!(a.merged_order(all[1]), 0);
        let at = |start, order| Some(Piece { start, order });
        // Order 0 goes to the lowest hole, even though a larger one exists.
        assert_eq!(a.alloc_below(0, 66, 4), at(12, 0));
        // Order 2 only fits the upper hole: refused below it, taken at it.
        assert_eq!(a.alloc_below(2, 45, 4), None);
        assert_eq!(a.free_blocks(), 4, "a refusal takes nothing");
        // Not cut from a piece larger than allowed.
        assert_eq!(a.alloc_below(0, 66, 1), None);
        assert_eq!(a.alloc_below(2, 46, 2), at(42, 2));
        assert_eq!(a.free_blocks(), 0);
        assert_eq!(a.alloc_below(0, u64::MAX, 4), None);
        check(&a);
    }

    #[test]
    fn odd_sized_heap_is_fully_usable() {
        let a = BuddyAllocator::new(2, 1000, 6);
        check(&a);
        assert_eq!(a.free_blocks(), 1000);
    }

    #[test]
    fn object_waste_is_under_one_block() {
        let mut a = BuddyAllocator::new(0, 1 << 14, 8);
        for size in [
            1u64,
            4095,
            4096,
            4097,
            40_000,
            1 << 20,
            (1 << 20) + 1,
            3 << 22,
        ] {
            let pieces = a.alloc_object(size).unwrap();
            let got: u64 = pieces.iter().map(|p| p.len_bytes()).sum();
            assert!(got >= size && got - size < 4096, "size {size} got {got}");
            for p in pieces {
                a.free(p);
            }
            check(&a);
        }
        assert_eq!(a.free_blocks(), 1 << 14);
    }

    #[test]
    fn a_multi_piece_tail_lies_back_to_back_and_the_rest_is_freed() {
        let mut a = BuddyAllocator::new(0, 1 << 10, 8);
        // A one-block piece left free at the bottom, where the piece-by-piece
        // policy would put the tail.
        let low = a.alloc(0).unwrap();
        let _hold = a.alloc(0).unwrap();
        a.free(low);
        // 5 blocks: 4 + 1, contiguous; 3 blocks of its 8-block span free.
        let pieces = a.alloc_object(5 * 4096).unwrap();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].start + 4, pieces[1].start, "{pieces:?}");
        assert_eq!(a.free_blocks(), (1 << 10) - 1 - 5);
        check(&a);
        // 300 blocks = 256 + 32 + 8 + 4: the 44-block tail is contiguous.
        let big = a.alloc_object(300 * 4096).unwrap();
        for w in big[1..].windows(2) {
            assert_eq!(w[0].start + (1 << w[0].order), w[1].start, "{big:?}");
        }
        check(&a);
    }

    #[test]
    fn fragmented_space_is_still_used() {
        let mut a = BuddyAllocator::new(0, 64, 4);
        let all: Vec<_> = (0..64).map(|_| a.alloc(0).unwrap()).collect();
        for p in all.iter().step_by(2) {
            a.free(*p);
        }
        // 32 free single blocks, no two adjacent: 8 blocks still fit.
        let pieces = a.alloc_object(8 * 4096).unwrap();
        assert_eq!(pieces.len(), 8);
        check(&a);
    }

    #[test]
    fn no_space_allocates_nothing() {
        let mut a = BuddyAllocator::new(0, 16, 4);
        let _keep = a.alloc(3).unwrap();
        let err = a.alloc_object(9 * 4096).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NoSpace);
        assert_eq!(a.free_blocks(), 8);
        check(&a);
    }

    #[test]
    fn mark_allocated_rebuilds_and_detects_overlap() {
        let mut live = BuddyAllocator::new(10, 500, 5);
        let pieces: Vec<_> = (0..40)
            .map(|i| live.alloc((i % 4) as u8).unwrap())
            .collect();
        let mut rebuilt = BuddyAllocator::new(10, 500, 5);
        for p in &pieces {
            rebuilt.mark_allocated(*p).unwrap();
        }
        check(&rebuilt);
        assert_eq!(rebuilt.free_blocks(), live.free_blocks());
        let err = rebuilt.mark_allocated(pieces[3]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        let outside = Piece { start: 9, order: 0 };
        assert_eq!(
            rebuilt.mark_allocated(outside).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }

    #[test]
    fn random_alloc_free_sequences_keep_invariants() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut a = BuddyAllocator::new(3, 3000, 7);
        let mut held: Vec<Vec<Piece>> = vec![];
        for _ in 0..3000 {
            if rng.random_bool(0.55) {
                let size = rng.random_range(0..600_000u64);
                if let Ok(p) = a.alloc_object(size) {
                    held.push(p);
                }
            } else if !held.is_empty() {
                let i = rng.random_range(0..held.len());
                for p in held.swap_remove(i) {
                    a.free(p);
                }
            }
        }
        check(&a);
        for ps in held.drain(..) {
            for p in ps {
                a.free(p);
            }
        }
        check(&a);
        assert_eq!(a.free_blocks(), 3000);
    }

    #[test]
    fn growth_frees_the_new_blocks_and_merges_them_with_the_old_end() {
        // 6 blocks: free as 4 + 2; one block taken at the end.
        let mut a = BuddyAllocator::new(2, 6, 3);
        let last = a.alloc(0).unwrap();
        assert_eq!(a.free_blocks(), 5);
        a.grow(16);
        assert_eq!(a.total_blocks(), 16);
        assert_eq!(a.free_blocks(), 15);
        // Blocks 8..16 are one free max-order piece, and 0..8 merges once
        // the taken block comes back.
        a.free(last);
        assert_eq!(a.free_blocks(), 16);
        assert_eq!(a.alloc(3).unwrap().start, 2);
        assert_eq!(a.alloc(3).unwrap().start, 10);
        assert!(a.alloc(0).is_none());
        // Growing to a smaller size does nothing.
        a.grow(4);
        assert_eq!(a.total_blocks(), 16);
    }
}
