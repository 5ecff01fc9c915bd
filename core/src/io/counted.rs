//! An [`IoEngine`] decorator that counts the bytes written to the device.
//!
//! The store's write amplification (`Stats::device_bytes_written` over the
//! user bytes committed) is only as true as this count. Counting by hand at
//! each call site drifted (a superblock publish was counted as two blocks at
//! one place, one at another, none at a third); counting here, once, below
//! every writer, makes the figure what the device was asked to write —
//! data, tuple blocks, journal slots, zeroed extents, superblocks alike.
//!
//! A write is counted when it completes successfully, by its buffer's
//! length; a failed write (a full device, a power cut in the crash tests)
//! counts nothing. Reads, syncs and everything else pass straight through,
//! with no extra allocation on the read path.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{AlignedBuf, BufResult, CompletionSource, IoEngine, IoFuture};

/// Counts the bytes of every successful write made through `inner`.
pub(crate) struct Counted {
    inner: Arc<dyn IoEngine>,
    written: Arc<AtomicU64>,
}

impl Counted {
    /// Wraps `inner`; `written` is the counter the store reports.
    pub(crate) fn new(inner: Arc<dyn IoEngine>, written: Arc<AtomicU64>) -> Counted {
        Counted { inner, written }
    }

    fn count<T>(&self, r: &io::Result<T>, bytes: usize) {
        if r.is_ok() {
            self.written.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }
}

impl IoEngine for Counted {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        self.inner.read_at(buf, offset)
    }

    fn read_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        self.inner.read_at_blocking(buf, offset)
    }

    fn write_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        let len = buf.len();
        let (r, buf) = self.inner.write_at_blocking(buf, offset);
        self.count(&r, len);
        (r, buf)
    }

    fn sync_blocking(&self) -> io::Result<()> {
        self.inner.sync_blocking()
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let len = buf.len();
        let fut = self.inner.write_at(buf, offset);
        let written = self.written.clone();
        Box::pin(async move {
            let (r, buf) = fut.await;
            if r.is_ok() {
                written.fetch_add(len as u64, Ordering::Relaxed);
            }
            (r, buf)
        })
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        self.inner.sync()
    }

    /// Forwards to the inner engine's own batched write-and-sync (the
    /// io_uring engine submits the group's writes together); a group whose
    /// writes or sync failed counts nothing, as the caller cannot tell
    /// which of its writes landed.
    fn write_and_sync(self: Arc<Self>, writes: Vec<(AlignedBuf, u64)>) -> IoFuture<io::Result<()>> {
        let len: usize = writes.iter().map(|(b, _)| b.len()).sum();
        let fut = self.inner.clone().write_and_sync(writes);
        Box::pin(async move {
            let r = fut.await;
            self.count(&r, len);
            r
        })
    }

    fn completion_source(&self) -> Option<CompletionSource> {
        self.inner.completion_source()
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn resizable(&self) -> bool {
        self.inner.resizable()
    }

    fn grow(&self, from: u64, len: u64) -> io::Result<()> {
        self.inner.grow(from, len)
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn direct_io(&self) -> bool {
        self.inner.direct_io()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::BLOCK_SIZE;
    use crate::io::fault::MemDevice;
    use crate::io::wait_here;

    fn counted(dev: Arc<MemDevice>) -> (Arc<Counted>, Arc<AtomicU64>) {
        let written = Arc::new(AtomicU64::new(0));
        (Arc::new(Counted::new(dev, written.clone())), written)
    }

    #[test]
    fn every_successful_write_path_is_counted_once() {
        let (engine, written) = counted(Arc::new(MemDevice::new(64 * BLOCK_SIZE)));
        let (r, _) = wait_here(engine.write_at(AlignedBuf::zeroed(BLOCK_SIZE), 0));
        r.unwrap();
        assert_eq!(written.load(Ordering::Relaxed), BLOCK_SIZE as u64);
        let (r, _) = engine.write_at_blocking(AlignedBuf::zeroed(2 * BLOCK_SIZE), 4096);
        r.unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 3 * BLOCK_SIZE as u64);
        let group = vec![
            (AlignedBuf::zeroed(BLOCK_SIZE), 8 * BLOCK_SIZE as u64),
            (AlignedBuf::zeroed(4 * BLOCK_SIZE), 16 * BLOCK_SIZE as u64),
        ];
        wait_here(engine.clone().write_and_sync(group)).unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 8 * BLOCK_SIZE as u64);
        // Reads and syncs write nothing.
        let (r, _) = wait_here(engine.read_at(AlignedBuf::zeroed(BLOCK_SIZE), 0));
        r.unwrap();
        engine.sync_blocking().unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 8 * BLOCK_SIZE as u64);
    }

    #[test]
    fn a_failed_write_counts_nothing() {
        let dev = Arc::new(MemDevice::new(64 * BLOCK_SIZE));
        let (engine, written) = counted(dev.clone());
        dev.crash_now();
        let (r, _) = wait_here(engine.write_at(AlignedBuf::zeroed(BLOCK_SIZE), 0));
        assert!(r.is_err());
        let (r, _) = engine.write_at_blocking(AlignedBuf::zeroed(BLOCK_SIZE), 0);
        assert!(r.is_err());
        assert_eq!(written.load(Ordering::Relaxed), 0);
    }
}
