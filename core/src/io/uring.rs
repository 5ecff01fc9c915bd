//! io_uring engine: a tokio-uring runtime on a dedicated thread.
//!
//! tokio-uring's futures are `!Send`, so they never leave the ring thread.
//! Callers send a request through an unbounded channel and await a oneshot
//! reply; the returned futures are therefore `Send` and work from any
//! runtime. Inside the ring thread nothing blocks: requests are received
//! with an async `recv` and each one runs as its own local task, so many
//! requests are in flight on the ring at once.

use std::fs::File;
use std::io;

use futures::channel::oneshot;
use tokio::sync::mpsc;

use super::{AlignedBuf, BufResult, IoEngine, IoFuture};

enum Request {
    Read(AlignedBuf, u64, oneshot::Sender<BufResult<()>>),
    Write(AlignedBuf, u64, oneshot::Sender<BufResult<()>>),
    Sync(oneshot::Sender<io::Result<()>>),
}

/// io_uring engine; dropping it stops the ring thread once idle.
pub struct UringEngine {
    tx: mpsc::UnboundedSender<Request>,
    /// The original descriptor: sizes and synchronous reads.
    size_file: File,
    direct: bool,
}

fn closed() -> io::Error {
    io::Error::other("io_uring thread has stopped")
}

impl UringEngine {
    /// Starts the ring thread on a duplicate of `file`'s descriptor. Fails
    /// when the kernel refuses io_uring (disabled or too old).
    pub fn new(file: File, direct: bool) -> io::Result<Self> {
        let ring_file = file.try_clone()?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        std::thread::Builder::new()
            .name("blobcask-uring".into())
            .spawn(move || {
                let mut builder = tokio_uring::builder();
                builder.entries(256);
                let runtime = match tokio_uring::Runtime::new(&builder) {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // The duplicated descriptor is owned by tokio-uring's File
                    // from here on and closed when the ring thread ends.
                    let file = std::rc::Rc::new(tokio_uring::fs::File::from_std(ring_file));
                    let _ = ready_tx.send(Ok(()));
                    while let Some(req) = rx.recv().await {
                        let file = file.clone();
                        tokio_uring::spawn(async move { serve(&file, req).await });
                    }
                    // Let in-flight requests finish before the runtime drops.
                    while std::rc::Rc::strong_count(&file) > 1 {
                        tokio::task::yield_now().await;
                    }
                });
            })?;
        ready_rx.recv().map_err(|_| closed())??;
        Ok(UringEngine {
            tx,
            size_file: file,
            direct,
        })
    }
}

async fn serve(file: &tokio_uring::fs::File, req: Request) {
    match req {
        Request::Read(buf, offset, reply) => {
            let _ = reply.send(read_full(file, buf, offset).await);
        }
        Request::Write(buf, offset, reply) => {
            let (r, buf) = file.write_all_at(buf, offset).await;
            let _ = reply.send((r, buf));
        }
        Request::Sync(reply) => {
            let _ = reply.send(file.sync_data().await);
        }
    }
}

/// Reads until the buffer's capacity is full (short reads are retried).
async fn read_full(file: &tokio_uring::fs::File, buf: AlignedBuf, offset: u64) -> BufResult<()> {
    use tokio_uring::buf::BoundedBuf;
    let total = buf.capacity();
    let mut buf = buf;
    buf.set_len(0);
    let mut done = 0usize;
    while done < total {
        let slice = buf.slice(done..total);
        let (r, slice) = file.read_at(slice, offset + done as u64).await;
        buf = slice.into_inner();
        match r {
            Ok(0) => {
                buf.set_len(total);
                return (Err(io::ErrorKind::UnexpectedEof.into()), buf);
            }
            Ok(n) => done += n,
            Err(e) => {
                buf.set_len(total);
                return (Err(e), buf);
            }
        }
    }
    buf.set_len(total);
    (Ok(()), buf)
}

impl IoEngine for UringEngine {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Request::Read(buf, offset, tx));
        Box::pin(async move {
            if let Err(mpsc::error::SendError(Request::Read(buf, _, _))) = sent {
                return (Err(closed()), buf);
            }
            rx.await
                .unwrap_or_else(|_| (Err(closed()), AlignedBuf::zeroed(0)))
        })
    }

    fn read_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        // One request, one waiter: a plain pread on the caller's thread is
        // faster than a round trip through the ring thread.
        super::pread_full(&self.size_file, buf, offset)
    }

    fn write_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        super::pwrite_all(&self.size_file, buf, offset)
    }

    fn sync_blocking(&self) -> io::Result<()> {
        self.size_file.sync_data()
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Request::Write(buf, offset, tx));
        Box::pin(async move {
            if let Err(mpsc::error::SendError(Request::Write(buf, _, _))) = sent {
                return (Err(closed()), buf);
            }
            rx.await
                .unwrap_or_else(|_| (Err(closed()), AlignedBuf::zeroed(0)))
        })
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Request::Sync(tx)).is_ok();
        Box::pin(async move {
            if !sent {
                return Err(closed());
            }
            rx.await.unwrap_or_else(|_| Err(closed()))
        })
    }

    fn size(&self) -> io::Result<u64> {
        super::file_size(&self.size_file)
    }

    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn direct_io(&self) -> bool {
        self.direct
    }
}
