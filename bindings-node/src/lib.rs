//! Node bindings: Promise methods over the async engine, `...Sync` twins
//! over the blocking engine for scripts, and lib.js over both (argument
//! checks that need JavaScript, iteration, errors).
//!
//! Errors cross as a message `"CODE: message"`, or `"CODE/errno: message"`
//! when the operating system reported the cause, which lib.js turns into a
//! `BlobcaskError` with that `code` (`'NOT_FOUND'`, `'NO_SPACE'`, ...) and
//! the OS error as its `cause` (see [`js_err`]).
//!
//! Where Promise calls run: `get`, `read`, `put`, `stat` and `delete` run
//! on the store's own [`engine::event_loop::EventLoop`], hosted on Node's
//! libuv loop (`host.rs`): the call submits its I/O from the JavaScript
//! thread, the loop's `uv_poll` handles see the completion, and the promise
//! is settled in that same libuv callback. No thread hop either way.
//! Transfers of 1 MiB and more run on a helper thread instead (the
//! engine's `EventLoop::read_op`/`put_op`: their checksums and copies would
//! stall the loop). Uploads, `sync`, `backup` and `close` run on napi-rs's
//! runtime; a bulk load on a thread of its own (see [`BulkLoad`]).
//! The `...Sync` calls made while Promise calls are pending keep the loop
//! running while they wait (the engine's invariant L4): a commit group one
//! of those leads completes only when the loop runs.
//!
//! After `close()` (or once the JavaScript `Store` is collected) new
//! Promise calls reject with CLOSED; pending ones still settle, then the
//! loop's handles are closed. An open store with nothing pending does not
//! keep Node alive.
//!
//! Bytes in and out: values passed to `put`/`writePart`/`bulkLoad` are
//! copied before the call returns (the caller may reuse its Buffer at
//! once); read results become Buffers as `results.rs` describes.
#![deny(unsafe_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use engine::{Bytes, Durability, IndexKind, IoEngineKind, Options, PutMode, PutOptions};
use napi::bindgen_prelude::*;
use napi_derive::napi;

mod host;
mod records;
mod results;

use host::{Host, JsThread, Promise};
use records::{js, Js, MAX_SAFE_INTEGER};
use results::{read_options, ObjectBytes};

/// The engine's error as it crosses into JavaScript: `"CODE: message"`,
/// where the message ends with the operating system's words when the
/// error has an OS cause, and `"CODE/errno: message"` when that cause has
/// an error number (lib.js makes it the `cause`, with Node's name for it).
/// A napi-rs Promise carries only napi's own statuses, hence the prefix.
pub(crate) fn js_err(e: engine::Error) -> Error {
    let code = e.kind().code();
    let source = std::error::Error::source(&e);
    let errno = source
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error);
    let tag = match errno {
        Some(n) => format!("{code}/{n}"),
        None => code.to_string(),
    };
    let message = match source {
        Some(s) => format!("{}: {s}", e.message()),
        None => e.message().to_string(),
    };
    Error::new(
        Status::GenericFailure,
        format!("{tag}: {}", js_names(&message)),
    )
}

/// The core's messages name options and conditions as Rust and Python do
/// (`read_only`, `if_absent`); JavaScript callers passed `readOnly`,
/// `ifAbsent`. Whole words only, so a key that contains one is left alone.
fn js_names(message: &str) -> String {
    const NAMES: [&str; 11] = [
        "read_only",
        "create_new",
        "io_engine",
        "direct_io",
        "cache_bytes",
        "max_capacity",
        "inline_threshold",
        "max_piece_size",
        "max_delay",
        "if_absent",
        "if_version",
    ];
    let mut out = message.to_owned();
    for name in NAMES {
        let mut from = 0;
        while let Some(at) = out.get(from..).and_then(|rest| rest.find(name)) {
            let (start, end) = (from + at, from + at + name.len());
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            let before = out.get(..start).and_then(|s| s.chars().next_back());
            let after = out.get(end..).and_then(|s| s.chars().next());
            if word(before) || word(after) {
                from = end;
                continue;
            }
            let camel = records::camel(name);
            out.replace_range(start..end, &camel);
            from = start + camel.len();
        }
    }
    out
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(
        Status::InvalidArg,
        format!("INVALID_ARGUMENT: {}", msg.into()),
    )
}

/// A key: a string (UTF-8) or a Buffer/Uint8Array.
fn key_of(key: Either<String, Uint8Array>) -> Bytes {
    match key {
        Either::A(s) => Bytes::from(s.into_bytes()),
        Either::B(b) => Bytes::copy_from_slice(&b),
    }
}

/// An `ifVersion`: a number that is a safe integer, or a bigint below 2^64.
fn version_of(v: Either<f64, BigInt>) -> Result<u64> {
    const BAD: &str =
        "ifVersion must be a version: a non-negative safe integer or bigint below 2^64";
    match v {
        Either::A(n) if n.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER as f64).contains(&n) => {
            Ok(n as u64)
        }
        Either::A(n) => Err(invalid(format!("{BAD}, not {n}"))),
        Either::B(b) => match b.get_u64() {
            (false, v, true) => Ok(v),
            _ => Err(invalid(BAD)),
        },
    }
}

/// One batch of a bulk load's items, keys and values copied.
type Batch = Vec<(Bytes, Bytes)>;

/// Batches fed to one bulk load and not yet taken by it: with the batch
/// being filled, what the load holds of the caller's values beyond its own
/// batches (at most about 3 x [`FEED_BYTES`]).
const FEED_BATCHES: usize = 2;
/// Items per fed batch, at most.
const FEED_ITEMS: usize = 1024;
/// Value bytes per fed batch, about: a batch is full once it holds this
/// much (one value may take it further).
const FEED_BYTES: usize = 4 << 20;

/// A bulk load in progress (`Store.bulkLoad` in lib.js): lib.js takes the
/// items from the caller's iterable on the JavaScript thread and `add`s
/// each here, which copies it into the batch being filled; full batches
/// are fed (`feed`) to the engine's `bulk_load`, which runs on a thread of
/// its own over them, in order, until `finish`. A thread, not the event
/// loop or napi-rs's runtime, because the engine takes the items from a
/// blocking iterator: it waits for the next batch inside the load. Ending
/// the feed early (`finish` after a failure on the JavaScript side, or the
/// `BulkLoad` collected) loads the items fed so far.
#[napi]
pub struct BulkLoad {
    /// The batch being filled and its value bytes.
    batch: Mutex<(Batch, usize)>,
    feed: Mutex<Option<SyncSender<Batch>>>,
    load: Mutex<Option<JoinHandle<engine::Result<engine::LoadReport>>>>,
}

/// `BulkLoad.feed` on the libuv thread pool: waits for room in the feed.
pub struct Feed {
    feed: Option<SyncSender<Batch>>,
    batch: Batch,
}

impl Task for Feed {
    type Output = bool;
    type JsValue = bool;

    fn compute(&mut self) -> Result<bool> {
        let batch = std::mem::take(&mut self.batch);
        // The sender is dropped here, not whenever napi-rs drops the task,
        // so that `finish` holds the last one and ends the feed.
        // `false`: the load has ended (it failed; `finish` says how).
        Ok(match self.feed.take() {
            Some(feed) if !batch.is_empty() => feed.send(batch).is_ok(),
            Some(_) => true,
            None => false,
        })
    }

    fn resolve(&mut self, _: Env, fed: bool) -> Result<bool> {
        Ok(fed)
    }
}

/// `BulkLoad.finish` on the libuv thread pool: feeds the last batch, ends
/// the feed and waits for the load's end.
pub struct Finish {
    feed: Option<SyncSender<Batch>>,
    batch: Batch,
    load: Option<JoinHandle<engine::Result<engine::LoadReport>>>,
}

impl Task for Finish {
    type Output = Js;
    type JsValue = Js;

    fn compute(&mut self) -> Result<Js> {
        // The feed ends here, when this last sender is dropped: `feed`
        // tasks have resolved (and dropped theirs) before lib.js finishes.
        if let Some(feed) = self.feed.take() {
            let batch = std::mem::take(&mut self.batch);
            if !batch.is_empty() {
                // A load that has ended says why below.
                let _ = feed.send(batch);
            }
        }
        let load = self
            .load
            .take()
            .ok_or_else(|| invalid("the bulk load was already finished"))?;
        match load.join() {
            Ok(r) => r.map(|r| js(&r)).map_err(js_err),
            Err(_) => Err(Error::from_reason("INTERNAL: the bulk load panicked")),
        }
    }

    fn resolve(&mut self, _: Env, report: Js) -> Result<Js> {
        Ok(report)
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::from_reason("INTERNAL: a bulk load lock was poisoned")
}

#[napi]
impl BulkLoad {
    /// Copies one item into the batch being filled; returns whether the
    /// batch is full (then lib.js calls `feed` before adding more).
    #[napi]
    pub fn add(&self, key: Either<String, Uint8Array>, value: Uint8Array) -> Result<bool> {
        let mut batch = self.batch.lock().map_err(poisoned)?;
        batch.1 += value.len();
        batch.0.push((key_of(key), Bytes::copy_from_slice(&value)));
        Ok(batch.0.len() >= FEED_ITEMS || batch.1 >= FEED_BYTES)
    }

    /// Feeds the batch being filled to the load. Resolves once the load
    /// has room for it: `true`, or `false` when the load has already ended
    /// (then `finish` rejects with why).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn feed(&self) -> Result<AsyncTask<Feed>> {
        let (batch, _) = std::mem::take(&mut *self.batch.lock().map_err(poisoned)?);
        let feed = self.feed.lock().map_err(poisoned)?.clone();
        Ok(AsyncTask::new(Feed { feed, batch }))
    }

    /// Feeds the batch being filled, ends the feed and resolves with the
    /// load's report once everything fed is committed; rejects with the
    /// load's error.
    #[napi(ts_return_type = "Promise<LoadReport>")]
    pub fn finish(&self) -> Result<AsyncTask<Finish>> {
        let (batch, _) = std::mem::take(&mut *self.batch.lock().map_err(poisoned)?);
        let feed = self.feed.lock().map_err(poisoned)?.take();
        let load = self.load.lock().map_err(poisoned)?.take();
        Ok(AsyncTask::new(Finish { feed, batch, load }))
    }
}

/// Options for `Store.open`.
#[napi(object)]
#[derive(Default)]
pub struct OpenOptions {
    /// Size of the store file: a new store starts at it (default 16 MiB)
    /// and grows as it fills; a larger one at reopen grows the store, a
    /// smaller one is refused. Default: the store's current size.
    pub capacity: Option<f64>,
    /// `'hash'`, `'btree'` or `'fst'`. Stored in the store: omitted, an
    /// existing store uses its stored kind (a new one `'hash'`).
    pub index: Option<String>,
    /// Values up to this many bytes are stored inline. Stored like `index`.
    pub inline_threshold: Option<u32>,
    /// Largest size the store file grows to by itself (a put that needs
    /// more rejects with NO_SPACE). Stored like `index`; omitted, an
    /// existing store keeps its stored limit (a new one has none but the
    /// file system). `2 ** 64` or more (e.g. `Infinity`) means no limit.
    pub max_capacity: Option<f64>,
    /// `'auto'` (default), `'io_uring'` or `'portable'`.
    pub io_engine: Option<String>,
    /// Bypass the page cache (default true).
    pub direct_io: Option<bool>,
    /// Create a store where nothing is: a missing path or an empty file
    /// (default true). Any other file without a blobcask superblock is
    /// refused (CORRUPT) and left untouched.
    pub create: Option<bool>,
    /// Insist on a new store: an existing non-empty file is refused
    /// (INVALID_ARGUMENT) and left untouched (default false).
    pub create_new: Option<bool>,
    /// Open an existing store read-only: shared lock (several readers may
    /// share it, a writer gets LOCKED), read-only descriptor, every change
    /// rejected with UNSUPPORTED, nothing ever written (default false).
    pub read_only: Option<bool>,
    /// With `readOnly` only: open a store that a plain open refuses for a
    /// damaged tuple block, skipping the block (its objects are missing,
    /// never served from an older copy; `stats().recovery.skipped` names
    /// it), to copy out what reads (`backup`). Default false.
    pub salvage: Option<bool>,
    /// Bytes of the read cache of whole small objects (default 64 MiB; 0
    /// turns it off). `stats().cache` counts its hits.
    pub cache_bytes: Option<f64>,
    /// When an acknowledged change is durable: `'sync'` (the default) or
    /// `{ maxDelayMs }` (see [`BufferedDurability`]). Not stored: given
    /// at every open.
    #[napi(ts_type = "'sync' | { maxDelayMs: number }")]
    pub durability: Option<Either<String, BufferedDurability>>,
}

/// `durability: { maxDelayMs }`: changes are acknowledged at once and
/// written as one group at most `maxDelayMs` later (or at `sync()`,
/// `close()`). A crash loses the changes of up to the last `maxDelayMs`,
/// acknowledged or not; what survives is a prefix of them in commit order.
#[napi(object)]
pub struct BufferedDurability {
    /// Longest time an acknowledged change stays unwritten, in
    /// milliseconds: more than 0 (fractions down to 0.001, 1 µs), finite.
    pub max_delay_ms: f64,
}

fn durability_of(d: Either<String, BufferedDurability>) -> Result<Durability> {
    match d {
        Either::A(s) if s == "sync" => Ok(Durability::Sync),
        Either::A(s) => Err(invalid(format!(
            "durability must be 'sync' or {{ maxDelayMs }}, not {s:?}"
        ))),
        Either::B(BufferedDurability { max_delay_ms: ms }) => {
            match Duration::try_from_secs_f64(ms / 1000.0) {
                Ok(max_delay) if max_delay >= Duration::from_micros(1) => {
                    Ok(Durability::Buffered { max_delay })
                }
                _ => Err(invalid(format!(
                    "durability.maxDelayMs must be a finite number of milliseconds of at least 0.001, not {ms}"
                ))),
            }
        }
    }
}

/// Conditions and expiry of a `put`.
#[napi(object)]
#[derive(Default)]
pub struct PutConditions {
    /// Create only: rejects with ALREADY_EXISTS if the key has an object.
    pub if_absent: Option<bool>,
    /// Replace only this version (`ObjectInfo.version`, a number or a
    /// bigint): rejects with VERSION_MISMATCH if the key holds another
    /// version or nothing.
    #[napi(ts_type = "number | bigint")]
    pub if_version: Option<Either<f64, BigInt>>,
    /// Time to live in milliseconds (fractions down to 0.001, 1 µs): the
    /// object expires that long after its commit. Omitted or `null`, it
    /// never expires (replacing one that would have).
    #[napi(ts_type = "number | null")]
    pub ttl: Option<Either<f64, Null>>,
}

fn put_options(c: Option<PutConditions>) -> Result<PutOptions> {
    let c = c.unwrap_or_default();
    let version = c.if_version.map(version_of).transpose()?;
    let mode = PutMode::from_conditions(c.if_absent.unwrap_or(false), version).map_err(js_err)?;
    let options = PutOptions::from(mode);
    match c.ttl {
        None | Some(Either::B(Null)) => Ok(options),
        Some(Either::A(ms)) => Ok(options.ttl(ttl_of(ms)?)),
    }
}

/// A time to live given in milliseconds. Only what no `Duration` can hold
/// (negative, NaN, infinite, beyond 2^64 seconds) is refused here; the
/// range a put accepts (at least 1 µs, at most `MAX_TTL`) is the core's to
/// check. Both are INVALID_ARGUMENT.
fn ttl_of(ms: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(ms / 1000.0)
        .map_err(|_| invalid(format!("ttl out of range: {ms} ms")))
}

fn options_of(o: Option<OpenOptions>) -> Result<Options> {
    let o = o.unwrap_or_default();
    let mut opts = Options::new();
    if let Some(c) = o.capacity {
        if !(c.is_finite() && c >= 0.0) {
            return Err(invalid("capacity must be a non-negative number"));
        }
        opts = opts.capacity(c as u64);
    }
    if let Some(i) = o.index {
        opts = opts.index(i.parse::<IndexKind>().map_err(js_err)?);
    }
    if let Some(t) = o.inline_threshold {
        opts = opts.inline_threshold(t as usize);
    }
    if let Some(m) = o.max_capacity {
        opts = opts.max_capacity(limit_of(m, "maxCapacity")?);
    }
    if let Some(c) = o.cache_bytes {
        opts = opts.cache_bytes(offset_of(c, "cacheBytes")?);
    }
    if let Some(d) = o.durability {
        opts = opts.durability(durability_of(d)?);
    }
    if let Some(e) = o.io_engine {
        opts = opts.io_engine(e.parse::<IoEngineKind>().map_err(js_err)?);
    }
    Ok(opts
        .direct_io(o.direct_io.unwrap_or(true))
        .create(o.create.unwrap_or(true))
        .create_new(o.create_new.unwrap_or(false))
        .read_only(o.read_only.unwrap_or(false))
        .salvage(o.salvage.unwrap_or(false)))
}

fn offset_of(n: f64, what: &str) -> Result<u64> {
    // 2^64 as a double: the first value `as u64` would saturate.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    if (0.0..LIMIT).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid(format!(
            "{what} must be a non-negative integer below 2^64, not {n}"
        )))
    }
}

/// A size limit: a non-negative integer, where `2 ** 64` and beyond
/// (`Infinity` too) mean no limit (`u64::MAX`).
fn limit_of(n: f64, what: &str) -> Result<u64> {
    if n == f64::INFINITY || (n >= 18_446_744_073_709_551_616.0 && n.fract() == 0.0) {
        return Ok(u64::MAX);
    }
    offset_of(n, what)
}

/// Opens (creating when missing) the store at `path`.
#[napi]
pub async fn open(path: String, options: Option<OpenOptions>) -> Result<Store> {
    let opts = options_of(options)?;
    let store = engine::Store::open(path, opts).await.map_err(js_err)?;
    Ok(Store::new(store))
}

/// Synchronous `open`, for scripts.
#[napi]
pub fn open_sync(path: String, options: Option<OpenOptions>) -> Result<Store> {
    let opts = options_of(options)?;
    let store = engine::blocking::Store::open(path, opts).map_err(js_err)?;
    Ok(Store::new(store.as_async().clone()))
}

/// CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes.
#[napi(js_name = "crc32c")]
pub fn crc32c_of(data: Uint8Array) -> u32 {
    ::crc32c::crc32c(&data)
}

/// The loop host of a store (H1 in `host.rs`: JavaScript thread only).
#[derive(Default)]
struct Hosting {
    host: Option<Rc<Host>>,
}

/// An open blob store.
#[napi]
pub struct Store {
    inner: engine::Store,
    /// Made at the first call that needs it, on the JavaScript thread, and
    /// used there only; `open` builds the `Store` on a runtime thread with
    /// an empty one.
    hosting: JsThread<RefCell<Hosting>>,
    /// Set when `close()` or `closeSync()` is called, and shared with the
    /// store's `Upload`s, whose calls then reject with CLOSED too, even
    /// while the close is still finishing.
    closing: Arc<AtomicBool>,
}

impl Store {
    fn new(inner: engine::Store) -> Store {
        Store {
            inner,
            hosting: JsThread(RefCell::new(Hosting::default())),
            closing: Arc::default(),
        }
    }

    fn blocking(&self) -> engine::blocking::Store {
        engine::blocking::Store::from(self.inner.clone())
    }

    /// CLOSED once `close()` or `closeSync()` was called, even while the
    /// close is still finishing: every call but `close` checks this first
    /// (`sync()` after an unawaited `close()` used to go through).
    fn check_open(&self) -> Result<()> {
        if self.closing.load(Ordering::Acquire) || self.inner.is_closed() {
            return Err(host::closed());
        }
        Ok(())
    }

    /// The store's loop host, made on first use. `env` proves we are on
    /// the JavaScript thread (H1).
    fn host(&self, env: &Env) -> Result<Rc<Host>> {
        self.check_open()?;
        let mut hosting = self.hosting.0.borrow_mut();
        if let Some(h) = &hosting.host {
            return Ok(h.clone());
        }
        let h = Host::new(env.raw(), &self.inner)?;
        hosting.host = Some(h.clone());
        Ok(h)
    }

    /// A `getSync`/`readSync` on the calling thread.
    fn read_sync_range(&self, key: Bytes, offset: u64, length: u64) -> Result<ObjectBytes> {
        self.check_open()?;
        let store = self.blocking();
        let options = read_options(&store, &key, offset, length);
        store
            .read_with(key, offset, length, options)
            .map(|bytes| ObjectBytes::new(bytes, options))
            .map_err(js_err)
    }

    /// A `get`/`read` on the store's loop (`EventLoop::read_op`: results
    /// of 1 MiB or more are read on a helper thread).
    fn read_range(&self, env: &Env, key: Bytes, offset: u64, length: u64) -> Result<Promise> {
        let options = read_options(&self.blocking(), &key, offset, length);
        self.host(env)?.spawn(|ev| {
            let read = ev.read_op(key, offset, length, options);
            async move {
                read.await
                    .map(|bytes| ObjectBytes::new(bytes, options))
                    .map_err(js_err)
            }
        })
    }

    /// Marks the store closed for the loop: later calls reject with
    /// CLOSED; the host stops once its pending tasks are done.
    fn close_host(&self) {
        self.closing.store(true, Ordering::Release);
        let host = self.hosting.0.borrow_mut().host.take();
        if let Some(h) = host {
            h.close();
        }
    }
}

impl Drop for Store {
    /// The JavaScript `Store` was collected (or `open` was abandoned, with
    /// no host yet): pending calls still settle, then the host stops.
    fn drop(&mut self) {
        self.close_host();
    }
}

#[napi]
impl Store {
    /// Stores `value` under `key` (create or replace). Resolves once durable;
    /// puts issued together are committed together. The value is copied
    /// before `put` returns, so the caller may change or reuse its Buffer
    /// at once without changing what is stored. Runs on the store's loop
    /// (submitted from this thread, completed by the loop); values of
    /// 1 MiB or more are written by a helper thread.
    #[napi(ts_return_type = "Promise<ObjectInfo>")]
    pub fn put(
        &self,
        env: &Env,
        key: Either<String, Uint8Array>,
        value: Uint8Array,
        conditions: Option<PutConditions>,
    ) -> Result<Promise> {
        let options = put_options(conditions)?;
        let (key, value) = (key_of(key), Bytes::copy_from_slice(&value));
        self.host(env)?.spawn(|ev| {
            let put = ev.put_op(key, value, options);
            async move { put.await.map(|i| js(&i)).map_err(js_err) }
        })
    }

    /// The whole object. Runs on the store's loop; results of 1 MiB or
    /// more are read by a helper thread.
    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn get(&self, env: &Env, key: Either<String, Uint8Array>) -> Result<Promise> {
        self.read_range(env, key_of(key), 0, u64::MAX)
    }

    /// `length` bytes from `offset` (to the end when omitted), clipped at
    /// the end; an offset past the end rejects with INVALID_ARGUMENT.
    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn read(
        &self,
        env: &Env,
        key: Either<String, Uint8Array>,
        offset: f64,
        length: Option<f64>,
    ) -> Result<Promise> {
        let offset = offset_of(offset, "offset")?;
        let length = match length {
            Some(l) => offset_of(l, "length")?,
            None => u64::MAX,
        };
        self.read_range(env, key_of(key), offset, length)
    }

    /// Size, version and commit time.
    #[napi(ts_return_type = "Promise<ObjectInfo>")]
    pub fn stat(&self, env: &Env, key: Either<String, Uint8Array>) -> Result<Promise> {
        let (store, key) = (self.inner.clone(), key_of(key));
        self.host(env)?
            .spawn(|_| async move { store.stat(key).await.map(|i| js(&i)).map_err(js_err) })
    }

    /// Deletes `key` (NOT_FOUND when absent); resolves once durable.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete(&self, env: &Env, key: Either<String, Uint8Array>) -> Result<Promise> {
        let (store, key) = (self.inner.clone(), key_of(key));
        self.host(env)?
            .spawn(|_| async move { store.delete(key).await.map_err(js_err) })
    }

    /// Whether `key` has an object (memory only, no I/O).
    #[napi]
    pub fn has(&self, key: Either<String, Uint8Array>) -> Result<bool> {
        self.check_open()?;
        Ok(self.inner.contains(key_of(key)))
    }

    /// Up to `limit` keys starting with `prefix`, strictly after `after`
    /// when given, in order. `list()` in lib.js pages through this.
    #[napi]
    pub fn list_page(
        &self,
        prefix: Either<String, Uint8Array>,
        after: Option<Uint8Array>,
        limit: u32,
    ) -> Result<Vec<Buffer>> {
        self.check_open()?;
        let prefix = key_of(prefix);
        let keys = match after {
            None => self.inner.list(&prefix),
            Some(a) => self.inner.list_after(&prefix, &*a),
        }
        .map_err(js_err)?;
        let mut out = Vec::new();
        for entry in keys.take(limit as usize) {
            out.push(Buffer::from(entry.map_err(js_err)?.key.to_vec()));
        }
        Ok(out)
    }

    /// Starts a multipart upload of exactly `size` bytes.
    #[napi(ts_return_type = "Promise<Upload>")]
    pub fn begin_upload(
        &self,
        env: &Env,
        key: Either<String, Uint8Array>,
        size: f64,
    ) -> Result<AsyncBlock<Upload>> {
        self.check_open()?;
        let key = key_of(key);
        let size = offset_of(size, "size")?;
        let store = self.inner.clone();
        let store_closing = self.closing.clone();
        AsyncBlockBuilder::new(async move {
            let up = store.begin_upload(key, size).await.map_err(js_err)?;
            Ok(Upload {
                inner: Arc::new(up),
                store_closing,
            })
        })
        .build(env)
    }

    /// Starts a bulk load fed by lib.js (`Store.bulkLoad`); see
    /// [`BulkLoad`]. Throws CLOSED after `close()`; the load itself
    /// rejects (at `finish`) with UNSUPPORTED on a read-only store.
    #[napi]
    pub fn bulk_load(&self) -> Result<BulkLoad> {
        self.check_open()?;
        let (feed, batches) = mpsc::sync_channel::<Batch>(FEED_BATCHES);
        let store = self.blocking();
        let load = std::thread::Builder::new()
            .name("blobcask-bulk-load".into())
            .spawn(move || store.bulk_load(batches.into_iter().flatten()))
            .map_err(|e| Error::from_reason(format!("IO: starting the bulk load thread: {e}")))?;
        Ok(BulkLoad {
            batch: Mutex::new((Vec::new(), 0)),
            feed: Mutex::new(Some(feed)),
            load: Mutex::new(Some(load)),
        })
    }

    /// The uploads in progress on this store (begun through this process's
    /// open store and neither committed, aborted nor dropped), oldest
    /// first. Memory only, no I/O. Uploads are not persisted: one not
    /// committed when the process ends is gone at the next open, its space
    /// free. CLOSED after `close()`.
    #[napi(ts_return_type = "Array<UploadInfo>")]
    pub fn list_uploads(&self) -> Result<Vec<Js>> {
        self.check_open()?;
        Ok(self.inner.list_uploads().iter().map(js).collect())
    }

    /// Aborts upload `id` (`Upload.id`, `UploadInfo.id`) wherever its
    /// handle is: its space is freed once parts being written finish, and
    /// the handle's later `writePart` and `commit` reject with CLOSED.
    /// Memory only, no I/O, so synchronous. Throws NOT_FOUND when no such
    /// upload is in progress (already committed, aborted or dropped),
    /// CLOSED after `close()`, INVALID_ARGUMENT for an `id` that is not a
    /// non-negative integer. A commit already under way is not stopped.
    #[napi]
    pub fn abort_upload(&self, id: f64) -> Result<()> {
        self.check_open()?;
        let id = offset_of(id, "id")?;
        self.inner.abort_upload(id).map_err(js_err)
    }

    /// Space and content figures.
    #[napi(ts_return_type = "Stats")]
    pub fn stats(&self) -> Result<Js> {
        self.check_open()?;
        Ok(js(&self.inner.stats()))
    }

    /// Grows the store file to `capacity` bytes (rounded down to 4096) now,
    /// ahead of the growth a put would trigger; the space is reserved on
    /// the file system and the new size durable when the promise resolves
    /// (`stats().capacity`). The current size is a no-op. Rejects with
    /// INVALID_ARGUMENT for a smaller size (a store never shrinks), one
    /// above `maxCapacity` or not a non-negative integer; UNSUPPORTED on a
    /// block device or a read-only store; NO_SPACE when the file system is
    /// full (the store keeps its size); CLOSED after `close()`. Runs on
    /// napi-rs's runtime.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn grow(&self, env: &Env, capacity: f64) -> Result<AsyncBlock<()>> {
        self.check_open()?;
        let capacity = offset_of(capacity, "capacity")?;
        let store = self.inner.clone();
        AsyncBlockBuilder::new(async move { store.grow(capacity).await.map_err(js_err) }).build(env)
    }

    /// Barrier: resolves once everything acknowledged before is durable.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn sync(&self, env: &Env) -> Result<AsyncBlock<()>> {
        self.check_open()?;
        let store = self.inner.clone();
        AsyncBlockBuilder::new(async move { store.sync().await.map_err(js_err) }).build(env)
    }

    /// Writes a consistent copy of the store to `dest`, a path that must
    /// not exist yet, while other calls go on; open the copy with
    /// `Store.open(dest)`. The copy holds the objects live at the call
    /// (compacted: only live data), is reopened and checked against the
    /// source's bytes before the promise resolves, and appears under
    /// `dest` only once complete. Rejects with ALREADY_EXISTS if `dest`
    /// exists (nothing is ever replaced), NOT_FOUND if its directory does
    /// not exist, INVALID_ARGUMENT if it names no file, CLOSED after
    /// `close()`, CORRUPT if an object fails its checksums (no copy is
    /// made), NO_SPACE or IO. Runs on napi-rs's runtime.
    #[napi(ts_return_type = "Promise<BackupReport>")]
    pub fn backup(&self, env: &Env, dest: String) -> Result<AsyncBlock<Js>> {
        self.check_open()?;
        let store = self.inner.clone();
        AsyncBlockBuilder::new(
            async move { store.backup(dest).await.map(|r| js(&r)).map_err(js_err) },
        )
        .build(env)
    }

    /// Moves objects towards the start of the store so that free space
    /// left in small holes by deletes joins into large pieces, while other
    /// calls go on; moved objects keep their version, creation time and
    /// expiry. A put that finds no room although enough is free does this
    /// by itself. Rejects with UNSUPPORTED on a read-only store, CLOSED
    /// after `close()`, IO. Runs on napi-rs's runtime.
    #[napi(ts_return_type = "Promise<CompactReport>")]
    pub fn compact(&self, env: &Env) -> Result<AsyncBlock<Js>> {
        self.check_open()?;
        let store = self.inner.clone();
        AsyncBlockBuilder::new(async move { store.compact().await.map(|r| js(&r)).map_err(js_err) })
            .build(env)
    }

    /// Finishes pending commits and releases the lock. Calls made after
    /// `close()` reject with CLOSED at once; calls already pending settle
    /// as usual, and the store's loop stops once they have.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self, env: &Env) -> Result<AsyncBlock<()>> {
        self.close_host();
        let store = self.inner.clone();
        AsyncBlockBuilder::new(async move { store.close().await.map_err(js_err) }).build(env)
    }

    /// Synchronous `put` (blocks the event loop; for scripts).
    #[napi(ts_return_type = "ObjectInfo")]
    pub fn put_sync(
        &self,
        key: Either<String, Uint8Array>,
        value: Uint8Array,
        conditions: Option<PutConditions>,
    ) -> Result<Js> {
        self.check_open()?;
        let options = put_options(conditions)?;
        let (key, value) = (key_of(key), Bytes::copy_from_slice(&value));
        self.blocking()
            .put_with(key, value, options)
            .map(|i| js(&i))
            .map_err(js_err)
    }

    /// Synchronous `get`.
    #[napi(ts_return_type = "Buffer")]
    pub fn get_sync(&self, key: Either<String, Uint8Array>) -> Result<ObjectBytes> {
        self.read_sync_range(key_of(key), 0, u64::MAX)
    }

    /// Synchronous `read`.
    #[napi(ts_return_type = "Buffer")]
    pub fn read_sync(
        &self,
        key: Either<String, Uint8Array>,
        offset: f64,
        length: Option<f64>,
    ) -> Result<ObjectBytes> {
        let offset = offset_of(offset, "offset")?;
        let length = match length {
            Some(l) => offset_of(l, "length")?,
            None => u64::MAX,
        };
        self.read_sync_range(key_of(key), offset, length)
    }

    /// Synchronous `stat`.
    #[napi(ts_return_type = "ObjectInfo")]
    pub fn stat_sync(&self, key: Either<String, Uint8Array>) -> Result<Js> {
        self.check_open()?;
        self.blocking()
            .stat(key_of(key))
            .map(|i| js(&i))
            .map_err(js_err)
    }

    /// Synchronous `delete`.
    #[napi]
    pub fn delete_sync(&self, key: Either<String, Uint8Array>) -> Result<()> {
        self.check_open()?;
        self.blocking().delete(key_of(key)).map_err(js_err)
    }

    /// Synchronous `grow` (blocks the event loop while the file system
    /// reserves the space; for scripts).
    #[napi]
    pub fn grow_sync(&self, capacity: f64) -> Result<()> {
        self.check_open()?;
        let capacity = offset_of(capacity, "capacity")?;
        self.blocking().grow(capacity).map_err(js_err)
    }

    /// Synchronous `sync`.
    #[napi]
    pub fn sync_sync(&self) -> Result<()> {
        self.check_open()?;
        self.blocking().sync().map_err(js_err)
    }

    /// Synchronous `backup` (blocks the event loop while it copies; for
    /// scripts).
    #[napi(ts_return_type = "BackupReport")]
    pub fn backup_sync(&self, dest: String) -> Result<Js> {
        self.check_open()?;
        self.blocking().backup(dest).map(|r| js(&r)).map_err(js_err)
    }

    /// Synchronous `compact` (blocks the event loop while it moves
    /// objects; for scripts).
    #[napi(ts_return_type = "CompactReport")]
    pub fn compact_sync(&self) -> Result<Js> {
        self.check_open()?;
        self.blocking().compact().map(|r| js(&r)).map_err(js_err)
    }

    /// Synchronous `close`.
    #[napi]
    pub fn close_sync(&self) -> Result<()> {
        // The host first: later calls reject with CLOSED. Calls still
        // pending on the loop finish while `close` waits (the engine drives
        // the loop of this thread meanwhile, its invariant L4).
        self.close_host();
        self.blocking().close().map_err(js_err)
    }
}

/// A multipart upload; see `Store.beginUpload`.
#[napi]
pub struct Upload {
    /// The engine's handle, shared with the write and commit tasks: a
    /// commit while a part is being written is refused (INVALID_ARGUMENT)
    /// and leaves the upload as it was; once it ended, `writePart` and
    /// `commit` reject with CLOSED. An ended handle holds no store.
    inner: Arc<engine::Upload>,
    /// Its store's `closing`: set, `writePart` and `commit` reject with
    /// CLOSED.
    store_closing: Arc<AtomicBool>,
}

#[napi]
impl Upload {
    /// This upload's id in `listUploads` (for `abortUpload`); still
    /// readable once committed or aborted.
    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.inner.id() as f64
    }

    /// Writes one part at `offset` (a multiple of 4096; parts end on a
    /// multiple of 4096 or at the object's end), in any order, concurrently.
    /// With `crc32c` (the CRC32C of `data`, as `crc32c()` computes it) the
    /// bytes are checked before anything is written; a mismatch rejects
    /// with 'INVALID_ARGUMENT'.
    /// The part is copied before `writePart` returns: the caller may reuse
    /// its Buffer at once.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_part(
        &self,
        env: &Env,
        offset: f64,
        data: Uint8Array,
        crc32c: Option<f64>,
    ) -> Result<AsyncBlock<()>> {
        if self.store_closing.load(Ordering::Acquire) {
            return Err(host::closed());
        }
        let offset = offset_of(offset, "offset")?;
        let crc = match crc32c {
            None => None,
            Some(c) if c.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&c) => Some(c as u32),
            Some(_) => return Err(invalid("crc32c must be an integer from 0 to 2^32 - 1")),
        };
        let data = Bytes::copy_from_slice(&data);
        let up = self.inner.clone();
        AsyncBlockBuilder::new(async move {
            match crc {
                Some(c) => up.write_part_checked(offset, data, c).await,
                None => up.write_part(offset, data).await,
            }
            .map_err(js_err)
        })
        .build(env)
    }

    /// Makes the object visible atomically; `{ ifAbsent, ifVersion, ttl }`
    /// as for `put`. A bad option rejects and leaves the upload as it was,
    /// as does a commit while a `writePart` of this upload is still under
    /// way (INVALID_ARGUMENT: commit once every part has resolved); a
    /// commit the store refuses (a condition not met, bytes never written)
    /// ends it. Once it ended, `writePart` and `commit` reject with CLOSED.
    #[napi(ts_return_type = "Promise<ObjectInfo>")]
    pub async fn commit(&self, conditions: Option<PutConditions>) -> Result<Js> {
        if self.store_closing.load(Ordering::Acquire) {
            return Err(host::closed());
        }
        let options = put_options(conditions)?;
        let up = self.inner.clone();
        up.commit_with(options)
            .await
            .map(|i| js(&i))
            .map_err(js_err)
    }

    /// Abandons the upload and frees its space (a no-op once it ended).
    #[napi]
    pub async fn abort(&self) -> Result<()> {
        self.inner.clone().abort().await.map_err(js_err)
    }
}
