//! The `growth` phase (only when asked for): filling a store that starts
//! at the default size and grows, against the same puts into one created
//! at its final size.

use std::time::{Duration, Instant};

use blobcask::{IoEngineKind, Options, Store};

use blobcask_bench::figures::Figure;

use super::Config;

/// Filling a store that starts at the default size and grows, against the
/// same puts into a store created at its final size, alternating rounds.
pub(crate) async fn growth_phase(cfg: &Config) {
    println!("\n## growth: puts into a growing store vs a preallocated one");
    let total: u64 = if cfg.quick { 128 << 20 } else { 512 << 20 };
    let rounds = if cfg.quick { 3 } else { 5 };
    let writers = 8u64;
    for size in [64u64 << 10, 1 << 20] {
        let n = total / size;
        let value = blobcask::Bytes::from(vec![0x5au8; size as usize]);
        let fill = |store: Store| {
            let value = value.clone();
            async move {
                let tasks: Vec<_> = (0..writers)
                    .map(|w| {
                        let (store, value) = (store.clone(), value.clone());
                        tokio::spawn(async move {
                            for i in (w..n).step_by(writers as usize) {
                                store
                                    .put(format!("obj/{i:08}"), value.clone())
                                    .await
                                    .unwrap();
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                store
            }
        };
        let (mut grow_t, mut pre_t, mut pre_open_t) = (Vec::new(), Vec::new(), Vec::new());
        let mut grown = 0;
        for _ in 0..rounds {
            let path = cfg.dir.join("growth.blobcask");
            let _ = std::fs::remove_file(&path);
            let t0 = Instant::now();
            let store = Store::open(&path, Options::new().io_engine(IoEngineKind::IoUring))
                .await
                .unwrap();
            let store = fill(store).await;
            grow_t.push(t0.elapsed());
            grown = store.stats().capacity;
            store.close().await.unwrap();
            std::fs::remove_file(&path).unwrap();

            let t0 = Instant::now();
            let store = Store::open(
                &path,
                Options::new()
                    .io_engine(IoEngineKind::IoUring)
                    .capacity(grown),
            )
            .await
            .unwrap();
            let opened = t0.elapsed();
            let store = fill(store).await;
            pre_open_t.push(t0.elapsed());
            pre_t.push(t0.elapsed() - opened);
            assert_eq!(store.stats().capacity, grown, "no growth when preallocated");
            store.close().await.unwrap();
            std::fs::remove_file(&path).unwrap();
        }
        for v in [&mut grow_t, &mut pre_t, &mut pre_open_t] {
            v.sort();
        }
        let med = |v: &Vec<Duration>| v[v.len() / 2].as_secs_f64();
        println!(
            "{:>5} KiB x {n:>5}, {writers} writers: growing from 16 MiB to {} MiB {:.3} s; preallocated {:.3} s (with its open {:.3} s); growing / preallocated {:.2} ({:.2} with the open) (medians of {rounds})",
            size >> 10,
            grown >> 20,
            med(&grow_t),
            med(&pre_t),
            med(&pre_open_t),
            med(&grow_t) / med(&pre_t),
            med(&grow_t) / med(&pre_open_t),
        );
        let label = format!(
            "{n} puts of {} KiB from {writers} writers into a growing store",
            size >> 10
        );
        cfg.figures.record(
            Figure::new(
                "growth",
                &format!("growth.{}k", size >> 10),
                &label,
                med(&grow_t),
                "s",
            )
            .baseline(
                med(&pre_t),
                "the same puts into a store created at its final size (median)",
            )
            .ratio(med(&grow_t) / med(&pre_t))
            .engine("io_uring"),
        );
    }
}
