//! Step 2, the copy: the pinned objects read from the source (adjacent
//! small ones in runs) and written into a new store by bulk load in
//! batches, large ones through an upload chunk by chunk.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::{join, OptionFuture};
use futures::stream::{self, StreamExt, TryStreamExt};

use super::{
    BackupProgress, Pinned, ReadObject, BATCH_BYTES, BATCH_OBJECTS, LARGE, LARGE_CHUNKS_IN_FLIGHT,
    READS_IN_FLIGHT, RUN_BYTES, RUN_GAP,
};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::meta::tuple::{self, Checksums};
use crate::options::{Durability, Options};
use crate::store::bulk::LoadItem;
use crate::store::request::{Expiry, PutSpec};
use crate::store::{data, BulkOptions, HeapRead, ObjectData, Store};

impl Store {
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
                    .map_err(|e| e.context(format!("read {} at {offset}", show_key(p.key()))))
            }
        }
    }

    /// Creates the copy at `temp` and fills it; returns the CRC32C of each
    /// object's 4 KiB blocks as read from the source, in snapshot order.
    pub(super) async fn copy_to(
        &self,
        temp: &Path,
        snapshot: &[Pinned],
        progress: &BackupProgress,
    ) -> Result<Vec<Arc<[u32]>>> {
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
        let filled = self.fill(&copy, snapshot, progress).await;
        let closed = copy.close().await;
        let crcs = filled?;
        closed?;
        Ok(crcs)
    }

    async fn fill(
        &self,
        copy: &Store,
        snapshot: &[Pinned],
        progress: &BackupProgress,
    ) -> Result<Vec<Arc<[u32]>>> {
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
                        key: p.map(|p| p.key().into()).unwrap_or_default(),
                        value,
                        expires: p.and_then(|p| p.expires),
                        sums: Some(sums),
                    }
                })
                .collect();
            let batch = (
                items.len() as u64,
                items.iter().map(|i| i.value.len() as u64).sum(),
            );
            let load = copy.load_items(items.into_iter(), BulkOptions::default());
            let (loaded, following) = join(load, next).await;
            loaded?;
            progress.add(batch.0, batch.1);
            current = following;
        }
        for i in large {
            let Some(p) = snapshot.get(i) else { continue };
            let sums = self.copy_large(copy, p, progress).await?;
            progress.add(1, 0);
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
    pub(super) async fn read_batch(
        &self,
        snapshot: &[Pinned],
        batch: Vec<usize>,
    ) -> Result<Vec<ReadObject>> {
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
            .map_err(|e| e.context(format!("read {}", show_key(p.key()))))
    }

    /// The CRC32C of each 4 KiB block of `p` as its source records them
    /// (in its tuple, or in its trailer table, read and checked). A read
    /// of `p` checks its bytes against exactly these, so once one has
    /// succeeded they are the copy's sums without another pass over the
    /// bytes. `None` for inline values and objects of older formats
    /// without block sums: their sums are computed from the bytes.
    pub(super) async fn recorded_sums(&self, p: &Pinned) -> Result<Option<Arc<[u32]>>> {
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
                    .map_err(|e| e.context(format!("read {}", show_key(p.key()))))?
            }
            _ => return Ok(None),
        };
        Ok((sums.len() as u64 == p.size.div_ceil(BLOCK_SIZE as u64)).then_some(sums))
    }

    /// Copies one large object through an upload, a chunk at a time (the
    /// next chunk read while one is written); the CRC32C of its blocks.
    async fn copy_large(
        &self,
        copy: &Store,
        p: &Pinned,
        progress: &BackupProgress,
    ) -> Result<Arc<[u32]>> {
        let upload = copy.begin_upload(p.key(), p.size).await?;
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
                progress.add(0, len);
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
pub(super) fn runs(snapshot: &[Pinned], batch: Vec<usize>) -> Vec<Run> {
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
