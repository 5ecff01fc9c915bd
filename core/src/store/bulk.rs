//! Bulk load: the fastest way to fill a store.
//!
//! Items are taken in batches (up to `BATCH_OBJECTS` objects or
//! `BATCH_BYTES` bytes: what the load holds of the caller's values at a
//! time). For each batch every value gets its pieces first, then all the
//! batch's data goes out as large sequential writes (adjacent pieces merged,
//! copies done in parallel on the blocking pool), two batches at a time so
//! the device is never idle at a batch boundary. Written batches
//! accumulate until `COMMIT_OBJECTS` objects or `COMMIT_BYTES` bytes (or the
//! end), and then go to the commit path as one request: one commit group
//! (one data sync, one tuple sync) per ~`COMMIT_BYTES` instead of per
//! object. While a group commits, the next batches' data is being written.
//!
//! Visibility is progressive: a group's objects become visible when it
//! commits. Groups commit in order and each is all-or-nothing, so after a
//! crash the store holds a prefix of the load (in iteration order), whole
//! groups, every object whole, and nothing after it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesOrdered, StreamExt};

use super::request::Staged;
use super::{check_key, data, ObjectData, Store};
use crate::error::{show_key, Result};
use crate::format::BLOCK_SIZE;

/// Most objects per batch.
const BATCH_OBJECTS: usize = 4096;
/// Most value bytes per batch.
const BATCH_BYTES: u64 = 64 << 20;
/// Batches being written at once (each with its own I/O depth).
const WRITE_AHEAD: usize = 2;
/// In a cache store, a group's (and a batch's) value bytes are at most its
/// bound divided by this: with the batches written ahead and the group
/// committing, a load holds about a fifth of the bound uncommitted, which
/// no eviction can free.
const CACHE_GROUP_SHARE: u64 = 32;
/// In a cache store, most objects per group (an eviction round passes over
/// the keys of the group's uncommitted rest).
const CACHE_GROUP_OBJECTS: usize = 4096;

type WriteFut<'a> = Pin<Box<dyn Future<Output = (Result<Vec<Staged>>, u64)> + Send + 'a>>;
/// A batch's commit: (objects, bytes), or the failure and how many of the
/// batch's first objects were committed before it.
type Committed = std::result::Result<(u64, u64), (crate::Error, u64)>;
type CommitFut<'a> = Pin<Box<dyn Future<Output = Committed> + Send + 'a>>;

/// One object of a load, as the load takes it.
pub(crate) struct LoadItem {
    pub key: Box<[u8]>,
    pub value: Bytes,
    /// When it expires, µs since the epoch (a backup keeps its source's).
    pub expires: Option<u64>,
    /// The CRC32C of each 4 KiB block of `value`, when the caller holds
    /// them already, checked against these very bytes (a backup, whose
    /// read of the source checked them): the load then skips its own pass
    /// over the bytes. Sums of the wrong count are ignored (computed).
    pub sums: Option<Arc<[u32]>>,
}

/// What the load loop waits for next.
enum Event {
    Committed(Committed),
    Written((Result<Vec<Staged>>, u64)),
}

/// How a bulk load groups its commits: a group is committed (made durable
/// and visible, all-or-nothing) once at least this many objects or value
/// bytes have been written since the last one (more when the previous
/// group is still committing), and at the end. Larger groups mean
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
    /// `benches/log/2026-11-22-small-values-bulk-load.md` for the measurement.
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
    /// One the metadata journal cannot take whole on a full device is
    /// written as several smaller groups, in order, counted here as one.
    pub groups: u64,
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
        let items = items.into_iter().map(|(k, v)| LoadItem {
            key: Box::<[u8]>::from(k.as_ref()),
            value: v.into(),
            expires: None,
            sums: None,
        });
        self.load_items(items, opts).await
    }

    /// The load itself, over items that may carry an expiry (µs since the
    /// epoch: a backup keeps its source's).
    pub(crate) async fn load_items<I>(&self, items: I, opts: BulkOptions) -> Result<LoadReport>
    where
        I: Iterator<Item = LoadItem> + Send,
    {
        // Refused up front (read-only store), even for an empty load.
        self.check_open()?;
        self.shared().check_failed()?;
        let mut commit_objects = opts.commit_objects.max(1);
        let mut commit_bytes = opts.commit_bytes.max(1);
        // A cache store evicts for the load (`write_batch`,
        // `commit_batch`), but not the load's own values not yet
        // committed: those are held to a small share of its bound.
        if let Some(limit) = self.shared().growth_limit().filter(|_| self.evicts()) {
            commit_objects = commit_objects.min(CACHE_GROUP_OBJECTS);
            commit_bytes = commit_bytes.min((limit / CACHE_GROUP_SHARE).max(1));
        }
        let (batch_objects, batch_bytes) = (
            BATCH_OBJECTS.min(commit_objects),
            BATCH_BYTES.min(commit_bytes),
        );
        let start = Instant::now();
        let mut items = items;
        let mut report = LoadReport::default();
        let mut next_batch = || {
            let mut batch: Vec<LoadItem> = Vec::new();
            let mut bytes = 0u64;
            while batch.len() < batch_objects && bytes < batch_bytes {
                let Some(item) = items.next() else { break };
                bytes += item.value.len() as u64;
                batch.push(item);
            }
            (!batch.is_empty()).then_some((batch, bytes))
        };
        // Pipeline: up to WRITE_AHEAD batches are being written while the
        // previous group commits, so the device never waits for a batch
        // boundary or a sync. Batches finish in order (FuturesOrdered) and
        // only finished batches join a group; one group commits at a time,
        // in order, so what is visible is always a prefix.
        // How many objects the load committed (the first ones, in order),
        // earlier batches' and those of a batch cut short together.
        let context = |e: crate::Error, done: u64| {
            e.context(format!(
                "bulk_load committed the first {done} objects and stopped"
            ))
        };
        // A cache store writes one batch at a time and commits it before
        // the next: the load's own values written and not yet committed
        // cannot be evicted, so two of them in flight could need more room
        // than a cache gives, where each alone fits (a put of it does).
        let one_at_a_time = self.evicts();
        let write_ahead = if one_at_a_time { 1 } else { WRITE_AHEAD };
        let mut writes: FuturesOrdered<WriteFut<'_>> = FuturesOrdered::new();
        let mut committing: Option<CommitFut<'_>> = None;
        let mut written: (Vec<Staged>, u64) = (Vec::new(), 0);
        let mut exhausted = false;
        let mut failure: Option<crate::Error> = None;
        loop {
            // Items are taken only while no group of this load commits:
            // committing, this task leads the store's commit group, and an
            // iterator that itself writes to the store (a put from inside
            // it) would wait for that group while holding up the task that
            // must finish it. The batches in flight keep the device busy
            // meanwhile.
            while failure.is_none()
                && !exhausted
                && committing.is_none()
                && writes.len() < write_ahead
                && (!one_at_a_time || written.0.is_empty())
            {
                match next_batch() {
                    Some((batch, bytes)) => {
                        writes.push_back(Box::pin(
                            async move { (self.write_batch(batch).await, bytes) },
                        ))
                    }
                    None => exhausted = true,
                }
            }
            let group_ready = written.0.len() >= commit_objects
                || written.1 >= commit_bytes
                || ((exhausted || one_at_a_time) && writes.is_empty() && !written.0.is_empty());
            if failure.is_none() && committing.is_none() && group_ready {
                committing = Some(Box::pin(self.commit_batch(std::mem::take(&mut written))));
            }
            if committing.is_none() && writes.is_empty() {
                break;
            }
            // After a failure this only drains: every write still in flight
            // finishes before its pieces can be freed (invariant 2).
            let event = futures::future::poll_fn(|cx| {
                if let Some(c) = committing.as_mut() {
                    if let Poll::Ready(r) = c.as_mut().poll(cx) {
                        return Poll::Ready(Event::Committed(r));
                    }
                }
                match writes.poll_next_unpin(cx) {
                    Poll::Ready(Some(w)) => Poll::Ready(Event::Written(w)),
                    _ => Poll::Pending,
                }
            })
            .await;
            match event {
                Event::Committed(r) => {
                    committing = None;
                    match r {
                        Ok(done) => report.add(done),
                        Err((e, applied)) => {
                            failure.get_or_insert(context(e, report.objects + applied));
                        }
                    }
                }
                Event::Written((Ok(staged), bytes)) if failure.is_none() => {
                    written.0.extend(staged);
                    written.1 += bytes;
                }
                Event::Written((Ok(_), _)) => {}
                Event::Written((Err(e), _)) => {
                    failure.get_or_insert(context(e, report.objects));
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        report.elapsed = start.elapsed();
        Ok(report)
    }

    /// Allocates the batch's pieces and writes its data; nothing is visible.
    async fn write_batch(&self, batch: Vec<LoadItem>) -> Result<Vec<Staged>> {
        self.check_open()?;
        self.shared().check_failed()?;
        let mut staged = Vec::with_capacity(batch.len());
        let mut segments = Vec::new();
        let mut keep = Vec::new();
        for LoadItem {
            key,
            value,
            expires,
            sums,
        } in batch
        {
            check_key(&key).map_err(|e| e.context(show_key(&key)))?;
            let size = value.len() as u64;
            let data = if self.is_inline(size) {
                ObjectData::Inline(value)
            } else {
                // A cache store evicts for it, as for a put.
                let keys = [&key[..]];
                let need = self.need(std::iter::once(size), &keys);
                let extent = self
                    .making_room(need, || async { data::allocate(self.shared(), &key, size) })
                    .await
                    .map_err(|e| e.context(show_key(&key)))?;
                let sums = sums
                    .filter(|s| s.len() as u64 == size.div_ceil(BLOCK_SIZE as u64))
                    .unwrap_or_else(|| crate::meta::tuple::block_sums(&value).into());
                let (sums, table) = data::seal(sums);
                segments.extend(data::segments(&extent, &value, table.as_ref()));
                keep.push(extent.clone());
                // The commit path syncs this data before the tuples, which
                // a batch pays once per group.
                ObjectData::Heap {
                    extent,
                    sums,
                    unsynced: false,
                }
            };
            staged.push((key, size, data, expires));
        }
        data::write_segments(self.shared(), segments, Arc::new(keep)).await?;
        Ok(staged)
    }

    /// Commits a written batch as one request: one commit group, one data
    /// sync and one tuple sync for the whole batch (more groups when the
    /// metadata journal splits it). A failure comes with how many of the
    /// batch's first objects were committed before it.
    ///
    /// In a cache store a `NoSpace` (the tuple blocks at their limit, full)
    /// evicts for the rest and commits it: the first part is committed,
    /// each group whole, in order, so the load is still a prefix.
    async fn commit_batch(&self, (items, bytes): (Vec<Staged>, u64)) -> Committed {
        let total = items.len();
        if !self.evicts() {
            let (applied, stop) = self.submit_many(items).await.map_err(|e| (e, 0))?;
            return match stop {
                None if applied == total => Ok((total as u64, bytes)),
                Some(e) => Err((e, applied as u64)),
                None => Err((short(applied, total), applied as u64)),
            };
        }
        let (mut rest, mut done) = (items, 0usize);
        let mut rounds = super::evict::Rounds::default();
        loop {
            let seen = self.eviction_rounds();
            // The rest's values stay ours (its pieces held) for another try.
            let n = rest.len();
            let (applied, stop) = self
                .submit_many(rest.clone())
                .await
                .map_err(|e| (e, done as u64))?;
            rest.drain(..applied.min(n));
            done += applied;
            let e = match stop {
                None if applied == n => return Ok((total as u64, bytes)),
                Some(e) => e,
                None => return Err((short(done, total), done as u64)),
            };
            // Room for the rest's tuples: all their bytes, in any blocks
            // (each commits as soon as it finds a place).
            let keys: Vec<&[u8]> = rest.iter().map(|s| &*s.0).collect();
            let need = super::evict::Need {
                bytes: 0,
                count: 1,
                ..self.need(rest.iter().map(|s| s.1), &keys)
            };
            self.evict_after(&need, e, seen, &mut rounds)
                .await
                .map_err(|e| (e, done as u64))?;
        }
    }
}

/// A group the commit path answered with fewer objects and no error.
fn short(applied: usize, n: usize) -> crate::Error {
    crate::Error::new(
        crate::ErrorKind::Io,
        format!("only {applied} of {n} objects of a batch were committed"),
    )
}

impl LoadReport {
    fn add(&mut self, (objects, bytes): (u64, u64)) {
        self.objects += objects;
        self.bytes += bytes;
        self.groups += 1;
    }
}
