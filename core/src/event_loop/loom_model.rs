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
//! is left in the queue (or the host would sleep with work pending). The
//! model writes out `Ready::push`/`raise` and the head of `run` step for
//! step; the descriptor (an eventfd, each read and write atomic) and the
//! queue are loom locks. The broken variant takes the queue before it
//! lowers the flag, so a wake in between is neither taken nor signalled:
//! loom must find that (`#[should_panic]`).

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

struct Ready {
    queue: Mutex<Vec<usize>>,
    raised: AtomicBool,
    /// The eventfd counter.
    fd: Mutex<u64>,
}

impl Ready {
    /// `Ready::push` (a waker, on any thread).
    fn push(&self, id: usize) {
        self.queue.lock().unwrap().push(id);
        if !self.raised.swap(true, Ordering::AcqRel) {
            *self.fd.lock().unwrap() += 1;
        }
    }

    /// `EventLoop::run` up to the polls: lower, then take the queue (the
    /// broken variant the other way round). Returns the tasks to poll.
    fn run(&self, broken: bool) -> Vec<usize> {
        let lower = || {
            if self.raised.swap(false, Ordering::AcqRel) {
                *self.fd.lock().unwrap() = 0;
            }
        };
        if broken {
            let woken = std::mem::take(&mut *self.queue.lock().unwrap());
            lower();
            woken
        } else {
            lower();
            std::mem::take(&mut *self.queue.lock().unwrap())
        }
    }

    fn readable(&self) -> bool {
        *self.fd.lock().unwrap() > 0
    }
}

fn wakes_reach_the_loop(broken: bool) {
    crate::loom_check::model(move || {
        let ready = Arc::new(Ready {
            queue: Mutex::new(Vec::new()),
            raised: AtomicBool::new(false),
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
        polled.sort_unstable();
        assert_eq!(
            polled,
            vec![0, 1],
            "the host sleeps with woken tasks queued: a lost wake-up"
        );
    });
}

#[test]
fn loom_model_event_loop_wakes_reach_the_loop() {
    wakes_reach_the_loop(false);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_model_event_loop_broken_take_before_lower_loses_a_wake() {
    wakes_reach_the_loop(true);
}
