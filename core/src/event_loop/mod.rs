//! Store operations driven by a foreign event loop (asyncio, libuv), on
//! that loop's own thread.
//!
//! An [`EventLoop`] is a small executor for one store's futures, meant for
//! language bindings whose host already runs an event loop. The host
//! watches the descriptors of [`EventLoop::fds`] for readability and calls
//! [`EventLoop::run`] whenever one is readable; `run` delivers the ring's
//! completions (io_uring), polls every woken task and hands each finished
//! result to its callback, all on the calling thread. An awaited read
//! therefore goes: submitted from the loop's thread by [`EventLoop::spawn`],
//! completed by the kernel, the eventfd turns readable, the loop's own
//! `epoll` reports it and `run` resolves the result. No thread in between.
//!
//! Tasks woken from other threads (a commit group led by a blocking caller,
//! the portable engine's thread pool) raise the wake descriptor, so the
//! loop runs them at its next turn.
//!
//! The store calls ([`EventLoop::read`], [`put`](EventLoop::put),
//! [`stat`](EventLoop::stat), [`delete`](EventLoop::delete)) are what the
//! bindings use. Transfers of at least [`OFFLOAD_BYTES`] run on a helper
//! thread instead: checking a 48 MiB read's checksums and joining its
//! pieces, or copying a 48 MiB value into aligned buffers, is tens of
//! milliseconds of CPU that would hold the loop (measured: 266 ms of stall
//! for three 48 MiB gets on the loop), while the hop costs tens of
//! microseconds, nothing at that size.
//!
//! Invariants (L1–L3; `core/tests/event_loop.rs` guards them, and the loom
//! model in `loom_model` L1 with a broken variant):
//! * L1. A woken task is polled by a later `run`: the waker queues it and
//!   raises the wake descriptor unless the flag says it is up, and `run`
//!   drains the descriptor, then lowers the flag, then takes the queue;
//!   so the flag is never up over an empty descriptor. A wake on
//!   the thread of a `run` in progress only queues: that run takes the
//!   queue again until it is empty (or raises the descriptor when it stops
//!   early).
//! * L2. No lock of the executor is held while a task is polled or a
//!   callback runs, so callbacks may spawn and cancel.
//! * L3. Operations of the store's ring polled inside `spawn` or `run` wait
//!   for this loop's `run` (they register no other reactor or thread):
//!   the host must watch every descriptor of `fds` for as long as tasks are
//!   pending.
//! * L4. A blocking call ([`crate::io::block_on`]) made on a thread that
//!   started tasks of a loop still pending drives that loop while it
//!   waits: it may be waiting for one of them (a commit group led by a
//!   loop task, whose I/O only that loop's `run` completes), and the host
//!   loop cannot run while its thread is blocked.
#![allow(unsafe_code)]

#[cfg(all(test, blobcask_loom))]
mod loom_model;

use std::collections::HashMap;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

use futures::FutureExt;
use parking_lot::Mutex;

use crate::io::{self, CompletionSource};
use crate::{Bytes, Error, ErrorKind, ObjectInfo, PutOptions, ReadOptions, Result, Store};

/// Reads and puts of at least this many bytes run on a helper thread
/// rather than on the loop (see the module documentation).
pub const OFFLOAD_BYTES: u64 = 1 << 20;

/// Identifies a spawned task, for [`EventLoop::cancel`].
pub type TaskId = u64;

/// Rounds of woken tasks one `run` polls before it returns to the host
/// loop (raising the wake descriptor when more are queued), so a task that
/// keeps waking itself cannot starve the loop's other work.
const ROUNDS_PER_RUN: usize = 64;

type BoxedTask = Pin<Box<dyn Future<Output = ()> + Send>>;

struct Task {
    future: BoxedTask,
    waker: Waker,
}

/// The queue of woken tasks and the descriptor that tells the host loop.
struct Ready {
    queue: Mutex<Vec<TaskId>>,
    /// Whether the descriptor was raised since the latest `run` began (L1).
    raised: AtomicBool,
    fd: OwnedFd,
}

impl Ready {
    /// An empty queue over a fresh eventfd.
    fn new() -> std::io::Result<Ready> {
        // SAFETY: plain syscall; the descriptor is owned from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ready {
            queue: Mutex::new(Vec::new()),
            raised: AtomicBool::new(false),
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn push(&self, id: TaskId) {
        self.queue.lock().push(id);
        // A wake from inside this loop's own `run` (an operation reaped
        // there) is taken by that run before it returns: no descriptor
        // write, and no extra turn of the host loop to read it back.
        if RUNNING.with(|r| r.get()) != self as *const Ready as usize {
            self.raise();
        }
    }

    fn raise(&self) {
        if !self.raised.swap(true, Ordering::SeqCst) {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a local u64 to our eventfd. The
            // counter cannot overflow (it is drained at every `run`), and
            // a failed write is impossible for a valid eventfd.
            unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }

    /// Drains the descriptor, then lowers the flag (L1). In this order a
    /// raise racing with it either still finds the flag up (its task is
    /// already queued, and `run` takes the queue after this) or writes
    /// after the flag went down (the descriptor stays readable). The other
    /// order could drain a raise that had just put the flag up: the flag
    /// would stay up over an empty descriptor, and every later wake would
    /// be silent (found by the event-loop tests under load; the loom
    /// model's broken variant).
    fn lower(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a local u64; the descriptor is
        // non-blocking, so nothing to read is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), (&raw mut v).cast(), 8) };
        self.raised.store(false, Ordering::SeqCst);
    }
}

thread_local! {
    /// The `Ready` whose `run` is polling tasks on this thread (0: none).
    static RUNNING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

struct TaskWaker {
    id: TaskId,
    ready: Arc<Ready>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.ready.push(self.id);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.id);
    }
}

/// An executor for one store's futures, driven by a host event loop (see
/// the module documentation). `Send` and `Sync`; normally used from the
/// loop's thread only.
pub struct EventLoop {
    inner: Arc<Inner>,
}

struct Inner {
    ready: Arc<Ready>,
    tasks: Mutex<HashMap<TaskId, Task>>,
    next: AtomicU64,
    source: Option<CompletionSource>,
    store: Store,
}

thread_local! {
    /// The event loops whose tasks were started on this thread: a blocking
    /// call made here while they have tasks pending drives them while it
    /// waits ([`drive_hosted`]).
    static HOSTED: std::cell::RefCell<Vec<Weak<Inner>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl std::fmt::Debug for EventLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLoop")
            .field("fds", &self.fds())
            .field("pending", &self.len())
            .finish()
    }
}

impl EventLoop {
    /// An executor for `store`'s operations. Fails only when the system
    /// refuses an eventfd.
    pub fn new(store: &Store) -> Result<EventLoop> {
        let ready = Ready::new().map_err(|e| Error::new(ErrorKind::Io, format!("eventfd: {e}")))?;
        Ok(EventLoop {
            inner: Arc::new(Inner {
                ready: Arc::new(ready),
                tasks: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
                source: store.completion_source(),
                store: store.clone(),
            }),
        })
    }

    /// The descriptors the host loop must watch for readability (calling
    /// [`run`](Self::run) when any is readable): the wake descriptor, then
    /// the store's ring eventfd when its engine has one.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut fds = vec![self.inner.ready.fd.as_raw_fd()];
        fds.extend(self.inner.source.as_ref().map(CompletionSource::fd));
        fds
    }

    /// Starts `future` and polls it once right away, on this thread (so its
    /// I/O is submitted now); `done` receives its output (or the panic that
    /// ended it) from inside this call or a later [`run`](Self::run).
    pub fn spawn<T, F, D>(&self, future: F, done: D) -> TaskId
    where
        F: Future<Output = T> + Send + 'static,
        D: FnOnce(std::thread::Result<T>) + Send + 'static,
    {
        self.note_hosted();
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let future: BoxedTask = Box::pin(AssertUnwindSafe(future).catch_unwind().map(done));
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: self.inner.ready.clone(),
        }));
        self.inner.tasks.lock().insert(id, Task { future, waker });
        self.poll_task(id);
        id
    }

    /// [`Store::read`] as this loop runs it: polled on the loop, or, for
    /// a range of [`OFFLOAD_BYTES`] or more, on a helper thread. For hosts
    /// that wrap the future (the Node binding); [`read`](Self::read) spawns
    /// it.
    pub fn read_op(
        &self,
        key: Bytes,
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> impl Future<Output = Result<Bytes>> + Send + 'static {
        let store = self.inner.store.clone();
        let large = store
            .size_of(&key)
            .is_some_and(|size| size.saturating_sub(offset).min(len) >= OFFLOAD_BYTES);
        async move {
            if large {
                crate::store::fork::unblock(move || store.read_blocking(&key, offset, len, options))
                    .await
            } else {
                store.read_with(&key, offset, len, options).await
            }
        }
    }

    /// [`Store::put`] as this loop runs it: on the loop, or, for a value
    /// of [`OFFLOAD_BYTES`] or more, on a helper thread.
    pub fn put_op(
        &self,
        key: Bytes,
        value: Bytes,
        options: PutOptions,
    ) -> impl Future<Output = Result<ObjectInfo>> + Send + 'static {
        let store = self.inner.store.clone();
        async move {
            if value.len() as u64 >= OFFLOAD_BYTES {
                // Copy and write on the helper thread; the commit stays
                // here, so a task dropped meanwhile commits nothing (a
                // cancelled put landing after a later one was seen when
                // the whole put ran there). A cache store evicts to make
                // room and tries again, as every other put does.
                let size = value.len() as u64;
                let keys: [&[u8]; 1] = [&key];
                let need = store.need(std::iter::once(size), &keys);
                store
                    .making_room(need, || async {
                        let staging = store.staging();
                        let spec = store.precheck(&key, &options).map_err(|e| {
                            e.context(format!("put {}", crate::error::show_key(&key)))
                        })?;
                        let (writer, k, v) = (store.clone(), key.clone(), value.clone());
                        let data =
                            crate::store::fork::unblock(move || writer.write_blocking(&k, &v))
                                .await?;
                        let committed = store.commit_object(&key, size, data, None, spec).await;
                        drop(staging);
                        committed
                    })
                    .await
            } else {
                store.put_with(&key, value, options).await
            }
        }
    }

    /// Spawns [`read_op`](Self::read_op): `len` bytes of `key` from
    /// `offset`, clipped at the end. `done` receives the outcome (or the
    /// panic that ended it).
    pub fn read<D>(
        &self,
        key: Bytes,
        offset: u64,
        len: u64,
        options: ReadOptions,
        done: D,
    ) -> TaskId
    where
        D: FnOnce(std::thread::Result<Result<Bytes>>) + Send + 'static,
    {
        self.spawn(self.read_op(key, offset, len, options), done)
    }

    /// Spawns [`put_op`](Self::put_op); `done` runs once the object is
    /// durable.
    pub fn put<D>(&self, key: Bytes, value: Bytes, options: PutOptions, done: D) -> TaskId
    where
        D: FnOnce(std::thread::Result<Result<ObjectInfo>>) + Send + 'static,
    {
        self.spawn(self.put_op(key, value, options), done)
    }

    /// [`Store::stat`] (memory only: `done` runs before this returns).
    pub fn stat<D>(&self, key: Bytes, done: D) -> TaskId
    where
        D: FnOnce(std::thread::Result<Result<ObjectInfo>>) + Send + 'static,
    {
        let store = self.inner.store.clone();
        self.spawn(async move { store.stat(&key).await }, done)
    }

    /// [`Store::delete`]; `done` runs once the deletion is durable.
    pub fn delete<D>(&self, key: Bytes, done: D) -> TaskId
    where
        D: FnOnce(std::thread::Result<Result<()>>) + Send + 'static,
    {
        let store = self.inner.store.clone();
        self.spawn(async move { store.delete(&key).await }, done)
    }

    /// Delivers the ring's completions and polls every woken task. Call it
    /// whenever a descriptor of [`fds`](Self::fds) is readable. A panic of a
    /// callback is resumed here, after its task was removed.
    pub fn run(&self) {
        /// Restores the thread's mark, also when a callback panics.
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                RUNNING.with(|r| r.set(self.0));
            }
        }
        let me = Arc::as_ptr(&self.inner.ready) as usize;
        let _restore = Restore(RUNNING.with(|r| r.replace(me)));
        // L1: drain and lower before taking the queue, so a wake after the
        // take raises the descriptor again.
        self.inner.ready.lower();
        if let Some(source) = &self.inner.source {
            source.complete();
        }
        for _ in 0..ROUNDS_PER_RUN {
            let woken = std::mem::take(&mut *self.inner.ready.queue.lock());
            if woken.is_empty() {
                return;
            }
            for id in woken {
                self.poll_task(id);
            }
        }
        if !self.inner.ready.queue.lock().is_empty() {
            self.inner.ready.raise();
        }
    }

    /// Drops a pending task (its future is dropped, its callback never
    /// runs). `false` when it already finished or is being polled.
    pub fn cancel(&self, id: TaskId) -> bool {
        let task = self.inner.tasks.lock().remove(&id);
        task.is_some()
    }

    /// Drops every pending task (their callbacks never run), for a host
    /// whose loop is gone: a task left pending could hold the store's
    /// commit lead for good. Returns how many were dropped.
    pub fn cancel_all(&self) -> usize {
        let tasks = std::mem::take(&mut *self.inner.tasks.lock());
        tasks.len()
    }

    /// Tasks spawned and not finished.
    pub fn len(&self) -> usize {
        self.inner.tasks.lock().len()
    }

    /// Whether no task is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records that this loop's tasks are started on this thread (L4).
    fn note_hosted(&self) {
        HOSTED.with(|h| {
            let mut h = h.borrow_mut();
            if h.iter()
                .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.inner)))
            {
                return;
            }
            h.retain(|w| w.strong_count() > 0);
            h.push(Arc::downgrade(&self.inner));
        });
    }

    fn poll_task(&self, id: TaskId) {
        // L2: the task leaves the table while it is polled.
        let Some(mut task) = self.inner.tasks.lock().remove(&id) else {
            // Finished or cancelled; a stale wake.
            return;
        };
        let polled = io::polling_for_loop(self.inner.source.as_ref(), || {
            let mut cx = Context::from_waker(&task.waker);
            catch_unwind(AssertUnwindSafe(|| task.future.as_mut().poll(&mut cx)))
        });
        match polled {
            Ok(Poll::Pending) => {
                self.inner.tasks.lock().insert(id, task);
            }
            Ok(Poll::Ready(())) => {}
            Err(panic) => {
                drop(task);
                resume_unwind(panic);
            }
        }
    }
}

/// For [`crate::io::block_on`] (L4): polls `future` to completion on this
/// thread like `block_on` does, and while it is pending, waits on the
/// descriptors of every event loop hosted here with tasks pending and runs
/// them. `Err(future)` when no such loop exists (the caller blocks as
/// usual).
pub(crate) fn drive_hosted<F: Future>(future: F) -> std::result::Result<F::Output, F> {
    let hosted: Vec<EventLoop> = HOSTED.with(|h| {
        h.borrow()
            .iter()
            .filter_map(Weak::upgrade)
            .map(|inner| EventLoop { inner })
            .filter(|ev| !ev.is_empty())
            .collect()
    });
    if hosted.is_empty() {
        return Err(future);
    }
    // The future's own waker raises a descriptor of its own.
    let Ok(woken) = Ready::new() else {
        return Err(future);
    };
    let woken = Arc::new(woken);
    let waker = Waker::from(Arc::new(TaskWaker {
        id: 0,
        ready: woken.clone(),
    }));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let mut fds: Vec<libc::pollfd> = std::iter::once(woken.fd.as_raw_fd())
        .chain(hosted.iter().flat_map(EventLoop::fds))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        woken.lower();
        woken.queue.lock().clear();
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Ok(out);
        }
        for p in &mut fds {
            p.revents = 0;
        }
        // SAFETY: a valid array of `fds.len()` pollfd. The timeout bounds
        // the wait should a loop stop having tasks while we sleep.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        for ev in &hosted {
            io::outside_block_on(|| ev.run());
        }
    }
}
