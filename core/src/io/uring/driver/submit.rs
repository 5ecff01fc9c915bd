//! Submission: an operation's entry pushed into the shared submission
//! queue on the caller's thread, the queue entered once for everything
//! queued, and the entries the engine uses.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use io_uring::{opcode, squeue, types};

use super::op::Op;
use super::slots::Slot;
use super::{Driver, FileRef};
use crate::io::AlignedBuf;

impl Driver {
    /// Queues `entry` (its user data set to a fresh slot that owns `buf`)
    /// and returns the operation. The kernel sees it at the next enter.
    ///
    /// # Safety
    /// `entry` may only point into `buf`'s allocation (or at nothing), and
    /// the file it names (a descriptor, or a slot of this ring's registered
    /// files, which the ring keeps open) must stay open while the driver
    /// lives.
    pub unsafe fn push(
        self: &Arc<Self>,
        entry: squeue::Entry,
        buf: Option<AlignedBuf>,
    ) -> Result<Op, (io::Error, Option<AlignedBuf>)> {
        let (id, data) = self.slots.lock().insert(buf);
        #[cfg(test)]
        self.pushes.fetch_add(1, Ordering::Relaxed);
        let entry = entry.user_data(data);
        let mut pushed = false;
        for _ in 0..2 {
            // SAFETY: the entry's memory is owned by slot `id` until its
            // completion is reaped (D1).
            pushed = self.with_sq(|sq| unsafe { sq.push(&entry) }.is_ok());
            if pushed {
                self.unsubmitted.fetch_add(1, Ordering::Release);
                break;
            }
            // Full: hand what is queued to the kernel and try again.
            if let Err(e) = self.submit() {
                return Err((e, self.take_back(id)));
            }
        }
        if !pushed {
            let e = io::Error::other("io_uring submission queue is full");
            return Err((e, self.take_back(id)));
        }
        Ok(Op {
            driver: self.clone(),
            id: Some(id),
            data,
        })
    }

    /// Runs `f` on the submission queue with `sq` held for the queue
    /// handle's whole life. The handle stores its snapshot of the tail into
    /// the shared ring when it is dropped, so that drop must happen under
    /// `sq` too: a handle dropped after the guard (as a temporary in a
    /// block's tail expression is, in edition 2021) can move the tail back
    /// over an entry another thread just pushed. The kernel then never sees
    /// that entry (its slot is overwritten by the next push), or, when the
    /// tail falls behind the head, consumes a queue's worth of stale
    /// entries a second time.
    pub(super) fn with_sq<R>(&self, f: impl FnOnce(&mut squeue::SubmissionQueue<'_>) -> R) -> R {
        let _g = self.sq.lock();
        // SAFETY: every handle on the submission queue is created and
        // dropped inside this function, under `sq`.
        let mut sq = unsafe { self.ring.submission_shared() };
        let r = f(&mut sq);
        drop(sq);
        r
    }

    /// Frees a slot whose entry never reached the queue; its buffer back.
    fn take_back(&self, id: usize) -> Option<AlignedBuf> {
        let mut slots = self.slots.lock();
        let buf = match slots.slots.get_mut(id) {
            Some(Slot::InFlight { buf, .. }) => buf.take(),
            _ => None,
        };
        slots.release(id);
        buf
    }

    /// Enters the kernel once for every queued entry, if any. On failure
    /// the entries stay queued and counted, so the next call retries them.
    pub fn submit(&self) -> io::Result<()> {
        let n = self.unsubmitted.swap(0, Ordering::AcqRel);
        if n == 0 {
            return Ok(());
        }
        let mut rounds = 0;
        loop {
            match self.ring.submitter().submit() {
                Ok(_) => {
                    // The kernel stops at an entry it cannot take; what is
                    // left goes in another enter (entries pushed meanwhile
                    // by other threads are counted by them).
                    rounds += 1;
                    if rounds >= 8 || self.with_sq(|sq| sq.is_empty()) {
                        if rounds >= 8 {
                            self.unsubmitted.fetch_add(1, Ordering::AcqRel);
                        }
                        return Ok(());
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EAGAIN)) => {
                    // Completion queue backlog or no memory for requests
                    // right now: reap and retry.
                    self.reap();
                    rounds += 1;
                    if rounds >= 1000 {
                        self.unsubmitted.fetch_add(n, Ordering::AcqRel);
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
                Err(e) => {
                    self.unsubmitted.fetch_add(n, Ordering::AcqRel);
                    return Err(e);
                }
            }
        }
    }
}

/// Entry builders for the operations the engine uses.
pub(crate) fn read_entry(
    file: FileRef,
    buf: &mut AlignedBuf,
    from: usize,
    offset: u64,
) -> squeue::Entry {
    let len = (buf.capacity() - from) as u32;
    // SAFETY (of the pointer arithmetic): from <= capacity.
    let ptr = unsafe { buf.as_mut_ptr().add(from) };
    match file {
        FileRef::Registered => opcode::Read::new(types::Fixed(0), ptr, len),
        FileRef::Fd(fd) => opcode::Read::new(types::Fd(fd), ptr, len),
    }
    .offset(offset)
    .build()
}

pub(crate) fn write_entry(
    file: FileRef,
    buf: &AlignedBuf,
    from: usize,
    offset: u64,
) -> squeue::Entry {
    let len = (buf.len() - from) as u32;
    // SAFETY (of the pointer arithmetic): from <= len.
    let ptr = unsafe { buf.as_ptr().add(from) };
    match file {
        FileRef::Registered => opcode::Write::new(types::Fixed(0), ptr, len),
        FileRef::Fd(fd) => opcode::Write::new(types::Fd(fd), ptr, len),
    }
    .offset(offset)
    .build()
}

pub(crate) fn fdatasync_entry(file: FileRef) -> squeue::Entry {
    match file {
        FileRef::Registered => opcode::Fsync::new(types::Fixed(0)),
        FileRef::Fd(fd) => opcode::Fsync::new(types::Fd(fd)),
    }
    .flags(types::FsyncFlags::DATASYNC)
    .build()
}
