//! Bulk load: the fastest way to fill a store.
//!
//! Items are taken in batches (up to `BATCH_OBJECTS` objects or
//! `BATCH_BYTES` bytes: what the load holds of the caller's values at a
//! time). For each batch every value gets its pieces first, then all the
//! batch's data goes out as large sequential writes (adjacent pieces merged,
//! copies done in parallel on the blocking pool). Written batches
//! accumulate until `COMMIT_OBJECTS` objects or `COMMIT_BYTES` bytes (or the
//! end), and then go to the commit thread as one request: one commit group
//! (one data sync, one tuple sync) per ~`COMMIT_BYTES` instead of per
//! object. While a group commits, the next batch's data is being written.
//!
//! Visibility is progressive: a group's objects become visible when it
//! commits. Groups commit in order and each is all-or-nothing, so after a
//! crash the store holds a prefix of the load (in iteration order), whole
//! groups, every object whole, and nothing after it.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::commit::Staged;
use super::{check_key, data, ObjectData, Store};
use crate::error::{show_key, Result};

/// Most objects per batch.
const BATCH_OBJECTS: usize = 4096;
/// Most value bytes per batch.
const BATCH_BYTES: u64 = 64 << 20;

/// How a bulk load groups its commits: a group is committed (made durable
/// and visible, all-or-nothing) once this many objects or value bytes have
/// been written since the last one, and at the end. Larger groups mean
/// fewer syncs (faster), smaller ones finer-grained progress and a shorter
/// prefix lost to a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkOptions {
    /// Objects per commit group (at least 1).
    pub commit_objects: usize,
    /// Value bytes per commit group (at least 1).
    pub commit_bytes: u64,
}

impl Default for BulkOptions {
    /// 16384 objects or 256 MiB. Each group costs two syncs, which on a
    /// host-cached virtual disk stall the writes behind them; see
    /// benches/RESULTS.md (bulk load) for the measurement.
    fn default() -> Self {
        BulkOptions {
            commit_objects: 16384,
            commit_bytes: 256 << 20,
        }
    }
}

/// What a bulk load did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Objects committed.
    pub objects: u64,
    /// Value bytes committed.
    pub bytes: u64,
    /// Commit groups the load was made visible in (each all-or-nothing).
    pub batches: u64,
    /// Wall time of the whole load.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Objects per second.
    pub fn objects_per_sec(&self) -> f64 {
        self.objects as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Value bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl Store {
    /// Loads every `(key, value)` of `items`, replacing existing keys, as
    /// fast as the device allows. Objects become visible group by group (see
    /// the module docs and [`BulkOptions`]); on an error the objects of
    /// earlier groups stay committed and the error says how many.
    pub async fn bulk_load<I, K, V>(&self, items: I) -> Result<LoadReport>
    where
        I: IntoIterator<Item = (K, V)>,
        I::IntoIter: Send,
        K: AsRef<[u8]>,
        V: Into<Bytes>,
    {
        self.bulk_load_with(items, BulkOptions::default()).await
    }

    /// [`bulk_load`](Self::bulk_load) with explicit commit grouping.
    pub async fn bulk_load_with<I, K, V>(&self, items: I, opts: BulkOptions) -> Result<LoadReport>
    where
        I: IntoIterator<Item = (K, V)>,
        I::IntoIter: Send,
        K: AsRef<[u8]>,
        V: Into<Bytes>,
    {
        let commit_objects = opts.commit_objects.max(1);
        let commit_bytes = opts.commit_bytes.max(1);
        let (batch_objects, batch_bytes) = (
            BATCH_OBJECTS.min(commit_objects),
            BATCH_BYTES.min(commit_bytes),
        );
        let start = Instant::now();
        let mut items = items.into_iter();
        let mut report = LoadReport::default();
        let mut next_batch = || {
            let mut batch: Vec<(Box<[u8]>, Bytes)> = Vec::new();
            let mut bytes = 0u64;
            while batch.len() < batch_objects && bytes < batch_bytes {
                let Some((k, v)) = items.next() else { break };
                let v: Bytes = v.into();
                bytes += v.len() as u64;
                batch.push((k.as_ref().into(), v));
            }
            (!batch.is_empty()).then_some((batch, bytes))
        };
        // Pipeline: while one group commits, the next batch is written.
        // Commits stay in order, so what is visible is always a prefix.
        let mut written: Option<(Vec<Staged>, u64)> = None;
        let context =
            |e: crate::Error, done: u64| e.context(format!("bulk_load after {done} objects"));
        loop {
            let Some((batch, bytes)) = next_batch() else {
                if let Some(ready) = written.take() {
                    let ready = self
                        .commit_batch(ready)
                        .await
                        .map_err(|e| context(e, report.objects))?;
                    report.add(ready);
                }
                break;
            };
            written = Some(match written.take() {
                Some(ready) if ready.0.len() >= commit_objects || ready.1 >= commit_bytes => {
                    let (ready, staged) =
                        futures::join!(self.commit_batch(ready), self.write_batch(batch));
                    report.add(ready.map_err(|e| context(e, report.objects))?);
                    (staged.map_err(|e| context(e, report.objects))?, bytes)
                }
                Some((mut staged, staged_bytes)) => {
                    let more = self
                        .write_batch(batch)
                        .await
                        .map_err(|e| context(e, report.objects))?;
                    staged.extend(more);
                    (staged, staged_bytes + bytes)
                }
                None => {
                    let staged = self
                        .write_batch(batch)
                        .await
                        .map_err(|e| context(e, report.objects))?;
                    (staged, bytes)
                }
            });
        }
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// Allocates the batch's pieces and writes its data; nothing is visible.
    async fn write_batch(&self, batch: Vec<(Box<[u8]>, Bytes)>) -> Result<Vec<Staged>> {
        self.check_open()?;
        self.shared().check_failed()?;
        let mut staged = Vec::with_capacity(batch.len());
        let mut segments = Vec::new();
        for (key, value) in batch {
            check_key(&key).map_err(|e| e.context(show_key(&key)))?;
            let size = value.len() as u64;
            let data = if self.is_inline(size) {
                ObjectData::Inline(value)
            } else {
                let extent = data::allocate(self.shared(), &key, size)
                    .map_err(|e| e.context(show_key(&key)))?;
                segments.extend(data::segments(&extent, &value));
                // No checksum: the commit thread syncs this data before the
                // tuples (kind 0), which a batch pays once per group.
                ObjectData::Heap { extent, crc: None }
            };
            staged.push((key, size, data));
        }
        data::write_segments(self.shared(), segments).await?;
        Ok(staged)
    }

    /// Commits a written batch as one request: one commit group, one data
    /// sync and one tuple sync for the whole batch.
    async fn commit_batch(&self, (items, bytes): (Vec<Staged>, u64)) -> Result<(u64, u64)> {
        let n = items.len();
        let (applied, stop) = self.submit_many(items).await?;
        match stop {
            None if applied == n => Ok((n as u64, bytes)),
            Some(e) => Err(e.context(format!(
                "{applied} objects of the last batch were committed"
            ))),
            None => Err(crate::Error::new(
                crate::ErrorKind::Io,
                format!("only {applied} of {n} objects of a batch were committed"),
            )),
        }
    }
}

impl LoadReport {
    fn add(&mut self, (objects, bytes): (u64, u64)) {
        self.objects += objects;
        self.bytes += bytes;
        self.batches += 1;
    }
}
