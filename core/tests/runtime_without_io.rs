//! A tokio runtime built without I/O (no `enable_io`): the io_uring driver
//! cannot register its eventfd with that runtime's reactor, so the fallback
//! completion thread serves its tasks. tokio reports "no I/O" only by
//! panicking; the driver catches that panic and keeps it quiet, while every
//! other panic still reaches the application's hook. Its own binary: the
//! panic hook is the process's.
#![cfg(target_os = "linux")]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use blobcask::{IoEngineKind, Store};
use common::*;

#[test]
fn a_runtime_without_io_is_served_quietly_and_other_panics_still_reach_the_hook() {
    // The application's hook, set before the store is used.
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    std::panic::set_hook(Box::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    }));
    let t = temp_path();
    for multi_thread in [false, true] {
        let rt = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread().build()
        }
        .unwrap();
        rt.block_on(async {
            let s = Store::open(&t.path, options(IoEngineKind::IoUring))
                .await
                .unwrap();
            for i in 0..20u64 {
                let k = format!("k{i}");
                let v = pattern(i, 3000 + i as usize * 511);
                s.put(&k, v.clone()).await.unwrap();
                assert_eq!(&s.get(&k).await.unwrap()[..], &v[..]);
                assert_eq!(&s.read(&k, 1, 2000).await.unwrap()[..], &v[1..2001]);
            }
            s.close().await.unwrap();
        });
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the driver's expected panic reached the application's hook"
    );
    // Any other panic, on this thread or another, still does.
    assert!(std::panic::catch_unwind(|| panic!("the application's own")).is_err());
    std::thread::spawn(|| panic!("another thread's"))
        .join()
        .unwrap_err();
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}
