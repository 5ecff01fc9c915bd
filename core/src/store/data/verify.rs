//! Checking what is read (invariant 5): each block against its checksum,
//! a large object's trailer table read, checked and cached, and a whole
//! object read back for a scrub.

use std::sync::Arc;

use super::{spans, TableCache, TableWeight, IO_CHUNK};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::IoEngine;
use crate::meta::tuple::{self, TupleValue};

use super::read::{read_range, read_spans, BlockReader, ObjectRef, ReadSpan};

/// Checks every data block a span read touches against `table`: `Err` with
/// the object offset of the first block that does not match.
pub(super) fn verify_span(
    table: &[u32],
    size: u64,
    r: &ReadSpan,
) -> std::result::Result<(), (u64, u64)> {
    let bs = BLOCK_SIZE as u64;
    let base = r.span.obj_pos - r.skip as u64;
    let first = base / bs;
    let last = (r.span.obj_pos + r.span.len - 1) / bs;
    let bytes = &r.buf[..];
    for j in first..=last {
        let start = j * bs;
        let end = (start + bs).min(size);
        let chunk = bytes.get((start - base) as usize..(end - base) as usize);
        let ok = match (chunk, table.get(j as usize)) {
            (Some(chunk), Some(&want)) => crc32c::crc32c(chunk) == want,
            _ => false,
        };
        if !ok {
            return Err((start, r.span.dev - r.skip as u64 + (start - base)));
        }
    }
    Ok(())
}

pub(super) fn damaged(obj_offset: u64, dev: u64) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!(
            "data block at object offset {obj_offset} (device byte {dev}) does not match its checksum; \
             the object is damaged: restore it from a backup or write it again"
        ),
    )
}

/// Reads, checks and caches the trailer table of a large object.
pub(crate) async fn load_table<R: BlockReader + ?Sized>(
    dev: &R,
    tables: Option<&TableCache>,
    obj: &ObjectRef<'_>,
    crc: u32,
) -> Result<Arc<[u32]>> {
    if let Some(t) = tables.and_then(|c| c.get(&obj.version)) {
        return Ok(t);
    }
    let at = tuple::table_offset(obj.size);
    let len = tuple::table_len(obj.size);
    let reads = read_spans(dev, spans(obj.pieces, at, len)).await?;
    let mut bytes = Vec::with_capacity(len as usize);
    for r in &reads {
        bytes.extend_from_slice(r.bytes()?);
    }
    if bytes.len() as u64 != len || crc32c::crc32c(&bytes) != crc {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the checksum table after the object's data (object offset {at}) does not match its checksum; \
                 the object is damaged: restore it from a backup or write it again"
            ),
        ));
    }
    let table: Arc<[u32]> = tuple::decode_table(&bytes).into();
    if let Some(c) = tables {
        c.insert(obj.version, table.clone());
    }
    Ok(table)
}

/// Reads a whole heap object and checks every byte (scrub, and recovery of
/// the newest group): `Ok(None)` when intact, `Ok(Some(why))` when not.
pub(crate) async fn verify_object(
    engine: &dyn IoEngine,
    tuple: &crate::meta::tuple::Tuple,
) -> Result<Option<String>> {
    let TupleValue::Heap { pieces, sums, .. } = &tuple.value else {
        return Ok(None);
    };
    let obj = ObjectRef {
        pieces,
        size: tuple.size,
        sums,
        version: tuple.version,
    };
    // Bounded memory: the object is checked 16 MiB at a time; its trailer
    // table is read once.
    let local = TableCache::with_weighter(4, 1 << 30, TableWeight);
    let mut at = 0;
    while at < tuple.size || (at == 0 && tuple.size == 0) {
        let n = (tuple.size - at).min(16 * IO_CHUNK);
        match read_range(engine, Some(&local), &obj, at, n).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Corrupt => return Ok(Some(e.message().to_string())),
            Err(e) => return Err(e),
        }
        if n == 0 {
            break;
        }
        at += n;
    }
    Ok(None)
}
