//! One operation in the ring as a future: its poll submits, reaps or
//! waits through the caller's runtime, and dropping it abandons its slot
//! to the reaper (D1).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::slots::{user_data, Mode, Slot, Slots};
use super::{together, Driver};
use crate::io::AlignedBuf;

/// One operation in the ring. Awaiting it yields the kernel's result (bytes
/// or a negative errno) and the buffer back.
pub(crate) struct Op {
    pub(super) driver: Arc<Driver>,
    pub(super) id: Option<usize>,
    /// The entry's user data (slot and generation): names this operation
    /// and no later one in the same slot.
    pub(super) data: u64,
}

/// Output of an operation: the result and the buffer it owned.
pub(crate) type OpOutput = (io::Result<i32>, Option<AlignedBuf>);

impl Op {
    /// Takes the result if the completion arrived; otherwise records
    /// `waker` (if any) for the reaper.
    pub(super) fn take_done(&mut self, waker: Option<&Waker>) -> Option<OpOutput> {
        let id = self.id?;
        let mut slots = self.driver.slots.lock();
        let slot = slots.slots.get_mut(id)?;
        match slot {
            Slot::Done { .. } => {
                let Slot::Done { res, buf, mode } = std::mem::replace(slot, Slot::Free) else {
                    return None;
                };
                slots.free.push(id);
                slots.busy -= 1;
                if mode == Mode::Fallback {
                    slots.fallback_waiters -= 1;
                }
                let handoff = self.leave(&mut slots, id);
                drop(slots);
                self.id = None;
                together::leave(self.driver.identity(), self.data);
                handoff.into_iter().for_each(Waker::wake);
                let r = if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res)
                };
                Some((r, buf))
            }
            Slot::InFlight { waker: w, .. } => {
                if let Some(new) = waker {
                    match w {
                        Some(old) if old.will_wake(new) => {}
                        _ => *w = Some(new.clone()),
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Bookkeeping when this operation stops waiting: gives up the reactor
    /// registration (D3) and the fallback count. Returns a waker to wake
    /// (the new registrant) once the lock is released.
    fn leave(&self, slots: &mut Slots, id: usize) -> Option<Waker> {
        let rt = slots.registered_runtime(id)?;
        // The woken waiter is the registrant from now on, even before it
        // polls again: if its own completion is reaped first and it leaves
        // without registering, it hands on in turn (D3).
        let (next, waker) = match slots.other_reactor_waiter(rt, id) {
            Some((next, w)) => (Some(next), Some(w)),
            None => (None, None),
        };
        slots.set_registrant(rt, next);
        // A sibling polled together with this operation registers in the
        // next pass of the same poll (see `together`).
        let sibling = match (
            next.and_then(|n| slots.gens.get(n).map(|&g| user_data(n, g))),
            &waker,
        ) {
            (Some(data), Some(w)) => together::holds_back(self.driver.identity(), data, w),
            _ => false,
        };
        if sibling {
            return None;
        }
        waker
    }

    fn set_mode(&self, mode: Mode) -> Mode {
        let Some(id) = self.id else { return mode };
        let mut slots = self.driver.slots.lock();
        let mut was = Mode::Unset;
        match slots.slots.get_mut(id) {
            Some(Slot::InFlight { mode: m, .. }) | Some(Slot::Done { mode: m, .. }) => {
                was = *m;
                *m = mode;
            }
            _ => return was,
        }
        if was != mode {
            if was == Mode::Fallback {
                slots.fallback_waiters -= 1;
            }
            if mode == Mode::Fallback {
                slots.fallback_waiters += 1;
            }
        }
        was
    }

    /// The result of an operation that cannot wait any longer (entering
    /// the kernel failed): the error, without the buffer. The slot keeps
    /// the buffer and is abandoned when the `Op` is dropped (D1); the
    /// entry itself stays queued and reaches the kernel at a later enter.
    pub(super) fn fail(&mut self, e: io::Error) -> OpOutput {
        (Err(e), None)
    }
}

impl Future for Op {
    type Output = OpOutput;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<OpOutput> {
        let driver = self.driver.clone();
        together::join(driver.identity(), self.data);
        if crate::io::waits_here(Arc::as_ptr(&driver) as usize) {
            // A blocking caller, or the future of a multi-thread runtime's
            // `block_on`: wait in the kernel on this thread.
            return Poll::Ready(driver.wait_blocking(&mut self));
        }
        if let Err(e) = driver.submit() {
            return Poll::Ready(self.fail(e));
        }
        loop {
            driver.reap_for(self.id);
            if let Some(r) = self.take_done(Some(cx.waker())) {
                return Poll::Ready(r);
            }
            if crate::io::polled_by_loop_of(Arc::as_ptr(&driver) as usize) {
                // The event loop polling this task watches the eventfd and
                // reaps when it turns readable; the waker is recorded (by
                // `take_done`, under the slots lock the reaper takes), so a
                // completion from here on wakes it.
                self.set_mode(Mode::Loop);
                // An operation first polled under tokio may have held the
                // reactor registration: pass it on (D3).
                let handoff = match self.id {
                    Some(id) => self.leave(&mut driver.slots.lock(), id),
                    None => None,
                };
                handoff.into_iter().for_each(Waker::wake);
                return Poll::Pending;
            }
            match driver.reactor() {
                Some((rt, fd)) => {
                    self.set_mode(Mode::Reactor(rt));
                    // tokio keeps the waker of the latest poll only, so the
                    // poll and the record of who made it happen under one
                    // lock: `registrant` always names the task the reactor
                    // will wake (D3).
                    let mut slots = driver.slots.lock();
                    let polled = fd.poll_read_ready(cx);
                    let mut handoff = None;
                    if polled.is_pending() {
                        // A waiter that registered for another runtime
                        // before (a future moved between runtimes) hands
                        // that one on first.
                        if let Some(id) = self.id {
                            if slots.registered_runtime(id) != Some(rt) {
                                handoff = self.leave(&mut slots, id);
                            }
                        }
                        slots.set_registrant(rt, self.id);
                    }
                    drop(slots);
                    handoff.into_iter().for_each(Waker::wake);
                    match polled {
                        Poll::Ready(Ok(mut guard)) => {
                            // tokio's reactor watches edge-triggered: every
                            // later signal of the ring is a new edge, however
                            // high the counter already is, so clearing the
                            // readiness consumes the signal (D2) without a
                            // read of the counter (one system call less per
                            // wake-up). Level-triggered watchers (the
                            // fallback thread, foreign loops) drain it.
                            guard.clear_ready();
                            continue;
                        }
                        Poll::Ready(Err(_)) => {
                            // The runtime is shutting down: its operations
                            // go through the fallback thread from here on.
                            driver.drop_reactor(rt);
                        }
                        Poll::Pending => {
                            // A completion that landed between the reap and
                            // the registration raised the eventfd, so the
                            // reactor reports it (D2).
                            return Poll::Pending;
                        }
                    }
                }
                None => {
                    if self.set_mode(Mode::Fallback) != Mode::Fallback {
                        driver.want_fallback();
                    }
                    // The fallback thread may have consumed the signal for
                    // this completion before we registered: look again.
                    driver.reap_for(self.id);
                    if let Some(r) = self.take_done(Some(cx.waker())) {
                        return Poll::Ready(r);
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let mut slots = self.driver.slots.lock();
        let handoff = self.leave(&mut slots, id);
        let Some(slot) = slots.slots.get_mut(id) else {
            return;
        };
        let mut fallback = false;
        match std::mem::replace(slot, Slot::Free) {
            Slot::InFlight { buf, mode, .. } => {
                fallback = mode == Mode::Fallback;
                // D1: the kernel still owns the buffer.
                *slot = Slot::Abandoned { _buf: buf };
            }
            Slot::Done { mode, .. } => {
                fallback = mode == Mode::Fallback;
                slots.free.push(id);
                slots.busy -= 1;
            }
            other => *slot = other,
        }
        if fallback {
            slots.fallback_waiters -= 1;
        }
        drop(slots);
        if let Some(w) = handoff {
            w.wake();
        }
    }
}
