//! The engine's helper threads: blocking work handed off from async code
//! (the portable engine's file I/O, large copies, open and close) runs on
//! a pool the crate owns, so that the last store's close can end it. The
//! `blocking` crate's pool, used before, keeps a thread for a while after
//! its last task and cannot be told to stop: a C program's last
//! `bc_store_free` left helper threads running at exit (valgrind: "possibly
//! lost", their thread-local storage).
//!
//! The rule: every open store, and every open in progress, holds a
//! [`Lease`]. When the last lease goes (the last store's close, a failed
//! open, the last handle dropped unclosed), the pool's threads are told to
//! end once the queue is empty, and the thread that let the lease go joins
//! them, unless it is one of them (a pool thread never joins: it could
//! wait for itself). A thread started while no lease is held ends by
//! itself after [`IDLE`] without work, and is joined by the next spawn or
//! the next last close.
//!
//! In a fork child the pool is not used (`fork` starts threads of its own
//! there) and never joined: its threads stayed in the parent. Its lock and
//! condition variable are std's (a futex each), not parking_lot's: a
//! parking_lot wait or wake-up goes through one process-wide table whose
//! locks a fork can copy held, and an idle helper thread of the parent
//! (waking every `IDLE`) left a fork child hung in its first wake-up.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a thread waits for work before it ends.
pub(crate) const IDLE: Duration = Duration::from_millis(500);

/// Most threads at once (as the `blocking` crate allowed): beyond it, work
/// waits in the queue.
const MAX_THREADS: usize = 500;

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    state: Mutex<State>,
    /// Work queued, or the generation moved on.
    work: Condvar,
}

struct State {
    queue: VecDeque<Job>,
    /// Threads waiting on `work`.
    idle: usize,
    /// Every thread started and not yet joined.
    threads: Vec<JoinHandle<()>>,
    /// Threads that ended by themselves since `threads` was last pruned.
    ended: usize,
    /// Bumped when the last lease goes: threads of an older generation
    /// end once the queue is empty.
    generation: u64,
}

impl Pool {
    /// The state; jobs run outside the lock, so a poisoned one (a panic
    /// in this file's own bookkeeping) is still consistent.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

static POOL: LazyLock<Pool> = LazyLock::new(|| Pool {
    state: Mutex::new(State {
        queue: VecDeque::new(),
        idle: 0,
        threads: Vec::new(),
        ended: 0,
        generation: 0,
    }),
    work: Condvar::new(),
});

/// Leases held: open stores and opens in progress. Outside the pool's
/// lock, so that a fork child (whose copy of the lock may be held by a
/// thread that stayed in the parent) counts without locking.
static LEASES: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is one of the pool's.
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the pool's threads while held (see the module's rule).
pub(crate) struct Lease(());

/// Takes a lease: the pool keeps its threads until it is dropped.
pub(crate) fn lease() -> Lease {
    LEASES.fetch_add(1, Ordering::AcqRel);
    Lease(())
}

impl Drop for Lease {
    fn drop(&mut self) {
        if LEASES.fetch_sub(1, Ordering::AcqRel) == 1 {
            wind_down();
        }
    }
}

/// Runs `job` on a pool thread, starting one when none is idle. Where no
/// thread can be started and none runs, runs it here rather than never.
pub(crate) fn spawn(job: impl FnOnce() + Send + 'static) {
    let pool = &*POOL;
    let mut st = pool.lock();
    let ended = take_ended(&mut st);
    st.queue.push_back(Box::new(job));
    if st.queue.len() > st.idle && st.threads.len() < MAX_THREADS {
        let generation = st.generation;
        let started = std::thread::Builder::new()
            .name("blobcask-helper".into())
            .spawn(move || work(generation));
        match started {
            Ok(handle) => st.threads.push(handle),
            Err(_) if st.threads.is_empty() => {
                // No thread will ever take it: run it on the caller's.
                if let Some(job) = st.queue.pop_back() {
                    drop(st);
                    join(ended);
                    job();
                    return;
                }
            }
            // The running threads take it when they are free.
            Err(_) => {}
        }
    }
    pool.work.notify_one();
    drop(st);
    join(ended);
}

/// Runs `f` on a pool thread and returns its result; a panic in `f` is
/// resumed here.
pub(crate) async fn unblock<T, F>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = futures::channel::oneshot::channel();
    spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.await {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => unreachable!("every queued job runs, and sends before it ends"),
    }
}

/// A pool thread: runs jobs until none comes for `IDLE`, or until the
/// queue is empty after its generation ended.
fn work(generation: u64) {
    IN_POOL.with(|p| p.set(true));
    let pool = &*POOL;
    let mut st = pool.lock();
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            // A panicking job (a detached one: `unblock` catches its own)
            // must not take the thread, and its place in `idle`, with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            st = pool.lock();
            continue;
        }
        if st.generation != generation {
            st.ended += 1;
            return;
        }
        st.idle += 1;
        let (guard, waited) = pool
            .work
            .wait_timeout(st, IDLE)
            .unwrap_or_else(PoisonError::into_inner);
        st = guard;
        let timed_out = waited.timed_out();
        st.idle -= 1;
        // The queue is looked at again first: a job queued as the wait
        // timed out is taken, not stranded.
        if timed_out && st.queue.is_empty() {
            st.ended += 1;
            return;
        }
    }
}

/// Takes the threads that have ended by themselves (`IDLE`), to be
/// joined once the lock is released (their thread-local destructors may
/// still run, and could need it).
/// Looks only when some thread ended: a spawn per I/O of the portable
/// engine must not walk every thread.
fn take_ended(st: &mut State) -> Vec<JoinHandle<()>> {
    if st.ended == 0 {
        return Vec::new();
    }
    let (ended, running): (Vec<_>, Vec<_>) = std::mem::take(&mut st.threads)
        .into_iter()
        .partition(JoinHandle::is_finished);
    st.threads = running;
    // One still leaving (its function not yet returned) waits for the
    // next thread to end, or for the wind-down.
    st.ended = 0;
    ended
}

fn join(threads: Vec<JoinHandle<()>>) {
    for handle in threads {
        let _ = handle.join();
    }
}

/// The last lease went: every thread ends once the queue is empty, and is
/// joined here unless this is a pool thread or a fork child.
fn wind_down() {
    if crate::store::fork::generation() != 0 {
        return;
    }
    let pool = &*POOL;
    let threads = {
        let mut st = pool.lock();
        st.generation += 1;
        pool.work.notify_all();
        if IN_POOL.with(Cell::get) {
            // Joined by a later spawn or wind-down.
            return;
        }
        st.ended = 0;
        std::mem::take(&mut st.threads)
    };
    join(threads);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unblock_returns_the_result_and_resumes_a_panic() {
        // Whether the threads end is the C suite's to check (valgrind with
        // default leak kinds after the last bc_store_free): here other
        // tests hold leases at the same time.
        let _lease = lease();
        assert_eq!(futures::executor::block_on(unblock(|| 41 + 1)), 42);
        let panicked = std::panic::catch_unwind(|| {
            futures::executor::block_on(unblock(|| -> u8 { panic!("in a helper") }))
        });
        assert!(panicked.is_err());
        assert_eq!(futures::executor::block_on(unblock(|| 7)), 7);
    }
}
