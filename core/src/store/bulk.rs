//! Bulk load: the fastest way to fill a store.
//!
//! Items are taken in batches (up to `BATCH_OBJECTS` objects or
//! `BATCH_BYTES` bytes). For each batch every value gets its pieces first,
//! then all the batch's data goes out as large sequential writes (adjacent
//! pieces merged, copies done in parallel on the blocking pool), and then
//! the whole batch goes to the commit thread as one request: one commit
//! group (one data sync, one tuple sync) per batch instead of per object.
//! While a batch commits, the next batch's data is being written.
//!
//! Visibility is progressive: a batch's objects become visible when its
//! group commits. Groups commit in order and each is all-or-nothing, so
//! after a crash the store holds a prefix of the load (in iteration order),
//! whole batches, every object whole, and nothing after it.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::commit::Staged;
use super::{check_key, data, ObjectData, Store};
use crate::error::{show_key, Result};

/// Most objects per batch.
const BATCH_OBJECTS: usize = 4096;
/// Most value bytes per batch.
const BATCH_BYTES: u64 = 64 << 20;

/// What a bulk load did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Objects committed.
    pub objects: u64,
    /// Value bytes committed.
    pub bytes: u64,
    /// Batches (each: one run of data writes, then its commit groups).
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
    /// fast as the device allows. Objects become visible batch by batch (see
    /// the module docs); on an error the objects of earlier batches stay
    /// committed and the error says how many.
    pub async fn bulk_load<I, K, V>(&self, items: I) -> Result<LoadReport>
    where
        I: IntoIterator<Item = (K, V)>,
        I::IntoIter: Send,
        K: AsRef<[u8]>,
        V: Into<Bytes>,
    {
        let start = Instant::now();
        let mut items = items.into_iter();
        let mut report = LoadReport::default();
        let mut next_batch = || {
            let mut batch: Vec<(Box<[u8]>, Bytes)> = Vec::new();
            let mut bytes = 0u64;
            while batch.len() < BATCH_OBJECTS && bytes < BATCH_BYTES {
                let Some((k, v)) = items.next() else { break };
                let v: Bytes = v.into();
                bytes += v.len() as u64;
                batch.push((k.as_ref().into(), v));
            }
            (!batch.is_empty()).then_some((batch, bytes))
        };
        // Pipeline: while one batch commits, the next one's data is written.
        // Commits stay in order, so what is visible is always a prefix.
        let mut written: Option<(Vec<Staged>, u64)> = None;
        loop {
            let context =
                |e: crate::Error, done: u64| e.context(format!("bulk_load after {done} objects"));
            let upcoming = next_batch();
            let (committed, staged) = match (written.take(), upcoming) {
                (None, None) => break,
                (Some(ready), None) => (Some(ready), None),
                (None, Some((batch, bytes))) => {
                    let staged = self
                        .write_batch(batch)
                        .await
                        .map_err(|e| context(e, report.objects))?;
                    (None, Some((staged, bytes)))
                }
                (Some(ready), Some((batch, bytes))) => {
                    let (ready, staged) =
                        futures::join!(self.commit_batch(ready), self.write_batch(batch));
                    let ready = ready.map_err(|e| context(e, report.objects))?;
                    report.add(ready);
                    let staged = staged.map_err(|e| context(e, report.objects))?;
                    (None, Some((staged, bytes)))
                }
            };
            if let Some(ready) = committed {
                let ready = self
                    .commit_batch(ready)
                    .await
                    .map_err(|e| context(e, report.objects))?;
                report.add(ready);
            }
            written = staged;
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
