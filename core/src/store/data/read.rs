//! Reading object bytes back: the device requests planned from the pieces,
//! issued through a `BlockReader` (the engine, a runtime's own ring, or
//! bytes read ahead), checked, and assembled (without a copy when one
//! request covers the range).

use std::future::Future;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::{spans, Span, TableCache, IO_DEPTH};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::{round_up, AlignedBuf, BufResult, IoEngine};
use crate::meta::tuple::{Checksums, Piece};

use super::verify::{damaged, load_table, verify_span};

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
pub(super) struct ReadSpan {
    pub(super) span: Span,
    pub(super) skip: usize,
    /// The whole blocks read (a device buffer, or bytes read ahead).
    pub(super) buf: Bytes,
}

impl ReadSpan {
    /// The span's own bytes within the whole blocks read around them.
    /// The buffer was sized to hold them (`span_buffer`); a buffer the
    /// engine returned shorter is an I/O error, not a panic.
    pub(super) fn bytes(&self) -> Result<&[u8]> {
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

pub(super) async fn read_spans<R: BlockReader + ?Sized>(
    dev: &R,
    parts: Vec<Span>,
) -> Result<Vec<ReadSpan>> {
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
