//! The engine: the public [`Store`] and the state it shares with the commit
//! thread.
//!
//! Concurrency protocol:
//! * every metadata change goes through the commit path (`commit.rs`): one
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
mod bulk;
mod cache;
mod commit;
mod compact;
mod data;
pub(crate) mod fork;
mod grow;
mod landing;
mod list;
#[cfg(target_os = "linux")]
mod local;
#[cfg(all(test, blobcask_loom))]
mod loom_models;
mod open;
mod report;
mod scrub;
mod shared;
mod state;
mod upload;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::channel::oneshot;
use parking_lot::Mutex;

use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::tuple::{self, Checksums, TupleValue, MAX_KEY_LEN};
use crate::options::{Options, PutMode, PutOptions, ReadOptions};
pub use cache::CacheStats;

pub use backup::BackupReport;
pub use bulk::{BulkOptions, LoadReport};
pub use compact::CompactReport;
pub use list::{Keys, ListEntry};
#[cfg(target_os = "linux")]
pub use local::LocalStore;
pub use report::{ObjectInfo, Stats};
pub use scrub::ScrubReport;
pub use upload::{Upload, UploadInfo, PART_ALIGN};

// The moved items at the paths the other files of `store/` reach them by.
pub(crate) use shared::{Geometry, Shared};
pub(crate) use state::{heap, now_micros, Entry, Extent, HeapValue, ObjectData, State, Stored};

/// Heap objects up to this size are not synced before their tuple: the
/// group's one sync makes data and tuple durable together, and recovery
/// reads the newest group's such objects back against their checksums. A
/// put is then one sync. Larger objects (uploads, bulk loads always) are
/// synced before their tuple, because verifying them at open would mean
/// reading them.
pub(crate) const UNSYNCED_LIMIT: u64 = 1 << 20;

/// A put after its checks: the value to commit, or pieces to fill first
/// (with the trailer table to write after the data, if any).
enum Staged {
    /// What to commit, and the value's write when the commit group issues
    /// it (`Store::prepare_write`).
    Ready(ObjectData, Option<commit::DataWrite>),
    /// Pieces to write the value into; whether its data may skip the sync
    /// before its tuple.
    Write(Arc<Extent>, bool),
}

/// A read resolved against the index.
enum Located {
    /// The bytes are at hand (inline values not yet written, cached ones).
    Ready(Bytes),
    /// Read `len` bytes at `offset` of this object version.
    Heap(HeapRead),
    /// An inline value: read it from the slot holding its tuple block.
    Slot(SlotRead),
}

/// An inline value to read from its tuple block's written slot.
struct SlotRead {
    block: u32,
    /// Device offset of the slot.
    at: u64,
    /// The block's write count when it was located (`State::slots`).
    writes: u64,
    version: u64,
    size: u64,
    offset: u64,
    len: u64,
}

/// A heap object pinned for a read (the `Arc` keeps its pieces allocated).
struct HeapRead {
    extent: Arc<Extent>,
    sums: Checksums,
    size: u64,
    version: u64,
    offset: u64,
    len: u64,
}

impl HeapRead {
    fn object(&self) -> data::ObjectRef<'_> {
        data::ObjectRef {
            pieces: &self.extent.pieces,
            size: self.size,
            sums: &self.sums,
            version: self.version,
        }
    }
}
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

/// `bytes` as the caller asked for them: as they are (shared with the store,
/// read-only), or copied into memory nothing else holds.
/// `key`'s inline value of `version` among a tuple block's `tuples`, as a
/// copy of its own (a slice would keep the whole decoded block alive, and
/// the caller may own it: invariant 9).
pub(crate) fn inline_in(tuples: &[tuple::Tuple], key: &[u8], version: u64) -> Option<Bytes> {
    tuples
        .iter()
        .find(|t| t.version == version && *t.key == *key)
        .and_then(|t| match &t.value {
            TupleValue::Inline(v) => Some(Bytes::copy_from_slice(v)),
            TupleValue::Heap { .. } => None,
        })
}

/// `key`'s inline value of `version` among a kept block's `tuples`, as
/// the slice of the block's decoded payload it is (see [`lend_inline`]).
fn inline_kept(tuples: &[tuple::Tuple], key: &[u8], version: u64) -> Option<Bytes> {
    tuples
        .iter()
        .find(|t| t.version == version && *t.key == *key)
        .and_then(|t| match &t.value {
            TupleValue::Inline(v) => Some(v.clone()),
            TupleValue::Heap { .. } => None,
        })
}

/// Inline bytes served from a kept tuple block, as handed out: a copy of
/// their own for an owned read (invariant 9) and below `LEND_INLINE`
/// bytes (a slice would keep the 4 KiB payload alive for a few bytes);
/// from there on the slice itself, which keeps at most four times its
/// length alive and saves a copy that costs more than the lookup (an
/// allocation above the allocator's small-size caches: warm gets of
/// 1.5 KiB inline values ran at 0.4 × the heap's; `benches/RESULTS.md`).
fn lend_inline(bytes: Bytes, options: ReadOptions) -> Bytes {
    if options.owned || bytes.len() < LEND_INLINE {
        Bytes::copy_from_slice(&bytes)
    } else {
        bytes
    }
}

/// Smallest inline value a cache hit hands out as a slice of its block.
const LEND_INLINE: usize = 1024;

fn owned(bytes: Bytes, options: ReadOptions) -> Bytes {
    if options.owned {
        Bytes::copy_from_slice(&bytes)
    } else {
        bytes
    }
}

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

    pub(crate) fn start(
        shared: Arc<Shared>,
        committer: commit::Committer,
        lock: Option<std::fs::File>,
    ) -> Store {
        let commits = Arc::new(commit::CommitPath::new(
            committer,
            shared.maintenance.clone(),
        ));
        let handle = {
            let commits = commits.clone();
            std::thread::Builder::new()
                .name("blobcask-maintenance".into())
                .spawn(move || commits.maintain())
                .expect("spawn maintenance thread")
        };
        Store {
            inner: Arc::new(Inner {
                shared,
                commits,
                maintainer: Mutex::new(Some(handle)),
                lock: Mutex::new(lock),
                closed: AtomicBool::new(false),
                closing: AtomicBool::new(false),
                fork_generation: fork::generation(),
                staging: AtomicUsize::new(0),
            }),
        }
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
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> commit::Request,
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
        let key = key.as_ref();
        let value: Bytes = value.into();
        let _staging = self.staging();
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        let spec = self.precheck(key, &options).map_err(ctx)?;
        let staged = match self.stage_put(key, &value, true) {
            // A heap with the room but in holes too small: compact it once
            // and try again.
            Err(e) if self.worth_compacting(&e, value.len() as u64) => {
                self.compact().await.map_err(ctx)?;
                self.after_compaction(self.stage_put(key, &value, true))
            }
            r => r,
        };
        let (data, data_write) = match staged.map_err(ctx)? {
            Staged::Ready(data, data_write) => (data, data_write),
            Staged::Write(extent, unsynced) => {
                let sums = data::write_object(self.shared(), &extent, &value)
                    .await
                    .map_err(ctx)?;
                (heap(extent, sums, unsynced), None)
            }
        };
        self.commit_object(key, value.len() as u64, data, data_write, spec)
            .await
            .map_err(ctx)
    }

    /// Checks a put's options, and refuses a conditional put that already
    /// fails against the index before its value is written (the commit
    /// path decides for real).
    pub(crate) fn precheck(&self, key: &[u8], options: &PutOptions) -> Result<commit::PutSpec> {
        let spec = commit::PutSpec::of(options)?;
        if spec.mode == PutMode::Overwrite {
            return Ok(spec);
        }
        let st = self.shared().state.read();
        let current = st.lookup(key).map(|e| e.version);
        spec.mode.check(current)?;
        Ok(spec)
    }

    /// The value's write left to its commit group, which issues it beside
    /// the tuple blocks (one device round trip instead of two before the
    /// sync): a value of one device request, UNSYNCED (so recovery checks
    /// it against its tuple in the newest group: until the sync any subset
    /// of the group's writes may be on the device, as before), in the
    /// `Sync` durability mode (in `Buffered` the put is acknowledged before
    /// its group is written, so its data must be written first).
    fn prepare_write(
        &self,
        extent: &Arc<Extent>,
        value: &Bytes,
        unsynced: bool,
    ) -> Option<(Checksums, commit::DataWrite)> {
        let sync_mode = matches!(self.shared().options.durability, crate::Durability::Sync);
        if !(unsynced && sync_mode) {
            return None;
        }
        data::prepare_write(self.shared(), extent, value)
    }

    /// [`put`](Self::put) for blocking callers: a value that fits one device
    /// request goes with its commit group; a larger one is written with
    /// `pwrite` on the calling thread first.
    pub(crate) fn put_blocking(
        &self,
        key: &[u8],
        value: Bytes,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        let _staging = self.staging();
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        let spec = self.precheck(key, &options).map_err(ctx)?;
        let (data, data_write) = match self.stage_put_here(key, &value, true).map_err(ctx)? {
            Staged::Ready(data, data_write) => (data, data_write),
            Staged::Write(extent, unsynced) => {
                let sums =
                    data::write_object_blocking(self.shared(), &extent, &value).map_err(ctx)?;
                (heap(extent, sums, unsynced), None)
            }
        };
        crate::io::block_on(self.commit_object(key, value.len() as u64, data, data_write, spec))
            .map_err(ctx)
    }

    /// The part of a put before its commit, on the calling thread: the
    /// value checked, placed and written (not yet visible). For puts whose
    /// copy and write run on a helper thread while the commit stays with
    /// the caller's task (`EventLoop::put_op`): a task dropped meanwhile
    /// commits nothing, so a cancelled put can never land after a later
    /// one of the same caller.
    pub(crate) fn write_blocking(&self, key: &[u8], value: &Bytes) -> Result<ObjectData> {
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        match self.stage_put_here(key, value, false).map_err(ctx)? {
            Staged::Ready(data, _) => Ok(data),
            Staged::Write(extent, unsynced) => {
                let sums =
                    data::write_object_blocking(self.shared(), &extent, value).map_err(ctx)?;
                Ok(heap(extent, sums, unsynced))
            }
        }
    }

    /// [`stage_put`](Self::stage_put) on the calling thread, compacting
    /// once (there) when the heap has the room only in small holes.
    fn stage_put_here(&self, key: &[u8], value: &Bytes, overlap: bool) -> Result<Staged> {
        match self.stage_put(key, value, overlap) {
            Err(e) if self.worth_compacting(&e, value.len() as u64) => {
                crate::io::block_on(self.compact())?;
                self.after_compaction(self.stage_put(key, value, overlap))
            }
            r => r,
        }
    }

    /// Checks a put and decides where its value goes: inline, or into
    /// freshly allocated pieces with a checksum per block.
    /// With `overlap`, a value whose write can go beside its commit group's
    /// tuple blocks is prepared here (`prepare_write`) and comes back `Ready`.
    fn stage_put(&self, key: &[u8], value: &Bytes, overlap: bool) -> Result<Staged> {
        self.check_open()?;
        check_key(key)?;
        self.shared().check_failed()?;
        let size = value.len() as u64;
        if self.is_inline(size) {
            return Ok(Staged::Ready(ObjectData::Inline(value.clone()), None));
        }
        let extent = data::allocate(self.shared(), key, size)?;
        let unsynced = size <= UNSYNCED_LIMIT;
        if overlap {
            if let Some((sums, data_write)) = self.prepare_write(&extent, value, unsynced) {
                return Ok(Staged::Ready(
                    heap(extent, sums, unsynced),
                    Some(data_write),
                ));
            }
        }
        Ok(Staged::Write(extent, unsynced))
    }

    pub(crate) fn is_inline(&self, size: u64) -> bool {
        size == 0 || size <= self.shared().settings.inline_threshold as u64
    }

    pub(crate) async fn commit_object(
        &self,
        key: &[u8],
        size: u64,
        data: ObjectData,
        data_write: Option<commit::DataWrite>,
        spec: commit::PutSpec,
    ) -> Result<ObjectInfo> {
        let key: Box<[u8]> = key.into();
        self.submit(|reply| commit::Request::Put {
            key,
            size,
            data,
            data_write,
            spec,
            reply,
        })
        .await
    }

    /// Sends many staged puts as one commit request.
    pub(crate) async fn submit_many(
        &self,
        items: Vec<commit::Staged>,
    ) -> Result<(usize, Option<Error>)> {
        let (tx, rx) = oneshot::channel();
        let req = commit::Request::PutMany { items, reply: tx };
        let Ok(role) = self.inner.commits.push(req) else {
            return Err(Error::new(ErrorKind::Closed, "the store is closed"));
        };
        self.inner
            .commits
            .wait(role, rx)
            .await
            .ok_or_else(|| Error::new(ErrorKind::Closed, "the store closed during the call"))
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

    async fn read_located(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<(ObjectInfo, Bytes)> {
        let ctx = |e: Error| e.context(format!("read {} at {offset}", show_key(key)));
        let s = self.shared();
        loop {
            let (info, located) = self.locate(key, offset, len, options)?;
            let bytes = match located {
                Located::Ready(b) => b,
                Located::Heap(h) => {
                    s.landing.wait(h.version).await;
                    let bytes = data::read_range(
                        s.engine.as_ref(),
                        Some(&s.tables),
                        &h.object(),
                        h.offset,
                        h.len,
                    )
                    .await
                    .map_err(ctx)?;
                    self.admit(key, &h, &bytes, options);
                    bytes
                }
                Located::Slot(r) => {
                    match self
                        .read_slot(s.engine.as_ref(), key, &r)
                        .await
                        .map_err(ctx)?
                    {
                        Some(b) => b,
                        // The block was rewritten during the read.
                        None => continue,
                    }
                }
            };
            return Ok((info, bytes));
        }
    }

    /// [`read`](Self::read) for blocking callers: a range inside one device
    /// request is read with a plain `pread` on the calling thread, with no
    /// hop to an engine thread.
    pub(crate) fn read_blocking(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<Bytes> {
        let ctx = |e: Error| e.context(format!("read {} at {offset}", show_key(key)));
        let s = self.shared();
        loop {
            match self.locate(key, offset, len, options)?.1 {
                Located::Ready(b) => return Ok(b),
                Located::Heap(h) => {
                    s.landing.wait_blocking(h.version);
                    let bytes = data::read_range_blocking(
                        s.engine.as_ref(),
                        Some(&s.tables),
                        &h.object(),
                        h.offset,
                        h.len,
                    )
                    .map_err(ctx)?;
                    self.admit(key, &h, &bytes, options);
                    return Ok(bytes);
                }
                Located::Slot(r) => {
                    let (io, buf) = s
                        .engine
                        .read_at_blocking(AlignedBuf::zeroed(BLOCK_SIZE), r.at);
                    if let Some(b) = self
                        .inline_from_slot(key, &r, io, buf.as_slice())
                        .map_err(ctx)?
                    {
                        return Ok(b);
                    }
                }
            }
        }
    }

    /// `key`'s inline value of `version`, held in tuple block `block`,
    /// expired or not (backup's checks of its copy).
    pub(crate) async fn inline_value(
        &self,
        key: &[u8],
        version: u64,
        block: u32,
        size: u64,
    ) -> Result<Bytes> {
        let s = self.shared();
        loop {
            let slot = s.state.read().slot_of(block);
            let (at, writes) = slot.ok_or_else(|| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!("tuple block {block} of an inline value was never written"),
                )
            })?;
            let r = SlotRead {
                block,
                at,
                writes,
                version,
                size,
                offset: 0,
                len: size,
            };
            let found = self.read_slot(s.engine.as_ref(), key, &r).await?;
            if let Some(b) = found {
                return Ok(b);
            }
        }
    }

    /// The tuples of `block` as its current slot holds them, read now (none
    /// for a block never written), read again while commits rewrite it;
    /// `Err(why)` when the slot does not decode and was not rewritten
    /// during its read (damage). For scans (scrub, a backup's snapshot).
    pub(crate) async fn current_block(
        &self,
        block: u32,
    ) -> Result<std::result::Result<Vec<tuple::Tuple>, String>> {
        let s = self.shared();
        let id = SlotIdentity {
            store_id: s.geometry.store_id,
            block_no: block,
        };
        loop {
            let Some((at, writes)) = s.state.read().slot_of(block) else {
                return Ok(Ok(Vec::new()));
            };
            let (r, buf) = s.engine.read_at(AlignedBuf::zeroed(BLOCK_SIZE), at).await;
            r.map_err(|e| Error::io("reading a tuple block", e))?;
            let why = match decode_slot(id, buf.as_slice()) {
                SlotContent::Valid { tuples, .. } => return Ok(Ok(tuples)),
                SlotContent::Invalid { why, .. } => why,
                SlotContent::Empty => "it is empty".to_owned(),
            };
            if s.state.read().slot_of(block) == Some((at, writes)) {
                return Ok(Err(why));
            }
        }
    }

    /// Reads the slot `r` names through `reader` and takes `key`'s inline
    /// value from it (see [`inline_from_slot`](Self::inline_from_slot)).
    async fn read_slot<R: data::BlockReader + ?Sized>(
        &self,
        reader: &R,
        key: &[u8],
        r: &SlotRead,
    ) -> Result<Option<Bytes>> {
        let (io, buf) = reader
            .read_blocks(AlignedBuf::zeroed(BLOCK_SIZE), r.at)
            .await;
        self.inline_from_slot(key, r, io, buf.as_slice())
    }

    /// `key`'s inline value (the range `r` asks for) from `slot`, the bytes
    /// read from its tuple block's slot: checked with the slot (magic,
    /// checksum, identity: invariant 5), and kept in the read cache like a
    /// heap object's. `Ok(None)` when the slot did not hold it because a
    /// commit rewrote the block during the read (its write count moved):
    /// locate again. Otherwise a slot that does not hold the version the
    /// index names is `Corrupt`, never a guess.
    fn inline_from_slot(
        &self,
        key: &[u8],
        r: &SlotRead,
        io: std::io::Result<()>,
        slot: &[u8],
    ) -> Result<Option<Bytes>> {
        let s = self.shared();
        let id = SlotIdentity {
            store_id: s.geometry.store_id,
            block_no: r.block,
        };
        let found = match io.as_ref().map(|()| decode_slot(id, slot)) {
            Ok(SlotContent::Valid { tuples, .. }) => {
                let tuples: Arc<[tuple::Tuple]> = tuples.into();
                let found = inline_in(&tuples, key, r.version);
                if s.cache.wants_block(r.block) {
                    s.cache.admit_block(r.block, tuples);
                }
                found.ok_or_else(|| format!("does not hold version {}", r.version))
            }
            Ok(SlotContent::Invalid { why, .. }) => Err(why),
            Ok(SlotContent::Empty) => Err("is empty".to_owned()),
            Err(_) => Err(String::new()),
        };
        let value = match found {
            Ok(v) if v.len() as u64 == r.size => v,
            other => {
                if s.state.read().slot_of(r.block).map(|(_, w)| w) != Some(r.writes) {
                    return Ok(None);
                }
                if let Err(e) = io {
                    return Err(Error::io("reading a tuple block", e));
                }
                let why = match other {
                    Err(why) => why,
                    Ok(_) => format!("holds version {} with another size", r.version),
                };
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("tuple block {} (slot at byte {}) {why}", r.block, r.at),
                ));
            }
        };
        Ok(Some(
            value.slice(r.offset as usize..(r.offset + r.len) as usize),
        ))
    }

    /// Keeps the checked bytes of a whole-object read in the read cache
    /// (`cache`), unless `key` has moved on to another version meanwhile.
    /// Bytes the caller owns (`options.owned`) are kept as a copy.
    fn admit(&self, key: &[u8], h: &HeapRead, bytes: &Bytes, options: ReadOptions) {
        let s = self.shared();
        if s.cache.wants(h.version, h.size, h.offset, h.len) {
            s.cache.admit(h.version, bytes, options.owned, || {
                s.state
                    .read()
                    .lookup(key)
                    .is_some_and(|e| e.version == h.version)
            });
        }
    }

    /// Checks the call and resolves `key` to its bytes (inline and not yet
    /// written, or cached; copied when the caller is to own them), to its
    /// tuple block's slot (inline), or to its extent, pinned (the `Arc`) so
    /// its pieces outlive the read.
    fn locate(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<(ObjectInfo, Located)> {
        let ctx = || format!("read {} at {offset}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        let (info, data, block, slot) = {
            let st = self.shared().state.read();
            let e = st
                .lookup(key)
                .ok_or_else(|| Error::new(ErrorKind::NotFound, "no such key").context(ctx()))?;
            (e.info(), e.data.at_hand(), e.block, st.slot_of(e.block))
        };
        let (size, version) = (info.size, info.version);
        if offset > size {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("offset {offset} is past the end of the {size}-byte object"),
            )
            .context(ctx()));
        }
        let len = len.min(size - offset);
        let cache = &self.shared().cache;
        if matches!(data, Some(ObjectData::Heap { .. })) {
            if let Some(b) = cache.get(version, offset, len) {
                return Ok((info, Located::Ready(owned(b, options))));
            }
        }
        let located = match data {
            Some(ObjectData::Inline(b)) => Located::Ready(owned(
                b.slice(offset as usize..(offset + len) as usize),
                options,
            )),
            Some(ObjectData::Heap { extent, sums, .. }) => Located::Heap(HeapRead {
                extent,
                sums,
                size,
                version,
                offset,
                len,
            }),
            None => {
                if len == 0 {
                    // No bytes to read or check.
                    return Ok((info, Located::Ready(Bytes::new())));
                }
                let (at, writes) = slot.ok_or_else(|| {
                    Error::new(
                        ErrorKind::Corrupt,
                        format!("tuple block {block} of an inline value was never written"),
                    )
                    .context(ctx())
                })?;
                // A kept copy of the block holds the value if it holds this
                // version (a tuple's value never changes; versions are
                // never reused), whenever the copy was read.
                let kept = cache
                    .block(block)
                    .and_then(|tuples| inline_kept(&tuples, key, version))
                    .filter(|v| v.len() as u64 == size);
                match kept {
                    Some(v) => Located::Ready(lend_inline(
                        v.slice(offset as usize..(offset + len) as usize),
                        options,
                    )),
                    None => Located::Slot(SlotRead {
                        block,
                        at,
                        writes,
                        version,
                        size,
                        offset,
                        len,
                    }),
                }
            }
        };
        Ok((info, located))
    }

    /// The size of `key`'s object, from memory (`None` when absent).
    pub(crate) fn size_of(&self, key: &[u8]) -> Option<u64> {
        self.shared().state.read().lookup(key).map(|e| e.size)
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
        let key = key.as_ref();
        let ctx = || format!("stat {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        let st = self.shared().state.read();
        st.lookup(key)
            .map(Entry::info)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "no such key").context(ctx()))
    }

    /// Deletes `key`; `NotFound` when absent. Returns once durable.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let ctx = || format!("delete {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        self.shared().check_failed().map_err(|e| e.context(ctx()))?;
        let key: Box<[u8]> = key.into();
        self.submit(|reply| commit::Request::Delete { key, reply })
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
        let key = key.as_ref();
        let ctx = || format!("begin_upload {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        self.shared().check_failed().map_err(|e| e.context(ctx()))?;
        match Upload::begin(self.clone(), key, size) {
            Err(e) if self.worth_compacting(&e, size) => {
                self.compact().await.map_err(|e| e.context(ctx()))?;
                self.after_compaction(Upload::begin(self.clone(), key, size))
            }
            r => r,
        }
        .map_err(|e| e.context(ctx()))
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
        self.submit(|reply| commit::Request::Barrier { reply })
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
