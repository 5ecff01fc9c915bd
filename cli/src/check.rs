//! Read-only verification of a store file: superblock, every tuple block
//! (both slots), duplicate keys, pieces against each other (rebuilding the
//! allocator), and the CRC32C of every checksummed object. Nothing is
//! written, so it is safe on a store that did not shut down cleanly.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use blobcask::alloc::BuddyAllocator;
use blobcask::format::{Superblock, BLOCK_SIZE, SUPER_BLOCKS};
use blobcask::meta::block::{choose_slot, decode_slot, SlotContent, SlotIdentity};
use blobcask::meta::tuple::{Piece, Tuple, TupleValue};

/// What a scan found.
#[derive(Default)]
pub struct Report {
    pub blocks: u64,
    pub blocks_in_use: u64,
    pub objects: u64,
    pub verified: u64,
    pub logical_bytes: u64,
    pub largest_free: u64,
    pub problems: Vec<String>,
}

fn read(file: &File, offset: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| format!("reading {len} bytes at {offset}: {e}"))?;
    Ok(buf)
}

pub fn scan(path: &Path) -> Result<Report, String> {
    let file = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let head = read(&file, 0, 2 * BLOCK_SIZE)?;
    let mut report = Report::default();
    let slots = [
        Superblock::decode(&head[..BLOCK_SIZE]),
        Superblock::decode(&head[BLOCK_SIZE..]),
    ];
    for (i, s) in slots.iter().enumerate() {
        if let Err(e) = s {
            report.problems.push(format!("superblock slot {i}: {e}"));
        }
    }
    let sb = slots
        .into_iter()
        .filter_map(|s| s.ok().flatten())
        .max_by_key(|s| s.seq)
        .ok_or_else(|| "not a blobcask store (no valid superblock)".to_string())?;
    let total = sb.total_blocks();
    let mut alloc = BuddyAllocator::new(SUPER_BLOCKS, total - SUPER_BLOCKS, sb.max_order);
    let mut winners: HashMap<Box<[u8]>, Tuple> = HashMap::new();
    let mut block_no = 0u32;
    for e in &sb.meta_extents {
        if let Err(err) = alloc.mark_allocated(Piece {
            start: e.start,
            order: e.order,
        }) {
            report
                .problems
                .push(format!("metadata extent at block {}: {err}", e.start));
            continue;
        }
        let bytes = read(&file, e.start * BLOCK_SIZE as u64, BLOCK_SIZE << e.order)?;
        for pair in bytes.chunks_exact(2 * BLOCK_SIZE) {
            let id = SlotIdentity {
                store_id: sb.store_id,
                block_no,
            };
            let slots = [
                decode_slot(id, &pair[..BLOCK_SIZE]),
                decode_slot(id, &pair[BLOCK_SIZE..]),
            ];
            report.blocks += 1;
            match choose_slot(&slots) {
                Err(err) => report
                    .problems
                    .push(format!("tuple block {block_no}: {err}")),
                Ok(None) => {}
                Ok(Some(w)) => {
                    if let SlotContent::Valid { tuples, .. } = &slots[w] {
                        if !tuples.is_empty() {
                            report.blocks_in_use += 1;
                        }
                        for t in tuples {
                            let newer = winners
                                .get(&t.key)
                                .is_none_or(|old| old.version < t.version);
                            if newer {
                                winners.insert(t.key.clone(), t.clone());
                            }
                        }
                    }
                }
            }
            block_no += 1;
        }
    }
    for (key, t) in &winners {
        report.objects += 1;
        report.logical_bytes += t.size;
        let TupleValue::Heap { pieces, crc } = &t.value else {
            continue;
        };
        let shown = String::from_utf8_lossy(key);
        let mut ok = true;
        for p in pieces {
            if let Err(err) = alloc.mark_allocated(*p) {
                report.problems.push(format!("{shown}: {err}"));
                ok = false;
            }
        }
        if let (true, Some(crc)) = (ok, crc) {
            let mut sum = 0u32;
            let mut left = t.size;
            for p in pieces {
                let n = left.min(p.len_bytes());
                sum = crc32c::crc32c_append(sum, &read(&file, p.offset(), n as usize)?);
                left -= n;
            }
            if sum == *crc {
                report.verified += 1;
            } else {
                report.problems.push(format!(
                    "{shown}: data does not match its checksum (bytes that never reached the disk; the next open rolls its group back)"
                ));
            }
        }
    }
    report.largest_free = alloc
        .largest_free_order()
        .map_or(0, |k| (BLOCK_SIZE as u64) << k);
    Ok(report)
}
