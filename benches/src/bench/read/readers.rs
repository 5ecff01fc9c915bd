//! The read phase's readers on runtimes of their own, each on a thread
//! that answers a round of reads at a time (`RoundThread`), so that their
//! rounds take turns with the phase's other rows: a tokio current-thread
//! runtime and tokio-uring's; and the rounds' random reads and timing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use blobcask::{IoEngineKind, Options, Store};

#[cfg(target_os = "linux")]
use blobcask_bench::raw::open_direct;
use rand::Rng;

use crate::bench::process_cpu;

/// A thread of its own that answers requests one at a time (a round of
/// reads on another runtime), so that its rounds interleave with the read
/// phase's others. Dropped, it ends the thread and waits for it.
pub(crate) struct RoundThread<Req, Resp> {
    tx: Option<std::sync::mpsc::Sender<(Req, tokio::sync::oneshot::Sender<Resp>)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a [`RoundThread`]'s body receives: each request and where its
/// answer goes.
type Rounds<Req, Resp> = std::sync::mpsc::Receiver<(Req, tokio::sync::oneshot::Sender<Resp>)>;

impl<Req: Send + 'static, Resp: Send + 'static> RoundThread<Req, Resp> {
    /// Runs `body` on a thread named `name`; it answers every request it
    /// receives until the channel closes.
    fn start(name: &str, body: impl FnOnce(Rounds<Req, Resp>) + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(rx))
            .expect("spawn a bench thread");
        RoundThread {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// One request, answered on the thread.
    pub(crate) async fn round(&self, req: Req) -> Resp {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if let Some(tx) = &self.tx {
            tx.send((req, reply)).expect("bench thread");
        }
        rx.await.expect("bench thread's answer")
    }
}

impl<Req, Resp> Drop for RoundThread<Req, Resp> {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Latencies of a round of reads, and the CPU time they took.
pub(crate) type Timed = (Vec<Duration>, Duration);

/// `n` random 4 KiB reads of the read phase's objects (`objects` of `obj`
/// bytes, named `obj/{i}`): each a key and an offset, block-aligned or any.
pub(crate) fn random_reads(
    rng: &mut impl Rng,
    n: usize,
    objects: usize,
    obj: usize,
    aligned: bool,
) -> Vec<(String, u64)> {
    (0..n)
        .map(|_| {
            let key = format!("obj/{}", rng.random_range(0..objects));
            let off = if aligned {
                rng.random_range(0..(obj as u64 / 4096)) * 4096
            } else {
                rng.random_range(0..obj as u64 - 4096)
            };
            (key, off)
        })
        .collect()
}

/// Reads 4 KiB at each (key, offset) with `read`, one at a time: their
/// latencies and CPU time. (`read` takes the key by value, so that a
/// future reading through a borrowed store can run in a spawned task.)
pub(crate) async fn timed_reads<F>(
    reads: Vec<(String, u64)>,
    read: impl Fn(String, u64) -> F,
) -> Timed
where
    F: std::future::Future<Output = blobcask::Result<blobcask::Bytes>>,
{
    let mut times = Vec::with_capacity(reads.len());
    let cpu = process_cpu();
    for (key, off) in reads {
        let t = Instant::now();
        let got = read(key, off).await.unwrap();
        times.push(t.elapsed());
        assert_eq!(got.len(), 4096);
    }
    (times, process_cpu() - cpu)
}

/// `Store::read` awaited in `handle.block_on` (a multi-thread runtime's)
/// on a thread of its own, which is none of that runtime's workers: as a
/// `#[tokio::main]` program's main future awaits. Each request is the
/// (key, offset) of each 4 KiB read.
pub(crate) fn block_on_reader(
    store: Store,
    handle: tokio::runtime::Handle,
) -> RoundThread<Vec<(String, u64)>, Timed> {
    RoundThread::start(
        "bench-block-on",
        move |rounds: Rounds<Vec<(String, u64)>, Timed>| {
            while let Ok((reads, reply)) = rounds.recv() {
                let s = &store;
                let r = handle.block_on(timed_reads(reads, |key, off| async move {
                    s.read(&key, off, 4096).await
                }));
                let _ = reply.send(r);
            }
        },
    )
}

/// `Store::read` on a tokio current-thread runtime of its own, of a store
/// of its own at `path` holding the same objects as the read phase's: the
/// async row without the multi-thread scheduler's hand-offs between
/// workers. Each request is the (key, offset) of each 4 KiB read.
pub(crate) fn current_thread_reader(
    path: PathBuf,
    engine: IoEngineKind,
    objects: usize,
    obj: usize,
) -> RoundThread<Vec<(String, u64)>, Timed> {
    RoundThread::start(
        "bench-current-thread",
        move |rounds: Rounds<Vec<(String, u64)>, Timed>| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("current-thread runtime");
            let _ = std::fs::remove_file(&path);
            let store = rt.block_on(async {
                let capacity = objects as u64 * obj as u64 * 2;
                let store = Store::open(&path, Options::new().capacity(capacity).io_engine(engine))
                    .await
                    .expect("open");
                let value = blobcask::Bytes::from(vec![7u8; obj]);
                for i in 0..objects {
                    store.put(format!("obj/{i}"), value.clone()).await.unwrap();
                }
                store
            });
            while let Ok((reads, reply)) = rounds.recv() {
                let s = &store;
                let r = rt.block_on(timed_reads(reads, |key, off| async move {
                    s.read(&key, off, 4096).await
                }));
                let _ = reply.send(r);
            }
            rt.block_on(store.close()).expect("close");
            let _ = std::fs::remove_file(&path);
        },
    )
}

/// A round of [`local_reader`]: the (key, offset) of each 4 KiB store
/// read and the file offset of each raw one.
#[cfg(target_os = "linux")]
pub(crate) type LocalRound = (Vec<(String, u64)>, Vec<u64>);

/// `LocalStore::read` inside `tokio_uring::start` (the runtime the handle
/// is for), then tokio-uring's own `read_at` of raw offsets.
#[cfg(target_os = "linux")]
pub(crate) fn local_reader(
    store: Store,
    path: &std::path::Path,
) -> RoundThread<LocalRound, (Timed, Timed)> {
    let raw = open_direct(path);
    RoundThread::start(
        "bench-tokio-uring",
        move |rounds: Rounds<LocalRound, (Timed, Timed)>| {
            tokio_uring::start(async move {
                let local = store.local().expect("LocalStore");
                let raw = tokio_uring::fs::File::from_std(raw);
                let mut buf = blobcask::io::AlignedBuf::zeroed(4096);
                // Blocks the runtime between rounds, when it has nothing else
                // to run.
                while let Ok(((reads, raw_offsets), reply)) = rounds.recv() {
                    let store_reads = timed_reads(reads, |key, off| {
                        let local = &local;
                        async move { local.read(&key, off, 4096).await }
                    })
                    .await;
                    let mut raw_times = Vec::with_capacity(raw_offsets.len());
                    let cpu = process_cpu();
                    for off in raw_offsets {
                        let t = Instant::now();
                        let (r, b) = raw.read_at(buf, off).await;
                        raw_times.push(t.elapsed());
                        assert_eq!(r.unwrap(), 4096);
                        buf = b;
                    }
                    let cpu_raw = process_cpu() - cpu;
                    let _ = reply.send((store_reads, (raw_times, cpu_raw)));
                }
            })
        },
    )
}
