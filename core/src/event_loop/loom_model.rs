//! loom model of the event loop's wake-up protocol (invariant L1 of
//! [`super`]): a task woken from any thread is polled by a later `run`.
//! Run with
//!
//! ```text
//! RUSTFLAGS="--cfg blobcask_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p blobcask --release --lib loom_model
//! ```
//!
//! The host loop only calls `run` when the wake descriptor is readable,
//! so the property is: whenever the descriptor reads zero, no woken task
//! is left in the queue (or the host would sleep with work pending), and
//! the flag is down (or the next wake would be silent). The model writes
//! out `Ready::push`/`raise` and the head of `run` step for step; the
//! descriptor (an eventfd, each read and write atomic) and the queue are
//! loom locks. Two wakers race with a turn of the host; a third wake comes
//! after them. Two broken variants must fail (`#[should_panic]`): taking
//! the queue before lowering, and lowering the flag before draining the
//! descriptor (the first version's order: a raise between the two had its
//! write drained under a flag left up, and every later wake was silent;
//! the event-loop tests found it under load, this model then did).

use loom::sync::{Arc, Mutex};
use loom::thread;

struct Ready {
    queue: Mutex<Vec<usize>>,
    /// The flag (an atomic in the code; a lock here, since loom's model
    /// of a swap racing a store is unsound, tokio-rs/loom#254).
    raised: Mutex<bool>,
    /// The eventfd counter.
    fd: Mutex<u64>,
}

impl Ready {
    /// `Ready::push` (a waker, on any thread).
    fn push(&self, id: usize) {
        self.queue.lock().unwrap().push(id);
        if !std::mem::replace(&mut *self.raised.lock().unwrap(), true) {
            *self.fd.lock().unwrap() += 1;
        }
    }

    /// `EventLoop::run` up to the polls: drain, lower, take the queue.
    /// Returns the tasks to poll.
    fn run(&self, broken: Broken) -> Vec<usize> {
        let drain = || *self.fd.lock().unwrap() = 0;
        let lower = || *self.raised.lock().unwrap() = false;
        match broken {
            Broken::No => {
                drain();
                lower();
                std::mem::take(&mut *self.queue.lock().unwrap())
            }
            Broken::TakeFirst => {
                let woken = std::mem::take(&mut *self.queue.lock().unwrap());
                drain();
                lower();
                woken
            }
            Broken::LowerFirst => {
                lower();
                drain();
                std::mem::take(&mut *self.queue.lock().unwrap())
            }
        }
    }

    fn readable(&self) -> bool {
        *self.fd.lock().unwrap() > 0
    }
}

#[derive(Clone, Copy)]
enum Broken {
    No,
    TakeFirst,
    LowerFirst,
}

fn wakes_reach_the_loop(broken: Broken) {
    crate::loom_check::model(move || {
        let ready = Arc::new(Ready {
            queue: Mutex::new(Vec::new()),
            raised: Mutex::new(false),
            fd: Mutex::new(0),
        });
        let wakers: Vec<_> = (0..2)
            .map(|id| {
                let r = ready.clone();
                thread::spawn(move || r.push(id))
            })
            .collect();
        // The host: one turn while the wakers run (as `epoll` may report
        // the descriptor at any time)...
        let mut polled = Vec::new();
        if ready.readable() {
            polled.extend(ready.run(broken));
        }
        for w in wakers {
            w.join().unwrap();
        }
        // ...then turns until the descriptor reads zero, when it would
        // sleep: every woken task must have been polled by then.
        while ready.readable() {
            polled.extend(ready.run(broken));
        }
        let mut first = polled.clone();
        first.sort_unstable();
        assert_eq!(
            first,
            vec![0, 1],
            "the host sleeps with woken tasks queued: a lost wake-up"
        );
        // A later wake must reach it too (the flag must be down).
        ready.push(2);
        while ready.readable() {
            polled.extend(ready.run(broken));
        }
        polled.sort_unstable();
        assert_eq!(
            polled,
            vec![0, 1, 2],
            "the host sleeps with woken tasks queued: a lost wake-up"
        );
    });
}

#[test]
fn loom_model_event_loop_wakes_reach_the_loop() {
    wakes_reach_the_loop(Broken::No);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_model_event_loop_broken_take_before_lower_loses_a_wake() {
    wakes_reach_the_loop(Broken::TakeFirst);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_model_event_loop_broken_lower_before_drain_loses_a_later_wake() {
    wakes_reach_the_loop(Broken::LowerFirst);
}
