//! loom models of the io_uring driver's completion protocol (invariants D2
//! and D3 of [`super::driver`], and the wake-ups `driver::together` holds
//! back under D2). Run with
//!
//! ```text
//! RUSTFLAGS="--cfg blobcask_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p blobcask --release --lib loom_model
//! ```
//!
//! loom cannot run io_uring, so the ring, the eventfd and the tokio reactor
//! are modelled by the few atomic steps the driver relies on; the driver's
//! own steps (`Driver::reap`, `Op::poll`, `Op::take_done`, `Op::leave`) are
//! written out step for step, each lock of `slots` or `cq` being one loom
//! lock. Each protocol has a deliberately broken variant that loom must
//! catch (`#[should_panic]`): if a change to the model made the check
//! vacuous, the broken variant would start passing and the suite would
//! fail.
//!
//! A second D3 model covers runtimes: another runtime's registering drops
//! a registration only while no poll holds it and no waiter is its
//! registrant.
//!
//! The D3 model first found a gap in the driver: a hand-off to a waiter
//! whose own completion was reaped before it polled again left nobody
//! registered. The driver now names the woken waiter as the registrant at
//! the hand-off; the old protocol is kept as a broken variant.
//!
//! Shared flags that several threads both set and clear (the eventfd
//! counter, wake-ups) are loom locks rather than atomics: loom's model of
//! an atomic read-modify-write racing a store is unsound
//! (tokio-rs/loom#254) and reports impossible failures.

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::loom_check::model;

// ---------------------------------------------------------------------------
// D2: whoever consumes an eventfd signal reaps afterwards, and every reap
// hands every completion to its slot.
// ---------------------------------------------------------------------------

/// Operations in flight, one per waiter; the kernel completes them in order.
const OPS: usize = 2;

/// An operation's slot, as far as D2 is concerned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum D2Slot {
    /// In the kernel; `waker` once the operation was polled.
    InFlight { waker: bool },
    /// Handed over by a reaper; `woken` if the reaper woke a waker.
    Done { woken: bool },
    /// The waiter took the result.
    Taken,
}

struct D2 {
    /// The completion queue ring: the kernel writes an entry (the index of
    /// the operation), then publishes the tail with release ordering.
    entries: [AtomicUsize; OPS],
    tail: AtomicUsize,
    /// The driver's `cq` lock, guarding the head that reapers advance.
    cq: Mutex<usize>,
    /// The eventfd's unconsumed signals: the kernel adds one per
    /// completion; a poller consumes them all at once. Under tokio that is
    /// the reactor's readiness, set again by every signal (an edge under
    /// EPOLLET, whatever the counter holds) and cleared by `clear_ready`;
    /// elsewhere, a read of the counter to zero. (A lock, as in the kernel:
    /// each write and read of an eventfd is atomic.)
    eventfd: Mutex<usize>,
    slots: Mutex<[D2Slot; OPS]>,
}

impl D2 {
    /// The kernel posts the completion of `op` and then signals the eventfd.
    fn complete(&self, op: usize) {
        let tail = self.tail.load(Ordering::Relaxed);
        self.entries[tail].store(op, Ordering::Relaxed);
        self.tail.store(tail + 1, Ordering::Release);
        *self.eventfd.lock().unwrap() += 1;
    }

    /// `Driver::reap_for`: drain the queue under `cq`, then hand every
    /// completion to its slot under `slots`, waking the waker it holds,
    /// except that of operation `polling`, whose own poll is reaping (it
    /// takes its result right after). `skip_if_busy` is the old bug: give
    /// up when another reaper holds `cq` instead of waiting for it.
    ///
    /// With `together` (the reaper polls its operations inside a
    /// `driver::together::Together`, every operation of this model being
    /// one of them), another operation's wake-up is held back instead, and
    /// noted there.
    fn reap(&self, skip_if_busy: bool, polling: usize, mut together: Option<&mut bool>) {
        let done: Vec<usize> = {
            let mut head = if skip_if_busy {
                match self.cq.try_lock() {
                    Ok(head) => head,
                    Err(_) => return,
                }
            } else {
                self.cq.lock().unwrap()
            };
            let tail = self.tail.load(Ordering::Acquire);
            let done = (*head..tail)
                .map(|i| self.entries[i].load(Ordering::Relaxed))
                .collect();
            *head = tail;
            done
        };
        if done.is_empty() {
            return;
        }
        let mut slots = self.slots.lock().unwrap();
        for op in done {
            match slots[op] {
                D2Slot::InFlight { waker } => {
                    let held = waker && op != polling && together.is_some();
                    if let Some(noted) = together.as_deref_mut() {
                        *noted |= held;
                    }
                    slots[op] = D2Slot::Done {
                        woken: waker && op != polling && !held,
                    }
                }
                other => panic!("completion of operation {op} found its slot {other:?}"),
            }
        }
    }

    /// `Op::take_done`: the result if it arrived, else records the waker.
    fn take_done(&self, op: usize) -> bool {
        let mut slots = self.slots.lock().unwrap();
        match slots[op] {
            D2Slot::Done { .. } => {
                slots[op] = D2Slot::Taken;
                true
            }
            D2Slot::InFlight { .. } => {
                slots[op] = D2Slot::InFlight { waker: true };
                false
            }
            D2Slot::Taken => unreachable!("polled after completion"),
        }
    }

    /// One `Op::poll` of operation `op` through the reactor: reap, look
    /// for the result, then ask the reactor. The reactor reports the
    /// eventfd readable while a signal is unconsumed; the poller then
    /// consumes them (`clear_ready`, one step here) and goes round again,
    /// so it reaps after every signal it consumes. Without a signal the poll returns `Pending`.
    /// Every round but the first consumes one of the `OPS` signals, so the
    /// loop is bounded. Returns whether the poll was `Ready`.
    fn poll(&self, op: usize, skip_if_busy: bool, mut together: Option<&mut bool>) -> bool {
        loop {
            self.reap(skip_if_busy, op, together.as_deref_mut());
            if self.take_done(op) {
                return true;
            }
            if std::mem::take(&mut *self.eventfd.lock().unwrap()) == 0 {
                return false;
            }
        }
    }
}

/// A kernel thread completes two operations (entry, then signal, each);
/// two tasks poll one operation each, concurrently. With every thread
/// joined, either a signal is still unconsumed (the reactor will report
/// it, and the reap that follows drains the whole queue), or every
/// completion reached its slot and every task left `Pending` was woken.
impl D2 {
    /// Every operation in flight, nothing posted yet.
    fn new() -> Arc<D2> {
        Arc::new(D2 {
            entries: [AtomicUsize::new(usize::MAX), AtomicUsize::new(usize::MAX)],
            tail: AtomicUsize::new(0),
            cq: Mutex::new(0),
            eventfd: Mutex::new(0),
            slots: Mutex::new([D2Slot::InFlight { waker: false }; OPS]),
        })
    }

    /// A kernel thread completing every operation in turn.
    fn kernel(d: &Arc<D2>) -> thread::JoinHandle<()> {
        let d = d.clone();
        thread::spawn(move || {
            for op in 0..OPS {
                d.complete(op);
            }
        })
    }
}

fn signal_then_reap(skip_if_busy: bool) {
    model(move || {
        let d = D2::new();
        let kernel = D2::kernel(&d);
        let waiters: Vec<_> = (0..OPS)
            .map(|op| {
                let d = d.clone();
                thread::spawn(move || d.poll(op, skip_if_busy, None))
            })
            .collect();
        kernel.join().unwrap();
        let ready: Vec<bool> = waiters.into_iter().map(|w| w.join().unwrap()).collect();

        if *d.eventfd.lock().unwrap() > 0 {
            return;
        }
        let head = *d.cq.lock().unwrap();
        let slots = *d.slots.lock().unwrap();
        assert!(
            head == d.tail.load(Ordering::SeqCst)
                && !slots.iter().any(|s| matches!(s, D2Slot::InFlight { .. })),
            "lost completion: its signal was consumed but no reap delivered it \
             (head {head}, slots {slots:?})"
        );
        for (op, ready) in ready.into_iter().enumerate() {
            assert!(
                ready || slots[op] == (D2Slot::Done { woken: true }),
                "lost completion: operation {op} left pending and never woken ({:?})",
                slots[op]
            );
        }
    });
}

#[test]
fn d2_every_consumed_signal_is_followed_by_a_reap() {
    signal_then_reap(false);
}

#[test]
#[should_panic(expected = "lost completion")]
fn d2_reaper_giving_up_on_a_busy_queue_is_caught() {
    signal_then_reap(true);
}

/// One task awaits both operations together (`driver::together`): each
/// pass polls every operation not yet done; a wake-up one poll held back
/// for another makes the task pass again before it may return `Pending`
/// (`broken`: it returns anyway). Once the kernel is done, either the task
/// has both results, or a signal is still unconsumed (the reactor will
/// poll the task again), or every result it lacks woke it.
fn polled_together(broken: bool) {
    model(move || {
        let d = D2::new();
        let kernel = D2::kernel(&d);
        let task = {
            let d = d.clone();
            thread::spawn(move || {
                let mut taken = [false; OPS];
                // Bounded: each pass takes a result or consumes a signal,
                // or ends the loop.
                for _ in 0..=2 * OPS {
                    let mut held = false;
                    for (op, done) in taken.iter_mut().enumerate() {
                        if !*done {
                            *done = d.poll(op, false, Some(&mut held));
                        }
                    }
                    if taken.iter().all(|&t| t) || !held || broken {
                        break;
                    }
                }
                taken
            })
        };
        kernel.join().unwrap();
        let taken = task.join().unwrap();
        if taken.iter().all(|&t| t) || *d.eventfd.lock().unwrap() > 0 {
            return;
        }
        let slots = *d.slots.lock().unwrap();
        for (op, taken) in taken.into_iter().enumerate() {
            assert!(
                taken || slots[op] == (D2Slot::Done { woken: true }),
                "lost wake-up: operation {op} done, held back and never polled again ({:?})",
                slots[op]
            );
        }
    });
}

#[test]
fn d2_wake_ups_held_back_inside_a_together_poll_are_polled_again() {
    polled_together(false);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn d2_a_together_poll_returning_with_a_held_back_wake_up_is_caught() {
    polled_together(true);
}

// ---------------------------------------------------------------------------
// D3: while any operation waits through the reactor, one of them (the
// registrant) holds the registration; when it leaves it wakes another.
// The driver keeps one registrant per tokio runtime, each following this
// protocol among that runtime's waiters only: the model is one runtime.
// ---------------------------------------------------------------------------

/// A waiter's slot, as far as D3 is concerned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum D3Slot {
    /// Waiting through the reactor (`InFlight`, a waker, mode `Reactor`).
    Reactor,
    /// Took its result or was dropped.
    Left,
}

struct D3State {
    slots: Vec<D3Slot>,
    registrant: Option<usize>,
}

/// The shared state: `Slots` (the slot states and the registrant) behind
/// the driver's `slots` lock, and the wake-ups sent by hand-offs and not
/// yet acted on (a woken task polls its operation again; the executor
/// serialises a wake with the task's next poll, modelled by a lock).
struct D3 {
    slots: Mutex<D3State>,
    woken: Mutex<Vec<bool>>,
}

impl D3 {
    /// `Op::take_done` finding the result (or `Drop for Op`): the slot is
    /// freed and `Op::leave` gives up the registration, handing it to the
    /// first other reactor waiter (`Slots::other_reactor_waiter`), who is
    /// the registrant from then on and whose waker is woken once the lock
    /// is released.
    fn leave(&self, me: usize, protocol: Handoff) {
        let handoff = {
            let mut s = self.slots.lock().unwrap();
            s.slots[me] = D3Slot::Left;
            let mut handoff = None;
            if s.registrant == Some(me) {
                s.registrant = None;
                if protocol != Handoff::None {
                    handoff =
                        (0..s.slots.len()).find(|&i| i != me && s.slots[i] == D3Slot::Reactor);
                }
                if protocol == Handoff::NamingTheNext {
                    s.registrant = handoff;
                }
            }
            handoff
        };
        if let Some(w) = handoff {
            self.woken.lock().unwrap()[w] = true;
        }
    }

    /// A woken task polls its operation again: no result yet, the reactor
    /// returns `Pending`, and it takes the registration. (A wake-up that has
    /// not arrived yet when this runs stays pending for the final check.)
    fn repoll_if_woken(&self, me: usize) {
        if std::mem::take(&mut self.woken.lock().unwrap()[me]) {
            let mut s = self.slots.lock().unwrap();
            if s.slots[me] == D3Slot::Reactor {
                s.registrant = Some(me);
            }
        }
    }

    /// With every thread joined: if any operation still waits through the
    /// reactor, a waiting one holds the registration, or a waiting one has
    /// a wake-up pending (it will poll and register).
    fn check(&self) {
        let s = self.slots.lock().unwrap();
        let waiting: Vec<usize> = (0..s.slots.len())
            .filter(|&i| s.slots[i] == D3Slot::Reactor)
            .collect();
        if waiting.is_empty() {
            return;
        }
        let registered = s.registrant.is_some_and(|r| waiting.contains(&r));
        let woken = self.woken.lock().unwrap();
        let handed = waiting.iter().any(|&i| woken[i]);
        assert!(
            registered || handed,
            "reactor waiters {waiting:?} stranded: registrant {:?} and no hand-off pending",
            s.registrant
        );
    }
}

/// How `Op::leave` passes the registration on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Handoff {
    /// The driver's protocol: wake the next reactor waiter and name it the
    /// registrant at once.
    NamingTheNext,
    /// Broken (the driver before the loom model): wake the next waiter but
    /// leave `registrant` unset until it polls again.
    WakeOnly,
    /// Broken: give the registration up and wake nobody.
    None,
}

/// What a waiter thread does, in order.
#[derive(Clone, Copy)]
enum Step {
    RepollIfWoken,
    Leave,
}

/// Runs one thread per entry of `waiters` (its steps); all wait through
/// the reactor at first, waiter 0 holding the registration.
fn registrant_handoff(protocol: Handoff, waiters: &'static [&'static [Step]]) {
    model(move || {
        let d = Arc::new(D3 {
            slots: Mutex::new(D3State {
                slots: vec![D3Slot::Reactor; waiters.len()],
                registrant: Some(0),
            }),
            woken: Mutex::new(vec![false; waiters.len()]),
        });
        let threads: Vec<_> = waiters
            .iter()
            .enumerate()
            .map(|(me, &steps)| {
                let d = d.clone();
                thread::spawn(move || {
                    for step in steps {
                        match step {
                            Step::RepollIfWoken => d.repoll_if_woken(me),
                            Step::Leave => d.leave(me, protocol),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        d.check();
    });
}

/// The registrant (0) takes its result (or is dropped) while waiters 1
/// and 2 wait through the reactor; each polls again if it was woken.
const REGISTRANT_LEAVES: &[&[Step]] = &[
    &[Step::Leave],
    &[Step::RepollIfWoken],
    &[Step::RepollIfWoken],
];

/// The registrant (0) hands off to waiter 1, whose own completion is
/// reaped before its task polls again, so it takes its result without
/// ever registering; waiter 2 must not be stranded.
const HANDED_TO_ONE_THAT_FINISHES: &[&[Step]] =
    &[&[Step::Leave], &[Step::Leave], &[Step::RepollIfWoken]];

#[test]
fn d3_registrant_leaving_hands_the_registration_on() {
    registrant_handoff(Handoff::NamingTheNext, REGISTRANT_LEAVES);
}

#[test]
fn d3_registration_handed_to_a_waiter_that_finishes_first_is_handed_on() {
    registrant_handoff(Handoff::NamingTheNext, HANDED_TO_ONE_THAT_FINISHES);
}

#[test]
#[should_panic(expected = "stranded")]
fn d3_registrant_leaving_without_a_handoff_is_caught() {
    registrant_handoff(Handoff::None, REGISTRANT_LEAVES);
}

#[test]
#[should_panic(expected = "stranded")]
fn d3_handoff_that_does_not_name_the_next_registrant_is_caught() {
    registrant_handoff(Handoff::WakeOnly, HANDED_TO_ONE_THAT_FINISHES);
}

// ---------------------------------------------------------------------------
// D3, across runtimes: when a runtime registers, another runtime's
// registration that no waiter holds (no registrant) and no poll is using
// is dropped (`Driver::reactor`). A poll of that other runtime takes its
// registration (a clone of the `Arc`, under the reactors lock), then names
// itself registrant (under the slots lock) and returns `Pending`; the
// registration must not be dropped in between, or the waiter is left with
// nothing to wake it.
// ---------------------------------------------------------------------------

/// Runtime A's registration, under the driver's `reactors` lock.
struct Registration {
    /// In the list (registered with A's reactor).
    registered: bool,
    /// Polls holding a clone of it (`Arc::strong_count` − 1).
    holders: usize,
}

/// Which registrations the other runtime's `reactor()` drops.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum IdleRule {
    /// The driver's rule: no registrant and no poll holding it.
    NoRegistrantNorHolder,
    /// Broken: no registrant, whoever holds it.
    NoRegistrant,
}

fn registration_dropped_while_idle(rule: IdleRule) {
    model(move || {
        let reactors = Arc::new(Mutex::new(Registration {
            registered: true,
            holders: 0,
        }));
        let slots = Arc::new(Mutex::new(D3State {
            slots: vec![D3Slot::Left],
            registrant: None,
        }));
        // Runtime A's operation, polled for the first time: `reactor()`,
        // then the registrant named under `slots`, then `Pending` (the
        // clone dropped at the end of the poll).
        let a = {
            let (reactors, slots) = (reactors.clone(), slots.clone());
            thread::spawn(move || {
                {
                    let mut r = reactors.lock().unwrap();
                    r.registered = true;
                    r.holders += 1;
                }
                {
                    let mut s = slots.lock().unwrap();
                    s.slots[0] = D3Slot::Reactor;
                    s.registrant = Some(0);
                }
                reactors.lock().unwrap().holders -= 1;
            })
        };
        // Runtime B registering: A's registration goes if it is idle
        // (lock order: reactors, then slots).
        let b = {
            let (reactors, slots) = (reactors.clone(), slots.clone());
            thread::spawn(move || {
                let mut r = reactors.lock().unwrap();
                let s = slots.lock().unwrap();
                let idle =
                    s.registrant.is_none() && (rule == IdleRule::NoRegistrant || r.holders == 0);
                if idle {
                    r.registered = false;
                }
            })
        };
        a.join().unwrap();
        b.join().unwrap();
        let s = slots.lock().unwrap();
        if s.slots[0] == D3Slot::Reactor {
            assert!(
                reactors.lock().unwrap().registered,
                "waiter stranded: registrant {:?} but its runtime's registration was dropped",
                s.registrant
            );
        }
    });
}

#[test]
fn d3_idle_registration_dropped_never_under_a_waiter() {
    registration_dropped_while_idle(IdleRule::NoRegistrantNorHolder);
}

#[test]
#[should_panic(expected = "stranded")]
fn d3_registration_dropped_while_a_poll_holds_it_is_caught() {
    registration_dropped_while_idle(IdleRule::NoRegistrant);
}
