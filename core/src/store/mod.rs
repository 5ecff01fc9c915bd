//! The engine's front: the public [`Store`] handle, its methods (each a
//! short delegation to the file that does the job), and the handle's life
//! from open to close. What it fronts, a job per file:
//! * `state.rs`: the in-memory state readers see (the entry table the index
//!   points into, where each value is, extents);
//! * `shared.rs`: `Shared`, the engine state behind the `Arc` that the
//!   handles, the commit path and the maintenance thread share;
//! * `write.rs`: put staging, a put turned into a commit request;
//! * `read.rs`: the read path (locate, read, verify, keep in the cache);
//! * `report.rs`: the public [`ObjectInfo`] and [`Stats`];
//! * `batch.rs`: atomic batches (staged here, applied by `commit/batch.rs`)
//!   and `get_many`;
//! * `list.rs`: listings ([`Keys`]); `tuple_keys.rs`: the keys read from
//!   the tuple blocks in one pass, for an index that holds none (hash);
//! * `request.rs`: what a change asks of the commit path; `commit/`: the
//!   commit path (a file per role); `open.rs`: open; `helpers.rs`: the
//!   threads blocking work is handed to, ended by the last store's close;
//!   the rest one job each (uploads, bulk loads, backup, compaction,
//!   scrub, growth).
//!
//! The front keeps the handle's life: a call on a closed handle, or on one
//! a fork child inherited, fails (`Closed`, `Locked`) before it touches the
//! store; `close` lets the puts already started finish (within a bound)
//! before its last group and sync, so what was acknowledged is durable
//! (invariant 1). Keys are checked here for every call (invariant 3).
//!
//! Concurrency protocol:
//! * every metadata change goes through the commit path (`commit/`): one
//!   caller at a time leads, takes every queued change as a group, assigns
//!   versions in order, writes tuple blocks and syncs once per group, and
//!   only then acknowledges;
//! * readers look a key up under a short read lock, clone the entry's
//!   [`Extent`] handle and read without any lock; an inline value is read
//!   from the slot holding its tuple block's state (`State::slots`), and
//!   read again if a commit rewrote that block meanwhile (its write count
//!   in `State::slots` moved):
//!   a slot is rewritten only after a publish made it the spare;
//! * heap pieces return to the allocator when the last handle of their
//!   extent drops. The index drops its handle only after the change that
//!   unlinked the extent is durable, and every in-flight read holds one, so
//!   space is never reused under a reader nor before its tuple is gone from
//!   the disk (invariant 2).

mod backup;
mod batch;
mod bulk;
mod cache;
mod commit;
mod compact;
mod data;
pub(crate) mod evict;
pub(crate) mod fork;
mod grow;
pub(crate) mod helpers;
mod landing;
mod list;
#[cfg(target_os = "linux")]
mod local;
#[cfg(all(test, blobcask_loom))]
mod loom_models;
mod open;
mod read;
mod report;
mod request;
mod scrub;
mod shared;
mod state;
mod tuple_keys;
mod upload;
mod warm;
mod write;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::channel::oneshot;
use parking_lot::Mutex;

use crate::error::{show_key, Error, ErrorKind, Result};
use crate::io::IoEngine;
use crate::meta::tuple::MAX_KEY_LEN;
#[cfg(doc)] // for the docs' links
use crate::options::PutMode;
use crate::options::{Options, PutOptions, ReadOptions};
pub use cache::CacheStats;

pub use backup::{BackupProgress, BackupReport};
pub use batch::{Batch, BatchOutcome, MAX_BATCH_OPS};
pub use bulk::{BulkOptions, LoadReport};
pub use compact::CompactReport;
pub use list::{Keys, ListEntry};
#[cfg(target_os = "linux")]
pub use local::LocalStore;
pub use report::{ObjectInfo, Stats};
pub use scrub::ScrubReport;
pub use upload::{Upload, UploadInfo, PART_ALIGN};

// The moved items at the paths the other files of `store/` reach them by.
pub(crate) use read::{HeapRead, Located};
pub(crate) use shared::{Geometry, Shared};
pub(crate) use state::{heap, now_micros, Entry, Extent, HeapValue, ObjectData, State, Stored};

/// What every clone of a [`Store`] shares: the engine state, the commit
/// path, the maintenance thread, the file lock and the handle's life.
struct Inner {
    shared: Arc<Shared>,
    commits: Arc<commit::CommitPath>,
    /// The maintenance thread; it also closes the commit path when told
    /// to stop.
    maintainer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Separate open file description holding the `flock`; dropped on close.
    lock: Mutex<Option<std::fs::File>>,
    closed: AtomicBool,
    /// Set when `close` begins: a backup in progress stops at its next
    /// read (`Closed`) instead of reading on after the lock is released.
    closing: AtomicBool,
    /// `fork::generation()` when opened: another value means this is a
    /// fork child's inherited copy (see `fork`).
    fork_generation: u64,
    /// Puts started and not yet answered (`Staging` guards): `close`
    /// lets them finish before its last group.
    staging: AtomicUsize,
    /// Keeps the helper threads while the store is open: let go by
    /// `close` on the caller's thread once the close is done (the last
    /// store's close joins them), or with the handle.
    helpers: Mutex<Option<helpers::Lease>>,
}

/// A put in progress, counted in `Inner::staging` until dropped.
pub(crate) struct Staging(Arc<Inner>);

impl Drop for Staging {
    fn drop(&mut self) {
        self.0.staging.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long `close` waits for puts already started (a put left pending
/// for good, by a task nobody polls any more, must not hold it forever).
const CLOSE_WAITS_FOR_PUTS: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for Inner {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl Inner {
    /// Whether this is a fork child's inherited copy of the handle.
    fn forked(&self) -> bool {
        fork::generation() != self.fork_generation
    }

    /// Commits what is queued, writes what is open, marks the clean close
    /// and releases the lock. Idempotent. The closing is done by the
    /// maintenance thread, so that dropping a store inside an executor
    /// never nests one executor in another.
    fn shut_down(&self) {
        if self.forked() {
            // Not this process's store: no thread to stop (it stayed in
            // the parent), nothing to write.
            self.closed.store(true, Ordering::Release);
            if let Some(h) = self.maintainer.lock().take() {
                std::mem::forget(h);
            }
            return;
        }
        self.closed.store(true, Ordering::Release);
        self.shared.maintenance.stop();
        if let Some(h) = self.maintainer.lock().take() {
            if h.join().is_err() {
                // The thread died: close from here.
                self.commits.close();
            }
        }
        drop(self.lock.lock().take());
    }
}

/// An open blob store. Cheap to clone: clones share one engine.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("capacity", &self.inner.shared.capacity())
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish()
    }
}

/// Refuses a key no tuple can hold: empty (`InvalidArgument`) or longer
/// than `MAX_KEY_LEN` (`TooLarge`) (invariant 3).
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArgument, "key is empty"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "key of {} bytes exceeds the maximum of {MAX_KEY_LEN}",
                key.len()
            ),
        ));
    }
    Ok(())
}

impl Store {
    /// Opens the store at `path` (file or block device), creating it with
    /// `options.capacity` when the path does not exist or is an empty file
    /// (see [`Options::create`], [`Options::create_new`]). Anything else
    /// without a blobcask superblock is refused with `Corrupt` and left
    /// untouched, never formatted. Fails with `Locked` while another
    /// handle has it open (or, with [`Options::read_only`], open for
    /// writing).
    pub async fn open(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        // Held until the store holds its own: a failed open lets the
        // helper threads go.
        let _helpers = helpers::lease();
        crate::store::fork::unblock(move || crate::io::block_on(open::open_path(&path, options)))
            .await
    }

    /// Opens a store on a caller-supplied I/O engine (for example the
    /// in-memory [`MemDevice`](crate::io::fault::MemDevice)); the engine's
    /// size is the capacity. No file lock is taken. With
    /// [`Options::create`] (the default) an engine whose first blocks are
    /// all zero gets a new store; with [`Options::create_new`] the engine
    /// is formatted unless it already holds a store.
    pub async fn open_with_engine(engine: Arc<dyn IoEngine>, options: Options) -> Result<Store> {
        let if_blank = if options.create_new {
            open::IfBlank::Format
        } else {
            open::IfBlank::CreateIfZeroed
        };
        open::open_engine(engine, None, options, if_blank).await
    }

    /// Starts an opened store: its commit path and maintenance thread. A
    /// thread the system refuses (out of threads or memory) is an `Io`
    /// error of the open, not a panic.
    pub(crate) fn start(
        shared: Arc<Shared>,
        committer: commit::Committer,
        lock: Option<std::fs::File>,
    ) -> Result<Store> {
        let commits = Arc::new(commit::CommitPath::new(
            committer,
            shared.maintenance.clone(),
        ));
        let warm = warm::WarmUp::new(shared.clone());
        let handle = {
            let commits = commits.clone();
            std::thread::Builder::new()
                .name("blobcask-maintenance".into())
                .spawn(move || commits.maintain(warm))
                .map_err(|e| Error::io("starting the store's maintenance thread", e))?
        };
        Ok(Store {
            inner: Arc::new(Inner {
                shared,
                commits,
                maintainer: Mutex::new(Some(handle)),
                lock: Mutex::new(lock),
                closed: AtomicBool::new(false),
                closing: AtomicBool::new(false),
                fork_generation: fork::generation(),
                staging: AtomicUsize::new(0),
                helpers: Mutex::new(Some(helpers::lease())),
            }),
        })
    }

    /// The descriptor an event loop watches to complete this store's I/O
    /// on its own thread (see [`crate::event_loop`]).
    pub(crate) fn completion_source(&self) -> Option<crate::io::CompletionSource> {
        self.shared().engine.completion_source()
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Counts a put as started until the guard drops (see `close`).
    pub(crate) fn staging(&self) -> Staging {
        self.inner.staging.fetch_add(1, Ordering::AcqRel);
        Staging(self.inner.clone())
    }

    /// `Closed` once `close` has begun (long-running calls check it as
    /// they go).
    pub(crate) fn check_not_closing(&self) -> Result<()> {
        if self.inner.closing.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::Closed, "the store was closed"));
        }
        self.check_open()
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.forked() {
            return Err(Error::new(
                ErrorKind::Locked,
                "this handle was inherited through fork(): the store belongs to the parent \
                 process; open it again in this process once the parent has closed it",
            ));
        }
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::Closed, "the store is closed"));
        }
        Ok(())
    }

    async fn submit<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> request::Request,
    ) -> Result<T> {
        // Every change passes here: none from an inherited handle (`fork`).
        self.check_open()?;
        let (tx, rx) = oneshot::channel();
        let Ok(role) = self.inner.commits.push(make(tx)) else {
            return Err(Error::new(ErrorKind::Closed, "the store is closed"));
        };
        self.inner.commits.wait(role, rx).await.unwrap_or_else(|| {
            Err(Error::new(
                ErrorKind::Closed,
                "the store closed during the call",
            ))
        })
    }

    /// Stores `value` under `key`, replacing any previous object atomically.
    /// Returns once the object is durable.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl Into<Bytes>) -> Result<ObjectInfo> {
        self.put_with(key, value, PutOptions::default()).await
    }

    /// [`put`](Self::put) with options: a conditional create
    /// ([`PutMode::Create`], `AlreadyExists` if the key has an object) or
    /// compare-and-swap on the version ([`PutMode::Update`],
    /// `VersionMismatch`). The condition is decided in commit order, so of
    /// two racing creates of one key exactly one succeeds; a refused put
    /// changes nothing.
    pub async fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl Into<Bytes>,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        self.put_value(key.as_ref(), value.into(), options).await
    }

    /// The whole object.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Bytes> {
        self.read(key, 0, u64::MAX).await
    }

    /// `len` bytes from `offset`, clipped at the end of the object. An
    /// offset equal to the size gives an empty result; beyond it is
    /// `InvalidArgument`.
    pub async fn read(&self, key: impl AsRef<[u8]>, offset: u64, len: u64) -> Result<Bytes> {
        self.read_with(key, offset, len, ReadOptions::default())
            .await
    }

    /// [`read`](Self::read) with [`ReadOptions`] (e.g. bytes the caller
    /// owns, for a binding that lends them as a writable buffer).
    pub async fn read_with(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<Bytes> {
        self.read_located(key.as_ref(), offset, len, options)
            .await
            .map(|(_, b)| b)
    }

    /// [`read`](Self::read), with the [`ObjectInfo`] of the version the
    /// bytes come from (one lookup: the two always agree, whatever commits
    /// meanwhile). For front-ends that answer with an e-tag.
    pub async fn read_with_info(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<(ObjectInfo, Bytes)> {
        self.read_located(key.as_ref(), offset, len, ReadOptions::default())
            .await
    }

    /// A handle for tasks of the tokio-uring runtime running on this
    /// thread (call it inside `tokio_uring::start`): its reads go out on
    /// that runtime's own io_uring, with the same checks as
    /// [`read`](Self::read); writes take the ordinary commit path. See
    /// [`LocalStore`] for which call uses which ring. Linux only.
    ///
    /// `Unsupported` outside a tokio-uring runtime and for stores opened
    /// on a caller-supplied engine ([`open_with_engine`](Self::open_with_engine):
    /// no descriptor to read through); `Closed` once closed.
    #[cfg(target_os = "linux")]
    pub fn local(&self) -> Result<LocalStore> {
        self.check_open()?;
        let Some(file) = &self.shared().io_file else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "a LocalStore needs a store opened by path (this one runs on a caller-supplied engine)",
            ));
        };
        let dup = file
            .try_clone()
            .map_err(|e| Error::io("duplicating the store descriptor", e))?;
        LocalStore::new(self.clone(), dup)
    }

    /// Size, version and commit time of `key`.
    pub async fn stat(&self, key: impl AsRef<[u8]>) -> Result<ObjectInfo> {
        self.object_info(key.as_ref())
    }

    /// Deletes `key`; `NotFound` when absent. Returns once durable.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let ctx = || format!("delete {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        self.shared().check_failed().map_err(|e| e.context(ctx()))?;
        let key: Box<[u8]> = key.into();
        self.submit(|reply| request::Request::Delete { key, reply })
            .await
            .map_err(|e| e.context(ctx()))
    }

    /// Whether [`close`](Self::close) has run: calls that can fail then fail
    /// with `Closed`, and [`contains`](Self::contains) answers `false`.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Whether `key` has a committed object (false once closed).
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        !self.inner.closed.load(Ordering::Acquire)
            && self.shared().state.read().lookup(key.as_ref()).is_some()
    }

    /// Starts a multipart upload of an object of exactly `size` bytes. Space
    /// is reserved now; parts are written with [`Upload::write_part`] in any
    /// order, concurrently, then [`Upload::commit`] makes the object visible
    /// atomically. Dropping the upload aborts it.
    pub async fn begin_upload(&self, key: impl AsRef<[u8]>, size: u64) -> Result<Upload> {
        self.start_upload(key.as_ref(), size).await
    }

    /// Space and content figures.
    pub fn stats(&self) -> Stats {
        Stats::gather(self.shared())
    }

    /// The uploads in progress on this handle's store (begun and neither
    /// committed, aborted nor dropped), oldest first. Uploads are held in
    /// memory only: one not committed when the process ends is gone at
    /// the next open and its space is free again. Ids are this open
    /// store's: they start again at 1 at the next open. Empty once the
    /// store is closed (or in a fork child).
    pub fn list_uploads(&self) -> Vec<UploadInfo> {
        if self.check_open().is_err() {
            return Vec::new();
        }
        self.shared().uploads.list()
    }

    /// Aborts upload `id` (from [`list_uploads`](Self::list_uploads) or
    /// [`Upload::id`]) wherever its handle is: its space is freed as soon
    /// as parts being written finish, and the handle's later `write_part`
    /// and `commit` fail with `Closed`. `NotFound` when no such upload is in
    /// progress (committed or being committed, aborted or dropped): a
    /// commit under way is not stopped.
    pub fn abort_upload(&self, id: u64) -> Result<()> {
        self.check_open()?;
        self.shared().uploads.abort(id)
    }

    /// Grows the store file to `capacity` bytes (rounded down to 4 KiB)
    /// now, ahead of the growth a put would otherwise trigger: the new
    /// space is reserved on the file system (a full one is `NoSpace`, and
    /// the store keeps its size) and durable when this returns. A file
    /// store also grows by itself when full, up to
    /// [`Options::max_capacity`]. Its current size is fine (nothing to do);
    /// a smaller size, or one above `max_capacity`, is `InvalidArgument`;
    /// a block device is `Unsupported`, a read-only store too.
    /// [`Stats::capacity`] reports the size.
    pub async fn grow(&self, capacity: u64) -> Result<()> {
        self.check_open()?;
        let ctx = |e: Error| e.context(format!("grow to {capacity} bytes"));
        grow::grow_to(self.shared(), capacity).map_err(ctx)
    }

    /// Waits until every change acknowledged before the call is durable and
    /// issues a device sync. (Acknowledged changes already are durable in
    /// the default mode; this is a barrier.)
    /// On a read-only store there is nothing to make durable: it returns
    /// at once.
    pub async fn sync(&self) -> Result<()> {
        self.check_open()?;
        if self.shared().options.is_read_only() {
            return Ok(());
        }
        self.submit(|reply| request::Request::Barrier { reply })
            .await
    }

    /// Finishes pending commits, syncs, stops the engine threads and
    /// releases the lock. Later calls on any clone fail with `Closed`.
    pub async fn close(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.inner.forked() {
            self.inner.shut_down();
            drop(self.inner.helpers.lock().take());
            return Ok(());
        }
        self.inner.closing.store(true, Ordering::Release);
        // Puts already started finish first (their values may still be
        // being written on another thread), within a bound; a backup (also
        // counted) stops at its next read.
        let since = std::time::Instant::now();
        while self.inner.staging.load(Ordering::Acquire) > 0
            && since.elapsed() < CLOSE_WAITS_FOR_PUTS
        {
            crate::store::fork::unblock(|| std::thread::sleep(std::time::Duration::from_millis(1)))
                .await;
        }
        let synced = self.sync().await;
        let inner = self.inner.clone();
        crate::store::fork::unblock(move || inner.shut_down()).await;
        // Here, not in `shut_down`: that ran on a helper thread, and the
        // last store's close joins them all.
        drop(self.inner.helpers.lock().take());
        synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}
    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn store_is_clone_send_sync_and_futures_are_send() {
        assert_send_sync::<Store>();
        let f = |s: Store| async move {
            let _ = s.put("k", vec![1u8]).await;
            let _ = s.get("k").await;
            let _ = s.read("k", 0, 1).await;
            let _ = s.stat("k").await;
            let _ = s.delete("k").await;
            let u = s.begin_upload("k", 3).await.unwrap();
            let _ = u.write_part(0, vec![1u8, 2, 3]).await;
            let _ = u.commit().await;
            let _ = s.sync().await;
            let _ = s.backup("copy").await;
            let _ = s.scrub().await;
            let _ = s.bulk_load([("k", vec![1u8])]).await;
            let _ = s.close().await;
        };
        let _ = |s: Store| assert_send(&f(s));
        let _ = |p: &'static str| assert_send(&Store::open(p, Options::new()));
    }
}
