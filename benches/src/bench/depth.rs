//! The `depth` phase: random 4 KiB reads, 64 in flight, through the store
//! (64 futures in one task, and 64 spawned tasks) against fio and 64
//! threads of `O_DIRECT` pread, in rotating turns.

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::IoEngineKind;
use futures::StreamExt;

use blobcask_bench::figures::Figure;
use blobcask_bench::raw::{aligned, as_bytes_mut, open_direct, WrittenBlocks};
use rand::{Rng, SeedableRng};

use super::{engine_name, fresh, median, Config};

/// Random 4 KiB reads with 64 in flight: `Store::read` futures driven 64 at
/// a time by one task, and 64 spawned tasks reading one at a time, against
/// fio (io_uring, iodepth 64, direct) on the same written region of the
/// same file when fio is installed, and against 64 threads of O_DIRECT
/// pread in this process. The four take turns, a window each
/// per round, the first of each round rotating (this device's speed drifts
/// by 20 % within seconds, so rows timed in one window each could not be
/// compared); the table gives each row's median over the rounds, and the
/// ratios are medians of the ratios within each round.
pub(crate) async fn depth_phase(cfg: &Config, engine: IoEngineKind) {
    const DEPTH: usize = 64;
    let objects = if cfg.quick { 64 } else { 512 };
    let obj = 1usize << 20;
    let (store, path) = fresh(cfg, engine, (objects as u64 * obj as u64) * 2).await;
    let value = blobcask::Bytes::from(vec![7u8; obj]);
    for i in 0..objects {
        store.put(format!("obj/{i}"), value.clone()).await.unwrap();
    }
    let secs = Duration::from_secs(if cfg.quick { 2 } else { 5 });
    let rounds = if cfg.quick { 5 } else { 7 };

    // The baselines read written blocks only (see the read phase): 64
    // threads of pread in this process among all of them, fio in the
    // longest run of them (it takes one range).
    let file = Arc::new(open_direct(&path));
    let written = Arc::new(WrittenBlocks::of(&file).expect("the file's written blocks"));
    let (fio_offset, fio_size) = written.longest();

    let store_window = |seed: u64| {
        let store = store.clone();
        async move {
            let t = Instant::now();
            let done = Arc::new(AtomicU64::new(0));
            let reads = futures::stream::iter(0u64..)
                .take_while(|_| futures::future::ready(t.elapsed() < secs))
                .map(|i| {
                    let (store, done) = (store.clone(), done.clone());
                    async move {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 40 | i);
                        let key = format!("obj/{}", rng.random_range(0..objects));
                        let off = rng.random_range(0..(obj as u64 / 4096)) * 4096;
                        let got = store.read(&key, off, 4096).await.unwrap();
                        assert_eq!(got.len(), 4096);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .buffer_unordered(DEPTH);
            reads.for_each(|()| futures::future::ready(())).await;
            done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
        }
    };
    // The same reads as 64 spawned tasks, each reading one at a time, on
    // the bench's multi-thread runtime (2 workers): completions, checks
    // and copies spread over both workers, as in an application whose
    // requests are tasks of their own.
    let tasks_window = |seed: u64| {
        let store = store.clone();
        async move {
            let t = Instant::now();
            let done = Arc::new(AtomicU64::new(0));
            let tasks: Vec<_> = (0..DEPTH as u64)
                .map(|task| {
                    let (store, done) = (store.clone(), done.clone());
                    tokio::spawn(async move {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 40 | (200 + task));
                        while t.elapsed() < secs {
                            let key = format!("obj/{}", rng.random_range(0..objects));
                            let off = rng.random_range(0..(obj as u64 / 4096)) * 4096;
                            let got = store.read(&key, off, 4096).await.unwrap();
                            assert_eq!(got.len(), 4096);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
        }
    };
    let pread_window = |seed: u64| {
        let done = Arc::new(AtomicU64::new(0));
        let t = Instant::now();
        let threads: Vec<_> = (0..DEPTH as u64)
            .map(|i| {
                let (file, done, written) = (file.clone(), done.clone(), written.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed << 40 | (100 + i));
                    let mut buf = aligned(4096);
                    while t.elapsed() < secs {
                        let off = written.sample(&mut rng, 1);
                        file.read_exact_at(&mut as_bytes_mut(&mut buf)[..4096], off)
                            .unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
    };
    // fio on the same file, if installed.
    let fio_window = || {
        std::process::Command::new("fio")
            .args([
                "--name=depth",
                "--rw=randread",
                "--bs=4k",
                "--iodepth=64",
                "--ioengine=io_uring",
                "--direct=1",
                "--time_based",
                "--output-format=terse",
                "--terse-version=3",
            ])
            .arg(format!("--filename={}", path.display()))
            .arg(format!("--offset={fio_offset}"))
            .arg(format!("--size={fio_size}"))
            .arg(format!("--runtime={}", secs.as_secs()))
            .output()
            .ok()
            .filter(|o| o.status.success())
            // Terse v3: field 8 (1-based) is the read IOPS.
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split(';')
                    .nth(7)
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
    };

    // Per round: (store, pread threads, fio, store in spawned tasks).
    type Round = (f64, f64, Option<f64>, f64);
    let mut runs: Vec<Round> = Vec::new();
    for round in 0..rounds {
        let (mut st, mut pr, mut fi, mut ta) = (0.0, 0.0, None, 0.0);
        for turn in 0..4 {
            match (round + turn) % 4 {
                0 => st = store_window(round as u64).await,
                1 => pr = pread_window(round as u64),
                2 => fi = fio_window(),
                _ => ta = tasks_window(round as u64).await,
            }
        }
        runs.push((st, pr, fi, ta));
    }
    store.close().await.unwrap();

    let fio_all: Option<Vec<f64>> = runs.iter().map(|r| r.2).collect();
    println!(
        "depth: random 4 KiB reads, {DEPTH} in flight; {rounds} rounds of {}s windows taking turns; baselines on written blocks only ({} of them; fio on the longest run, {} MiB)",
        secs.as_secs(),
        written.blocks(),
        fio_size >> 20
    );
    println!("| path | median IOPS | median ratio to fio, same round | median ratio to 64 pread threads, same round | ratios to fio, each round |");
    println!("|---|---|---|---|---|");
    let to_fio = |pick: fn(&Round) -> f64| match &fio_all {
        Some(_) => {
            let each: Vec<f64> = runs
                .iter()
                .map(|r| pick(r) / r.2.unwrap_or(f64::NAN))
                .collect();
            let list = each
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ");
            (format!("{:.2}", median(each)), list)
        }
        None => ("–".into(), "–".into()),
    };
    let to_pread = |pick: fn(&Round) -> f64| median(runs.iter().map(|r| pick(r) / r.1).collect());
    if let Some(f) = &fio_all {
        println!(
            "| fio io_uring iodepth=64, direct | {:.0} | 1.00 | {:.2} | |",
            median(f.clone()),
            to_pread(|r| r.2.unwrap_or(f64::NAN))
        );
    } else {
        println!("| fio (not installed: apt-get install fio) | – | – | – | |");
    }
    let (pr_fio, pr_list) = to_fio(|r| r.1);
    println!(
        "| 64 threads of O_DIRECT pread | {:.0} | {pr_fio} | 1.00 | {pr_list} |",
        median(runs.iter().map(|r| r.1).collect())
    );
    let (st_fio, st_list) = to_fio(|r| r.0);
    println!(
        "| Store::read (async), 64 futures in flight | {:.0} | {st_fio} | {:.2} | {st_list} |",
        median(runs.iter().map(|r| r.0).collect()),
        to_pread(|r| r.0)
    );
    let (ta_fio, ta_list) = to_fio(|r| r.3);
    println!(
        "| Store::read (async), 64 spawned tasks, 2 workers | {:.0} | {ta_fio} | {:.2} | {ta_list} |",
        median(runs.iter().map(|r| r.3).collect()),
        to_pread(|r| r.3)
    );

    // The same figures as records: median IOPS, the median of the rounds'
    // ratios to fio (none without fio) and to the 64 pread threads.
    let e = engine_name(engine);
    let fio_median = fio_all.as_ref().map(|f| median(f.clone()));
    if let Some(f) = fio_median {
        let label = "fio io_uring iodepth=64, direct";
        cfg.figures
            .record(Figure::new("depth", "depth.qd64.fio", label, f, "IOPS").engine(e));
    }
    // (id, label, the row's IOPS in a round, runtime flavour)
    type Row<'a> = (&'a str, &'a str, fn(&Round) -> f64, Option<&'a str>);
    let rows: [Row; 3] = [
        (
            "pread_threads",
            "64 threads of O_DIRECT pread",
            |r| r.1,
            None,
        ),
        (
            "one_task",
            "Store::read (async), 64 futures in flight",
            |r| r.0,
            Some("multi-thread, block_on: one task, 64 futures"),
        ),
        (
            "spawned_tasks",
            "Store::read (async), 64 spawned tasks, 2 workers",
            |r| r.3,
            Some("multi-thread: 64 spawned tasks"),
        ),
    ];
    for (id, label, pick, runtime) in rows {
        let iops = median(runs.iter().map(pick).collect());
        let mut fig = Figure::new("depth", &format!("depth.qd64.{id}"), label, iops, "IOPS")
            .engine(e)
            .runtime(runtime);
        if let Some(f) = fio_median {
            let each = runs.iter().map(|r| pick(r) / r.2.unwrap_or(f64::NAN));
            fig = fig
                .baseline(f, "fio io_uring iodepth=64, direct (median)")
                .ratio(median(each.collect()));
        }
        cfg.figures.record(fig);
        if id != "pread_threads" {
            let threads = median(runs.iter().map(|r| r.1).collect());
            let id = format!("depth.qd64.{id}.vs_pread");
            cfg.figures.record(
                Figure::new("depth", &id, label, iops, "IOPS")
                    .baseline(threads, "64 threads of O_DIRECT pread (median)")
                    .ratio(to_pread(pick))
                    .engine(e)
                    .runtime(runtime),
            );
        }
    }
}
