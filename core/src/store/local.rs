//! [`LocalStore`]: a handle for applications on tokio-uring's
//! thread-per-core runtime, whose reads go out on that runtime's own ring.
//!
//! Invariants:
//! * L1. A local read resolves its key with the same `Store::locate` as
//!   every other read (range checks, the extent pinned for the whole read,
//!   invariant 2) and goes through the same `data::read_range` (request
//!   planning, every block checked against its checksum, invariant 5); only
//!   the device read itself differs ([`RingFile`], a `BlockReader`).
//! * L2. Device reads are issued on the ring of the tokio-uring runtime
//!   polling the future, through a duplicate of the store's own I/O
//!   descriptor: the same open file description, so the same `O_DIRECT`
//!   and access mode as the engine.
//! * L3. Outside a tokio-uring runtime, every call is `Unsupported` before
//!   any I/O (where that can be told, see [`LocalStore`]); tokio-uring
//!   itself would panic there.

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;
use futures::FutureExt;

use super::data::{self, BlockReader};
use super::{Located, ObjectInfo, Store};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::io::{AlignedBuf, BufResult};
use crate::options::ReadOptions;

/// A handle on a [`Store`] for tasks of a tokio-uring runtime
/// (`tokio_uring::start`): its reads are submitted on that runtime's own
/// io_uring and complete on it, with no thread and no other ring in
/// between. Made by [`Store::local`]; Linux only.
///
/// ```no_run
/// # fn main() -> blobcask::Result<()> {
/// tokio_uring::start(async {
///     let store = blobcask::Store::open("/tmp/demo.blobcask", blobcask::Options::new()).await?;
///     let local = store.local()?; // on this runtime's ring from here on
///     local.put("thumbs/cat.jpg", vec![0u8; 20_000]).await?;
///     let head = local.read("thumbs/cat.jpg", 0, 4096).await?;
///     assert_eq!(head.len(), 4096);
///     store.close().await
/// })
/// # }
/// ```
///
/// Which ring each call uses:
/// * [`get`](Self::get) and [`read`](Self::read): the **runtime's** ring.
///   They find the object exactly as [`Store::read`] does and check every
///   byte they return against its checksum (a mismatch is `Corrupt`);
///   inline values come from memory, with no I/O.
/// * [`put`](Self::put) and [`delete`](Self::delete): the **store's** own
///   ring, through the ordinary commit path ([`Store::put`],
///   [`Store::delete`]): submitted from this thread, completions through
///   the tokio reactor that tokio-uring's runtime runs — for the first
///   runtime that waits on that store's ring; others wait through the
///   store's completion thread.
/// * [`stat`](Self::stat) and [`contains`](Self::contains): memory only.
///
/// The handle and its futures are `!Send`: they stay on the thread (and
/// runtime) that runs them, as tokio-uring's own files do. Clones are
/// cheap and share one descriptor; spawn them into `tokio_uring::spawn`
/// tasks.
///
/// Outside a tokio-uring runtime every call that does I/O (and
/// [`Store::local`]) fails with `Unsupported` rather than panicking: with no async runtime on the thread, or a
/// multi-thread tokio runtime, at once; on a current-thread tokio runtime
/// that is not tokio-uring's, after a probe that tokio-uring answers with
/// a panic, caught without its message being printed
/// (`io::catch_quietly`; with `panic = "abort"` the process aborts
/// instead). The probe runs once per runtime.
#[derive(Clone)]
pub struct LocalStore {
    store: Store,
    inner: Rc<Local>,
}

struct Local {
    file: RingFile,
    /// The tokio runtime this handle last found to be tokio-uring's.
    runtime: Cell<Option<tokio::runtime::Id>>,
}

/// The store's I/O descriptor opened on the polling runtime's ring.
struct RingFile(tokio_uring::fs::File);

impl BlockReader for RingFile {
    async fn read_blocks(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        let cap = buf.capacity();
        // Fills bytes [0, capacity) of the buffer, reading again after a
        // short read; end of file is `UnexpectedEof`.
        let (r, mut buf) = self.0.read_exact_at(buf, offset).await;
        if r.is_ok() {
            buf.set_len(cap);
        }
        (r, buf)
    }
}

fn outside(why: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!("a LocalStore works only inside a tokio-uring runtime (tokio_uring::start): {why}"),
    )
}

/// Whether this thread runs a tokio-uring runtime. tokio-uring has no
/// query for it and panics when an operation is made outside one: make a
/// no-op, catch the panic. Inside, the no-op goes on the ring and is
/// dropped in flight, which tokio-uring supports (it discards the
/// completion).
fn on_tokio_uring() -> bool {
    crate::io::catch_quietly(|| drop(tokio_uring::no_op().now_or_never())).is_ok()
}

impl LocalStore {
    pub(super) fn new(store: Store, file: std::fs::File) -> Result<LocalStore> {
        let local = LocalStore {
            store,
            inner: Rc::new(Local {
                file: RingFile(tokio_uring::fs::File::from_std(file)),
                runtime: Cell::new(None),
            }),
        };
        local.check_runtime()?;
        Ok(local)
    }

    /// `Ok` when called on a tokio-uring runtime's thread (L3).
    fn check_runtime(&self) -> Result<()> {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return Err(outside("no async runtime runs on this thread"));
        };
        let id = handle.id();
        if self.inner.runtime.get() == Some(id) {
            return Ok(());
        }
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread {
            return Err(outside("this is a multi-thread tokio runtime"));
        }
        if !on_tokio_uring() {
            return Err(outside("this tokio runtime is not tokio-uring's"));
        }
        self.inner.runtime.set(Some(id));
        Ok(())
    }

    /// The store this handle reads from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The whole object (see [`Store::get`]), read on the runtime's ring.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Bytes> {
        self.read(key, 0, u64::MAX).await
    }

    /// `len` bytes from `offset`, clipped at the end of the object (see
    /// [`Store::read`]: the same checks, errors and verification), read on
    /// the runtime's ring.
    pub async fn read(&self, key: impl AsRef<[u8]>, offset: u64, len: u64) -> Result<Bytes> {
        let key = key.as_ref();
        let ctx = || format!("read {} at {offset}", show_key(key));
        self.check_runtime().map_err(|e| e.context(ctx()))?;
        loop {
            match self
                .store
                .locate(key, offset, len, ReadOptions::default())?
                .1
            {
                Located::Ready(b) => return Ok(b),
                Located::Heap(h) => {
                    let s = self.store.shared();
                    s.landing.wait(h.version).await;
                    let bytes = data::read_range(
                        &self.inner.file,
                        Some(&s.tables),
                        &h.object(),
                        h.offset,
                        h.len,
                    )
                    .await
                    .map_err(|e| e.context(ctx()))?;
                    self.store.admit(key, &h, &bytes, ReadOptions::default());
                    return Ok(bytes);
                }
                Located::Slot(r) => {
                    let found = self
                        .store
                        .read_slot(&self.inner.file, key, &r)
                        .await
                        .map_err(|e| e.context(ctx()))?;
                    if let Some(b) = found {
                        return Ok(b);
                    }
                }
            }
        }
    }

    /// [`Store::put`]: the data and the commit go through the store's own
    /// ring.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl Into<Bytes>) -> Result<ObjectInfo> {
        self.check_runtime()
            .map_err(|e| e.context(format!("put {}", show_key(key.as_ref()))))?;
        self.store.put(key, value).await
    }

    /// [`Store::delete`], through the store's own ring.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.check_runtime()
            .map_err(|e| e.context(format!("delete {}", show_key(key.as_ref()))))?;
        self.store.delete(key).await
    }

    /// [`Store::stat`] (no I/O).
    pub async fn stat(&self, key: impl AsRef<[u8]>) -> Result<ObjectInfo> {
        self.store.stat(key).await
    }

    /// [`Store::contains`] (no I/O).
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.store.contains(key)
    }
}

impl std::fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStore")
            .field("store", &self.store)
            .finish()
    }
}
