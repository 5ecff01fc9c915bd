//! A store handle belongs to the process that opened it. After `fork()`,
//! the child inherits the descriptors, the lock's open file description
//! and the in-memory state, but not the engine's threads: writing through
//! the inherited handle would put a second writer on the parent's store
//! (a child's writes destroyed the parent's acknowledged objects in a
//! hostile-user test), and closing it would run threads that do not exist
//! there. A fork counter, bumped in every child by a `pthread_atfork`
//! handler, tells a handle that it was inherited: every call then fails
//! with `Locked`, and dropping it does nothing but let go of the
//! descriptors.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static FORKS: AtomicU64 = AtomicU64::new(0);

extern "C" fn in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// Forks this process has been through so far (as a child), counted from
/// the first call: what a handle records when it is opened.
pub(crate) fn generation() -> u64 {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only touches an atomic, which
        // is async-signal-safe, as code run in a fork child must be.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    FORKS.load(Ordering::Relaxed)
}

/// Runs `f` on the engine's helper threads (`helpers`), except in a fork
/// child: a child of a process that used the pool inherits the pool's
/// bookkeeping (its threads counted, some as idle) but none of its
/// threads, so a task handed to the pool there waited forever (a child
/// that opened a store of its own hung in `open`, with the `blocking`
/// crate's pool used before). In a child `f`
/// runs on a thread of its own, started for it; a panic in `f` is resumed
/// in the caller either way.
pub(crate) async fn unblock<T, F>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    if generation() == 0 {
        return crate::store::helpers::unblock(f).await;
    }
    let (tx, rx) = futures::channel::oneshot::channel();
    on_a_thread_of_its_own(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.await {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => unreachable!("the thread sends before it ends"),
    }
}

/// Runs `f` in the background, nobody waiting for it: on the helper
/// threads, or in a fork child (see [`unblock`]) on a thread of its own.
pub(crate) fn detach<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    if generation() == 0 {
        crate::store::helpers::spawn(f);
    } else {
        on_a_thread_of_its_own(f);
    }
}

/// Starts a thread for `f`; where none can be had, runs `f` here rather
/// than not at all.
fn on_a_thread_of_its_own<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    // The closure comes back from a failed spawn only through this slot.
    let slot = std::sync::Arc::new(parking_lot::Mutex::new(Some(f)));
    let theirs = slot.clone();
    let started = std::thread::Builder::new()
        .name("blobcask-forked".into())
        .spawn(move || {
            if let Some(f) = theirs.lock().take() {
                f();
            }
        });
    if started.is_err() {
        if let Some(f) = slot.lock().take() {
            f();
        }
    }
}
