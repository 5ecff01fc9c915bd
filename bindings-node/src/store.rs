//! `Store`: opening one, and every call on it, as a Promise and as a
//! `...Sync` twin; its loop host.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use engine::event_loop::OFFLOAD_BYTES;
use engine::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{key_of, offset_of, options_of, put_options, OpenOptions, PutConditions};
use crate::bulk_load::{Batch, BulkLoad, FEED_BATCHES};
use crate::errors::js_err;
use crate::host::{self, Host, JsThread, Promise};
use crate::listing::Listing;
use crate::records::{js, Js};
use crate::results::{read_options, ObjectBytes};
use crate::upload::Upload;
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

/// The loop host of a store (H1 in `host.rs`: JavaScript thread only).
#[derive(Default)]
struct Hosting {
    host: Option<Rc<Host>>,
}

/// An open blob store.
#[napi]
pub struct Store {
    pub(crate) inner: engine::Store,
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

    pub(crate) fn blocking(&self) -> engine::blocking::Store {
        engine::blocking::Store::from(self.inner.clone())
    }

    /// CLOSED once `close()` or `closeSync()` was called, even while the
    /// close is still finishing: every call but `close` checks this first
    /// (`sync()` after an unawaited `close()` used to go through).
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closing.load(Ordering::Acquire) || self.inner.is_closed() {
            return Err(host::closed());
        }
        Ok(())
    }

    /// The store's loop host, made on first use. `env` proves we are on
    /// the JavaScript thread (H1).
    pub(crate) fn host(&self, env: &Env) -> Result<Rc<Host>> {
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

/// A read's outcome with a miss as `()`, which JavaScript sees as
/// `undefined` (NOT_FOUND is no error for `get`); any other error as it is.
/// The whole object of `key`, read on the calling thread (`getSync`, and
/// each key of `getManySync`): `Either::B` when it has none. Results over
/// `COPY_UP_TO` are read as owned bytes and lent, not copied.
pub(crate) fn get_whole_sync(
    store: &engine::blocking::Store,
    key: Bytes,
) -> Result<Either<ObjectBytes, ()>> {
    let options = read_options(store, &key, 0, u64::MAX);
    found(
        store
            .read_with(key, 0, u64::MAX, options)
            .map(|bytes| ObjectBytes::new(bytes, options)),
    )
}

fn found<T>(read: engine::Result<T>) -> Result<Either<T, ()>> {
    match read {
        Ok(v) => Ok(Either::A(v)),
        Err(e) if e.kind() == engine::ErrorKind::NotFound => Ok(Either::B(())),
        Err(e) => Err(js_err(e)),
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
        let value = if value.len() as u64 >= OFFLOAD_BYTES {
            // Written from the caller's own bytes on the helper thread, with
            // no copy on this one (a 48 MiB copy held the loop ~40 ms): the
            // caller must leave its Buffer as it is until the promise
            // settles, as with `fs.write` (README).
            Bytes::from_owner(value)
        } else {
            Bytes::copy_from_slice(&value)
        };
        let key = key_of(key);
        self.host(env)?.spawn(|ev| {
            let put = ev.put_op(key, value, options);
            async move { put.await.map(|i| js(&i)).map_err(js_err) }
        })
    }

    /// The whole object, or `undefined` when `key` has no object (as
    /// classic-level's `get`). Runs on the store's loop; results of 1 MiB
    /// or more are read by a helper thread.
    #[napi(ts_return_type = "Promise<Buffer | undefined>")]
    pub fn get(&self, env: &Env, key: Either<String, Uint8Array>) -> Result<Promise> {
        let key = key_of(key);
        let options = read_options(&self.blocking(), &key, 0, u64::MAX);
        self.host(env)?.spawn(|ev| {
            let read = ev.read_op(key, 0, u64::MAX, options);
            async move { found(read.await.map(|bytes| ObjectBytes::new(bytes, options))) }
        })
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

    /// Starts a listing of the keys that start with `prefix`, in byte
    /// order, with every index; `list()` in lib.js pages through it. On
    /// the hash index the start reads the keys from the tuple blocks (one
    /// pass), on a blocking thread of napi-rs's runtime, so the event loop
    /// never waits for it.
    #[napi(ts_return_type = "Promise<Listing>")]
    pub fn list_start(
        &self,
        env: &Env,
        prefix: Either<String, Uint8Array>,
    ) -> Result<AsyncBlock<Listing>> {
        self.check_open()?;
        let prefix = key_of(prefix);
        let store = self.inner.clone();
        let store_closing = self.closing.clone();
        AsyncBlockBuilder::new(async move {
            let keys = spawn_blocking(move || store.list(&prefix))
                .await
                .map_err(|e| Error::from_reason(format!("IO: the listing's start failed: {e}")))?
                .map_err(js_err)?;
            Ok(Listing::new(keys, store_closing))
        })
        .build(env)
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

    /// Synchronous `get`: `undefined` when `key` has no object.
    #[napi(ts_return_type = "Buffer | undefined")]
    pub fn get_sync(&self, key: Either<String, Uint8Array>) -> Result<Either<ObjectBytes, ()>> {
        self.check_open()?;
        get_whole_sync(&self.blocking(), key_of(key))
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
