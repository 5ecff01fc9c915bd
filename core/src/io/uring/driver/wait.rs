//! Waiting for a completion where the caller waits: a tokio runtime's
//! reactor registration of the eventfd (D3), the fallback completion
//! thread, or a blocking caller's own `io_uring_enter`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use io_uring::types;

use super::op::Op;
use super::{drain_eventfd, Driver, FallbackCtl, Reactor, MAX_REACTORS};
use crate::io::AlignedBuf;

impl Driver {
    /// The current tokio runtime and its reactor registration, created
    /// for each runtime the first time one of its tasks polls; `None`
    /// outside tokio or in a runtime without I/O.
    #[allow(clippy::type_complexity)]
    pub(super) fn reactor(
        &self,
    ) -> Option<(
        tokio::runtime::Id,
        Arc<tokio::io::unix::AsyncFd<Arc<OwnedFd>>>,
    )> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let rt = handle.id();
        let mut reactors = self.reactors.lock();
        if let Some(reg) = reactors.iter().find(|r| r.runtime == rt) {
            return reg.fd.clone().map(|fd| (rt, fd));
        }
        // Another runtime's registration that nothing waits through (its
        // runtime has no registrant, D3, and no poll holds it) goes: the
        // eventfd is signalled at every completion, and each runtime whose
        // reactor watches it wakes for it, needed or not. That runtime
        // registers again at its next poll. Lock order: reactors, then
        // slots. The registrations are dropped (taken off their epoll)
        // after `slots` is released but before `reactors` is: a runtime
        // registering again before that would be refused by epoll (the
        // same descriptor, still there).
        let idle: Vec<Reactor> = {
            let slots = self.slots.lock();
            let (idle, kept) = std::mem::take(&mut *reactors).into_iter().partition(|r| {
                r.fd.as_ref().is_some_and(|fd| {
                    Arc::strong_count(fd) == 1
                        && !slots.registrants.iter().any(|(id, _)| *id == r.runtime)
                })
            });
            *reactors = kept;
            idle
        };
        drop(idle);
        let eventfd = self.eventfd.clone();
        // tokio panics (rather than failing) when the runtime was built
        // without I/O; such a runtime is remembered and served by the
        // fallback thread. The panic is expected, so it is kept quiet.
        let registered = crate::io::catch_quietly(move || {
            // SAFETY: the AsyncFd owns an `Arc` of the eventfd, so the
            // descriptor stays open and the same for its whole life.
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    eventfd,
                    tokio::io::Interest::READABLE,
                )
            }
        });
        let fd = match registered {
            Ok(Ok(fd)) => Some(Arc::new(fd)),
            // A refused registration is not remembered: this operation
            // waits through the fallback thread, the next one tries again.
            Ok(Err(_)) => return None,
            Err(_) => None,
        };
        // Runtimes come and go (a test per runtime, short-lived runtimes in
        // applications): beyond a bound, forget the oldest runtime without
        // a registration (one without I/O, or shut down). Every entry with
        // a registration is in use (idle ones went above), and dropping one
        // could strand its registrant.
        if reactors.len() >= MAX_REACTORS {
            if let Some(i) = reactors.iter().position(|r| r.fd.is_none()) {
                reactors.remove(i);
            }
        }
        reactors.push(Reactor {
            runtime: rt,
            fd: fd.clone(),
        });
        fd.map(|fd| (rt, fd))
    }

    /// Forgets the registration of runtime `rt`, which is shutting down:
    /// its operations are served by the fallback thread from now on
    /// (registering again could fail the same way, over and over).
    pub(super) fn drop_reactor(&self, rt: tokio::runtime::Id) {
        if let Some(r) = self.reactors.lock().iter_mut().find(|r| r.runtime == rt) {
            r.fd = None;
        }
    }

    /// Makes sure the fallback thread runs (it is started on first need).
    pub(super) fn want_fallback(&self) {
        let mut running = self.fallback.running.lock();
        if !*running {
            let weak = self.this.clone();
            let fd = self.eventfd.clone();
            let ctl = self.fallback.clone();
            let started = std::thread::Builder::new()
                .name("blobcask-uring-completions".into())
                .spawn(move || fallback_thread(weak, fd, ctl));
            if started.is_ok() {
                *running = true;
            }
        }
        self.fallback.wanted.notify_one();
    }

    /// Waits on the calling thread until `op` completes: enters the kernel
    /// for at least one completion at a time (with a short timeout, since
    /// another thread may reap this operation's completion first).
    pub fn wait_blocking(&self, op: &mut Op) -> (io::Result<i32>, Option<AlignedBuf>) {
        if op.id.is_none() {
            return op.fail(io::Error::other("io_uring operation already finished"));
        }
        let ts = types::Timespec::new().nsec(1_000_000);
        let mut refused = 0u32;
        loop {
            self.reap_for(op.id);
            if let Some(r) = op.take_done(None) {
                // Entries of other threads that an enter below left queued
                // (counted again) must not wait for some later caller.
                if self.unsubmitted.load(Ordering::Acquire) > 0 {
                    let _ = self.submit();
                }
                return r;
            }
            // One enter both submits everything queued (this operation's
            // entry included, unless another thread already did) and waits
            // for a completion: one system call per operation, as `pread`.
            let queued = self.unsubmitted.swap(0, Ordering::AcqRel);
            let args = types::SubmitArgs::new().timespec(&ts);
            let r = self.ring.submitter().submit_with_args(1, &args);
            if self.with_sq(|sq| !sq.is_empty()) {
                // Entries the kernel did not take (or pushed meanwhile by
                // threads that counted them already): the next enter.
                self.unsubmitted.fetch_add(queued.max(1), Ordering::AcqRel);
            }
            match r {
                Ok(_) => refused = 0,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {
                    refused = 0;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EAGAIN)) => {
                    // Completion backlog or no memory for requests right
                    // now: the enter neither took entries nor waited. Reap
                    // (at the top) and retry, as `submit` does, for a
                    // while.
                    refused += 1;
                    if refused >= 1000 {
                        return op.fail(e);
                    }
                    std::thread::yield_now();
                }
                Err(e) => return op.fail(e),
            }
        }
    }
}

fn fallback_thread(driver: Weak<Driver>, fd: Arc<OwnedFd>, ctl: Arc<FallbackCtl>) {
    loop {
        {
            let Some(d) = driver.upgrade() else { return };
            let mut running = ctl.running.lock();
            while d.slots.lock().fallback_waiters == 0 {
                if ctl.shutdown.load(Ordering::Acquire) {
                    *running = false;
                    return;
                }
                // Do not keep the driver alive while idle.
                let timed_out = ctl
                    .wanted
                    .wait_for(&mut running, std::time::Duration::from_millis(100))
                    .timed_out();
                if timed_out && driver.strong_count() == 1 {
                    // Only this thread holds the driver: it is going away.
                    *running = false;
                    return;
                }
            }
        }
        if ctl.shutdown.load(Ordering::Acquire) {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack; a timeout so shutdown is seen.
        unsafe { libc::poll(&raw mut pfd, 1, 100) };
        drain_eventfd(fd.as_raw_fd());
        let Some(d) = driver.upgrade() else { return };
        d.reap();
    }
}
