//! Online backup: a consistent, compacted, verified copy of a live store.
//!
//! 1. **Snapshot.** Under one read lock of the index, every live object
//!    version is pinned: its key, size, version and value (the `Arc` of
//!    its heap extent, which keeps its pieces from being reused while the
//!    backup reads them: invariant 2; or an inline value's bytes). Inline
//!    values live in their tuple blocks, not in RAM: right after the lock
//!    they are read from the blocks, one read per block, and one removed
//!    from its block meanwhile (its key changed) is taken from the values
//!    the commit path keeps aside while a snapshot is being filled
//!    (`Retired`). Then one sync, so the copy never holds an object the
//!    source could still lose.
//! 2. **Copy.** A new store is created beside the destination, under a
//!    temporary name (`.NAME.partial-PID-NANOS`), with the source's size
//!    (and the capacity it was asked for, so the source's options open the
//!    copy), index kind, inline threshold and engine. Objects are read
//!    from their pinned versions (every byte checked against its checksum,
//!    as on any read) in source heap order, many at once, and written into
//!    the copy by bulk load, in batches: the next batch is read while the
//!    previous one is written. Objects larger than `LARGE` go through an
//!    upload, chunk by chunk. Only live objects are copied: the copy is
//!    compacted.
//! 3. **Verify.** The copy is closed and reopened (recovery checks every
//!    metadata block), must hold exactly as many objects and bytes as the
//!    snapshot, and for every object the CRC32C it records for each 4 KiB
//!    block (in its tuple, or its trailer table, read and checked) must be
//!    that of the bytes read from the source. So the copy describes
//!    exactly the source's bytes, and any read of it checks its data
//!    against them (invariant 5). The data blocks themselves are not read
//!    back: that would make a backup a third pass over the bytes; run
//!    `Store::scrub` (`blobcask check --data`) on the copy for that.
//! 4. **Publish.** The temporary file is linked to the destination (which
//!    fails if something appeared there meanwhile: nothing is ever
//!    replaced) and unlinked; the directory is synced. A backup that fails
//!    or is cut short leaves no file at the destination; a cut (kill,
//!    power loss) can leave the temporary file, never a partial store under
//!    the destination's name.
//!
//! Writers and readers go on throughout; a write after the snapshot is not
//! in the copy. The copy has new versions and creation times (a version is
//! the store's commit sequence), the same keys, bytes and expiry times (an
//! object expired at the snapshot is not copied). Space freed at the
//! source during the backup is reused once the backup has read the object
//! that was there.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{join, OptionFuture};
use futures::stream::{self, StreamExt, TryStreamExt};
use parking_lot::Mutex;

use std::sync::Arc;

use super::bulk::LoadItem;
use super::request::{Expiry, PutSpec};
use super::{data, BulkOptions, HeapRead, ObjectData, Store};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::meta::tuple::{self, Checksums};
use crate::options::{Durability, Options};

/// Objects larger than this are copied through an upload, `CHUNK` at a
/// time, instead of being held whole in a batch.
const LARGE: u64 = 16 << 20;
/// Bytes read and written per step of a large object, and such steps in
/// flight.
const CHUNK: u64 = 4 << 20;
const LARGE_CHUNKS_IN_FLIGHT: usize = 6;
/// Value bytes of one batch (bulk load), and objects per batch at most.
const BATCH_BYTES: u64 = 64 << 20;
const BATCH_OBJECTS: usize = 8192;
/// Reads in flight (runs at the source, objects' checksums in the copy).
const READS_IN_FLIGHT: usize = 32;
/// Longest device span read at once for a run of adjacent small objects,
/// and the widest gap inside a run.
const RUN_BYTES: u64 = data::IO_CHUNK;
const RUN_GAP: u64 = 64 << 10;

/// What [`Store::backup`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BackupReport {
    /// Where the copy is.
    pub path: PathBuf,
    /// Objects in the copy (the live objects at the snapshot).
    pub objects: u64,
    /// Their bytes (keys not counted).
    pub bytes: u64,
    /// From the call to the copy being verified and published.
    pub elapsed: Duration,
}

impl BackupReport {
    /// Object bytes per second over the whole backup.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An object read for the copy: its index in the snapshot, its bytes, and
/// the block sums its source records.
type ReadObject = (usize, Bytes, Option<Arc<[u32]>>);

/// One object version pinned by the snapshot until it has been read.
struct Pinned {
    key: Box<[u8]>,
    size: u64,
    version: u64,
    /// When it expires (µs since the epoch): the copy's expires then too.
    expires: Option<u64>,
    /// Its value; taken (`release`) once its bytes are read, so the source
    /// can reuse the space of an object deleted meanwhile. `None` until
    /// filled for an inline value in its tuple block (`fill_inline`).
    data: Mutex<Option<ObjectData>>,
    /// The tuple block of an inline value to read at the snapshot.
    block: Option<u32>,
}

/// Inline values removed from their tuple blocks (replaced or deleted)
/// while a snapshot is being filled, by version: what the snapshot reads
/// there may no longer hold them. Kept only while someone holds it
/// (`hold`); the commit path adds to it (`keep`).
#[derive(Default)]
pub(crate) struct Retired(Mutex<(usize, std::collections::HashMap<u64, Bytes>)>);

impl Retired {
    /// Keeps `gone`'s value, if inline and a snapshot is being filled.
    pub fn keep(&self, gone: crate::meta::tuple::Tuple) {
        if let crate::meta::tuple::TupleValue::Inline(b) = gone.value {
            let mut g = self.0.lock();
            if g.0 > 0 {
                g.1.insert(gone.version, b);
            }
        }
    }

    fn get(&self, version: u64) -> Option<Bytes> {
        self.0.lock().1.get(&version).cloned()
    }

    /// Keeps removed values until the guard drops.
    fn hold(&self) -> RetiredHold<'_> {
        self.0.lock().0 += 1;
        RetiredHold(self)
    }
}

struct RetiredHold<'a>(&'a Retired);

impl Drop for RetiredHold<'_> {
    fn drop(&mut self) {
        let mut g = self.0 .0.lock();
        g.0 -= 1;
        if g.0 == 0 {
            g.1 = Default::default();
        }
    }
}

impl Pinned {
    fn data(&self) -> Result<ObjectData> {
        self.data.lock().clone().ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!("backup: {} was read twice", show_key(&self.key)),
            )
        })
    }

    fn release(&self) {
        self.data.lock().take();
    }

    /// Where its bytes start on the device (inline values first).
    fn heap_offset(&self) -> u64 {
        match &*self.data.lock() {
            Some(ObjectData::Heap { extent, .. }) => extent
                .pieces
                .first()
                .map_or(0, |p| p.offset().saturating_add(1)),
            _ => 0,
        }
    }

    /// The chunks of the object, as (offset, length).
    fn chunks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let n = self.size.div_ceil(CHUNK);
        (0..n).map(move |i| {
            let at = i * CHUNK;
            (at, CHUNK.min(self.size - at))
        })
    }
}

impl Store {
    /// Writes a consistent copy of the committed state to `dest`, a path
    /// that must not exist yet, while reads and writes go on. The copy holds
    /// the objects live at the call (compacted: only live data), is reopened
    /// and checked against the source's bytes (every object's recorded block
    /// checksums) before this returns, and appears under `dest` only when
    /// complete. See the module docs of `store::backup` for the steps; a
    /// file copy (`cp`) of a live store is **not** a backup. `close` waits
    /// for a backup in progress, which then stops with `Closed`.
    ///
    /// Errors: `AlreadyExists` if `dest` exists (nothing is ever replaced);
    /// `NotFound` if its directory does not exist; `InvalidArgument` if it
    /// names no file (`/`, or ending in `/`, `.` or `..`); `Closed`;
    /// `NoSpace` if the destination's file system cannot hold a store of
    /// the source's capacity; `Corrupt` if an object of the source fails its
    /// checksums (no copy is published); `Io` otherwise.
    pub async fn backup(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        let started = Instant::now();
        let dest = dest.as_ref();
        let ctx = || format!("backup to {}", dest.display());
        self.check_open().map_err(|e| e.context(ctx()))?;
        let temp = partial_path(dest).map_err(|e| e.context(ctx()))?;
        if names_a_directory(dest) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the destination must name a file (it ends with '/', '.' or '..')",
            )
            .context(ctx()));
        }
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(Error::new(
                ErrorKind::NotFound,
                "the destination's directory does not exist",
            )
            .context(ctx()));
        }
        if dest.symlink_metadata().is_ok() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                "the destination exists; a backup never replaces a file",
            )
            .context(ctx()));
        }
        // Counted with the puts in progress: `close` waits for the backup,
        // which stops at its next read once `close` has begun.
        let _running = self.staging();
        let snapshot = self.snapshot().await.map_err(|e| e.context(ctx()))?;
        self.sync().await.map_err(|e| e.context(ctx()))?;
        let outcome = match self.copy_to(&temp, &snapshot).await {
            Ok(sums) => verify(self, &temp, &snapshot, &sums).await,
            Err(e) => Err(e),
        };
        let published = outcome
            .and_then(|()| self.check_not_closing())
            .and_then(|()| publish(&temp, dest));
        if let Err(e) = published {
            let _ = std::fs::remove_file(&temp);
            return Err(e.context(ctx()));
        }
        Ok(BackupReport {
            path: dest.to_path_buf(),
            objects: snapshot.len() as u64,
            bytes: snapshot.iter().map(|p| p.size).sum(),
            elapsed: started.elapsed(),
        })
    }

    /// Every live object version, pinned, in source heap order, with the
    /// bytes of its inline values.
    async fn snapshot(&self) -> Result<Vec<Pinned>> {
        let _hold = self.shared().retired.hold();
        let snapshot = self.pin_live()?;
        self.fill_inline(&snapshot).await?;
        Ok(snapshot)
    }

    /// Every live object version, pinned, in source heap order; inline
    /// values in their tuple blocks still to read (`fill_inline`).
    fn pin_live(&self) -> Result<Vec<Pinned>> {
        let st = self.shared().state.read();
        let mut keys = Vec::new();
        st.index.all(&mut keys)?;
        let mut out: Vec<Pinned> = keys
            .into_iter()
            .filter_map(|(key, id)| {
                let e = st.entry(id).filter(|e| e.live())?;
                let data = e.data.at_hand();
                Some(Pinned {
                    key,
                    size: e.size,
                    version: e.version,
                    expires: e.expires_micros(),
                    block: data.is_none().then_some(e.block),
                    data: Mutex::new(data),
                })
            })
            .collect();
        drop(st);
        out.sort_by_key(Pinned::heap_offset);
        Ok(out)
    }

    /// Reads the inline values of the snapshot from their tuple blocks, one
    /// read per block, many at once. A value its block no longer holds was
    /// removed after the snapshot, so `Retired` has it; a block rewritten
    /// during its read is read again. Otherwise a missing value is
    /// `Corrupt` (as a read of it would be).
    async fn fill_inline(&self, snapshot: &[Pinned]) -> Result<()> {
        let mut by_block: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, p) in snapshot.iter().enumerate() {
            if let Some(b) = p.block {
                by_block.entry(b).or_default().push(i);
            }
        }
        stream::iter(by_block)
            .map(|(block, pins)| self.fill_block(snapshot, block, pins))
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }

    async fn fill_block(&self, snapshot: &[Pinned], block: u32, pins: Vec<usize>) -> Result<()> {
        self.check_not_closing()?;
        let damaged = |why: String| {
            Error::new(
                ErrorKind::Corrupt,
                format!("tuple block {block} cannot be read: {why}"),
            )
        };
        let tuples = self.current_block(block).await?.map_err(damaged)?;
        for p in pins.iter().filter_map(|&i| snapshot.get(i)) {
            // Not in the block as read: removed before that write, so kept
            // aside (`Retired`).
            let found = super::inline_in(&tuples, &p.key, p.version)
                .or_else(|| self.shared().retired.get(p.version))
                .filter(|b| b.len() as u64 == p.size);
            let Some(b) = found else {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "tuple block {block} does not hold the value of {} (version {})",
                        show_key(&p.key),
                        p.version
                    ),
                ));
            };
            *p.data.lock() = Some(ObjectData::Inline(b));
        }
        Ok(())
    }

    /// `len` bytes at `offset` of a pinned version, checked.
    async fn read_pinned(&self, p: &Pinned, offset: u64, len: u64) -> Result<Bytes> {
        self.check_not_closing()?;
        match &p.data()? {
            ObjectData::Inline(b) => Ok(b.slice(offset as usize..(offset + len) as usize)),
            ObjectData::Heap { extent, sums, .. } => {
                let s = self.shared();
                s.landing.wait(p.version).await;
                let h = HeapRead {
                    extent: extent.clone(),
                    sums: sums.clone(),
                    size: p.size,
                    version: p.version,
                    offset,
                    len,
                };
                data::read_range(s.engine.as_ref(), Some(&s.tables), &h.object(), offset, len)
                    .await
                    .map_err(|e| e.context(format!("read {} at {offset}", show_key(&p.key))))
            }
        }
    }

    /// Creates the copy at `temp` and fills it; returns the CRC32C of each
    /// object's 4 KiB blocks as read from the source, in snapshot order.
    async fn copy_to(&self, temp: &Path, snapshot: &[Pinned]) -> Result<Vec<Arc<[u32]>>> {
        let s = self.shared();
        // The copy keeps the capacity the source was asked for (so the
        // options that open the source open the copy too: a capacity below
        // one asked for before is refused) and is then grown to the size
        // the source has grown to. A source never asked for one is copied
        // at its size.
        let asked = s.settings.asked_capacity;
        let size = s.capacity();
        let options = s
            .options
            .clone()
            .capacity(if asked == 0 { size } else { asked.min(size) })
            .index(s.settings.index)
            .inline_threshold(s.settings.inline_threshold)
            .max_capacity(s.settings.max_capacity.unwrap_or(u64::MAX))
            .read_only(false)
            .salvage(false)
            .create_new(true)
            .cache_bytes(0)
            .durability(Durability::Sync);
        // Objects that expire while the copy is written stay in it (they
        // are checked against the snapshot; the copy's own next open
        // removes them).
        let options = Options {
            keep_expired: true,
            ..options
        };
        let copy = Store::open(temp, options).await?;
        if copy.shared().capacity() < size {
            if let Err(e) = copy.grow(size).await {
                let _ = copy.close().await;
                return Err(e);
            }
        }
        let filled = self.fill(&copy, snapshot).await;
        let closed = copy.close().await;
        let crcs = filled?;
        closed?;
        Ok(crcs)
    }

    async fn fill(&self, copy: &Store, snapshot: &[Pinned]) -> Result<Vec<Arc<[u32]>>> {
        let mut crcs: Vec<Arc<[u32]>> = vec![Arc::from(Vec::new()); snapshot.len()];
        let (large, small): (Vec<usize>, Vec<usize>) =
            (0..snapshot.len()).partition(|&i| snapshot.get(i).is_some_and(|p| p.size > LARGE));
        let mut batches = batches(snapshot, &small).into_iter();
        // Read the next batch while the previous one is being written.
        let mut current = match batches.next() {
            Some(b) => Some(self.read_batch(snapshot, b).await),
            None => None,
        };
        while let Some(read) = current.take() {
            let next: OptionFuture<_> = batches.next().map(|b| self.read_batch(snapshot, b)).into();
            let items: Vec<LoadItem> = read?
                .into_iter()
                .map(|(i, value, recorded)| {
                    // The source's own sums, which the read checked these
                    // bytes against, else (inline values) computed here.
                    let sums = recorded.unwrap_or_else(|| tuple::block_sums(&value).into());
                    if let Some(slot) = crcs.get_mut(i) {
                        *slot = sums.clone();
                    }
                    let p = snapshot.get(i);
                    p.inspect(|p| p.release());
                    LoadItem {
                        key: p.map(|p| p.key.clone()).unwrap_or_default(),
                        value,
                        expires: p.and_then(|p| p.expires),
                        sums: Some(sums),
                    }
                })
                .collect();
            let load = copy.load_items(items.into_iter(), BulkOptions::default());
            let (loaded, following) = join(load, next).await;
            loaded?;
            current = following;
        }
        for i in large {
            let Some(p) = snapshot.get(i) else { continue };
            let sums = self.copy_large(copy, p).await?;
            p.release();
            if let Some(slot) = crcs.get_mut(i) {
                *slot = sums;
            }
        }
        Ok(crcs)
    }

    /// Reads the objects `batch` names (indexes into `snapshot`), many at
    /// once, runs of adjacent small objects in one device request each;
    /// returns them with their indexes and the block sums the source
    /// records for them (see [`recorded_sums`](Self::recorded_sums)).
    async fn read_batch(&self, snapshot: &[Pinned], batch: Vec<usize>) -> Result<Vec<ReadObject>> {
        let read: Vec<Vec<ReadObject>> = stream::iter(runs(snapshot, batch))
            .map(|(span, members)| async move {
                let mut out = Vec::with_capacity(members.len());
                let pinned = |i: usize| {
                    snapshot.get(i).ok_or_else(|| {
                        Error::new(ErrorKind::Io, "backup: snapshot index out of range")
                    })
                };
                match span {
                    Some((start, end)) if members.len() > 1 => {
                        self.check_not_closing()?;
                        let s = self.shared();
                        let ahead =
                            data::ReadAhead::read(s.engine.as_ref(), start, end - start).await?;
                        for i in members {
                            let p = pinned(i)?;
                            let bytes = self.read_ahead(&ahead, p).await?;
                            out.push((i, bytes, self.recorded_sums(p).await?));
                        }
                    }
                    _ => {
                        for i in members {
                            let p = pinned(i)?;
                            let bytes = self.read_pinned(p, 0, p.size).await?;
                            out.push((i, bytes, self.recorded_sums(p).await?));
                        }
                    }
                }
                Ok::<_, Error>(out)
            })
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// A pinned heap object out of bytes read ahead, checked as any read.
    async fn read_ahead(&self, ahead: &data::ReadAhead, p: &Pinned) -> Result<Bytes> {
        let ObjectData::Heap { extent, sums, .. } = &p.data()? else {
            return self.read_pinned(p, 0, p.size).await;
        };
        self.shared().landing.wait(p.version).await;
        let obj = data::ObjectRef {
            pieces: &extent.pieces,
            size: p.size,
            sums,
            version: p.version,
        };
        data::read_range(ahead, None, &obj, 0, p.size)
            .await
            .map_err(|e| e.context(format!("read {}", show_key(&p.key))))
    }

    /// The CRC32C of each 4 KiB block of `p` as its source records them
    /// (in its tuple, or in its trailer table, read and checked). A read
    /// of `p` checks its bytes against exactly these, so once one has
    /// succeeded they are the copy's sums without another pass over the
    /// bytes. `None` for inline values and objects of older formats
    /// without block sums: their sums are computed from the bytes.
    async fn recorded_sums(&self, p: &Pinned) -> Result<Option<Arc<[u32]>>> {
        let sums = match p.data()? {
            ObjectData::Heap {
                sums: Checksums::Blocks(b),
                ..
            } => b,
            ObjectData::Heap {
                extent,
                sums: Checksums::Table(crc),
                ..
            } => {
                let s = self.shared();
                let obj = data::ObjectRef {
                    pieces: &extent.pieces,
                    size: p.size,
                    sums: &Checksums::Table(crc),
                    version: p.version,
                };
                data::load_table(s.engine.as_ref(), Some(&s.tables), &obj, crc)
                    .await
                    .map_err(|e| e.context(format!("read {}", show_key(&p.key))))?
            }
            _ => return Ok(None),
        };
        Ok((sums.len() as u64 == p.size.div_ceil(BLOCK_SIZE as u64)).then_some(sums))
    }

    /// Copies one large object through an upload, a chunk at a time (the
    /// next chunk read while one is written); the CRC32C of its blocks.
    async fn copy_large(&self, copy: &Store, p: &Pinned) -> Result<Arc<[u32]>> {
        let upload = copy.begin_upload(&p.key, p.size).await?;
        let parts = &upload;
        // Its chunks are checked against these as they are read.
        let recorded = &self.recorded_sums(p).await?;
        let sums: Vec<Vec<u32>> = stream::iter(p.chunks())
            .map(|(at, len)| async move {
                let bytes = self.read_pinned(p, at, len).await?;
                let block = BLOCK_SIZE as u64;
                let ours = recorded.as_ref().and_then(|r| {
                    r.get((at / block) as usize..(at + len).div_ceil(block) as usize)
                });
                let sums = match ours {
                    Some(s) => s.to_vec(),
                    None => tuple::block_sums(&bytes),
                };
                parts.write_part(at, bytes).await?;
                Ok::<Vec<u32>, Error>(sums)
            })
            .buffered(LARGE_CHUNKS_IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await?;
        let spec = PutSpec {
            expiry: p.expires.map(Expiry::At),
            ..PutSpec::default()
        };
        upload.commit_spec(spec).await?;
        Ok(sums.concat().into())
    }
}

/// Where a heap object with its block checksums in its tuple lies on the
/// device, when that span is short enough to share a run.
fn device_span(p: &Pinned) -> Option<(u64, u64)> {
    let Ok(ObjectData::Heap {
        extent,
        sums: Checksums::Blocks(_),
        ..
    }) = p.data()
    else {
        return None;
    };
    let start = extent.pieces.iter().map(|x| x.offset()).min()?;
    let end = extent
        .pieces
        .iter()
        .map(|x| x.offset() + x.len_bytes())
        .max()?;
    (end - start <= RUN_BYTES / 2).then_some((start, end))
}

/// Objects (indexes into the snapshot) read together, and the device span
/// read for them when they are read in one request.
type Run = (Option<(u64, u64)>, Vec<usize>);

/// `batch` (in heap order) cut into runs: objects whose device spans follow
/// each other (gaps of at most `RUN_GAP`) within `RUN_BYTES` share one
/// read; the others are runs of their own, without a span.
fn runs(snapshot: &[Pinned], batch: Vec<usize>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for i in batch {
        let span = snapshot.get(i).and_then(device_span);
        if let (Some((start, end)), Some((Some((run_start, run_end)), members))) =
            (span, out.last_mut())
        {
            if start >= *run_start
                && start <= *run_end + RUN_GAP
                && end.max(*run_end) - *run_start <= RUN_BYTES
            {
                *run_end = end.max(*run_end);
                members.push(i);
                continue;
            }
        }
        out.push((span, vec![i]));
    }
    out
}

/// The snapshot's small objects cut into batches of at most `BATCH_BYTES`
/// value bytes (one object per batch when it is larger) and `BATCH_OBJECTS`.
fn batches(snapshot: &[Pinned], small: &[usize]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut batch = Vec::new();
    let mut bytes = 0u64;
    for &i in small {
        let size = snapshot.get(i).map_or(0, |p| p.size);
        if !batch.is_empty() && (bytes + size > BATCH_BYTES || batch.len() >= BATCH_OBJECTS) {
            out.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        batch.push(i);
        bytes += size;
    }
    if !batch.is_empty() {
        out.push(batch);
    }
    out
}

/// Reopens the copy and checks it against the snapshot: as many objects
/// and bytes, each object with its size, and the checksums the copy stores
/// for each object's blocks (inline values: their bytes) equal to those of
/// the bytes read from the source.
async fn verify(
    source: &Store,
    temp: &Path,
    snapshot: &[Pinned],
    sums: &[Arc<[u32]>],
) -> Result<()> {
    let s = source.shared();
    let options = s
        .options
        .clone()
        .read_only(true)
        .salvage(false)
        .create(false)
        .create_new(false)
        .cache_bytes(0);
    // Counted with what expired since the snapshot; opened at the size it
    // has, whatever capacity the source's options ask for.
    let options = Options {
        keep_expired: true,
        capacity: None,
        ..options
    };
    let copy = Store::open(temp, options).await?;
    let checked = check_copy(&copy, snapshot, sums).await;
    let closed = copy.close().await;
    checked?;
    closed
}

async fn check_copy(copy: &Store, snapshot: &[Pinned], sums: &[Arc<[u32]>]) -> Result<()> {
    let stats = copy.stats();
    let bytes: u64 = snapshot.iter().map(|p| p.size).sum();
    if stats.objects != snapshot.len() as u64 || stats.logical_bytes != bytes {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy holds {} objects of {} bytes, the snapshot {} of {bytes}",
                stats.objects,
                stats.logical_bytes,
                snapshot.len()
            ),
        ));
    }
    if sums.len() != snapshot.len() {
        return Err(Error::new(
            ErrorKind::Io,
            "backup: checksums missing for part of the snapshot",
        ));
    }
    // By index (owned), so the future stays `Send` (a closure over
    // borrowed items is not general enough for it).
    stream::iter(0..snapshot.len())
        .map(|i| check_one(copy, snapshot.get(i), sums.get(i)))
        .buffer_unordered(READS_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Checks one object of the snapshot against the copy.
async fn check_one(copy: &Store, p: Option<&Pinned>, want: Option<&Arc<[u32]>>) -> Result<()> {
    let (Some(p), Some(want)) = (p, want) else {
        return Err(Error::new(
            ErrorKind::Io,
            "backup: snapshot index out of range",
        ));
    };
    match stored_sums(copy, &p.key).await? {
        Some((_, _, expires)) if expires != p.expires => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} expires at {expires:?} µs, the source at {:?}",
                show_key(&p.key),
                p.expires
            ),
        )),
        Some((size, got, _)) if size == p.size && *got == **want => Ok(()),
        Some((size, _, _)) if size != p.size => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} has {size} bytes, not {}",
                show_key(&p.key),
                p.size
            ),
        )),
        Some(_) => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} does not hold the source's bytes (its block checksums differ)",
                show_key(&p.key)
            ),
        )),
        None => Err(Error::new(
            ErrorKind::Corrupt,
            format!("the copy lacks {}", show_key(&p.key)),
        )),
    }
}

/// The size of `key`'s object in `copy` and the CRC32C of its 4 KiB blocks
/// as the copy records them: computed from an inline value (checked with
/// its tuple block at open), from the tuple, or from the trailer table
/// (read and checked against the tuple's CRC of it); and its expiry (an
/// object that expired since the snapshot is still checked).
async fn stored_sums(copy: &Store, key: &[u8]) -> Result<Option<(u64, Arc<[u32]>, Option<u64>)>> {
    let found = {
        let st = copy.shared().state.read();
        st.lookup_any(key).map(|e| {
            let at_hand = e.data.at_hand();
            (e.size, e.version, e.expires_micros(), at_hand, e.block)
        })
    };
    let Some((size, version, expires, data, block)) = found else {
        return Ok(None);
    };
    let data = match data {
        Some(d) => d,
        // Inline, in its tuple block: read it (checked with the block).
        None => ObjectData::Inline(copy.inline_value(key, version, block, size).await?),
    };
    let sums: Arc<[u32]> = match data {
        ObjectData::Inline(b) => tuple::block_sums(&b).into(),
        ObjectData::Heap { extent, sums, .. } => match sums {
            Checksums::Blocks(b) => b,
            Checksums::Table(crc) => {
                let obj = data::ObjectRef {
                    pieces: &extent.pieces,
                    size,
                    sums: &Checksums::Table(crc),
                    version,
                };
                data::load_table(copy.shared().engine.as_ref(), None, &obj, crc).await?
            }
            // A new store writes neither.
            Checksums::None | Checksums::Whole(_) => Arc::from(Vec::new()),
        },
    };
    Ok(Some((size, sums, expires)))
}

/// Whether `dest`, as written, names a directory (`d/`, `d/.`, `..`):
/// `Path` drops a trailing `/` or `.` when it takes a path apart.
fn names_a_directory(dest: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let raw = dest.as_os_str().as_bytes();
    raw.ends_with(b"/")
        || raw.ends_with(b"/.")
        || raw.ends_with(b"/..")
        || raw == b"."
        || raw == b".."
}

/// The temporary name of the copy being made for `dest`, in its directory:
/// `.NAME.partial-PID-N-NANOS`, unique within the process (`N` counts its
/// backups) and across processes (the PID), with `NAME` cut so the whole
/// stays within 255 bytes.
fn partial_path(dest: &Path) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    static BACKUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = dest.file_name().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            "the destination must name a file",
        )
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = BACKUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!(".partial-{}-{n}-{nanos}", std::process::id());
    let room = 255usize.saturating_sub(1 + suffix.len());
    let cut = name.as_bytes().get(..room).unwrap_or(name.as_bytes());
    let mut partial = std::ffi::OsString::from(".");
    partial.push(std::ffi::OsStr::from_bytes(cut));
    partial.push(suffix);
    Ok(dest.with_file_name(partial))
}

/// Gives the finished copy its name without replacing anything, durably.
fn publish(temp: &Path, dest: &Path) -> Result<()> {
    let named = |e: std::io::Error| {
        let kind = if e.kind() == std::io::ErrorKind::AlreadyExists {
            ErrorKind::AlreadyExists
        } else {
            ErrorKind::Io
        };
        Error::new(kind, format!("naming the finished copy: {e}"))
    };
    match std::fs::hard_link(temp, dest) {
        Ok(()) => {
            std::fs::remove_file(temp).map_err(|e| Error::io("removing the temporary copy", e))?;
        }
        // A file system without hard links (vfat, some FUSE and network
        // ones): a rename, after checking the name is free (a file that
        // appears in between would be replaced: the one window left).
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
            ) =>
        {
            if dest.symlink_metadata().is_ok() {
                return Err(named(std::io::Error::from(
                    std::io::ErrorKind::AlreadyExists,
                )));
            }
            std::fs::rename(temp, dest).map_err(named)?;
        }
        Err(e) => return Err(named(e)),
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("syncing the destination's directory", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    /// The check a backup ends with accepts the copy's own content and
    /// refuses one changed block checksum, size or object.
    #[test]
    fn the_verification_catches_a_changed_block_a_size_and_a_missing_object() {
        futures::executor::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path().join("s"), Options::new().capacity(64 << 20))
                .await
                .unwrap();
            let values: Vec<(String, Vec<u8>)> = [10usize, 5000, 70_000, (2 << 20) + 3]
                .iter()
                .enumerate()
                .map(|(i, &n)| (format!("k{i}"), (0..n).map(|b| (b * 7 + i) as u8).collect()))
                .collect();
            for (k, v) in &values {
                s.put(k, v.clone()).await.unwrap();
            }
            let snapshot = s.snapshot().await.unwrap();
            let mut sums: Vec<Arc<[u32]>> = Vec::new();
            let mut recorded = 0;
            for p in &snapshot {
                let v = &values
                    .iter()
                    .find(|(k, _)| k.as_bytes() == &*p.key)
                    .unwrap()
                    .1;
                let computed: Arc<[u32]> = tuple::block_sums(v).into();
                // What the source records (tuple or trailer table) is
                // what the copy may take instead of computing them.
                if let Some(r) = s.recorded_sums(p).await.unwrap() {
                    assert_eq!(r, computed, "{}", p.size);
                    recorded += 1;
                }
                sums.push(computed);
            }
            assert_eq!(recorded, 3, "the three heap objects (one with a table)");
            check_copy(&s, &snapshot, &sums).await.unwrap();
            for i in 0..snapshot.len() {
                let mut wrong = sums.clone();
                let mut flipped = wrong[i].to_vec();
                flipped[0] ^= 1;
                wrong[i] = flipped.into();
                let e = check_copy(&s, &snapshot, &wrong).await.unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Corrupt);
                assert!(e.to_string().contains("block checksums differ"), "{e}");
            }
            let mut short = snapshot;
            short.pop();
            let e = check_copy(&s, &short, &sums).await.unwrap_err();
            assert!(e.to_string().contains("objects"), "{e}");
            s.close().await.unwrap();
        });
    }

    /// An inline value removed from its tuple block between the snapshot's
    /// lock and the read of its block comes from the values the commit
    /// path kept aside (`Retired`); without them it could not be filled.
    #[test]
    fn inline_values_changed_after_the_snapshot_come_from_the_retired_values() {
        futures::executor::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path().join("s"), Options::new().capacity(16 << 20))
                .await
                .unwrap();
            s.put("a", b"a, first".to_vec()).await.unwrap();
            s.put("b", b"b, first".to_vec()).await.unwrap();
            // Nothing kept aside: the replaced value is gone from its block.
            let pins = s.pin_live().unwrap();
            s.put("a", b"a, second".to_vec()).await.unwrap();
            let e = s.fill_inline(&pins).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            assert!(e.to_string().contains("does not hold the value"), "{e}");

            let hold = s.shared().retired.hold();
            let pins = s.pin_live().unwrap();
            s.put("a", b"a, third".to_vec()).await.unwrap();
            s.delete("b").await.unwrap();
            s.fill_inline(&pins).await.unwrap();
            drop(hold);
            assert!(s.shared().retired.0.lock().1.is_empty(), "let go");
            let mut got: Vec<(Vec<u8>, Bytes)> = pins
                .iter()
                .map(|p| match p.data().unwrap() {
                    ObjectData::Inline(b) => (p.key.to_vec(), b),
                    ObjectData::Heap { .. } => panic!("inline"),
                })
                .collect();
            got.sort();
            assert_eq!(
                got,
                [
                    (b"a".to_vec(), Bytes::from_static(b"a, second")),
                    (b"b".to_vec(), Bytes::from_static(b"b, first"))
                ]
            );
            s.close().await.unwrap();
        });
    }

    /// Adjacent small objects are read in runs, and each comes out whole
    /// and checked.
    #[test]
    fn adjacent_small_objects_are_read_in_runs() {
        futures::executor::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path().join("s"), Options::new().capacity(64 << 20))
                .await
                .unwrap();
            let value = |i: usize| -> Vec<u8> { (0..9000).map(|b| (b * 3 + i) as u8).collect() };
            s.bulk_load((0..40).map(|i| (format!("k{i:02}"), value(i))))
                .await
                .unwrap();
            let snapshot = s.snapshot().await.unwrap();
            let all: Vec<usize> = (0..snapshot.len()).collect();
            let runs = runs(&snapshot, all.clone());
            assert!(
                runs.len() < 10,
                "{} runs for 40 adjacent objects",
                runs.len()
            );
            let mut read = s.read_batch(&snapshot, all).await.unwrap();
            read.sort_by_key(|(i, _, _)| *i);
            assert_eq!(read.len(), 40);
            for (i, bytes, sums) in read {
                let key = std::str::from_utf8(&snapshot[i].key).unwrap();
                let n: usize = key[1..].parse().unwrap();
                assert_eq!(&bytes[..], &value(n)[..], "{key}");
                // With the sums they were checked against.
                assert_eq!(&sums.unwrap()[..], &tuple::block_sums(&bytes)[..]);
            }
            s.close().await.unwrap();
        });
    }
}
