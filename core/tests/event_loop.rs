//! `blobcask::event_loop::EventLoop`: store operations driven by a host
//! event loop on its own thread. The host here is a `poll(2)` loop over
//! `EventLoop::fds` that calls `run` only when a descriptor is readable,
//! exactly what asyncio's `add_reader` or libuv's `uv_poll` do; a lost
//! wake-up (L1, L3) shows up as a loop that stops making progress.
//!
//! Every test in this file drives the io_uring engine only through an
//! `EventLoop` (and the blocking API), so none of them may start the
//! driver's fallback completion thread: that is checked too.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blobcask::event_loop::EventLoop;
use blobcask::io::block_on;
use blobcask::{ErrorKind, IoEngineKind, Store};
use common::*;

/// Polls the loop's descriptors and runs it while `more` holds; panics if
/// nothing completes for 10 s (a lost wake-up).
fn drive(ev: &EventLoop, mut more: impl FnMut() -> bool) {
    let fds = ev.fds();
    let mut last_progress = Instant::now();
    let mut pending = ev.len();
    while more() {
        let mut pfds: Vec<libc::pollfd> = fds
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
        if pfds.iter().any(|p| p.revents & libc::POLLIN != 0) {
            ev.run();
        }
        if ev.len() != pending {
            pending = ev.len();
            last_progress = Instant::now();
        }
        assert!(
            last_progress.elapsed() < Duration::from_secs(10),
            "no task finished for 10 s with {pending} pending: a lost wake-up"
        );
    }
}

fn open(t: &TempStore, engine: IoEngineKind) -> Store {
    block_on(Store::open(&t.path, options(engine))).unwrap()
}

type Results<T> = Arc<Mutex<Vec<(usize, blobcask::Result<T>)>>>;

#[test]
fn puts_and_reads_complete_on_the_loop_thread() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let s = open(&t, engine);
        let ev = EventLoop::new(&s).unwrap();
        assert_eq!(
            ev.fds().len(),
            if engine == IoEngineKind::IoUring {
                2
            } else {
                1
            }
        );
        // Inline and heap values, written by 32 concurrent puts.
        const SIZES: [usize; 5] = [10, 100, 5000, 16 << 10, 300 << 10];
        let value = |i: usize| pattern(i as u64, SIZES[i % SIZES.len()]);
        let put: Results<blobcask::ObjectInfo> = Arc::default();
        for i in 0..32 {
            let (s2, out) = (s.clone(), put.clone());
            ev.spawn(
                async move { s2.put(format!("k{i}"), value(i)).await },
                move |r| out.lock().unwrap().push((i, r.unwrap())),
            );
        }
        drive(&ev, || put.lock().unwrap().len() < 32);
        for (i, r) in put.lock().unwrap().iter() {
            assert_eq!(r.as_ref().unwrap().size, value(*i).len() as u64);
        }
        // 64 reads in flight at once, whole and at unaligned ranges.
        let got: Results<blobcask::Bytes> = Arc::default();
        for i in 0..64 {
            let (s2, out) = (s.clone(), got.clone());
            let k = format!("k{}", i % 32);
            ev.spawn(
                async move {
                    if i < 32 {
                        s2.get(k).await
                    } else {
                        s2.read(k, 3, 4099).await
                    }
                },
                move |r| out.lock().unwrap().push((i, r.unwrap())),
            );
        }
        drive(&ev, || got.lock().unwrap().len() < 64);
        for (i, r) in got.lock().unwrap().iter() {
            let v = value(i % 32);
            let want = if *i < 32 {
                &v[..]
            } else {
                &v[3.min(v.len())..(3 + 4099).min(v.len())]
            };
            assert_eq!(&r.as_ref().unwrap()[..], want, "read {i}");
        }
        // Errors arrive as errors.
        let err: Results<blobcask::Bytes> = Arc::default();
        let (s2, out) = (s.clone(), err.clone());
        ev.spawn(async move { s2.get("absent").await }, move |r| {
            out.lock().unwrap().push((0, r.unwrap()))
        });
        drive(&ev, || err.lock().unwrap().is_empty());
        let e = err.lock().unwrap().pop().unwrap().1.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(ev.is_empty());
        block_on(s.close()).unwrap();
        assert_no_fallback_thread();
        // What was acknowledged is durable.
        let s = open(&t, engine);
        for i in 0..32 {
            assert_eq!(
                &blobcask::blocking::Store::from(s.clone())
                    .get(format!("k{i}"))
                    .unwrap()[..],
                &value(i)[..]
            );
        }
    }
}

/// L1: a task woken from another thread runs at the loop's next turn.
#[test]
fn a_task_woken_from_another_thread_runs() {
    let t = temp_path();
    let s = open(&t, IoEngineKind::IoUring);
    let ev = EventLoop::new(&s).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    for round in 0..200u64 {
        let (tx, rx) = futures::channel::oneshot::channel::<u64>();
        let d = done.clone();
        ev.spawn(async move { rx.await.unwrap() }, move |r| {
            assert_eq!(r.unwrap(), round);
            d.fetch_add(1, Ordering::SeqCst);
        });
        let sender = std::thread::spawn(move || {
            if round % 3 == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
            tx.send(round).unwrap();
        });
        drive(&ev, || done.load(Ordering::SeqCst) <= round as usize);
        sender.join().unwrap();
    }
    // Blocking writers lead commit groups that loop tasks join: their
    // followers are woken from the writers' threads.
    let acked = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let b = blobcask::blocking::Store::from(s.clone());
            std::thread::spawn(move || {
                for i in 0..50 {
                    b.put(format!("w{w}/{i}"), pattern(i, 700)).unwrap();
                }
            })
        })
        .collect();
    for i in 0..200u64 {
        let (s2, a) = (s.clone(), acked.clone());
        ev.spawn(
            async move { s2.put(format!("loop/{i}"), pattern(i, 700)).await },
            move |r| {
                r.unwrap().unwrap();
                a.fetch_add(1, Ordering::SeqCst);
            },
        );
    }
    drive(&ev, || acked.load(Ordering::SeqCst) < 200);
    writers.into_iter().for_each(|w| w.join().unwrap());
    assert_no_fallback_thread();
}

/// L2: a callback may spawn and cancel; a cancelled task's callback never
/// runs, and dropping futures in flight loses nothing acknowledged.
#[test]
fn callbacks_spawn_and_cancelled_tasks_stay_silent() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let s = open(&t, engine);
        let ev = Arc::new(EventLoop::new(&s).unwrap());
        let chain = Arc::new(AtomicUsize::new(0));
        fn step(ev: &Arc<EventLoop>, s: &Store, n: usize, chain: &Arc<AtomicUsize>) {
            let (ev2, s2, c) = (ev.clone(), s.clone(), chain.clone());
            let s3 = s.clone();
            ev.spawn(
                async move { s3.put(format!("chain/{n}"), pattern(n as u64, 9000)).await },
                move |r| {
                    r.unwrap().unwrap();
                    c.fetch_add(1, Ordering::SeqCst);
                    if n < 20 {
                        step(&ev2, &s2, n + 1, &c);
                    }
                },
            );
        }
        step(&ev, &s, 0, &chain);
        drive(&ev, || chain.load(Ordering::SeqCst) < 21);

        let silent = Arc::new(AtomicUsize::new(0));
        let mut ids = vec![];
        for i in 0..50u64 {
            let (s2, c) = (s.clone(), silent.clone());
            ids.push(ev.spawn(
                async move {
                    s2.read(format!("chain/{}", i % 21), 0, u64::MAX).await?;
                    s2.put(format!("maybe/{i}"), pattern(i, 20_000)).await
                },
                move |_| {
                    c.fetch_add(1, Ordering::SeqCst);
                },
            ));
        }
        let cancelled = ids.iter().filter(|id| ev.cancel(**id)).count();
        assert_eq!(cancelled + silent.load(Ordering::SeqCst), 50);
        assert!(!ev.cancel(ids[0]), "a task is cancelled once");
        assert!(ev.is_empty());
        // The store still works, and nothing cancelled is torn.
        let (s2, c) = (s.clone(), chain.clone());
        ev.spawn(
            async move { s2.put("after", vec![1u8; 5000]).await },
            move |r| {
                r.unwrap().unwrap();
                c.fetch_add(1, Ordering::SeqCst);
            },
        );
        drive(&ev, || chain.load(Ordering::SeqCst) < 22);
        block_on(s.close()).unwrap();
        let s = open(&t, engine);
        for i in 0..50u64 {
            match blobcask::blocking::Store::from(s.clone()).get(format!("maybe/{i}")) {
                Ok(b) => assert_eq!(&b[..], &pattern(i, 20_000)[..]),
                Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound),
            }
        }
        assert_eq!(
            &blobcask::blocking::Store::from(s.clone())
                .get("after")
                .unwrap()[..],
            &[1u8; 5000][..]
        );
    }
    assert_no_fallback_thread();
}

#[test]
fn a_panicking_task_reports_its_panic() {
    let t = temp_path();
    let s = open(&t, IoEngineKind::IoUring);
    let ev = EventLoop::new(&s).unwrap();
    let seen = Arc::new(Mutex::new(None));
    let out = seen.clone();
    let s2 = s.clone();
    ev.spawn(
        async move {
            s2.put("p", vec![7u8; 10_000]).await.unwrap();
            panic!("task gave up");
        },
        move |r: std::thread::Result<()>| {
            let msg = r.unwrap_err().downcast_ref::<&str>().map(|s| s.to_string());
            *out.lock().unwrap() = Some(msg);
        },
    );
    drive(&ev, || seen.lock().unwrap().is_none());
    assert_eq!(
        seen.lock().unwrap().clone().unwrap().as_deref(),
        Some("task gave up")
    );
    assert!(ev.is_empty());
}

/// L4: a blocking call on the loop's thread while loop tasks are pending
/// (here a blocking put joining commit groups those tasks lead) drives the
/// loop while it waits; without that it would wait forever for a leader
/// whose I/O only this thread's `run` completes.
#[test]
fn a_blocking_call_on_the_loop_thread_drives_the_loop() {
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = finished.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !watch.load(Ordering::SeqCst) {
            eprintln!("a blocking call on the loop thread deadlocked (L4)");
            std::process::abort();
        }
    });
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let s = open(&t, engine);
        let b = blobcask::blocking::Store::from(s.clone());
        let ev = EventLoop::new(&s).unwrap();
        let acked = Arc::new(AtomicUsize::new(0));
        for round in 0..20u64 {
            for i in 0..8u64 {
                let (s2, a) = (s.clone(), acked.clone());
                // Inline values go straight to the commit path: the first
                // task leads a group at its first poll.
                ev.spawn(
                    async move { s2.put(format!("loop/{round}/{i}"), pattern(i, 100)).await },
                    move |r| {
                        r.unwrap().unwrap();
                        a.fetch_add(1, Ordering::SeqCst);
                    },
                );
            }
            // The loop's tasks are pending (one of them leads a group):
            // blocking calls on this very thread.
            b.put(format!("blocking/{round}"), pattern(round, 7000))
                .unwrap();
            b.delete(format!("blocking/{round}")).unwrap();
            b.sync().unwrap();
        }
        drive(&ev, || acked.load(Ordering::SeqCst) < 160);
        assert_eq!(b.get("loop/19/7").unwrap().len(), 100);
    }
    finished.store(true, Ordering::SeqCst);
}

/// Puts a loop's host issues in one turn (500 puts from one tick of
/// JavaScript, an asyncio `gather`) commit as one group: the first one's
/// lead waits for the loop's next round, by which the others are queued
/// (before, the first committed alone and the rest as a second group).
/// Dropping that leader while it waits passes the lead on: the others
/// still commit.
#[test]
fn puts_issued_in_one_turn_of_a_loop_commit_as_one_group() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let s = open(&t, engine);
        let ev = EventLoop::new(&s).unwrap();
        let before = s.stats().commit_groups;
        let done: Results<blobcask::ObjectInfo> = Arc::default();
        for i in 0..100 {
            let (s2, out) = (s.clone(), done.clone());
            ev.spawn(
                async move { s2.put(format!("k{i}"), pattern(i, 3000)).await },
                move |r| out.lock().unwrap().push((i as usize, r.unwrap())),
            );
        }
        drive(&ev, || done.lock().unwrap().len() < 100);
        assert!(done.lock().unwrap().iter().all(|(_, r)| r.is_ok()));
        assert_eq!(s.stats().commit_groups - before, 1, "{engine:?}");

        // The leader cancelled while it waits for the round.
        let before = s.stats().commit_groups;
        let done: Results<blobcask::ObjectInfo> = Arc::default();
        let mut first = None;
        for i in 0..20 {
            let (s2, out) = (s.clone(), done.clone());
            let id = ev.spawn(
                async move { s2.put(format!("c{i}"), pattern(i, 3000)).await },
                move |r| out.lock().unwrap().push((i as usize, r.unwrap())),
            );
            first.get_or_insert(id);
        }
        assert!(ev.cancel(first.unwrap()));
        drive(&ev, || done.lock().unwrap().len() < 19);
        assert!(done.lock().unwrap().iter().all(|(_, r)| r.is_ok()));
        // Its change was queued before it was dropped: it may have landed
        // (with its own bytes) or not, as any cancelled put.
        for i in 0..20u64 {
            if i == 0 && !s.contains("c0") {
                continue;
            }
            assert_eq!(
                &block_on(s.get(format!("c{i}"))).unwrap()[..],
                &pattern(i, 3000)[..]
            );
        }
        assert!(s.stats().commit_groups - before >= 1);
        block_on(s.close()).unwrap();
    }
}
