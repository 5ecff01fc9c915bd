//! One io_uring shared by every thread, with no ring thread.
//!
//! * **Submission** happens on the caller's thread: an operation pushes its
//!   entry when it is created, and the first poll (or blocking wait) of any
//!   operation enters the kernel once for everything queued, so operations
//!   created together (a `join` of many reads) go out in one
//!   `io_uring_enter`.
//! * **Completion** is delivered by whoever reaps the completion queue: each
//!   result goes to its operation's slot and the waiting task is woken.
//!   Who reaps depends on where the caller waits:
//!   - under a tokio runtime, the waiting task itself, when the runtime's
//!     reactor reports the ring's eventfd readable ([`AsyncFd`]): no extra
//!     thread, no extra wake-up;
//!   - on other executors, a fallback completion thread that blocks on the
//!     eventfd only while such waiters exist;
//!   - on a foreign event loop's thread (asyncio, libuv) that watches the
//!     ring's eventfd for an [`EventLoop`](crate::event_loop::EventLoop):
//!     that loop's thread, when the descriptor turns readable;
//!   - blocking callers, in `io_uring_enter` on their own thread.
//!
//! Invariants (numbered D1–D4; `driver_tests` and the loom model in
//! `io::uring::loom_model` guard D2 and D3):
//! * D1. A buffer handed to the kernel belongs to its slot until the
//!   completion is reaped, even when the operation's future is dropped (the
//!   slot is then *abandoned* and freed by the reaper).
//! * D2. Whoever consumes an eventfd signal reaps afterwards, and every reap
//!   hands every completion to its slot: no completion waits for a signal
//!   that was already consumed. The reaper wakes each completed
//!   operation's task, except the operation whose own poll is reaping,
//!   which takes its result at once.
//! * D3. While any operation waits through a tokio runtime's reactor, one
//!   of that runtime's waiters (its *registrant*) holds the runtime's
//!   registration; when it finishes or is dropped it wakes another waiter
//!   of the same runtime to take over. Each runtime that polls an operation
//!   registers the eventfd with its own reactor (thread-per-core setups
//!   run one runtime per thread), so none of them needs the fallback
//!   thread. A registration is kept only while it may be needed: when a
//!   runtime registers, every other runtime's registration that no waiter
//!   holds (no registrant) and no poll is using is dropped, so a runtime
//!   gone idle by then is no longer woken at every completion of the
//!   others (`an_idle_runtime_is_not_woken_by_another_runtimes_completions`).
//!   One that goes idle later keeps its registration until some runtime
//!   registers again.
//! * D4. The ring outlives every operation in the kernel: operations hold
//!   the driver, and dropping the driver waits for abandoned ones, then
//!   unregisters the store file, so no reference to it outlives the
//!   driver (`close_lets_go_of_the_file` in `tests/all/lifecycle.rs`).
#![allow(unsafe_code)]

mod op;
mod reap;
mod slots;
mod submit;
#[cfg(test)]
mod tests;
/// Operations awaited together by one task (`together.rs`).
pub(crate) mod together;
mod wait;

pub(crate) use op::Op;
pub(crate) use submit::{fdatasync_entry, read_entry, write_entry};

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use io_uring::{types, IoUring};
use parking_lot::{Condvar, Mutex};

use slots::Slots;

/// Runtimes a driver remembers at most, beyond those whose reactor
/// registrations are in use.
const MAX_REACTORS: usize = 64;

/// Entries in the submission queue.
const ENTRIES: u32 = 256;
/// Completion queue size: room for many more operations in flight than
/// one submission queue's worth.
const CQ_ENTRIES: u32 = 4096;

/// A tokio runtime's reactor registration of the ring's eventfd.
struct Reactor {
    runtime: tokio::runtime::Id,
    /// `None` when that runtime has no I/O driver.
    fd: Option<Arc<tokio::io::unix::AsyncFd<Arc<OwnedFd>>>>,
}

struct FallbackCtl {
    running: Mutex<bool>,
    wanted: Condvar,
    shutdown: AtomicBool,
}

/// How entries name the store file.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FileRef {
    /// The ring's registered file, slot 0: the kernel skips looking the
    /// descriptor up (and counting a reference) for every operation.
    Registered,
    /// The descriptor, where the kernel refused the registration.
    Fd(RawFd),
}

/// The shared ring and everything needed to deliver its completions.
pub(crate) struct Driver {
    ring: IoUring,
    /// The file every entry names; closed only after the ring is idle (D4).
    file: std::fs::File,
    /// Whether `file` is registered with the ring (slot 0).
    registered: bool,
    /// `fork::generation()` when the driver was made: a fork child shares
    /// the parent's ring (its queues are shared memory) and must leave it
    /// alone when its inherited copy is dropped.
    fork_generation: u64,
    /// Serialises pushes to the submission queue.
    sq: Mutex<()>,
    /// Serialises reaping of the completion queue.
    cq: Mutex<()>,
    /// Entries pushed but not yet submitted to the kernel.
    unsubmitted: AtomicUsize,
    slots: Mutex<Slots>,
    eventfd: Arc<OwnedFd>,
    /// One per runtime that polled an operation (D3).
    reactors: Mutex<Vec<Reactor>>,
    fallback: Arc<FallbackCtl>,
    this: Weak<Driver>,
    /// Operations pushed, for tests that tell whether one used the ring.
    #[cfg(test)]
    pushes: AtomicUsize,
}

fn new_eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the returned descriptor is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads the eventfd's counter to zero (non-blocking; nothing to read is
/// fine).
fn drain_eventfd(fd: RawFd) {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a local u64.
    unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
}

impl Driver {
    pub fn new(file: std::fs::File) -> io::Result<Arc<Driver>> {
        Self::with_registration(file, true)
    }

    /// [`new`](Self::new), with the file registered with the ring (when
    /// the kernel takes it) or named by its descriptor in every entry.
    /// Registered, an operation skips the descriptor lookup and the file's
    /// reference count: 4–7 % less CPU per 4 KiB read at 64 in flight
    /// (`benches/log/2026-11-28-depth-in-turns.md`). Where the kernel refuses it (a seccomp or
    /// LSM filter on `io_uring_register`, a descriptor limit too low for
    /// the file table, no memory), entries name the descriptor.
    pub(crate) fn with_registration(
        file: std::fs::File,
        register: bool,
    ) -> io::Result<Arc<Driver>> {
        let ring = IoUring::builder().setup_cqsize(CQ_ENTRIES).build(ENTRIES)?;
        let eventfd = Arc::new(new_eventfd()?);
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let registered = register && ring.submitter().register_files(&[file.as_raw_fd()]).is_ok();
        Ok(Arc::new_cyclic(|this| Driver {
            ring,
            file,
            registered,
            fork_generation: crate::store::fork::generation(),
            sq: Mutex::new(()),
            cq: Mutex::new(()),
            unsubmitted: AtomicUsize::new(0),
            slots: Mutex::new(Slots::default()),
            eventfd,
            reactors: Mutex::new(Vec::new()),
            fallback: Arc::new(FallbackCtl {
                running: Mutex::new(false),
                wanted: Condvar::new(),
                shutdown: AtomicBool::new(false),
            }),
            this: this.clone(),
            #[cfg(test)]
            pushes: AtomicUsize::new(0),
        }))
    }

    /// This driver's address: with an entry's user data, names one
    /// operation among those of every driver (`together`).
    fn identity(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// How entries name the store file, valid while the driver lives.
    pub fn file_ref(&self) -> FileRef {
        if self.registered {
            FileRef::Registered
        } else {
            FileRef::Fd(self.file.as_raw_fd())
        }
    }

    /// The file every entry names (for calls made without the ring).
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// Operations pushed so far, for tests that tell whether an operation
    /// went through the ring.
    #[cfg(test)]
    pub(crate) fn pushes(&self) -> usize {
        self.pushes.load(Ordering::Relaxed)
    }

    /// The eventfd the ring signals at every completion.
    pub fn eventfd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if crate::store::fork::generation() != self.fork_generation {
            // A fork child's copy: the ring, its queues and its registered
            // file are the parent's. Reaping here would take the parent's
            // completions, unregistering would take its file away; only
            // this process's descriptors and mappings go.
            return;
        }
        self.fallback.shutdown.store(true, Ordering::Release);
        self.fallback.wanted.notify_all();
        // D4: abandoned operations still own buffers the kernel writes to.
        let _ = self.submit();
        for _ in 0..10_000 {
            self.reap();
            if self.slots.lock().busy == 0 {
                break;
            }
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
        }
        // The ring holds its own reference to a registered file, and the
        // kernel tears a closed ring down asynchronously: without this, the
        // file stayed open for a moment after the store's `close` returned
        // (a write lease on it was refused right after every close).
        if self.registered {
            let _ = self.ring.submitter().unregister_files();
        }
    }
}
