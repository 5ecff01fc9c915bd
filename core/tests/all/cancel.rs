//! Invariant 2 when a caller gives up: a put, upload part or compaction
//! whose future is dropped while its device write is still in flight must
//! not let that write land in space given to another object. Both engines
//! finish a dropped write anyway (io_uring leaves it with the kernel, the
//! portable engine's thread runs on); the device below models that with
//! writes that land a while after they are issued.

use crate::common;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blobcask::io::{AlignedBuf, BufResult, IoEngine, IoFuture};
use blobcask::{Options, Store};
use common::pattern;

const LATE: Duration = Duration::from_millis(300);

/// An in-memory device whose writes, while `late` is set, land `LATE`
/// after they are issued, on a thread of their own.
struct LateWrites {
    bytes: Arc<Mutex<Vec<u8>>>,
    late: AtomicBool,
    issued_late: AtomicU64,
}

impl IoEngine for LateWrites {
    fn read_at(&self, mut buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let r = {
            let d = self.bytes.lock().unwrap();
            let out = buf.full_mut();
            match d.get(offset as usize..offset as usize + out.len()) {
                Some(src) => {
                    out.copy_from_slice(src);
                    Ok(())
                }
                None => Err(io::ErrorKind::UnexpectedEof.into()),
            }
        };
        let cap = buf.capacity();
        buf.set_len(cap);
        Box::pin(std::future::ready((r, buf)))
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let land = {
            let bytes = self.bytes.clone();
            let data = buf.as_slice().to_vec();
            move || {
                let at = offset as usize;
                bytes.lock().unwrap()[at..at + data.len()].copy_from_slice(&data);
            }
        };
        if !self.late.load(Ordering::SeqCst) {
            land();
            return Box::pin(std::future::ready((Ok(()), buf)));
        }
        self.issued_late.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(LATE);
            land();
            let _ = tx.send(());
        });
        Box::pin(async move {
            let _ = rx.await;
            (Ok(()), buf)
        })
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn name(&self) -> &'static str {
        "late-writes"
    }
    fn direct_io(&self) -> bool {
        false
    }
}

/// A store on a fresh 16 MiB `LateWrites` device (writes on time until
/// `late` is set).
async fn late_store() -> (Arc<LateWrites>, Store) {
    let dev = Arc::new(LateWrites {
        bytes: Arc::new(Mutex::new(vec![0u8; 16 << 20])),
        late: AtomicBool::new(false),
        issued_late: AtomicU64::new(0),
    });
    let s = Store::open_with_engine(dev.clone(), Options::new())
        .await
        .unwrap();
    (dev, s)
}

/// Polls `op` until one of its writes is in flight on `dev` (then the
/// caller drops it); panics if it ends first.
fn poll_until_a_write_is_late<F: Future>(dev: &LateWrites, op: std::pin::Pin<&mut F>, what: &str) {
    let mut op = op;
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut polls = 0;
    while dev.issued_late.load(Ordering::SeqCst) == 0 {
        assert!(
            op.as_mut().poll(&mut cx).is_pending(),
            "{what}: ended before a write"
        );
        polls += 1;
        assert!(polls < 100_000, "{what}: no write issued");
        std::thread::yield_now();
    }
}

/// Starts `op` with late writes, drops it once one of its writes is in
/// flight, then fills the free space with new objects (acknowledged) and
/// checks every one of them after the dropped write has landed.
async fn drop_mid_write(what: &str) {
    let (dev, s) = late_store().await;
    for i in 0..16u64 {
        s.put(format!("f{i:02}"), pattern(i, 64 << 10))
            .await
            .unwrap();
    }
    s.put("high", pattern(99, 256 << 10)).await.unwrap();
    for i in (0..16u64).filter(|i| i % 4 != 3 || *i < 8) {
        s.delete(format!("f{i:02}")).await.unwrap();
    }
    dev.late.store(true, Ordering::SeqCst);
    {
        let op = async {
            match what {
                "put" => s.put("dropped", pattern(5, 2 << 20)).await.map(drop),
                "upload" => {
                    let up = s.begin_upload("dropped", 2 << 20).await?;
                    up.write_part(0, pattern(5, 2 << 20)).await
                }
                _ => s.compact().await.map(drop),
            }
        };
        futures::pin_mut!(op);
        // Polled until a write of it is in flight, then dropped.
        poll_until_a_write_is_late(&dev, op, what);
    }
    dev.late.store(false, Ordering::SeqCst);
    let mut acked = Vec::new();
    for i in 0..64u64 {
        match s
            .put(format!("new{i:02}"), pattern(1000 + i, 64 << 10))
            .await
        {
            Ok(_) => acked.push(i),
            Err(e) if e.kind() == blobcask::ErrorKind::NoSpace => break,
            Err(e) => panic!("{what}: {e}"),
        }
    }
    assert!(acked.len() > 8, "{what}: only {} new objects", acked.len());
    tokio::time::sleep(LATE * 2).await;
    for i in acked {
        let got = s.get(format!("new{i:02}")).await;
        assert!(
            got.as_ref()
                .is_ok_and(|v| v[..] == pattern(1000 + i, 64 << 10)[..]),
            "{what}: new{i:02}, acknowledged, was damaged by a dropped write: {:?}",
            got.map(|v| v.len())
        );
    }
    assert_eq!(s.get("high").await.unwrap(), pattern(99, 256 << 10));
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_put_never_writes_into_space_given_away() {
    drop_mid_write("put").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_upload_part_never_writes_into_space_given_away() {
    drop_mid_write("upload").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_compaction_never_writes_into_space_given_away() {
    drop_mid_write("compact").await;
}

/// An upload part whose call is dropped while its write is in flight keeps
/// its range claimed until the write lands, and leaves its units
/// unwritten: a commit meanwhile is refused and so is a retry of the range;
/// once the write landed, the retry goes in and the committed object holds
/// the retry's bytes. Before, the commit sealed the earlier part's
/// checksums and the dropped write landed after it, leaving an
/// acknowledged object that reads as corrupt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_upload_part_never_lands_in_a_committed_object() {
    let (dev, s) = late_store().await;
    let size = 2 << 20;
    let up = s.begin_upload("o", size).await.unwrap();
    up.write_part(0, pattern(1, size as usize)).await.unwrap();
    dev.late.store(true, Ordering::SeqCst);
    {
        let overwrite = up.write_part(0, pattern(2, size as usize));
        futures::pin_mut!(overwrite);
        poll_until_a_write_is_late(&dev, overwrite, "upload part");
    }
    dev.late.store(false, Ordering::SeqCst);
    let retry = pattern(3, size as usize);
    let e = up.commit().await.unwrap_err();
    assert_eq!(e.kind(), blobcask::ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("still being written"), "{e}");
    let e = up.write_part(0, retry.clone()).await.unwrap_err();
    assert!(e.to_string().contains("still being written"), "{e}");
    tokio::time::sleep(LATE * 2).await;
    // Landed, but never acknowledged: its units do not count as written
    // (a commit now would be refused for them, and end the upload).
    assert_eq!(s.list_uploads()[0].written, 0);
    up.write_part(0, retry.clone()).await.unwrap();
    up.commit().await.unwrap();
    assert_eq!(s.get("o").await.unwrap(), retry);
    s.close().await.unwrap();
}
