//! Room for an object: its heap pieces (and trailer table's), no more than
//! its tuple can list, and the checksum form its tuple gets (`seal`).

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{BLOCK_SIZE, SUPER_BLOCKS};
use crate::meta::block::BLOCK_PAYLOAD;
use crate::meta::tuple::{self, Checksums, Piece, TupleValue, MAX_TUPLE_SUMS};
use crate::store::{Extent, Shared};

/// Allocates the pieces of a `size`-byte object (and its trailer table)
/// whose tuple carries `key`.
pub(crate) fn allocate(shared: &Shared, key: &[u8], size: u64) -> Result<Arc<Extent>> {
    let stored = tuple::stored_len(size);
    // A store that can grow is bounded by its growth limit, not its size.
    let heap_limit = |capacity: u64| capacity.saturating_sub(SUPER_BLOCKS * BLOCK_SIZE as u64);
    let heap = match shared.growth_limit() {
        _ if !shared.engine.resizable() => shared.alloc.lock().total_blocks() * BLOCK_SIZE as u64,
        Some(limit) => heap_limit(limit.max(shared.capacity())),
        None => u64::MAX,
    };
    if stored > heap {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("object of {size} bytes is larger than the store's heap can be ({heap} bytes)"),
        ));
    }
    // Checked before allocating: a tuple must fit one block.
    let per_piece_max = (BLOCK_SIZE as u64) << shared.alloc.lock().max_order();
    let fits = |pieces: usize| {
        let value = TupleValue::Heap {
            pieces: vec![Piece { start: 0, order: 0 }; pieces],
            sums: sums_shape(size),
            unsynced: true,
        };
        // With room for an expiry: whether the object gets one is decided
        // at commit.
        tuple::encoded_len(key.len(), &value, true) <= BLOCK_PAYLOAD
    };
    // A quick bound first (pieces at least 1 per max piece; a piece takes 8
    // bytes of the tuple, so more than a payload's worth never fits and is
    // refused before anything is built for it), exact after.
    let least = stored.div_ceil(per_piece_max);
    if least > (BLOCK_PAYLOAD / 8) as u64 || !fits(least as usize) {
        return Err(too_many_pieces(size, least));
    }
    // The data gets its pieces as if it had no table, and the table its own
    // piece(s) apart: a 1 MiB object stays one 1 MiB piece instead of
    // needing a 2 MiB run for 1 MiB + 4 KiB (the table is read on its own
    // anyway). In object space the table still follows the data. A full
    // heap grows the store file first (`grow`).
    // Room in more pieces than the tuple can list is no room: the heap
    // grows (a store that can) as for a full heap, else `NoSpace` (and a
    // put compacts the heap and tries again).
    let pieces = crate::store::grow::with_room(shared, stored, |a| {
        let mut pieces = a.alloc_object(tuple::table_offset(size))?;
        let table = tuple::table_len(size);
        if table > 0 {
            match a.alloc_object(table) {
                Ok(t) => pieces.extend(t),
                Err(e) => {
                    for p in pieces {
                        a.free(p);
                    }
                    return Err(e);
                }
            }
        }
        if !fits(pieces.len()) {
            let n = pieces.len();
            for p in pieces {
                a.free(p);
            }
            return Err(Error::new(
                ErrorKind::NoSpace,
                format!(
                    "object of {size} bytes would need {n} heap pieces (more than its tuple can list): \
                     the free space is in pieces too small; compaction joins them"
                ),
            ));
        }
        Ok(pieces)
    })?;
    Ok(shared.new_extent(pieces))
}

fn too_many_pieces(size: u64, pieces: u64) -> Error {
    Error::new(
        ErrorKind::TooLarge,
        format!(
            "object of {size} bytes needs {pieces} heap pieces; its tuple would exceed a tuple block ({BLOCK_PAYLOAD} bytes)"
        ),
    )
}

/// The checksum form a `size`-byte object gets (values are placeholders).
fn sums_shape(size: u64) -> Checksums {
    let n = tuple::data_blocks(size) as usize;
    if n > MAX_TUPLE_SUMS {
        Checksums::Table(0)
    } else {
        Checksums::Blocks(vec![0; n].into())
    }
}

/// An object's block checksums in the form its tuple carries, and the
/// trailer table to write when it has one.
pub(crate) fn seal(block_sums: Arc<[u32]>) -> (Checksums, Option<Arc<[u32]>>) {
    if block_sums.len() > MAX_TUPLE_SUMS {
        let crc = crc32c::crc32c(&tuple::encode_table(&block_sums));
        (Checksums::Table(crc), Some(block_sums))
    } else {
        (Checksums::Blocks(block_sums), None)
    }
}
