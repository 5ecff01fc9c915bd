//! Writing object bytes into their pieces: chunked, many requests in
//! flight, copies on the blocking pool for large chunks, and writes held
//! to completion when their future is dropped (invariant 2).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;

use super::{spans, IO_DEPTH};
use crate::error::{Error, Result};
use crate::format::BLOCK_SIZE;
use crate::io::{round_up, AlignedBuf, BufResult};
use crate::meta::tuple::{self, Checksums};
use crate::store::{Extent, Shared};

use super::pieces::seal;

/// Chunks at least this large are copied into aligned memory on the
/// blocking pool, so copies run in parallel with each other and with the
/// device instead of serialising on the task that submits the writes.
const PARALLEL_COPY: u64 = 256 << 10;

/// A device write into pieces that `keep` holds. Dropped before the write
/// completes (its caller's future cancelled: a timeout, a cancelled task),
/// it lets the write finish on a helper thread and only then drops `keep`,
/// so the pieces never go to another object while the device may still
/// write into them (invariant 2): the engines finish a dropped write anyway
/// (io_uring leaves it with the kernel, the portable engine's thread runs
/// on).
pub(crate) struct HeldWrite<K: Send + Unpin + 'static> {
    write: Option<crate::io::IoFuture<BufResult<()>>>,
    keep: Option<K>,
}

impl<K: Send + Unpin + 'static> HeldWrite<K> {
    pub fn new(write: crate::io::IoFuture<BufResult<()>>, keep: K) -> Self {
        HeldWrite {
            write: Some(write),
            keep: Some(keep),
        }
    }
}

impl<K: Send + Unpin + 'static> Future for HeldWrite<K> {
    type Output = std::io::Result<()>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(write) = self.write.as_mut() else {
            return std::task::Poll::Ready(Err(std::io::Error::other(
                "write polled after it ended",
            )));
        };
        let (r, _) = std::task::ready!(write.as_mut().poll(cx));
        self.write = None;
        self.keep = None;
        std::task::Poll::Ready(r)
    }
}

impl<K: Send + Unpin + 'static> Drop for HeldWrite<K> {
    fn drop(&mut self) {
        if let Some(write) = self.write.take() {
            let keep = self.keep.take();
            crate::store::fork::detach(move || {
                let _ = crate::io::wait_here(write);
                drop(keep);
            });
        }
    }
}

/// Writes `data` at object offset `offset` (block-aligned) into the extent
/// and returns the CRC32C of each 4 KiB block written, in order. The tail
/// of the last block is zero-padded. The checksums are computed from the
/// aligned copy that is written, right after copying it (while it is in
/// cache, on the blocking pool for large chunks, in parallel), so checking
/// costs no extra pass over the caller's bytes.
pub(crate) async fn write_range(
    shared: &Shared,
    extent: &Arc<Extent>,
    offset: u64,
    data: &Bytes,
) -> Result<Vec<u32>> {
    write_range_holding(shared, extent, offset, data, ()).await
}

/// [`write_range`], with `hold` kept (cloned into each device write) until
/// every write it issued has landed, even when this future is dropped
/// first: an upload part's claim on its range lasts as long as the device
/// may still write into it.
pub(crate) async fn write_range_holding<H: Clone + Send + Unpin + 'static>(
    shared: &Shared,
    extent: &Arc<Extent>,
    offset: u64,
    data: &Bytes,
    hold: H,
) -> Result<Vec<u32>> {
    debug_assert_eq!(offset % BLOCK_SIZE as u64, 0);
    let engine = &shared.engine;
    let mut parts = futures::stream::iter(spans(&extent.pieces, offset, data.len() as u64))
        .map(|s| {
            let at = (s.obj_pos - offset) as usize;
            let part = data.slice(at..at + s.len as usize);
            let padded = round_up(s.len as usize, BLOCK_SIZE);
            let hold = hold.clone();
            async move {
                let copy = move || {
                    let buf = AlignedBuf::copy_from(&part);
                    let sums = tuple::block_sums(buf.as_slice());
                    (buf, sums)
                };
                let (mut buf, sums) = if s.len >= PARALLEL_COPY {
                    crate::store::fork::unblock(copy).await
                } else {
                    copy()
                };
                buf.set_len(padded);
                let keep = (extent.clone(), hold);
                let r = HeldWrite::new(engine.write_at(buf, s.dev), keep).await;
                r.map_err(|e| {
                    Error::io(format!("writing object data at device byte {}", s.dev), e)
                })?;
                Ok((s.obj_pos, sums))
            }
        })
        .buffer_unordered(IO_DEPTH)
        // Every write runs to completion even after one fails: the caller
        // frees the pieces on error, and a write still in flight must not
        // land in space that was handed to another object (invariant 2).
        .collect::<Vec<Result<(u64, Vec<u32>)>>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    // Spans start on block boundaries and cover whole blocks but the last.
    parts.sort_unstable_by_key(|(pos, _)| *pos);
    Ok(parts.into_iter().flat_map(|(_, sums)| sums).collect())
}

/// Writes the trailer table of a `size`-byte object.
pub(crate) async fn write_table(
    shared: &Shared,
    extent: &Arc<Extent>,
    size: u64,
    table: &[u32],
) -> Result<()> {
    let bytes = Bytes::from(tuple::encode_table(table));
    write_range(shared, extent, tuple::table_offset(size), &bytes)
        .await
        .map(drop)
}

/// Writes a whole value into a freshly allocated extent, then its trailer
/// table when it has one; returns the checksums its tuple carries.
pub(crate) async fn write_object(
    shared: &Shared,
    extent: &Arc<Extent>,
    value: &Bytes,
) -> Result<Checksums> {
    let sums = write_range(shared, extent, 0, value).await?;
    let (sums, table) = seal(sums.into());
    if let Some(t) = table {
        write_table(shared, extent, value.len() as u64, &t).await?;
    }
    Ok(sums)
}

/// [`write_object`] on the calling thread: a value that fits one device
/// request (and has no trailer) is one `pwrite`; others run the async path
/// to completion.
pub(crate) fn write_object_blocking(
    shared: &Shared,
    extent: &Arc<Extent>,
    value: &Bytes,
) -> Result<Checksums> {
    let Some((dev, buf, sums)) = one_request(extent, value) else {
        return crate::io::block_on(write_object(shared, extent, value));
    };
    let (r, _) = shared.engine.write_at_blocking(buf, dev);
    r.map_err(|e| Error::io(format!("writing object data at device byte {dev}"), e))?;
    Ok(sums)
}

/// A value that is one device request with no trailer table: where it goes,
/// its aligned copy (padded to whole blocks) and its checksums. `None` for
/// other values.
fn one_request(extent: &Extent, value: &Bytes) -> Option<(u64, AlignedBuf, Checksums)> {
    let parts = spans(&extent.pieces, 0, value.len() as u64);
    let ([s], 0) = (&parts[..], tuple::table_len(value.len() as u64)) else {
        return None;
    };
    let mut buf = AlignedBuf::copy_from(value);
    let sums = tuple::block_sums(buf.as_slice());
    let padded = round_up(s.len as usize, BLOCK_SIZE);
    buf.set_len(padded);
    Some((s.dev, buf, seal(sums.into()).0))
}

/// Prepares the write of a value of one device request (no trailer table):
/// its checksums and the write for the commit group to issue beside its
/// tuple blocks (`request::DataWrite`); `None` for other values.
pub(crate) fn prepare_write(
    extent: &Arc<Extent>,
    value: &Bytes,
) -> Option<(Checksums, crate::store::request::DataWrite)> {
    let (at, buf, sums) = one_request(extent, value)?;
    Some((
        sums,
        crate::store::request::DataWrite {
            buf,
            at,
            extent: extent.clone(),
        },
    ))
}

/// Where a whole value goes: (device offset, bytes) per span, block-aligned,
/// the trailer table included.
pub(crate) fn segments(
    extent: &Extent,
    value: &Bytes,
    table: Option<&Arc<[u32]>>,
) -> Vec<(u64, Bytes)> {
    let place = |bytes: Bytes, at: u64| {
        spans(&extent.pieces, at, bytes.len() as u64)
            .into_iter()
            .map(move |s| {
                let from = (s.obj_pos - at) as usize;
                (s.dev, bytes.slice(from..from + s.len as usize))
            })
            .collect::<Vec<_>>()
    };
    let mut out = place(value.clone(), 0);
    if let Some(t) = table {
        let at = tuple::table_offset(value.len() as u64);
        out.extend(place(Bytes::from(tuple::encode_table(t)), at));
    }
    out
}

/// Longest run of adjacent segments written as one request.
const RUN_MAX: u64 = 1 << 20;

/// Writes many values' segments with as few, as large requests as possible:
/// segments are sorted by device offset and adjacent ones (each padded to
/// its block) are merged into runs of up to `RUN_MAX` bytes. A bulk load into
/// fresh space thus becomes a sequential stream of large writes.
/// `keep` holds the pieces written into (see [`HeldWrite`]).
pub(crate) async fn write_segments(
    shared: &Shared,
    mut segs: Vec<(u64, Bytes)>,
    keep: Arc<Vec<Arc<Extent>>>,
) -> Result<()> {
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
            let keep = keep.clone();
            async move {
                let fill = move || {
                    let parts: Vec<(usize, &[u8])> = members
                        .iter()
                        .map(|(dev, b)| ((dev - start) as usize, &b[..]))
                        .collect();
                    AlignedBuf::gather(len, &parts)
                };
                let buf = if len as u64 >= PARALLEL_COPY {
                    crate::store::fork::unblock(fill).await
                } else {
                    fill()
                };
                let r = HeldWrite::new(engine.write_at(buf, start), keep).await;
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
