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
