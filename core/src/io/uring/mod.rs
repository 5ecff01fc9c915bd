//! io_uring engine: a shared ring driven from the callers' threads (see
//! [`driver`]). The returned futures are `Send` and runtime-agnostic; under
//! tokio their completions arrive through the runtime's own reactor, so a
//! read crosses no thread.

#![allow(unsafe_code)]

mod driver;
mod here;
#[cfg(all(test, blobcask_loom))]
mod loom_model;

use std::fs::File;
use std::io;
use std::sync::Arc;

pub(crate) use driver::Driver;
use driver::Op;

use super::{AlignedBuf, BufResult, IoEngine, IoFuture};

/// io_uring engine over one file or device.
pub struct UringEngine {
    driver: Arc<Driver>,
    /// The original descriptor: sizes and the blocking calls.
    file: File,
    direct: bool,
    /// A regular file (not a block device), decided once here: asked on
    /// every heap allocation.
    resizable: bool,
}

impl UringEngine {
    /// Sets up a ring on a duplicate of `file`'s descriptor. Fails when the
    /// kernel refuses io_uring (disabled or too old).
    pub fn new(file: File, direct: bool) -> io::Result<Self> {
        let driver = Driver::new(file.try_clone()?)?;
        Ok(UringEngine {
            driver,
            resizable: super::is_regular(&file),
            file,
            direct,
        })
    }
}

/// Queues `entry` owning `buf`; on failure the error and the buffer.
fn push(
    driver: &Arc<Driver>,
    entry: io_uring::squeue::Entry,
    buf: AlignedBuf,
) -> Result<Op, (io::Error, AlignedBuf)> {
    // SAFETY: every entry built in this module points into `buf` (which the
    // slot owns from here on) and names the driver's file: slot 0 of its ring
    // (kept open by the ring) or its own descriptor.
    unsafe { driver.push(entry, Some(buf)) }.map_err(|(e, b)| (e, b.unwrap_or_else(empty)))
}

fn empty() -> AlignedBuf {
    AlignedBuf::zeroed(0)
}

/// Times an operation the kernel cancelled is issued again. The engine
/// never cancels anything itself; the kernel cancels queued work of a
/// thread that exits (io_uring ties requests to the task that entered
/// them), and any thread may enter for every queued entry. Reads, writes
/// of the same bytes and syncs are safe to repeat.
const CANCELLED_RETRIES: u32 = 64;

fn cancelled(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECANCELED)
}

/// Fills the buffer's whole capacity, resubmitting after short reads.
async fn read_rest(driver: Arc<Driver>, mut op: Op, total: usize, offset: u64) -> BufResult<()> {
    let mut done = 0usize;
    let mut retries = 0;
    loop {
        let (r, buf) = op.await;
        let mut buf = buf.unwrap_or_else(empty);
        let full = |mut buf: AlignedBuf| {
            // A buffer the driver could not give back has no capacity.
            buf.set_len(total.min(buf.capacity()));
            buf
        };
        match r {
            Ok(0) => return (Err(io::ErrorKind::UnexpectedEof.into()), full(buf)),
            Ok(n) => done += n as usize,
            Err(e) if cancelled(&e) && retries < CANCELLED_RETRIES && buf.capacity() == total => {
                retries += 1;
            }
            Err(e) => return (Err(e), full(buf)),
        }
        if done >= total {
            return (Ok(()), full(buf));
        }
        let entry = driver::read_entry(driver.file_ref(), &mut buf, done, offset + done as u64);
        op = match push(&driver, entry, buf) {
            Ok(op) => op,
            Err((e, buf)) => return (Err(e), full(buf)),
        };
    }
}

/// Writes the buffer's valid bytes, resubmitting after short writes.
async fn write_rest(driver: Arc<Driver>, mut op: Op, offset: u64) -> BufResult<()> {
    let mut done = 0usize;
    let mut retries = 0;
    loop {
        let (r, buf) = op.await;
        let Some(buf) = buf else {
            let e = r
                .err()
                .unwrap_or_else(|| io::Error::other("io_uring lost a write buffer"));
            return (Err(e), empty());
        };
        match r {
            Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
            Ok(n) => done += n as usize,
            Err(e) if cancelled(&e) && retries < CANCELLED_RETRIES => retries += 1,
            Err(e) => return (Err(e), buf),
        }
        if done >= buf.len() {
            return (Ok(()), buf);
        }
        let entry = driver::write_entry(driver.file_ref(), &buf, done, offset + done as u64);
        op = match push(&driver, entry, buf) {
            Ok(op) => op,
            Err((e, buf)) => return (Err(e), buf),
        };
    }
}

/// Waits for a sync, issuing it again if the kernel cancelled it.
async fn sync_rest(engine: Arc<Driver>, mut op: Op) -> io::Result<()> {
    let mut retries = 0;
    loop {
        match op.await.0 {
            Err(e) if cancelled(&e) && retries < CANCELLED_RETRIES => retries += 1,
            r => return r.map(drop),
        }
        // SAFETY: a sync entry points at no memory.
        op = unsafe { engine.push(driver::fdatasync_entry(engine.file_ref()), None) }
            .map_err(|(e, _)| e)?;
    }
}

impl UringEngine {
    fn start_read(&self, mut buf: AlignedBuf, offset: u64) -> Result<Op, (io::Error, AlignedBuf)> {
        buf.set_len(0);
        let entry = driver::read_entry(self.driver.file_ref(), &mut buf, 0, offset);
        push(&self.driver, entry, buf)
    }

    fn start_write(&self, buf: AlignedBuf, offset: u64) -> Result<Op, (io::Error, AlignedBuf)> {
        let entry = driver::write_entry(self.driver.file_ref(), &buf, 0, offset);
        push(&self.driver, entry, buf)
    }

    fn start_sync(&self) -> io::Result<Op> {
        let entry = driver::fdatasync_entry(self.driver.file_ref());
        // SAFETY: a sync entry points at no memory.
        unsafe { self.driver.push(entry, None) }.map_err(|(e, _)| e)
    }
}

impl IoEngine for UringEngine {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let ring = Arc::as_ptr(&self.driver) as usize;
        if !super::in_block_on()
            && !super::polled_by_loop_of(ring)
            && super::in_multi_thread_block_on()
        {
            // Alone, a `pread` here; among others, the ring (`here.rs`).
            return Box::pin(here::ReadHere::new(self.driver.clone(), buf, offset));
        }
        let total = buf.capacity();
        match self.start_read(buf, offset) {
            Ok(op) => Box::pin(read_rest(self.driver.clone(), op, total, offset)),
            Err((e, buf)) => Box::pin(async move { (Err(e), buf) }),
        }
    }

    fn read_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        // One request, one waiter: a plain pread on the caller's thread.
        super::pread_full(&self.file, buf, offset)
    }

    fn write_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        super::pwrite_all(&self.file, buf, offset)
    }

    fn sync_blocking(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        match self.start_write(buf, offset) {
            Ok(op) => Box::pin(write_rest(self.driver.clone(), op, offset)),
            Err((e, buf)) => Box::pin(async move { (Err(e), buf) }),
        }
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        if super::in_block_on() {
            // See `write_and_sync`: no kernel worker hop for a blocking
            // caller.
            let r = self.file.sync_data();
            return Box::pin(async move { r });
        }
        match self.start_sync() {
            Ok(op) => Box::pin(sync_rest(self.driver.clone(), op)),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn write_and_sync(self: Arc<Self>, writes: Vec<(AlignedBuf, u64)>) -> IoFuture<io::Result<()>> {
        // As the default, with the writes polled together: a completion
        // of one found by another's poll does not wake the task that is
        // polling them both (`driver::together`).
        let writes = driver::together::Together::new(
            writes.into_iter().map(|(buf, at)| self.write_at(buf, at)),
        );
        Box::pin(async move {
            for (r, _) in writes.await {
                r?;
            }
            self.sync().await
        })
    }

    fn completion_source(&self) -> Option<super::CompletionSource> {
        Some(super::CompletionSource::new(self.driver.clone()))
    }

    fn resizable(&self) -> bool {
        self.resizable
    }

    fn grow(&self, from: u64, len: u64) -> io::Result<()> {
        super::grow_file(&self.file, from, len)
    }

    fn size(&self) -> io::Result<u64> {
        super::file_size(&self.file)
    }

    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn direct_io(&self) -> bool {
        self.direct
    }
}
