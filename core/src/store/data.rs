//! Moving object bytes between user buffers and heap pieces.
//!
//! Large transfers are cut into `IO_CHUNK` requests with up to `IO_DEPTH` in
//! flight, so a multi-gigabyte object never needs a buffer of its size and
//! the device sees a deep sequential queue. A range read that falls inside
//! one chunk (the common case for small ranges) is one device read and is
//! returned without a copy.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::{Extent, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::{round_up, AlignedBuf};
use crate::meta::block::BLOCK_PAYLOAD;
use crate::meta::tuple::{self, TupleValue};

/// Largest single device request.
pub(crate) const IO_CHUNK: u64 = 1 << 20;
/// Device requests in flight per transfer.
const IO_DEPTH: usize = 16;

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
fn spans(extent: &Extent, offset: u64, len: u64) -> Vec<Span> {
    let end = offset + len;
    let mut out = Vec::new();
    let mut piece_start = 0u64;
    for p in &extent.pieces {
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

/// Allocates the pieces of a `size`-byte object whose tuple carries `key`.
pub(crate) fn allocate(shared: &Shared, key: &[u8], size: u64) -> Result<Arc<Extent>> {
    let heap = shared.alloc.lock().total_blocks() * BLOCK_SIZE as u64;
    if size > heap {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("object of {size} bytes is larger than the store's heap ({heap} bytes)"),
        ));
    }
    let pieces = shared.alloc.lock().alloc_object(size)?;
    let extent = shared.new_extent(pieces);
    // Sized with a checksum, the larger of the two heap tuple forms.
    let value = TupleValue::Heap {
        pieces: extent.pieces.clone(),
        crc: Some(0),
    };
    let need = tuple::encoded_len(key.len(), &value);
    if need > BLOCK_PAYLOAD {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "object of {size} bytes needs {} heap pieces; its tuple ({need} bytes) exceeds a tuple block ({BLOCK_PAYLOAD} bytes)",
                extent.pieces.len()
            ),
        ));
    }
    Ok(extent)
}

/// Chunks at least this large are copied into aligned memory on the
/// blocking pool, so copies run in parallel with each other and with the
/// device instead of serialising on the task that submits the writes.
const PARALLEL_COPY: u64 = 256 << 10;

/// Writes `data` at object offset `offset` (block-aligned) into the extent.
/// The tail of the last block is zero-padded.
pub(crate) async fn write_range(
    shared: &Shared,
    extent: &Extent,
    offset: u64,
    data: &Bytes,
) -> Result<()> {
    debug_assert_eq!(offset % BLOCK_SIZE as u64, 0);
    let engine = &shared.engine;
    futures::stream::iter(spans(extent, offset, data.len() as u64))
        .map(|s| {
            let at = (s.obj_pos - offset) as usize;
            let part = data.slice(at..at + s.len as usize);
            let padded = round_up(s.len as usize, BLOCK_SIZE);
            shared
                .device_bytes_written
                .fetch_add(padded as u64, Ordering::Relaxed);
            async move {
                let mut buf = if s.len >= PARALLEL_COPY {
                    blocking::unblock(move || AlignedBuf::copy_from(&part)).await
                } else {
                    AlignedBuf::copy_from(&part)
                };
                buf.set_len(padded);
                let (r, _) = engine.write_at(buf, s.dev).await;
                r.map_err(|e| Error::io(format!("writing object data at device byte {}", s.dev), e))
            }
        })
        .buffer_unordered(IO_DEPTH)
        // Every write runs to completion even after one fails: the caller
        // frees the pieces on error, and a write still in flight must not
        // land in space that was handed to another object (invariant 2).
        .collect::<Vec<Result<()>>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// Writes a whole value into a freshly allocated extent.
pub(crate) async fn write_object(shared: &Shared, extent: &Extent, value: &Bytes) -> Result<()> {
    write_range(shared, extent, 0, value).await
}

/// [`write_object`] on the calling thread: a value that fits one device
/// request is one `pwrite`; larger ones run the async path to completion.
pub(crate) fn write_object_blocking(shared: &Shared, extent: &Extent, value: &Bytes) -> Result<()> {
    let parts = spans(extent, 0, value.len() as u64);
    let [s] = parts[..] else {
        return futures::executor::block_on(write_range(shared, extent, 0, value));
    };
    let mut buf = AlignedBuf::copy_from(value);
    let padded = round_up(s.len as usize, BLOCK_SIZE);
    buf.set_len(padded);
    shared
        .device_bytes_written
        .fetch_add(padded as u64, Ordering::Relaxed);
    let (r, _) = shared.engine.write_at_blocking(buf, s.dev);
    r.map_err(|e| Error::io(format!("writing object data at device byte {}", s.dev), e))
}

/// Where a whole value goes: (device offset, bytes) per span, block-aligned.
pub(crate) fn segments(extent: &Extent, value: &Bytes) -> Vec<(u64, Bytes)> {
    spans(extent, 0, value.len() as u64)
        .into_iter()
        .map(|s| {
            let at = s.obj_pos as usize;
            (s.dev, value.slice(at..at + s.len as usize))
        })
        .collect()
}

/// Longest run of adjacent segments written as one request.
const RUN_MAX: u64 = 1 << 20;

/// Writes many values' segments with as few, as large requests as possible:
/// segments are sorted by device offset and adjacent ones (each padded to
/// its block) are merged into runs of up to `RUN_MAX` bytes. A bulk load into
/// fresh space thus becomes a sequential stream of large writes.
pub(crate) async fn write_segments(shared: &Shared, mut segs: Vec<(u64, Bytes)>) -> Result<()> {
    segs.sort_unstable_by_key(|(dev, _)| *dev);
    let block = BLOCK_SIZE as u64;
    let mut runs: Vec<(u64, Vec<(u64, Bytes)>)> = Vec::new();
    let mut run_end = 0u64;
    for (dev, bytes) in segs {
        let padded = (bytes.len() as u64).div_ceil(block) * block;
        match runs.last_mut() {
            Some((start, members)) if dev == run_end && run_end + padded - *start <= RUN_MAX => {
                members.push((dev, bytes));
            }
            _ => runs.push((dev, vec![(dev, bytes)])),
        }
        run_end = dev + padded;
    }
    let engine = &shared.engine;
    futures::stream::iter(runs)
        .map(|(start, members)| {
            let end = members
                .last()
                .map(|(dev, b)| dev + (b.len() as u64).div_ceil(block) * block)
                .unwrap_or(start);
            let len = (end - start) as usize;
            shared
                .device_bytes_written
                .fetch_add(len as u64, Ordering::Relaxed);
            async move {
                let fill = move || {
                    let parts: Vec<(usize, &[u8])> = members
                        .iter()
                        .map(|(dev, b)| ((dev - start) as usize, &b[..]))
                        .collect();
                    AlignedBuf::gather(len, &parts)
                };
                let buf = if len as u64 >= PARALLEL_COPY {
                    blocking::unblock(fill).await
                } else {
                    fill()
                };
                let (r, _) = engine.write_at(buf, start).await;
                r.map_err(|e| Error::io(format!("writing loaded data at device byte {start}"), e))
            }
        })
        .buffer_unordered(IO_DEPTH)
        // Every write runs to completion even after one fails: the caller
        // frees the pieces on error, and a write still in flight must not
        // land in space that was handed to another object (invariant 2).
        .collect::<Vec<Result<()>>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// Reads `len` bytes at object offset `offset` (already clipped).
pub(crate) async fn read_range(
    shared: &Shared,
    extent: &Extent,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    let engine = &shared.engine;
    let read_span = |s: Span| {
        let dev_start = s.dev & !(BLOCK_SIZE as u64 - 1);
        let skip = (s.dev - dev_start) as usize;
        let buf = AlignedBuf::zeroed(round_up(skip + s.len as usize, BLOCK_SIZE));
        let fut = engine.read_at(buf, dev_start);
        async move {
            let (r, buf) = fut.await;
            r.map_err(|e| Error::io(format!("reading object data at device byte {dev_start}"), e))?;
            Ok::<_, Error>((s, skip, buf))
        }
    };
    let parts = spans(extent, offset, len);
    if let [one] = parts[..] {
        let (s, skip, buf) = read_span(one).await?;
        return Ok(Bytes::from_owner(buf).slice(skip..skip + s.len as usize));
    }
    let mut out = BytesMut::zeroed(len as usize);
    let mut reads = futures::stream::iter(parts)
        .map(read_span)
        .buffer_unordered(IO_DEPTH);
    while let Some(r) = reads.next().await {
        let (s, skip, buf) = r?;
        let at = (s.obj_pos - offset) as usize;
        out[at..at + s.len as usize].copy_from_slice(&buf.as_slice()[skip..skip + s.len as usize]);
    }
    Ok(out.freeze())
}

/// [`read_range`] on the calling thread: a range inside one device request
/// is one synchronous read; larger ones run the async path to completion.
pub(crate) fn read_range_blocking(
    shared: &Shared,
    extent: &Extent,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    let parts = spans(extent, offset, len);
    let [s] = parts[..] else {
        return futures::executor::block_on(read_range(shared, extent, offset, len));
    };
    let dev_start = s.dev & !(BLOCK_SIZE as u64 - 1);
    let skip = (s.dev - dev_start) as usize;
    let buf = AlignedBuf::zeroed(round_up(skip + s.len as usize, BLOCK_SIZE));
    let (r, buf) = shared.engine.read_at_blocking(buf, dev_start);
    r.map_err(|e| Error::io(format!("reading object data at device byte {dev_start}"), e))?;
    Ok(Bytes::from_owner(buf).slice(skip..skip + s.len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::BuddyAllocator;
    use crate::meta::tuple::Piece;
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
        let s = spans(&ext, 0, 6 * 4096);
        assert_eq!(
            s.len(),
            2,
            "{:?}",
            s.iter().map(|x| (x.dev, x.len)).collect::<Vec<_>>()
        );
        assert_eq!((s[0].dev, s[0].len), (64 * 4096, 5 * 4096));
        assert_eq!((s[1].dev, s[1].len), (8 * 4096, 4096));
        // A range inside the merged pieces is one span too.
        let r = spans(&ext, 3 * 4096 + 100, 4096);
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
            let s = spans(&ext, off, len);
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
}
