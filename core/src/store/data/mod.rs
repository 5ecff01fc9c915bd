//! Moving object bytes between user buffers and heap pieces, and checking
//! them on the way back.
//!
//! Large transfers are cut into `IO_CHUNK` requests with up to `IO_DEPTH` in
//! flight, so a multi-gigabyte object never needs a buffer of its size and
//! the device sees a deep sequential queue. A range read that falls inside
//! one chunk (the common case for small ranges) is one device read and is
//! returned without a copy.
//!
//! Integrity (invariant 5, `core/INVARIANTS.md`): every 4 KiB data block of
//! an object has a CRC32C written with it, in the tuple for small objects
//! and in a trailer table after the data for large ones (`meta::tuple`).
//! Every read checks each block it returns before returning it; a mismatch
//! is `Corrupt` naming the object offset. Reads of whole device blocks are
//! what direct I/O does anyway, so checking costs no extra device read; a
//! trailer table is read once (concurrently with the data) and cached.

mod pieces;
mod read;
#[cfg(test)]
mod tests;
mod verify;
mod write;

pub(crate) use pieces::{allocate, seal};
pub(crate) use read::{read_range, read_range_blocking, BlockReader, ObjectRef, ReadAhead};
pub(crate) use verify::{load_table, verify_object};
pub(crate) use write::{
    prepare_write, segments, write_object, write_object_blocking, write_range_holding,
    write_segments, write_table, HeldWrite,
};

use std::sync::Arc;

use crate::meta::tuple::Piece;

/// Largest single device request.
pub(crate) const IO_CHUNK: u64 = 1 << 20;
/// Device requests in flight per transfer.
const IO_DEPTH: usize = 16;
/// Bytes of trailer tables kept decoded in RAM (one 4-byte checksum per
/// 4 KiB block: 32 MiB of tables cover 32 GiB of large objects).
pub(crate) const TABLE_CACHE_BYTES: u64 = 32 << 20;

/// Cache of trailer tables by object version (versions are never reused,
/// so an entry can never describe another object's bytes).
pub(crate) type TableCache = quick_cache::sync::Cache<u64, Arc<[u32]>, TableWeight>;

/// Weighs a cached table by its bytes.
#[derive(Clone)]
pub(crate) struct TableWeight;

impl quick_cache::Weighter<u64, Arc<[u32]>> for TableWeight {
    fn weight(&self, _key: &u64, val: &Arc<[u32]>) -> u64 {
        4 * val.len() as u64 + 16
    }
}

pub(crate) fn new_table_cache() -> TableCache {
    TableCache::with_weighter(1024, TABLE_CACHE_BYTES, TableWeight)
}

/// One device request: `len` bytes of the object at `obj_pos` live at
/// device byte `dev`.
#[derive(Debug, Clone, Copy)]
struct Span {
    obj_pos: u64,
    dev: u64,
    len: u64,
}

/// Splits the object range `[offset, offset + len)` into device spans of at
/// most `IO_CHUNK` bytes, in object order.
fn spans(pieces: &[Piece], offset: u64, len: u64) -> Vec<Span> {
    let end = offset + len;
    let mut out = Vec::new();
    let mut piece_start = 0u64;
    for p in pieces {
        let piece_end = piece_start + p.len_bytes();
        let lo = offset.max(piece_start);
        let hi = end.min(piece_end);
        let mut pos = lo;
        while pos < hi {
            // Chunk boundaries fall on multiples of IO_CHUNK within the
            // piece, so every span but the first starts block-aligned.
            let chunk_end = ((pos - piece_start) / IO_CHUNK + 1) * IO_CHUNK + piece_start;
            let stop = hi.min(chunk_end);
            out.push(Span {
                obj_pos: pos,
                dev: p.offset() + (pos - piece_start),
                len: stop - pos,
            });
            pos = stop;
        }
        piece_start = piece_end;
        if piece_start >= end {
            break;
        }
    }
    if out.len() < 2 {
        // Nothing to merge: one span, the common read.
        return out;
    }
    // Pieces that lie back to back on the device (the allocator places an
    // object's tail that way) are one request, up to IO_CHUNK.
    let mut merged: Vec<Span> = Vec::with_capacity(out.len());
    for s in out {
        if let Some(last) = merged.last_mut() {
            if last.dev + last.len == s.dev
                && last.obj_pos + last.len == s.obj_pos
                && last.len + s.len <= IO_CHUNK
            {
                last.len += s.len;
                continue;
            }
        }
        merged.push(s);
    }
    merged
}
