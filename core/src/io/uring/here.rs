//! Reads of a caller that waits on its own thread: the future of a
//! multi-thread runtime's `block_on` (`io::in_multi_thread_block_on`).
//!
//! Such a caller gains nothing from the ring when it reads one thing at a
//! time: a `pread` on its thread is one system call and one wake-up, and
//! measured closest to the device (a 4 KiB read in `block_on` through the
//! reactor measured 1.32–1.54 × a raw `pread`, waiting in `io_uring_enter`
//! 1.24–1.44 ×; the blocking API's `pread` 1.02–1.07 ×). When it reads
//! many at once (a `join` of reads, a stream of them kept in flight) the
//! ring is what lets them overlap. A read cannot tell which by itself: the
//! reads of a `join` start one by one, each when it is first polled. So:
//!
//! * its first poll only takes a number from this thread's count of reads
//!   started, and asks to be polled again (the caller's executor first
//!   polls what else it was given, whose reads take numbers too);
//! * at the second poll it goes alone, as a `pread`, when no read of this
//!   thread started after it and none is in the ring; otherwise it goes to
//!   the ring (one `io_uring_enter` submits all that are queued) and waits
//!   through the runtime's reactor, as a spawned task's read does (waiting
//!   in the kernel for one of many would leave the others' completions
//!   unused until it ends: 64 reads kept in flight from `block_on`
//!   measured 11,872 reads/s so, against 70,284 through the reactor);
//! * a read started while reads of this thread are in the ring joins them
//!   at its first poll.
//!
//! The numbers only choose between two correct ways of reading. A read
//! moved to another thread while in the ring leaves its thread's count of
//! reads in the ring one too high (it is taken back only on the thread
//! that counted it), so that thread's reads take the ring from then on:
//! slower, never a wrong byte.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::ThreadId;

use super::driver::Driver;
use super::{push, read_rest, BufResult, IoFuture};
use crate::io::AlignedBuf;

thread_local! {
    /// Reads this thread has started (taken a number), ever.
    static STARTED: Cell<u64> = const { Cell::new(0) };
    /// Reads of this thread in the ring and not yet finished.
    static IN_RING: Cell<usize> = const { Cell::new(0) };
}

fn in_ring() -> usize {
    IN_RING.with(Cell::get)
}

/// A read of `buf.capacity()` bytes at `offset` by a caller that waits
/// here (see the module doc).
pub(super) struct ReadHere {
    state: State,
    driver: Arc<Driver>,
}

enum State {
    /// Not polled yet.
    New(AlignedBuf, u64),
    /// Polled once, with its number.
    Started(AlignedBuf, u64, u64),
    /// In the ring, counted in `IN_RING` of that thread.
    Ring(IoFuture<BufResult<()>>, ThreadId),
    Finished,
}

impl ReadHere {
    pub(super) fn new(driver: Arc<Driver>, buf: AlignedBuf, offset: u64) -> ReadHere {
        ReadHere {
            state: State::New(buf, offset),
            driver,
        }
    }

    /// Ends this read's part in the counts.
    fn leave(&mut self) {
        if let State::Ring(_, thread) = std::mem::replace(&mut self.state, State::Finished) {
            if thread == std::thread::current().id() {
                IN_RING.with(|c| c.set(c.get().saturating_sub(1)));
            }
        }
    }

    /// Sends the read to the ring.
    fn send_to_ring(&mut self, mut buf: AlignedBuf, offset: u64) -> Option<BufResult<()>> {
        let total = buf.capacity();
        buf.set_len(0);
        let entry = super::driver::read_entry(self.driver.file_ref(), &mut buf, 0, offset);
        match push(&self.driver, entry, buf) {
            Ok(op) => {
                IN_RING.with(|c| c.set(c.get() + 1));
                let read = read_rest(self.driver.clone(), op, total, offset);
                self.state = State::Ring(Box::pin(read), std::thread::current().id());
                None
            }
            Err((e, buf)) => Some((Err(e), buf)),
        }
    }
}

impl Future for ReadHere {
    type Output = BufResult<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BufResult<()>> {
        let this = self.get_mut();
        loop {
            match std::mem::replace(&mut this.state, State::Finished) {
                State::New(buf, offset) if in_ring() > 0 => {
                    if let Some(failed) = this.send_to_ring(buf, offset) {
                        return Poll::Ready(failed);
                    }
                }
                State::New(buf, offset) => {
                    let number = STARTED.with(|c| {
                        c.set(c.get().wrapping_add(1));
                        c.get()
                    });
                    this.state = State::Started(buf, offset, number);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                State::Started(buf, offset, number) => {
                    if STARTED.with(Cell::get) == number && in_ring() == 0 {
                        return Poll::Ready(crate::io::pread_full(this.driver.file(), buf, offset));
                    }
                    if let Some(failed) = this.send_to_ring(buf, offset) {
                        return Poll::Ready(failed);
                    }
                }
                State::Ring(mut read, thread) => {
                    let r = crate::io::through_reactor(|| read.as_mut().poll(cx));
                    this.state = State::Ring(read, thread);
                    if r.is_ready() {
                        this.leave();
                    }
                    return r;
                }
                State::Finished => {
                    return Poll::Ready((
                        Err(std::io::Error::other("read polled after it finished")),
                        AlignedBuf::zeroed(0),
                    ))
                }
            }
        }
    }
}

impl Drop for ReadHere {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use futures::future::join_all;

    use crate::io::{AlignedBuf, IoEngine, UringEngine};

    /// An engine over a file of 64 blocks, block `i` filled with byte `i`.
    fn blocks() -> (tempfile::NamedTempFile, Arc<UringEngine>) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..64u8 {
            f.write_all(&[i; 4096]).unwrap();
        }
        f.flush().unwrap();
        let file = std::fs::File::open(f.path()).unwrap();
        (f, Arc::new(UringEngine::new(file, false).unwrap()))
    }

    fn multi_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    async fn read(engine: &UringEngine, block: u8) -> bool {
        let (r, buf) = engine
            .read_at(AlignedBuf::zeroed(4096), u64::from(block) * 4096)
            .await;
        r.is_ok() && buf.as_slice().len() == 4096 && buf.as_slice().iter().all(|&b| b == block)
    }

    /// A read alone in a multi-thread runtime's `block_on` is a `pread` on
    /// the caller's thread: the ring never holds an operation.
    #[test]
    fn a_read_alone_in_block_on_does_not_use_the_ring() {
        let (_f, engine) = blocks();
        let rt = multi_thread();
        for block in [0u8, 7, 63] {
            assert!(rt.block_on(read(&engine, block)));
        }
        assert_eq!(engine.driver.pushes(), 0);
        assert_eq!(super::in_ring(), 0);
    }

    /// Reads started together in `block_on` go to the ring together, and
    /// each returns its own block; the counts return to zero after.
    #[test]
    fn reads_started_together_in_block_on_share_the_ring() {
        let (_f, engine) = blocks();
        let rt = multi_thread();
        let all = rt.block_on(join_all((0..64u8).map(|b| read(&engine, b))));
        assert!(all.iter().all(|&ok| ok));
        // Every read but perhaps the last to decide (alone by then, when
        // the others' reads of the page cache finished at submission).
        assert!(engine.driver.pushes() >= 63, "the reads went to the ring");
        assert_eq!(super::in_ring(), 0);
        // Alone again: a pread.
        let used = engine.driver.pushes();
        assert!(rt.block_on(read(&engine, 5)));
        assert_eq!(engine.driver.pushes(), used);
    }

    /// A read dropped after its first poll (a `select!` that another
    /// branch won) or in the ring leaves no count behind: the next read
    /// alone is a `pread` again.
    #[test]
    fn a_dropped_read_leaves_no_count_behind() {
        let (_f, engine) = blocks();
        let rt = multi_thread();
        rt.block_on(async {
            let mut lone = std::pin::pin!(read(&engine, 3));
            // One poll: started, not decided.
            assert!(futures::poll!(lone.as_mut()).is_pending());
        });
        rt.block_on(async {
            let mut a = std::pin::pin!(read(&engine, 1));
            let mut b = std::pin::pin!(read(&engine, 2));
            assert!(futures::poll!(a.as_mut()).is_pending());
            assert!(futures::poll!(b.as_mut()).is_pending());
            // Second polls: the first of two undecided goes to the ring; the
            // other too unless the first finished already (a read of the
            // page cache can, at submission).
            let _ = futures::poll!(a.as_mut());
            let _ = futures::poll!(b.as_mut());
        });
        assert_eq!(super::in_ring(), 0);
        let used = engine.driver.pushes();
        assert!((1..=2).contains(&used), "{used}");
        assert!(rt.block_on(read(&engine, 9)));
        assert_eq!(engine.driver.pushes(), used);
    }

    /// Outside a multi-thread runtime's `block_on` (a spawned task, a
    /// current-thread runtime) reads keep the ring.
    #[test]
    fn tasks_and_current_thread_runtimes_keep_the_ring() {
        let (_f, engine) = blocks();
        let rt = multi_thread();
        let e = engine.clone();
        assert!(rt
            .block_on(rt.spawn(async move { read(&e, 4).await }))
            .unwrap());
        assert!(engine.driver.pushes() >= 1);
        let (_f, engine) = blocks();
        let current = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(current.block_on(read(&engine, 4)));
        assert!(engine.driver.pushes() >= 1);
    }
}
