//! Thread-per-core: several tokio runtimes (one per thread, as tokio-uring
//! and other thread-per-core setups run them) share one store. Each
//! runtime's reactor takes the ring's completions for its own tasks
//! (driver invariant D3, per runtime), so none of them needs the driver's
//! fallback completion thread. The only test in this binary, so the check
//! of the process's threads sees nothing else.

mod common;

use std::sync::Barrier;

use blobcask::io::block_on;
use blobcask::{IoEngineKind, Store};
use common::*;

#[test]
fn runtimes_on_their_own_threads_share_a_store_without_a_completion_thread() {
    let t = temp_path();
    let s = block_on(Store::open(&t.path, options(IoEngineKind::IoUring))).unwrap();
    const THREADS: usize = 4;
    let start = std::sync::Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let (s, start) = (s.clone(), start.clone());
            std::thread::spawn(move || {
                let rt = if w == 0 {
                    // One multi-thread runtime among the current-thread ones.
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                } else {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                }
                .unwrap();
                start.wait();
                rt.block_on(async move {
                    let tasks: Vec<_> = (0..8)
                        .map(|task| {
                            let s = s.clone();
                            tokio::spawn(async move {
                                for i in 0..25u64 {
                                    let k = format!("w{w}/t{task}/{i}");
                                    let v = pattern(i * 131 + task, 5000 + i as usize * 97);
                                    s.put(&k, v.clone()).await.unwrap();
                                    assert_eq!(&s.get(&k).await.unwrap()[..], &v[..], "{k}");
                                    assert_eq!(
                                        &s.read(&k, 3, 4097).await.unwrap()[..],
                                        &v[3..4100]
                                    );
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        task.await.unwrap();
                    }
                });
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_no_fallback_thread();
    block_on(s.close()).unwrap();
}
