//! Completion: the completion queue reaped, each result handed to its
//! operation's slot and the waiting tasks woken (D2).

use std::os::fd::AsRawFd;

use super::slots::{user_data, Slot};
use super::{drain_eventfd, together, Driver};

impl Driver {
    /// For an event loop that found the eventfd readable: consumes the
    /// signal and reaps (D2), waking the tasks whose operations finished.
    pub fn complete(&self) {
        drain_eventfd(self.eventfd.as_raw_fd());
        self.reap();
    }

    /// Hands every completion in the queue to its slot and wakes the
    /// waiting tasks (D2).
    pub fn reap(&self) {
        self.reap_for(None);
    }

    /// [`reap`](Self::reap) by the poll of operation `polling`, which takes
    /// its own result right after: its completion is recorded without a
    /// wake-up of its waker. That waker is the polling task's own, and
    /// waking a task from inside its poll makes the runtime poll it once
    /// more for nothing (and on tokio's multi-thread runtime rouses another
    /// worker to come and steal it).
    pub(super) fn reap_for(&self, polling: Option<usize>) {
        let mut done: Vec<(u64, i32)> = Vec::new();
        {
            // Wait for a concurrent reaper rather than skip: it may have
            // drained the queue before the completion this caller was
            // signalled for arrived (D2).
            let _g = self.cq.lock();
            loop {
                // SAFETY: reaping is serialised by `cq`.
                let cq = unsafe { self.ring.completion_shared() };
                for cqe in cq {
                    done.push((cqe.user_data(), cqe.result()));
                }
                // Completions that did not fit the queue wait in the
                // kernel's overflow list until an enter flushes them (the
                // crate asks for events when the overflow flag is up).
                let overflow = self.with_sq(|sq| sq.cq_overflow());
                if !overflow {
                    break;
                }
                let _ = self.ring.submitter().submit();
            }
        }
        if done.is_empty() {
            return;
        }
        let mut wake = Vec::with_capacity(done.len());
        let mut stale = 0usize;
        {
            let mut slots = self.slots.lock();
            for (data, res) in done {
                let id = (data & 0xffff_ffff) as usize;
                if slots.gens.get(id).map(|&g| user_data(id, g)) != Some(data) {
                    // Not for the slot's current operation: never hand it
                    // to another one.
                    stale += 1;
                    continue;
                }
                let Some(slot) = slots.slots.get_mut(id) else {
                    continue;
                };
                match std::mem::replace(slot, Slot::Free) {
                    Slot::InFlight { waker, buf, mode } => {
                        *slot = Slot::Done { res, buf, mode };
                        let held = waker
                            .as_ref()
                            .is_some_and(|w| together::holds_back(self.identity(), data, w));
                        if polling != Some(id) && !held {
                            wake.extend(waker);
                        }
                    }
                    Slot::Abandoned { .. } => {
                        // Free already holds; put the slot back on the list.
                        slots.free.push(id);
                        slots.busy -= 1;
                    }
                    other => {
                        stale += 1;
                        *slot = other;
                    }
                }
            }
        }
        for w in wake {
            w.wake();
        }
        debug_assert_eq!(stale, 0, "io_uring completions for no waiting operation");
    }
}
