//! Operations awaited together by one task (a commit group's writes):
//! while [`Together`](together::Together) polls its futures, a completion
//! or a registration hand-off for one of their operations, found by
//! another of them, wakes nobody; it is noted instead, and `Together`
//! polls every pending future again before it returns. Without this, each
//! such find wakes the task that is being polled, which the runtime then
//! polls once more for nothing (on tokio's multi-thread runtime rousing
//! another worker to steal it).
//!
//! A wake-up is held back only on the polling thread, only for an
//! operation polled inside that `Together` (named by its driver and its
//! user data, which no later operation in the same slot shares, and
//! forgotten once its result is taken), and only when the waker it would
//! wake is the `Together`'s own: an operation of another task, or of a
//! child that polls it with a waker of its own (a `FuturesUnordered`
//! inside a child), is woken as always (D2).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The `Together` being polled on this thread: its waker, its
/// operations (driver, user data), and whether a wake-up of one of
/// them was held back in this pass.
struct Members {
    waker: Waker,
    ops: Vec<(usize, u64)>,
    held_back: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<Members>> = const { RefCell::new(None) };
}

/// Called by every operation's poll: joins the `Together` being polled
/// on this thread, if any.
pub(super) fn join(driver: usize, data: u64) {
    let _ = CURRENT.try_with(|c| {
        if let Some(m) = c.borrow_mut().as_mut() {
            if !m.ops.contains(&(driver, data)) {
                m.ops.push((driver, data));
            }
        }
    });
}

/// Called when an operation's result is taken: it is no member any
/// more.
pub(super) fn leave(driver: usize, data: u64) {
    let _ = CURRENT.try_with(|c| {
        if let Some(m) = c.borrow_mut().as_mut() {
            m.ops.retain(|&op| op != (driver, data));
        }
    });
}

/// Whether waking `waker` for operation `data` of `driver` is held
/// back (see the module); notes that one was.
pub(super) fn holds_back(driver: usize, data: u64, waker: &Waker) -> bool {
    CURRENT
        .try_with(|c| match c.borrow_mut().as_mut() {
            Some(m) if m.ops.contains(&(driver, data)) && waker.will_wake(&m.waker) => {
                m.held_back = true;
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// Polls every future to its end, as `join_all`, with wake-ups among
/// their operations held back (see the module).
pub(crate) struct Together<F: Future> {
    futures: Vec<Option<Pin<Box<F>>>>,
    outputs: Vec<Option<F::Output>>,
    /// The members of earlier polls: an operation polled once stays a
    /// member until its result is taken (its completion may be found
    /// by a sibling first).
    ops: Vec<(usize, u64)>,
}

impl<F: Future> Together<F> {
    pub(crate) fn new(futures: impl IntoIterator<Item = F>) -> Self {
        let futures: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
        let outputs = futures.iter().map(|_| None).collect();
        Together {
            futures,
            outputs,
            ops: Vec::new(),
        }
    }
}

impl<F: Future> Unpin for Together<F> {}

impl<F: Future> Future for Together<F> {
    type Output = Vec<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            let outer = CURRENT.with(|c| {
                c.replace(Some(Members {
                    waker: cx.waker().clone(),
                    ops: std::mem::take(&mut this.ops),
                    held_back: false,
                }))
            });
            // Restores the outer `Together` (nested ones, or none) even
            // if a future panics.
            struct Restore(Option<Option<Members>>);
            impl Drop for Restore {
                fn drop(&mut self) {
                    if let Some(outer) = self.0.take() {
                        CURRENT.with(|c| *c.borrow_mut() = outer);
                    }
                }
            }
            let mut restore = Restore(Some(outer));
            for (slot, out) in this.futures.iter_mut().zip(this.outputs.iter_mut()) {
                if let Some(f) = slot {
                    if let Poll::Ready(v) = f.as_mut().poll(cx) {
                        *out = Some(v);
                        *slot = None;
                    }
                }
            }
            let mine = CURRENT.with(|c| c.borrow_mut().take());
            if let Some(outer) = restore.0.take() {
                CURRENT.with(|c| *c.borrow_mut() = outer);
            }
            let held_back = mine.as_ref().is_some_and(|m| m.held_back);
            this.ops = mine.map(|m| m.ops).unwrap_or_default();
            if this.futures.iter().all(Option::is_none) {
                let outputs = std::mem::take(&mut this.outputs);
                return Poll::Ready(outputs.into_iter().flatten().collect());
            }
            if !held_back {
                // Every pending operation's waker is recorded and no
                // wake-up was held back: a completion wakes the task.
                return Poll::Pending;
            }
        }
    }
}
