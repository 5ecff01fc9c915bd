//! Bulk load: the fastest way to fill a store.
//!
//! Items are taken in batches (up to `BATCH_OBJECTS` objects or
//! `BATCH_BYTES` bytes). For each batch every value gets its pieces first,
//! then all the batch's data goes out as large sequential writes (adjacent
//! pieces merged, copies done in parallel on the blocking pool), and then
//! every tuple of the batch is submitted to the commit thread at once, so
//! they share a handful of commit groups (one data sync and one tuple sync
//! each) instead of two syncs per object.
//!
//! Visibility is progressive: a batch's objects become visible when its
//! groups commit. Commit groups are taken in submission order, so after a
//! crash the store holds a prefix of the load (in iteration order), every
//! object in it whole, and nothing after it.

use std::time::{Duration, Instant};

use bytes::Bytes;

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
        loop {
            let mut batch: Vec<(Box<[u8]>, Bytes)> = Vec::new();
            let mut bytes = 0u64;
            while batch.len() < BATCH_OBJECTS && bytes < BATCH_BYTES {
                let Some((k, v)) = items.next() else { break };
                let v: Bytes = v.into();
                bytes += v.len() as u64;
                batch.push((k.as_ref().into(), v));
            }
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            self.load_batch(batch)
                .await
                .map_err(|e| e.context(format!("bulk_load after {} objects", report.objects)))?;
            report.objects += n;
            report.bytes += bytes;
            report.batches += 1;
        }
        report.elapsed = start.elapsed();
        Ok(report)
    }

    async fn load_batch(&self, batch: Vec<(Box<[u8]>, Bytes)>) -> Result<()> {
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
        let commits = staged
            .into_iter()
            .map(|(key, size, data)| async move { self.commit_object(&key, size, data).await });
        for r in futures::future::join_all(commits).await {
            r?;
        }
        Ok(())
    }
}
