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

use std::future::Future;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::{Extent, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{BLOCK_SIZE, SUPER_BLOCKS};
use crate::io::{round_up, AlignedBuf, BufResult, IoEngine};
use crate::meta::block::BLOCK_PAYLOAD;
use crate::meta::tuple::{self, Checksums, Piece, TupleValue, MAX_TUPLE_SUMS};

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

/// Allocates the pieces of a `size`-byte object (and its trailer table)
/// whose tuple carries `key`.
pub(crate) fn allocate(shared: &Shared, key: &[u8], size: u64) -> Result<Arc<Extent>> {
    let stored = tuple::stored_len(size);
    // A store that can grow is bounded by its growth limit, not its size.
    let heap_limit = |capacity: u64| capacity.saturating_sub(SUPER_BLOCKS * BLOCK_SIZE as u64);
    let heap = match shared.settings.max_capacity {
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
    let pieces = super::grow::with_room(shared, stored, |a| {
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
) -> Option<(Checksums, super::request::DataWrite)> {
    let (at, buf, sums) = one_request(extent, value)?;
    Some((
        sums,
        super::request::DataWrite {
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

/// What a read needs to know of one object version.
pub(crate) struct ObjectRef<'a> {
    pub pieces: &'a [Piece],
    pub size: u64,
    pub sums: &'a Checksums,
    /// Key of the trailer table in the table cache.
    pub version: u64,
}

/// One span read into memory: the buffer starts at the span's first
/// device block, `skip` bytes before the span's first byte.
struct ReadSpan {
    span: Span,
    skip: usize,
    /// The whole blocks read (a device buffer, or bytes read ahead).
    buf: Bytes,
}

impl ReadSpan {
    /// The span's own bytes within the whole blocks read around them.
    /// The buffer was sized to hold them (`span_buffer`); a buffer the
    /// engine returned shorter is an I/O error, not a panic.
    fn bytes(&self) -> Result<&[u8]> {
        let end = self.skip + self.span.len as usize;
        self.buf.get(self.skip..end).ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "reading object data at device byte {}: the read returned {} of {end} bytes",
                    self.span.dev - self.skip as u64,
                    self.buf.len()
                ),
            )
        })
    }
}

/// How a read path issues one device read: the only thing the store's
/// engine and a runtime's own ring (`store::local`) do differently when
/// reading objects. Everything else — planning the requests from the
/// pieces, checking every block against its checksum, the trailer table,
/// assembling the result — is the code below, shared by every read path.
///
/// Contract (as [`IoEngine::read_at`]): `offset` is block-aligned, the
/// buffer is block-aligned with a block-multiple capacity, and `Ok` means
/// the buffer's whole capacity was filled from `offset` (its length set to
/// its capacity). The buffer comes back either way.
///
/// A generic rather than `dyn`: the engine's futures are `Send` and a
/// runtime-local ring's are not, and each read path keeps its own.
pub(crate) trait BlockReader {
    /// Fills `buf`'s whole capacity from device byte `offset`.
    fn read_blocks(&self, buf: AlignedBuf, offset: u64) -> impl Future<Output = BufResult<()>>;

    /// `len` bytes (whole blocks) from device byte `offset`, as shared
    /// bytes: read into a new buffer, unless the reader holds them already
    /// and can lend them without a copy (`ReadAhead`). The bytes are then
    /// checked like any others.
    fn read_shared(
        &self,
        len: usize,
        offset: u64,
    ) -> impl Future<Output = (std::io::Result<()>, Bytes)> {
        async move {
            let (r, buf) = self.read_blocks(AlignedBuf::zeroed(len), offset).await;
            (r, Bytes::from_owner(buf))
        }
    }
}

// For every lifetime of the trait object, so that the `Send` check of a
// future holding `&dyn IoEngine` (a higher-ranked one) finds the impl.
impl<'a> BlockReader for dyn IoEngine + 'a {
    fn read_blocks(&self, buf: AlignedBuf, offset: u64) -> impl Future<Output = BufResult<()>> {
        self.read_at(buf, offset)
    }
}

/// Device bytes read in one request ahead of the object reads they serve
/// (a backup reads runs of adjacent small objects at once). It lends
/// slices of them (`read_shared`, no copy), so every object read from it
/// takes the ordinary planning and checks of [`read_range`] (invariant 5);
/// an object read from it keeps the whole run's buffer alive.
pub(crate) struct ReadAhead {
    start: u64,
    bytes: Bytes,
}

impl ReadAhead {
    /// `len` bytes at device byte `offset`, if they lie in what was read.
    fn lend(&self, len: usize, offset: u64) -> std::io::Result<Bytes> {
        offset
            .checked_sub(self.start)
            .and_then(|at| {
                let at = usize::try_from(at).ok()?;
                let end = at.checked_add(len)?;
                (end <= self.bytes.len()).then(|| self.bytes.slice(at..end))
            })
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "{len} bytes at device byte {offset} lie outside the bytes read ahead"
                ))
            })
    }
}

impl ReadAhead {
    /// Reads `len` bytes (rounded up to whole blocks) from block-aligned
    /// device byte `start`.
    pub async fn read(engine: &dyn IoEngine, start: u64, len: u64) -> Result<ReadAhead> {
        let buf = AlignedBuf::zeroed(round_up(len as usize, BLOCK_SIZE));
        let (r, bytes) = engine.read_at(buf, start).await;
        r.map_err(|e| read_failed(start, e))?;
        Ok(ReadAhead {
            start,
            bytes: Bytes::from_owner(bytes),
        })
    }
}

impl BlockReader for ReadAhead {
    fn read_blocks(&self, mut buf: AlignedBuf, offset: u64) -> impl Future<Output = BufResult<()>> {
        let cap = buf.capacity();
        let r = self.lend(cap, offset).map(|src| {
            buf.full_mut().copy_from_slice(&src);
            buf.set_len(cap);
        });
        std::future::ready((r, buf))
    }

    fn read_shared(
        &self,
        len: usize,
        offset: u64,
    ) -> impl Future<Output = (std::io::Result<()>, Bytes)> {
        std::future::ready(match self.lend(len, offset) {
            Ok(b) => (Ok(()), b),
            Err(e) => (Err(e), Bytes::new()),
        })
    }
}

/// Where a span's read starts on the device and how much it reads: the
/// span widened to whole blocks, `skip` bytes before its first byte.
fn span_blocks(s: Span) -> (u64, usize, usize) {
    let dev_start = s.dev & !(BLOCK_SIZE as u64 - 1);
    let skip = (s.dev - dev_start) as usize;
    (dev_start, skip, round_up(skip + s.len as usize, BLOCK_SIZE))
}

fn read_failed(dev_start: u64, e: std::io::Error) -> Error {
    Error::io(format!("reading object data at device byte {dev_start}"), e)
}

async fn read_span<R: BlockReader + ?Sized>(dev: &R, s: Span) -> Result<ReadSpan> {
    let (dev_start, skip, len) = span_blocks(s);
    let (r, buf) = dev.read_shared(len, dev_start).await;
    r.map_err(|e| read_failed(dev_start, e))?;
    Ok(ReadSpan { span: s, skip, buf })
}

fn read_span_blocking(engine: &dyn IoEngine, s: Span) -> Result<ReadSpan> {
    let (dev_start, skip, len) = span_blocks(s);
    let (r, buf) = engine.read_at_blocking(AlignedBuf::zeroed(len), dev_start);
    r.map_err(|e| read_failed(dev_start, e))?;
    Ok(ReadSpan {
        span: s,
        skip,
        buf: Bytes::from_owner(buf),
    })
}

async fn read_spans<R: BlockReader + ?Sized>(dev: &R, parts: Vec<Span>) -> Result<Vec<ReadSpan>> {
    if let [one] = parts[..] {
        // The common case (any range inside one request): no stream.
        return Ok(vec![read_span(dev, one).await?]);
    }
    let mut out: Vec<ReadSpan> = futures::stream::iter(parts)
        .map(|s| read_span(dev, s))
        .buffer_unordered(IO_DEPTH)
        .collect::<Vec<Result<ReadSpan>>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    out.sort_unstable_by_key(|r| r.span.obj_pos);
    Ok(out)
}

/// Checks every data block a span read touches against `table`: `Err` with
/// the object offset of the first block that does not match.
fn verify_span(table: &[u32], size: u64, r: &ReadSpan) -> std::result::Result<(), (u64, u64)> {
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

fn damaged(obj_offset: u64, dev: u64) -> Error {
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

/// Reads `len` bytes at object offset `offset` (already clipped), checking
/// every block it returns. Every async read path comes here, whatever
/// issues its device reads (`dev`: the store's engine, or a runtime's own
/// ring for `LocalStore`), so each gets the same planning and the same
/// checks (invariant 5).
pub(crate) async fn read_range<R: BlockReader + ?Sized>(
    dev: &R,
    tables: Option<&TableCache>,
    obj: &ObjectRef<'_>,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    let parts = spans(obj.pieces, offset, len);
    let (table, reads) = match obj.sums {
        Checksums::Blocks(t) => (Some(t.clone()), read_spans(dev, parts).await?),
        Checksums::Table(crc) => {
            // The table (cached after its first read) and the data are
            // read concurrently: one device round trip either way.
            let (t, r) = futures::join!(load_table(dev, tables, obj, *crc), read_spans(dev, parts));
            (Some(t?), r?)
        }
        Checksums::Whole(crc) => return read_whole_checked(dev, obj, *crc, offset, len).await,
        // Written by format 1 without any checksum: nothing to check.
        Checksums::None => (None, read_spans(dev, parts).await?),
    };
    if let Some(t) = &table {
        for r in &reads {
            verify_span(t, obj.size, r).map_err(|(o, d)| damaged(o, d))?;
        }
    }
    assemble(reads, offset, len)
}

/// The bytes of `reads` (sorted, covering `[offset, offset + len)`): the
/// device buffer itself when there is one read, else one copy.
fn assemble(mut reads: Vec<ReadSpan>, offset: u64, len: u64) -> Result<Bytes> {
    if reads.len() == 1 {
        if let Some(r) = reads.pop() {
            // Checked first: `Bytes::slice` panics out of range.
            r.bytes()?;
            let (skip, n) = (r.skip, r.span.len as usize);
            return Ok(r.buf.slice(skip..skip + n));
        }
    }
    let mut out = BytesMut::zeroed(len as usize);
    for r in &reads {
        let at = (r.span.obj_pos - offset) as usize;
        let src = r.bytes()?;
        // `spans` cuts `[offset, offset + len)` itself: each span lies in it.
        let dst = out.get_mut(at..at + src.len()).ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "object data read at object offset {} lies outside the range read",
                    r.span.obj_pos
                ),
            )
        })?;
        dst.copy_from_slice(src);
    }
    Ok(out.freeze())
}

/// Format-1 objects with one checksum over the whole object (at most
/// 1 MiB): read whole, checked, then cut.
async fn read_whole_checked<R: BlockReader + ?Sized>(
    dev: &R,
    obj: &ObjectRef<'_>,
    crc: u32,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    let reads = read_spans(dev, spans(obj.pieces, 0, obj.size)).await?;
    let whole = assemble(reads, 0, obj.size)?;
    if crc32c::crc32c(&whole) != crc {
        return Err(Error::new(
            ErrorKind::Corrupt,
            "object does not match its checksum (format-1 object, checked whole); \
             restore it from a backup or write it again",
        ));
    }
    Ok(whole.slice(offset as usize..(offset + len) as usize))
}

/// [`read_range`] on the calling thread: a range inside one device request
/// whose checksums are at hand is one synchronous read; others run the
/// async path to completion.
pub(crate) fn read_range_blocking(
    engine: &dyn IoEngine,
    tables: Option<&TableCache>,
    obj: &ObjectRef<'_>,
    offset: u64,
    len: u64,
) -> Result<Bytes> {
    let parts = spans(obj.pieces, offset, len);
    let table = match obj.sums {
        Checksums::Blocks(t) => Some(t.clone()),
        Checksums::Table(_) => tables.and_then(|c| c.get(&obj.version)),
        Checksums::None => None,
        Checksums::Whole(_) => None,
    };
    let simple = match obj.sums {
        Checksums::None => true,
        Checksums::Whole(_) => false,
        _ => table.is_some(),
    };
    let [s] = parts[..] else {
        return crate::io::block_on(read_range(engine, tables, obj, offset, len));
    };
    if !simple || len == 0 {
        return crate::io::block_on(read_range(engine, tables, obj, offset, len));
    }
    let r = read_span_blocking(engine, s)?;
    if let Some(t) = &table {
        verify_span(t, obj.size, &r).map_err(|(o, d)| damaged(o, d))?;
    }
    assemble(vec![r], offset, len)
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
}
