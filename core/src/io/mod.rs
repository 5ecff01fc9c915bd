//! How bytes reach the device.
//!
//! [`IoEngine`] separates *how* I/O is done (io_uring, pread/pwrite, or an
//! in-memory device with fault injection for tests) from the engine logic.
//! Every operation takes an owned [`AlignedBuf`] and hands it back with the
//! result, so the kernel never sees a buffer Rust code could free or move.
//!
//! Contract shared by all engines:
//! * offsets and lengths are multiples of [`BLOCK_SIZE`](crate::format::BLOCK_SIZE);
//! * `read_at` fills the buffer's whole capacity; `write_at` writes its valid
//!   length;
//! * a completed write is not durable until a later `sync` completes.

mod buf;
mod counted;
pub mod fault;
mod portable;
#[cfg(target_os = "linux")]
mod uring;

use std::fs::File;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};

pub use buf::{round_up, AlignedBuf};
pub(crate) use counted::Counted;
pub use portable::PortableEngine;
#[cfg(target_os = "linux")]
pub use uring::UringEngine;

thread_local! {
    /// Set while [`block_on`] runs a future on this thread: engines then
    /// wait for their completions right here instead of through a reactor
    /// or another thread.
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `fut` to completion on the calling thread, for the blocking API
/// and the maintenance thread. I/O started inside completes on this thread (the
/// io_uring engine waits in the kernel here), so it works even when called
/// from inside an async runtime's worker. Nested (a blocking call made
/// from code this runs, e.g. a bulk load's item iterator calling `get`)
/// and with no event loop to keep running, it waits with `wait_here`, on
/// a parker of its own.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    /// Restores the flag even when `fut` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BLOCKING.with(|b| b.set(self.0));
        }
    }
    let nested = BLOCKING.with(|b| b.replace(true));
    let _restore = Restore(nested);
    // On a thread hosting an event loop with tasks pending, keep that loop
    // running while waiting (invariant L4 of `event_loop`).
    match crate::event_loop::drive_hosted(fut) {
        Ok(out) => out,
        Err(fut) if nested => wait_here(fut),
        // The thread's own parker (no allocation per call). A nested wait
        // takes a fresh one: it could consume a wake-up meant for the
        // outer wait, which would then sleep through it.
        Err(fut) => match PARKER.try_with(Arc::clone) {
            Ok(parker) => run_parked(fut, parker),
            Err(_) => wait_here(fut),
        },
    }
}

/// Waits for `fut` on the calling thread, parking it between polls, without
/// entering an executor: unlike [`block_on`] it may run inside another
/// executor's task (the engine must complete `fut` without that executor's
/// help, as every engine here does).
pub(crate) fn wait_here<F: Future>(fut: F) -> F::Output {
    run_parked(fut, Arc::new(Parker::default()))
}

/// Wakes a thread waiting in [`run_parked`]: a flag under a lock and a
/// condition variable. Not `std::thread::Thread::unpark`: the handle
/// `std::thread::current()` makes for a thread that std did not start (a
/// C program's, a Python or Node thread) is never freed, and valgrind
/// reports it when the program exits. std's lock and condition variable
/// (a futex each), not parking_lot's, whose process-wide table a fork can
/// copy with a lock held by a thread the child does not have (see
/// `store::helpers`).
#[derive(Default)]
struct Parker {
    woken: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl std::task::Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut woken = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
        if !*woken {
            *woken = true;
            self.wake.notify_one();
        }
    }
}

impl Parker {
    /// Sleeps until woken since the last `park` returned (at once if it
    /// was). A wake-up left over from an earlier wait costs one extra
    /// poll, nothing else.
    fn park(&self) {
        let mut woken = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
        while !*woken {
            woken = self
                .wake
                .wait(woken)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *woken = false;
    }
}

thread_local! {
    /// This thread's parker for [`block_on`].
    static PARKER: Arc<Parker> = Arc::new(Parker::default());
}

/// Polls `fut` on this thread until it is ready, sleeping on `parker`
/// between polls.
fn run_parked<F: Future>(fut: F, parker: Arc<Parker>) -> F::Output {
    let waker = std::task::Waker::from(parker.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        parker.park();
    }
}

thread_local! {
    /// The completion source (its identity) an [`EventLoop`] watches while
    /// it polls tasks on this thread; 0 for none.
    ///
    /// [`EventLoop`]: crate::event_loop::EventLoop
    static LOOP_SOURCE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Set while an [`EventLoop`] polls tasks on this thread, whatever
    /// engine they use.
    ///
    /// [`EventLoop`]: crate::event_loop::EventLoop
    static IN_LOOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with `source` marked as watched by the event loop polling on
/// this thread: operations of that engine then wait for the loop to call
/// [`CompletionSource::complete`] instead of a reactor or another thread.
pub(crate) fn polling_for_loop<R>(source: Option<&CompletionSource>, f: impl FnOnce() -> R) -> R {
    /// Restores the mark even when `f` panics.
    struct Restore(usize, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            LOOP_SOURCE.with(|s| s.set(self.0));
            IN_LOOP.with(|s| s.set(self.1));
        }
    }
    let id = source.map_or(0, CompletionSource::id);
    let _restore = Restore(
        LOOP_SOURCE.with(|s| s.replace(id)),
        IN_LOOP.with(|s| s.replace(true)),
    );
    f()
}

/// Whether the event loop polling on this thread watches the completion
/// source with identity `id`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn polled_by_loop_of(id: usize) -> bool {
    id != 0 && LOOP_SOURCE.with(|s| s.get()) == id
}

/// Whether an event loop ([`EventLoop`]) polls the task running on this
/// thread.
///
/// [`EventLoop`]: crate::event_loop::EventLoop
pub(crate) fn polled_by_a_loop() -> bool {
    IN_LOOP.with(std::cell::Cell::get)
}

/// A descriptor through which a foreign event loop completes an engine's
/// operations on its own thread: when [`fd`](Self::fd) turns readable the
/// loop calls [`complete`](Self::complete), which hands every finished
/// operation to its task and wakes it. Used by
/// [`EventLoop`](crate::event_loop::EventLoop); engines without one
/// (portable, in-memory) wake their tasks from their own threads.
#[derive(Clone)]
pub struct CompletionSource {
    #[cfg(target_os = "linux")]
    driver: Arc<uring::Driver>,
}

impl CompletionSource {
    #[cfg(target_os = "linux")]
    pub(crate) fn new(driver: Arc<uring::Driver>) -> Self {
        CompletionSource { driver }
    }

    /// The descriptor to watch for readability.
    pub fn fd(&self) -> std::os::fd::RawFd {
        #[cfg(target_os = "linux")]
        return self.driver.eventfd();
        #[cfg(not(target_os = "linux"))]
        return -1;
    }

    /// Consumes the readiness and delivers every finished operation.
    pub fn complete(&self) {
        #[cfg(target_os = "linux")]
        self.driver.complete();
    }

    /// Identity of the ring, for the thread-local mark.
    fn id(&self) -> usize {
        #[cfg(target_os = "linux")]
        return Arc::as_ptr(&self.driver) as usize;
        #[cfg(not(target_os = "linux"))]
        return 0;
    }
}

impl std::fmt::Debug for CompletionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionSource")
            .field("fd", &self.fd())
            .finish()
    }
}

/// Runs `f` as if outside [`block_on`] (an event loop's tasks driven from
/// inside a blocking call wait for their loop, not in the kernel).
pub(crate) fn outside_block_on<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BLOCKING.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BLOCKING.with(|b| b.replace(false)));
    f()
}

/// Whether the current thread is inside [`block_on`].
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn in_block_on() -> bool {
    BLOCKING.with(|b| b.get())
}

/// Whether an operation of the ring with identity `ring` (see
/// [`polled_by_loop_of`]) polled on this thread waits for its completion
/// right here, in the kernel, rather than through a reactor or another
/// thread: inside [`block_on`], and in the future a multi-thread tokio
/// runtime's `block_on` runs ([`in_multi_thread_block_on`]) unless it is
/// one of many reads that future keeps in flight (`uring::here`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn waits_here(ring: usize) -> bool {
    in_block_on()
        || (!polled_by_loop_of(ring)
            && !THROUGH_REACTOR.with(std::cell::Cell::get)
            && in_multi_thread_block_on())
}

thread_local! {
    /// Set while an operation that must wait through the runtime's reactor
    /// is polled in a multi-thread runtime's `block_on` (see [`waits_here`]).
    static THROUGH_REACTOR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a poll) with this thread's operations waiting through the
/// runtime's reactor even in a multi-thread runtime's `block_on`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn through_reactor<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            THROUGH_REACTOR.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(THROUGH_REACTOR.with(|b| b.replace(true)));
    f()
}

/// Whether this thread polls the future of a multi-thread tokio runtime's
/// `block_on` (the main future of a `#[tokio::main]` program, or
/// `Handle::block_on` on a thread of the caller's): tokio gives that
/// future no task id, and every spawned task one.
///
/// That thread is none of the runtime's workers: a completion watched by
/// the runtime's reactor reaches it through a worker, which wakes it in
/// turn (two thread wake-ups per completion: a 4 KiB read measured
/// 1.32–1.54 × a raw `pread` at one in flight). Such a caller waits on its
/// own thread instead: a read alone as a `pread` (`uring::here`), a write
/// or a sync in the kernel (`io_uring_enter`, `fdatasync`), as the blocking
/// API does. What that future gives up: its other branches (a `select!`
/// with a timer, a `join!` with a channel) are polled when that operation
/// ends rather than while it is in the kernel (a read's tens of µs, a
/// commit's write and sync a few ms). A current-thread runtime's
/// `block_on` thread is that runtime's reactor and runs its spawned tasks
/// when it parks, so there the reactor is kept; so it is for spawned tasks
/// (they run on workers, which the reactor wakes directly).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn in_multi_thread_block_on() -> bool {
    tokio::task::try_id().is_none()
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// A boxed `Send` future, the return type of engine operations.
pub type IoFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
/// Result of an owned-buffer operation: the outcome and the buffer back.
pub type BufResult<T> = (io::Result<T>, AlignedBuf);

/// Block I/O against one store file or device.
pub trait IoEngine: Send + Sync + 'static {
    /// Reads `buf.capacity()` bytes at `offset` into `buf`.
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>>;
    /// [`read_at`](Self::read_at) on the calling thread, for blocking
    /// callers: engines with a file descriptor use `pread` directly, with no
    /// hop to an I/O thread.
    ///
    /// The defaults wait for the async call on the calling thread (they may
    /// be called from inside another `block_on`: superblock publishes are
    /// blocking calls made from async code and from the blocking API).
    fn read_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        wait_here(self.read_at(buf, offset))
    }
    /// [`write_at`](Self::write_at) on the calling thread (the maintenance thread
    /// and blocking callers), with no hop to an I/O thread.
    fn write_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        wait_here(self.write_at(buf, offset))
    }
    /// [`sync`](Self::sync) on the calling thread.
    fn sync_blocking(&self) -> io::Result<()> {
        wait_here(self.sync())
    }
    /// Writes `buf.len()` bytes at `offset`.
    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>>;
    /// Makes every completed write durable (fdatasync).
    fn sync(&self) -> IoFuture<io::Result<()>>;
    /// Writes every buffer (concurrently) and then syncs once: a commit
    /// group's values and tuple blocks.
    fn write_and_sync(self: Arc<Self>, writes: Vec<(AlignedBuf, u64)>) -> IoFuture<io::Result<()>> {
        let futs: Vec<_> = writes
            .into_iter()
            .map(|(buf, at)| self.write_at(buf, at))
            .collect();
        Box::pin(async move {
            for (r, _) in futures::future::join_all(futs).await {
                r?;
            }
            self.sync().await
        })
    }
    /// The descriptor an event loop may watch to complete this engine's
    /// operations on its own thread; `None` (the default) when the engine
    /// wakes its tasks from threads of its own.
    fn completion_source(&self) -> Option<CompletionSource> {
        None
    }
    /// Size of the file or device in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Whether [`grow`](Self::grow) can extend the store: a regular file
    /// can, a block device (or a fixed-size engine, the default) cannot.
    fn resizable(&self) -> bool {
        false
    }
    /// Reserves bytes `from..len` (the store's old and new capacity) and
    /// extends the file to `len` bytes if it is shorter, so a full file
    /// system fails here (`ENOSPC`) rather than at a later write, even where
    /// the file was already longer but sparse; on failure the length is
    /// left as it was. The new length is durable after the next
    /// [`sync`](Self::sync). The default refuses.
    fn grow(&self, from: u64, len: u64) -> io::Result<()> {
        let _ = (from, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this device has a fixed size",
        ))
    }
    /// Short name for stats and logs.
    fn name(&self) -> &'static str;
    /// Whether the data path bypasses the page cache.
    fn direct_io(&self) -> bool;
}

/// Which engine [`Options`](crate::Options) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoEngineKind {
    /// io_uring where the kernel allows it, else portable. The default.
    #[default]
    Auto,
    /// io_uring (one ring shared by the callers, no ring thread); fails
    /// where unavailable.
    IoUring,
    /// pread/pwrite on a thread pool; works everywhere.
    Portable,
}

impl IoEngineKind {
    /// Every kind, as [`Options::io_engine`](crate::Options::io_engine) takes it.
    pub const ALL: [IoEngineKind; 3] = [
        IoEngineKind::Auto,
        IoEngineKind::IoUring,
        IoEngineKind::Portable,
    ];

    /// Lower-case name (`auto`, `io_uring`, `portable`), as the bindings
    /// and the CLI spell it.
    pub fn name(self) -> &'static str {
        match self {
            IoEngineKind::Auto => "auto",
            IoEngineKind::IoUring => "io_uring",
            IoEngineKind::Portable => "portable",
        }
    }
}

impl std::str::FromStr for IoEngineKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        IoEngineKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                crate::Error::new(
                    crate::ErrorKind::InvalidArgument,
                    format!("unknown io_engine {s:?}: expected auto, io_uring or portable"),
                )
            })
    }
}

/// An open store file: the handle that holds the lock and knows whether
/// the file system accepted `O_DIRECT`.
pub(crate) struct OpenFile {
    pub file: File,
    pub direct: bool,
}

/// Runs `f`, catching its panic without printing that panic's message:
/// for probes whose only way to say "no" is to panic (tokio registering
/// with a runtime built without I/O; tokio-uring outside its runtime).
///
/// Installs, once per process, a panic hook that stays silent for a panic
/// on a thread inside `catch_quietly` and hands every other panic (other
/// threads', this thread's outside it) to the hook set before. A hook the
/// application sets later replaces it, and the probe's message is printed
/// again, nothing worse (README, "Using it from Rust"). With `panic = "abort"` there
/// is nothing to catch: the hook is left alone, so the message says why
/// the process aborts. On a thread already panicking, the hook cannot be
/// changed and is left alone too.
pub(crate) fn catch_quietly<R>(
    f: impl FnOnce() -> R + std::panic::UnwindSafe,
) -> std::thread::Result<R> {
    use std::cell::Cell;
    thread_local!(static QUIET: Cell<bool> = const { Cell::new(false) });
    static FILTER: std::sync::Once = std::sync::Once::new();
    if cfg!(panic = "abort") || std::thread::panicking() {
        return std::panic::catch_unwind(f);
    }
    FILTER.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = std::panic::catch_unwind(f);
    QUIET.with(|q| q.set(false));
    result
}

/// Opens (or creates) the file with `O_DIRECT` when asked, falling back to
/// buffered I/O only where the file system refuses direct I/O (`EINVAL`).
/// Without `writable` the file is opened `O_RDONLY` (read-only stores, files
/// with mode 0444); every engine reads and syncs through such a descriptor,
/// and a write through it fails with `EBADF`.
pub(crate) fn open_file(
    path: &Path,
    create: bool,
    writable: bool,
    want_direct: bool,
) -> io::Result<OpenFile> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(writable).create(create && writable);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(path)
    };
    if want_direct {
        match open(true) {
            Ok(file) => return Ok(OpenFile { file, direct: true }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(OpenFile {
        file: open(false)?,
        direct: false,
    })
}

/// Fills `buf`'s whole capacity from `file` at `offset` with `pread`.
pub(crate) fn pread_full(file: &File, mut buf: AlignedBuf, offset: u64) -> BufResult<()> {
    use std::os::unix::fs::FileExt;
    let r = file.read_exact_at(buf.full_mut(), offset);
    let cap = buf.capacity();
    buf.set_len(cap);
    (r, buf)
}

/// Writes `buf`'s valid bytes to `file` at `offset` with `pwrite`.
pub(crate) fn pwrite_all(file: &File, buf: AlignedBuf, offset: u64) -> BufResult<()> {
    use std::os::unix::fs::FileExt;
    let r = file.write_all_at(buf.as_slice(), offset);
    (r, buf)
}

/// Size of a regular file or a block device.
pub(crate) fn file_size(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    // Block devices report length 0 in metadata; seek to the end instead.
    let mut f = file;
    let end = f.seek(SeekFrom::End(0))?;
    f.seek(SeekFrom::Start(0))?;
    Ok(end)
}

/// Whether `file` is a regular file (which a store may extend).
pub(crate) fn is_regular(file: &File) -> bool {
    file.metadata().is_ok_and(|m| m.is_file())
}

/// Reserves bytes `from..len` of a regular file, extending it to `len`
/// ([`IoEngine::grow`]). A failure leaves the file at its old length.
#[allow(unsafe_code)]
pub(crate) fn grow_file(file: &File, from: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a block device keeps its size",
        ));
    }
    let old = meta.len();
    let from = from.min(len);
    if from == len {
        return Ok(());
    }
    let (Ok(at), Ok(add)) = (
        libc::off_t::try_from(from),
        libc::off_t::try_from(len - from),
    ) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: plain syscall on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), at, add) };
    let r = match rc {
        0 => Ok(()),
        // File systems without fallocate: a sparse extension.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len.max(old)),
        e => Err(io::Error::from_raw_os_error(e)),
    };
    if r.is_err() && len > old {
        // Give back what a partial reservation took.
        let _ = file.set_len(old);
    }
    r
}

/// Sets the file's length and reserves its blocks, so a full file system
/// shows up at creation instead of in the middle of a write.
#[allow(unsafe_code)]
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    file.set_len(len)?;
    // SAFETY: plain syscall on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
    match rc {
        0 => Ok(()),
        // File systems without fallocate: the sparse length is enough.
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}
