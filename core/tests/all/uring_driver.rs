//! The io_uring driver under mixed callers: tokio tasks (reactor
//! completions), `io::block_on` callers (completions waited for in the
//! kernel on their own thread) and a plain executor (fallback thread), all
//! at once on one engine. Every write is read back and compared, every
//! sync must succeed: a completion delivered to the wrong operation or a
//! buffer freed while the kernel owns it (driver invariants D1, D2) shows
//! up as wrong bytes or an error.
#![cfg(target_os = "linux")]

use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use blobcask::io::{AlignedBuf, IoEngine, UringEngine};

fn engine(len: u64) -> (tempfile::TempDir, Arc<dyn IoEngine>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(len).unwrap();
    (dir, Arc::new(UringEngine::new(f, false).unwrap()))
}

/// An engine on a file holding `contents`, opened `O_DIRECT`: reads of it
/// complete on the device, after the poll that submitted them (a read
/// served from the page cache or a hole completes inside the submission,
/// before any waker is kept or the reactor is asked). Under the target
/// directory: /tmp may be a tmpfs, which refuses O_DIRECT or serves it
/// from memory.
fn direct_engine(contents: &[u8]) -> (tempfile::TempDir, Arc<dyn IoEngine>) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("dev");
    std::fs::write(&path, contents).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    f.sync_all().unwrap();
    (dir, Arc::new(UringEngine::new(f, true).unwrap()))
}

/// A two-worker tokio runtime with its reactor.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Writes a pattern unique to (worker, round) into its own region, syncs
/// sometimes, reads it back and compares.
async fn worker(e: Arc<dyn IoEngine>, id: u64, rounds: u64) {
    let region = 1u64 << 20;
    for r in 0..rounds {
        let blocks = 1 + ((id * 7 + r * 13) % 64) as usize;
        let len = blocks * 4096;
        let fill = (id * 31 + r) as u8;
        let mut buf = AlignedBuf::zeroed(len);
        buf.as_mut_slice().fill(fill);
        let at = id * region * 2 + (r % 2) * region;
        let (w, _) = e.write_at(buf, at).await;
        w.unwrap();
        if r % 5 == 0 {
            e.sync().await.unwrap();
        }
        let (rd, back) = e.read_at(AlignedBuf::zeroed(len), at).await;
        rd.unwrap();
        assert!(
            back.as_slice().iter().all(|&b| b == fill),
            "worker {id} round {r}: read back other bytes"
        );
    }
}

#[test]
fn reactor_blocking_and_fallback_callers_share_one_ring() {
    let (_d, e) = engine(256 << 20);
    let rt = runtime();
    let mut threads = Vec::new();
    for id in 8..10u64 {
        let e = e.clone();
        threads.push(std::thread::spawn(move || {
            blobcask::io::block_on(worker(e, id, 300))
        }));
    }
    for id in 10..12u64 {
        let e = e.clone();
        threads.push(std::thread::spawn(move || {
            futures::executor::block_on(worker(e, id, 300))
        }));
    }
    rt.block_on(async {
        let tasks: Vec<_> = (12..76u64)
            .map(|id| tokio::spawn(worker(e.clone(), id, 300)))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn dropped_operations_keep_their_buffers_until_the_kernel_is_done() {
    let (_d, e) = engine(16 << 20);
    for round in 0..200u64 {
        // Start reads and writes and drop the futures at once: the kernel
        // still owns the buffers (D1); the engine must stay usable.
        let mut buf = AlignedBuf::zeroed(1 << 20);
        buf.as_mut_slice().fill(round as u8);
        drop(e.write_at(buf, (round % 8) << 20));
        drop(e.read_at(AlignedBuf::zeroed(1 << 20), ((round + 4) % 8) << 20));
    }
    let (r, _) = blobcask::io::block_on(e.read_at(AlignedBuf::zeroed(4096), 0));
    r.unwrap();
    drop(e);
}

#[test]
fn threads_that_enter_and_exit_at_once_lose_nothing() {
    // Any thread may enter the kernel for everything queued, and io_uring
    // ties requests to the thread that entered them: when that thread
    // exits, the kernel cancels what it has not started. Here each short
    // thread submits (and so may carry the tokio tasks' queued requests)
    // and exits at once, while the tasks keep reading and writing; every
    // task must still see its own bytes and no error.
    let (_d, e) = engine(256 << 20);
    let rt = runtime();
    rt.block_on(async {
        let tasks: Vec<_> = (12..44u64)
            .map(|id| tokio::spawn(worker(e.clone(), id, 100)))
            .collect();
        for i in 0..400u64 {
            let e = e.clone();
            std::thread::spawn(move || {
                let mut buf = AlignedBuf::zeroed(4096);
                buf.as_mut_slice().fill(i as u8);
                let at = (200 << 20) + (i % 64) * 4096;
                blobcask::io::block_on(e.write_and_sync(vec![(buf, at)])).unwrap();
            })
            .join()
            .unwrap();
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// Counts the wake-ups of a task's waker, and those that come from inside
/// the task's own poll.
#[derive(Default)]
struct Wakes {
    /// The thread polling the task right now, if any.
    in_poll: std::sync::Mutex<Option<std::thread::ThreadId>>,
    total: std::sync::atomic::AtomicUsize,
    from_own_poll: std::sync::atomic::AtomicUsize,
}

struct CountingWaker {
    /// The task's own waker, as of the latest poll.
    inner: std::sync::Mutex<std::task::Waker>,
    wakes: Arc<Wakes>,
}

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        self.wakes.total.fetch_add(1, SeqCst);
        // A wake-up from another thread meanwhile (a reactor on another
        // worker) is a real one.
        if *self.wakes.in_poll.lock().unwrap() == Some(std::thread::current().id()) {
            self.wakes.from_own_poll.fetch_add(1, SeqCst);
        }
        self.inner.lock().unwrap().wake_by_ref();
    }
}

/// Polls `fut` with a waker that records its wake-ups in `wakes`: one
/// waker for all its polls, as a runtime gives a task.
async fn watched<F: std::future::Future + Unpin>(mut fut: F, wakes: Arc<Wakes>) -> F::Output {
    let mut counting: Option<Arc<CountingWaker>> = None;
    std::future::poll_fn(move |cx| {
        let c = counting.get_or_insert_with(|| {
            Arc::new(CountingWaker {
                inner: std::sync::Mutex::new(cx.waker().clone()),
                wakes: wakes.clone(),
            })
        });
        c.inner.lock().unwrap().clone_from(cx.waker());
        let waker = std::task::Waker::from(c.clone());
        *wakes.in_poll.lock().unwrap() = Some(std::thread::current().id());
        let r = std::pin::Pin::new(&mut fut).poll(&mut std::task::Context::from_waker(&waker));
        *wakes.in_poll.lock().unwrap() = None;
        r
    })
    .await
}

/// A commit group's writes, all filled with `fill`: 16 KiB at the first
/// offset (a value), 4 KiB at the others (tuple blocks).
fn group(fill: u8, at: &[u64]) -> Vec<(AlignedBuf, u64)> {
    at.iter()
        .enumerate()
        .map(|(j, &at)| {
            let mut b = AlignedBuf::zeroed(if j == 0 { 16384 } else { 4096 });
            b.as_mut_slice().fill(fill);
            (b, at)
        })
        .collect()
}

/// Reads 4 KiB back at each offset of `at`: every byte must be `fill`.
async fn reads_back(e: &Arc<dyn IoEngine>, at: &[u64], fill: u8) {
    for &at in at {
        let (r, back) = e.read_at(AlignedBuf::zeroed(4096), at).await;
        r.unwrap();
        assert!(
            back.as_slice().iter().all(|&b| b == fill),
            "other bytes at {at}"
        );
    }
}

#[test]
fn a_completion_reaped_by_its_own_poll_or_a_sibling_does_not_wake_its_task() {
    // Driver invariant D2's reap hands every completion to its slot; the
    // one of the operation whose poll is reaping is taken by that poll at
    // once, so waking its task too would only make the runtime poll it
    // again for nothing (on tokio's multi-thread runtime, with another
    // worker roused to steal it).
    let (_dir, e) = direct_engine(&vec![7u8; 8 << 20]);
    for rt in [
        runtime(),
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    ] {
        let e = e.clone();
        // In a spawned task: the future of a multi-thread runtime's
        // `block_on` waits on its own thread instead (`io::waits_here`),
        // whose first poll of a read asks to be polled again on purpose.
        let task = rt.spawn(async move {
            let wakes = Arc::new(Wakes::default());
            // Reads in the first 4 MiB, writes in the next.
            for i in 0..300u64 {
                let read = e.read_at(AlignedBuf::zeroed(4096), (i * 7 % 1024) * 4096);
                let (r, back) = watched(read, wakes.clone()).await;
                r.unwrap();
                assert!(back.as_slice().iter().all(|&b| b == 7));
            }
            use std::sync::atomic::Ordering::SeqCst;
            // The reads did wait for the device: their tasks were woken.
            assert!(wakes.total.load(SeqCst) >= 100, "reads completed at once");
            let own = wakes.from_own_poll.load(SeqCst);
            assert_eq!(own, 0, "woken from inside its own poll {own} times");

            // A commit group's writes, awaited together: the completion of
            // one found by another's poll (and the registration handed from
            // one to the next) wakes nobody either. Every write lands.
            let wakes = Arc::new(Wakes::default());
            for i in 0..100u64 {
                let fill = i as u8;
                let at: Vec<u64> = (0..3u64)
                    .map(|j| (4 << 20) + ((i * 3 + j) % 200) * 16384)
                    .collect();
                watched(e.clone().write_and_sync(group(fill, &at)), wakes.clone())
                    .await
                    .unwrap();
                reads_back(&e, &at, fill).await;
            }
            // (Counts the syncs' wake-ups too: it shows the groups waited
            // for the device, not that each write did.)
            assert!(wakes.total.load(SeqCst) >= 100, "the groups never waited");
            let own = wakes.from_own_poll.load(SeqCst);
            assert_eq!(own, 0, "group woken from inside its own poll {own} times");
        });
        rt.block_on(task).unwrap();
    }
}

#[test]
fn tasks_writing_groups_at_once_each_see_their_writes_and_none_hangs() {
    // Wake-ups held back inside one task's group (`driver::together`) must
    // never be those of another task's operations: eight tasks write
    // groups at once on one ring, and each must finish, with its bytes.
    let (_d, e) = engine(64 << 20);
    let rt = runtime();
    rt.block_on(async {
        let tasks: Vec<_> = (0..8u64)
            .map(|t| {
                let e = e.clone();
                tokio::spawn(async move {
                    for round in 0..40u64 {
                        let fill = (t * 40 + round) as u8;
                        let at: Vec<u64> = (0..4u64)
                            .map(|j| (t << 23) + ((round * 4 + j) % 64) * 16384)
                            .collect();
                        e.clone().write_and_sync(group(fill, &at)).await.unwrap();
                        reads_back(&e, &at, fill).await;
                    }
                })
            })
            .collect();
        let all = futures::future::join_all(tasks);
        let done = tokio::time::timeout(std::time::Duration::from_secs(120), all)
            .await
            .expect("a task never finished: a wake-up was lost");
        for r in done {
            r.unwrap();
        }
    });
}

/// Reads block `i % 16` of a file whose block `b` is filled with `b`, `n`
/// times, checking each.
async fn read_blocks(e: &Arc<dyn IoEngine>, n: u64) {
    for i in 0..n {
        let b = i % 16;
        let (r, buf) = e.read_at(AlignedBuf::zeroed(4096), b * 4096).await;
        r.unwrap();
        assert!(
            buf.as_slice().iter().all(|&x| u64::from(x) == b),
            "block {b} read back other bytes"
        );
    }
}

/// How many times thread `tid` of this process has gone to sleep and been
/// woken (its voluntary context switches).
fn sleeps_of(tid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches in /proc")
}

/// The reactor registration of a runtime that nothing waits through is
/// dropped when another runtime registers, so the ring's completions stop
/// waking that runtime's thread (D3 keeps a registration for every
/// runtime with a waiter). Runtime A reads, then idles on its own thread
/// while runtime B reads 200 blocks: A's thread must not wake for them.
/// Then A reads alone (it registers again; a registration left with no
/// waiter to wake would hang it), and then both at once. Every read is
/// checked, every step under a timeout. (Whether A's reads went through
/// its reactor or the fallback thread is not seen here.)
#[test]
fn an_idle_runtime_is_not_woken_by_another_runtimes_completions() {
    use std::time::Duration;

    let blocks: Vec<u8> = (0..16u8).flat_map(|b| [b; 4096]).collect();
    let (_dir, e) = direct_engine(&blocks);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (step_tx, step_rx) = std::sync::mpsc::channel();
    let (alone_tx, alone_rx) = tokio::sync::oneshot::channel::<()>();
    let (both_tx, both_rx) = tokio::sync::oneshot::channel::<()>();
    let a = {
        let e = e.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                read_blocks(&e, 20).await;
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                alone_rx.await.unwrap();
                read_blocks(&e, 50).await;
                step_tx.send(()).unwrap();
                both_rx.await.unwrap();
                read_blocks(&e, 100).await;
                step_tx.send(()).unwrap();
            });
        })
    };
    let minute = Duration::from_secs(60);
    let tid = tid_rx
        .recv_timeout(minute)
        .expect("runtime A's first reads");
    // A is asleep in its reactor by now.
    std::thread::sleep(Duration::from_millis(100));
    let b = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b_reads = |n| {
        b.block_on(async {
            tokio::time::timeout(minute, read_blocks(&e, n))
                .await
                .expect("runtime B's reads hung")
        })
    };
    let before = sleeps_of(tid);
    b_reads(200);
    let woken = sleeps_of(tid) - before;
    assert!(
        woken < 20,
        "idle runtime A woke {woken} times during runtime B's 200 reads"
    );
    alone_tx.send(()).unwrap();
    step_rx
        .recv_timeout(minute)
        .expect("runtime A's reads alone, after its registration was dropped, hung");
    both_tx.send(()).unwrap();
    b_reads(200);
    step_rx
        .recv_timeout(minute)
        .expect("runtime A's reads beside B's hung");
    a.join().unwrap();
}

/// The future of a multi-thread runtime's `block_on` (a `#[tokio::main]`
/// program's own) waits for its I/O on its own thread (`io::waits_here`):
/// a read alone as a `pread`, reads started together through the ring
/// and the runtime's reactor, a commit's writes and sync in the kernel.
/// Every way gives each object its own bytes: puts one by one and many at
/// once, gets one by one and 64 at once, ranges, a read dropped after its
/// first poll (a `select!` another branch won) and one moved to a worker
/// between polls, all under a timeout (a lost wake-up hangs).
#[test]
fn a_multi_thread_block_on_caller_reads_and_writes_on_its_own_thread() {
    use crate::common::{options, pattern, temp_path};
    use blobcask::{IoEngineKind, Store};

    let t = temp_path();
    let rt = runtime();
    rt.block_on(async {
        let all = async {
            let s = Store::open(&t.path, options(IoEngineKind::IoUring))
                .await
                .unwrap();
            for i in 0..40u64 {
                s.put(format!("k{i}"), pattern(i, 700 + i as usize * 300))
                    .await
                    .unwrap();
            }
            let puts =
                (40..80u64).map(|i| s.put(format!("k{i}"), pattern(i, 700 + i as usize * 300)));
            for r in futures::future::join_all(puts).await {
                r.unwrap();
            }
            for i in 0..80u64 {
                let v = s.get(format!("k{i}")).await.unwrap();
                assert_eq!(&v[..], &pattern(i, 700 + i as usize * 300)[..], "k{i}");
            }
            let gets = (0..64u64).map(|i| s.read(format!("k{}", i + 16), 5, 600));
            for (i, v) in futures::future::join_all(gets)
                .await
                .into_iter()
                .enumerate()
            {
                let i = i as u64 + 16;
                assert_eq!(&v.unwrap()[..], &pattern(i, 700 + i as usize * 300)[5..605]);
            }
            for _ in 0..20 {
                tokio::select! {
                    biased;
                    () = std::future::ready(()) => {}
                    _ = s.get("k3") => panic!("the ready branch comes first"),
                }
            }
            // Polled once here, finished on a worker.
            let owned = s.clone();
            let mut moved = Box::pin(async move { owned.get("k70").await });
            assert!(futures::poll!(moved.as_mut()).is_pending());
            let v = tokio::spawn(moved).await.unwrap().unwrap();
            assert_eq!(&v[..], &pattern(70, 700 + 70 * 300)[..]);
            assert_eq!(&s.get("k1").await.unwrap()[..], &pattern(1, 1000)[..]);
            s.close().await.unwrap();
        };
        tokio::time::timeout(std::time::Duration::from_secs(120), all)
            .await
            .expect("a block_on caller's I/O hung");
    });
}
