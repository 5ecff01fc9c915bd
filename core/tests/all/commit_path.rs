//! The leader/follower commit path (`store::commit`): callers commit their
//! own groups, so a caller's future may be dropped while it leads, and the
//! same store is driven from tokio (multi-thread and current-thread),
//! `futures::executor` and blocking threads at once.

use crate::common;

use blobcask::{ErrorKind, IoEngineKind, Store};
use common::*;
use futures::FutureExt;

/// After reopening: every acknowledged put reads back whole, and an
/// unacknowledged one is either whole or absent.
async fn check(s: &Store, acked: &[(String, Vec<u8>)], maybe: &[(String, Vec<u8>)]) {
    for (k, v) in acked {
        assert_eq!(&s.get(k).await.unwrap()[..], &v[..], "acknowledged {k}");
    }
    for (k, v) in maybe {
        match s.get(k).await {
            Ok(b) => assert_eq!(&b[..], &v[..], "unacknowledged {k} torn"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{k}: {e}"),
        }
    }
}

/// Runs `body` once per I/O engine, on a current-thread runtime (where a
/// future polled once and dropped is easy to arrange).
fn per_engine_on_current_thread<F, Fut>(body: F)
where
    F: Fn(IoEngineKind) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(body(engine));
    }
}

#[test]
fn a_leader_dropped_half_way_leaves_its_group_to_the_next_caller() {
    per_engine_on_current_thread(|engine| async move {
        let t = temp_path();
        let s = open(&t, engine).await;
        let mut acked = vec![];
        let mut maybe = vec![];
        for round in 0..50u64 {
            // An inline value goes straight to the commit path: the
            // first poll queues it, takes the lead and starts the
            // group's writes; then the future is dropped.
            let k = format!("dropped/{round}");
            let v = pattern(round, 100);
            let mut f = Box::pin(s.put(k.clone(), v.clone()));
            if let Some(r) = (&mut f).now_or_never() {
                r.unwrap();
                acked.push((k, v));
            } else {
                maybe.push((k, v));
            }
            drop(f);
            // The next caller finishes that group first, then its own.
            let k = format!("next/{round}");
            let v = pattern(1000 + round, 5000 + round as usize);
            s.put(k.clone(), v.clone()).await.unwrap();
            acked.push((k, v));
        }
        // The case this test is about happened: futures dropped while
        // their group was in flight.
        assert!(!maybe.is_empty(), "no put was dropped half way");
        check(&s, &acked, &maybe).await;
        s.close().await.unwrap();
        let s = open(&t, engine).await;
        check(&s, &acked, &maybe).await;
        s.close().await.unwrap();
    });
}

#[test]
fn a_dropped_leader_with_nobody_after_it_is_finished_in_the_background() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let s = blobcask::blocking::Store::from(futures::executor::block_on(open(&t, engine)));
        let v = pattern(7, 100);
        let mut f = Box::pin(s.as_async().put("alone", v.clone()));
        let first = (&mut f).now_or_never();
        drop(f);
        if first.is_none() {
            // Nobody else calls: the maintenance thread finishes the group
            // (its first tick is at most 100 ms away).
            std::thread::sleep(std::time::Duration::from_millis(400));
        }
        // Either way the store works, and the put is whole or absent.
        s.put("after", pattern(8, 10)).unwrap();
        match s.get("alone") {
            Ok(b) => assert_eq!(&b[..], &v[..]),
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound),
        }
        s.close().unwrap();
    }
}

#[test]
fn tokio_futures_executor_and_blocking_writers_share_the_commit_path() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let s = rt.block_on(open(&t, engine));
        let value =
            |w: u64, i: u64| pattern(w * 1000 + i, 1 + ((w * 977 + i * 131) % 40_000) as usize);
        let rounds = 40u64;
        let mut threads = vec![];
        // Blocking callers and futures::executor callers on threads of
        // their own.
        for w in 0..4u64 {
            let s = s.clone();
            threads.push(std::thread::spawn(move || {
                for i in 0..rounds {
                    let put = s.put(format!("w{w}/{i}"), value(w, i));
                    if w % 2 == 0 {
                        blobcask::io::block_on(put).unwrap();
                    } else {
                        futures::executor::block_on(put).unwrap();
                    }
                }
            }));
        }
        // A current-thread runtime of its own.
        {
            let s = s.clone();
            threads.push(std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let tasks: Vec<_> = (4..12u64)
                        .map(|w| {
                            let s = s.clone();
                            async move {
                                for i in 0..rounds {
                                    s.put(format!("w{w}/{i}"), value(w, i)).await.unwrap();
                                }
                            }
                        })
                        .collect();
                    futures::future::join_all(tasks).await;
                });
            }));
        }
        rt.block_on(async {
            let tasks: Vec<_> = (12..44u64)
                .map(|w| {
                    let s = s.clone();
                    tokio::spawn(async move {
                        for i in 0..rounds {
                            s.put(format!("w{w}/{i}"), value(w, i)).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        for t in threads {
            t.join().unwrap();
        }
        rt.block_on(async {
            for w in 0..44u64 {
                for i in 0..rounds {
                    let got = s.get(format!("w{w}/{i}")).await.unwrap();
                    assert!(got == value(w, i), "w{w}/{i}");
                }
            }
            let versions = s.stats().commit_groups;
            assert!(versions > 0);
            s.close().await.unwrap();
        });
    }
}

#[test]
fn a_follower_told_to_lead_and_dropped_passes_the_lead_on() {
    per_engine_on_current_thread(|engine| async move {
        let t = temp_path();
        let s = open(&t, engine).await;
        let mut dropped = 0;
        let mut maybe = vec![];
        let mut acked = vec![];
        for round in 0..30u64 {
            let (ka, va) = (format!("a/{round}"), pattern(round, 100));
            let (kb, vb) = (format!("b/{round}"), pattern(500 + round, 200));
            // A leads and is left half way through its group; B queues
            // behind it as a follower.
            let mut a = Box::pin(s.put(ka.clone(), va.clone()));
            let mut b = Box::pin(s.put(kb.clone(), vb.clone()));
            let a_done = (&mut a).now_or_never();
            let b_done = (&mut b).now_or_never();
            if a_done.is_none() && b_done.is_none() {
                dropped += 1;
            }
            // Dropping A hands the lead to B (B's caller is told to
            // lead); dropping B before it acts must pass it on, or the
            // next put would wait for a leader that never comes.
            drop(a);
            drop(b);
            maybe.push((ka, va));
            maybe.push((kb, vb));
            let (kc, vc) = (format!("c/{round}"), pattern(900 + round, 3000));
            s.put(kc.clone(), vc.clone()).await.unwrap();
            acked.push((kc, vc));
        }
        assert!(
            dropped > 0,
            "never had a leader and a follower both in flight"
        );
        check(&s, &acked, &maybe).await;
        s.close().await.unwrap();
        let s = open(&t, engine).await;
        check(&s, &acked, &maybe).await;
        s.close().await.unwrap();
    });
}
