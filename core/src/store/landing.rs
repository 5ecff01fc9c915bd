//! Readers wait for values still being written by their commit group.
//!
//! A put whose value is written by its commit group beside the tuple blocks
//! (`request::DataWrite`) is linked into the index when the group applies
//! it, before the group's writes are issued: from then until the writes
//! complete, the index points at blocks that do not hold the value yet. A
//! read in that window must not go to the device (it would find the old
//! bytes and report the object damaged: a false `Corrupt` found by
//! `tests/all/cache.rs`), nor fill the read cache.
//!
//! Protocol (invariant 8 in `INVARIANTS.md`): before the group links the
//! first such version, it lowers `from` to that version (versions only
//! grow, and one group commits at a time); after the group's writes are
//! done — or have failed — it raises `from` back to `NONE` and wakes the
//! waiters. A reader that found version `v` in the index (under the state
//! lock, which orders it after the store to `from`) waits while
//! `v >= from`.

use std::sync::atomic::{AtomicU64, Ordering};

use event_listener::Event;

/// No version is waiting for its value.
const NONE: u64 = u64::MAX;

pub(crate) struct Landing {
    /// The first version of the group in progress whose value is not
    /// written yet; `NONE` when there is none.
    from: AtomicU64,
    landed: Event,
}

impl Landing {
    pub fn new() -> Landing {
        Landing {
            from: AtomicU64::new(NONE),
            landed: Event::new(),
        }
    }

    /// Called by the committer before it links `version`, whose value its
    /// group will write.
    pub fn hold(&self, version: u64) {
        self.from.fetch_min(version, Ordering::SeqCst);
    }

    /// Called by the committer once its group's writes are done (or
    /// failed): every held version's value is where its tuple says.
    pub fn release(&self) {
        if self.from.swap(NONE, Ordering::SeqCst) != NONE {
            self.landed.notify(usize::MAX);
        }
    }

    fn pending(&self, version: u64) -> bool {
        version >= self.from.load(Ordering::SeqCst)
    }

    /// Waits until `version`'s value is written. (Blocking callers run it
    /// in `io::block_on`, which drives an event loop hosted on their
    /// thread: the group they wait for may be led by one of its tasks.)
    pub async fn wait(&self, version: u64) {
        while self.pending(version) {
            let listener = self.landed.listen();
            if !self.pending(version) {
                break;
            }
            listener.await;
        }
    }

    /// [`wait`](Self::wait) for a blocking caller. A version already
    /// written (the common case) returns at once, without starting the
    /// event loop `io::block_on` hosts.
    pub fn wait_blocking(&self, version: u64) {
        if self.pending(version) {
            crate::io::block_on(self.wait(version));
        }
    }
}
