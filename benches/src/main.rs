//! Core-engine benchmark: blobcask next to the raw device, in one run.
//!
//! ```text
//! cargo run --release -p blobcask-bench -- [--dir DIR] [--quick] [--phase P] [--engine E] [--json FILE]
//! ```
//!
//! `--json FILE` appends one JSON record per figure measured to FILE
//! (`blobcask_bench::figures`); the printed tables are the same with or
//! without it. `benches/results.py` makes `benches/RESULTS.md` from the
//! records kept in `benches/results/figures/`.
//!
//! Phases (each reports blobcask and its raw baseline on the same file):
//! * `read`: random 4 KiB range reads, one in flight, through `Store::read`
//!   (awaited in a task, and in `block_on`), `blocking::Store::read` and a
//!   tokio current-thread runtime vs `pread` with `O_DIRECT` of random
//!   written blocks of the same store file; the rows take turns every 50
//!   reads so machine noise hits all of them. On
//!   Linux also `LocalStore::read` on a thread running `tokio_uring::start`
//!   (reads on that runtime's own ring), in the same rounds, next to
//!   tokio-uring's own `read_at` of 4 KiB on the same file (`O_DIRECT`),
//!   which tells the runtime's cost from the store's.
//! * `upload`: 64 MiB objects through `put` vs sequential `O_DIRECT`
//!   `pwrite` of the same bytes (1 MiB requests, 16 in flight) + fdatasync.
//! * `commit`: durable 16 KiB puts (overwrites: each key is put once,
//!   untimed, first) from 1, 16 and 64 concurrent writers vs one writer
//!   doing `O_DIRECT` write + fdatasync of 16 KiB into written space;
//!   with the io_uring engine, then one writer with every row taking turns
//!   (raw, raw io_uring floors of a put's I/O, blocking and async puts).
//! * `warm`: whole 16 KiB gets of 256 objects (5 passes, p50) through
//!   `blocking::Store::get` with the read cache off and with it warm, on
//!   the same store file, in alternating rounds.
//! * `backup` (only when asked for): `Store::backup` of stores holding
//!   512 MiB of 16 KiB, 1 MiB or 32 MiB objects vs a sequential copy of as
//!   many bytes of the store file (4 MiB O_DIRECT reads and writes, 4
//!   threads, destination preallocated, one fdatasync), alternating rounds.
//! * `fs`: random 4 KiB range reads of objects of several sizes through
//!   `blocking::Store::read` vs a file per object (open + pread + close, the
//!   page cache dropped first when running as root), interleaved rounds.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::{IoEngineKind, Options, Store};
use futures::StreamExt;

use blobcask_bench::figures::{slug, Figure, Sink};
use blobcask_bench::raw::{self, aligned, as_bytes, as_bytes_mut, open_direct, WrittenBlocks};
use rand::{Rng, SeedableRng};

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// CPU time (user + system) this process has used so far, every thread.
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[derive(Clone)]
struct Config {
    dir: PathBuf,
    quick: bool,
    phase: Option<String>,
    engine: Option<String>,
    /// Where each figure is recorded (`--json FILE`), besides the tables.
    figures: Arc<Sink>,
}

/// The engine's name as `--engine` takes it (records name the engine).
fn engine_name(engine: IoEngineKind) -> &'static str {
    match engine {
        IoEngineKind::IoUring => "io_uring",
        IoEngineKind::Portable => "portable",
        _ => "auto",
    }
}

fn main() {
    let mut cfg = Config {
        dir: PathBuf::from("target/bench"),
        quick: false,
        phase: None,
        engine: None,
        figures: Arc::new(Sink::none()),
    };
    let mut json = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => cfg.dir = PathBuf::from(args.next().expect("--dir DIR")),
            "--quick" => cfg.quick = true,
            "--phase" => cfg.phase = args.next(),
            "--engine" => cfg.engine = args.next(),
            "--json" => json = Some(PathBuf::from(args.next().expect("--json FILE"))),
            _ => {
                eprintln!(
                    "usage: blobcask-bench [--dir DIR] [--quick] [--phase read|upload|commit|depth|warm|fs|space|backup|growth] [--engine io_uring|portable] [--json FILE]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Some(path) = json {
        cfg.figures =
            Arc::new(Sink::append(&path, cfg.quick).expect("--json FILE: open for append"));
    }
    std::fs::create_dir_all(&cfg.dir).expect("bench dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (name, engine) in [
            ("io_uring", IoEngineKind::IoUring),
            ("portable", IoEngineKind::Portable),
        ] {
            if cfg.engine.as_deref().is_some_and(|e| e != name) {
                continue;
            }
            println!("\n## engine {name}");
            let run = |p: &str| cfg.phase.as_deref().is_none_or(|x| x == p);
            if run("read") {
                // In a task, as applications run: completions reach it
                // through the runtime's reactor on a worker thread.
                let c = cfg.clone();
                tokio::spawn(async move { read_phase(&c, engine).await })
                    .await
                    .unwrap();
            }
            if run("upload") {
                upload_phase(&cfg, engine).await;
            }
            if run("commit") {
                commit_phase(&cfg, engine).await;
            }
            if run("depth") {
                depth_phase(&cfg, engine).await;
            }
            if run("warm") {
                let c = cfg.clone();
                tokio::task::spawn_blocking(move || warm_phase(&c, engine))
                    .await
                    .unwrap();
            }
        }
        if cfg.phase.as_deref() == Some("space") {
            space_phase(&cfg).await;
        }
        if cfg.phase.as_deref() == Some("backup") {
            backup_phase(&cfg).await;
        }
        if cfg.phase.as_deref() == Some("growth") {
            growth_phase(&cfg).await;
        }
        if cfg.phase.as_deref().is_none_or(|p| p == "fs") {
            fs_phase(&cfg).await;
        }
    });
}

async fn fresh(cfg: &Config, engine: IoEngineKind, capacity: u64) -> (Store, PathBuf) {
    let path = cfg.dir.join("bench.blobcask");
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path, Options::new().capacity(capacity).io_engine(engine))
        .await
        .expect("open");
    (store, path)
}

/// Random 4 KiB reads with 64 in flight: `Store::read` futures driven 64 at
/// a time by one task, and 64 spawned tasks reading one at a time, against
/// fio (io_uring, iodepth 64, direct) on the same written region of the
/// same file when fio is installed, and against 64 threads of O_DIRECT
/// pread in this process. The four take turns, a window each
/// per round, the first of each round rotating (this device's speed drifts
/// by 20 % within seconds, so rows timed in one window each could not be
/// compared); the table gives each row's median over the rounds, and the
/// ratios are medians of the ratios within each round.
async fn depth_phase(cfg: &Config, engine: IoEngineKind) {
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

/// Space used per byte of values for many objects of one size (only with
/// `--phase space`): what the format costs on disk, data and metadata.
async fn space_phase(cfg: &Config) {
    println!("space: device bytes in use / value bytes, keys obj/NNNNNN");
    println!("| object size | objects | space amplification |");
    println!("|---|---|---|");
    for size in [4096usize, 16 << 10] {
        let objects = if cfg.quick { 2000 } else { 20_000 };
        let (store, _) = fresh(cfg, IoEngineKind::Portable, (objects * size * 2) as u64).await;
        let value = blobcask::Bytes::from(vec![5u8; size]);
        futures::stream::iter(0..objects)
            .map(|i| {
                let (store, value) = (store.clone(), value.clone());
                async move { store.put(format!("obj/{i:06}"), value).await.unwrap() }
            })
            .buffer_unordered(32)
            .for_each(|_| futures::future::ready(()))
            .await;
        let st = store.stats();
        println!(
            "| {size} | {objects} | {:.4} |",
            st.space_amplification().unwrap_or(0.0)
        );
        let amp = st.space_amplification().unwrap_or(f64::NAN);
        let label = format!("{size}-byte objects, {objects} of them");
        cfg.figures.record(
            Figure::new(
                "space",
                &format!("space.{size}"),
                &label,
                amp,
                "× value bytes",
            )
            .engine("portable"),
        );
        store.close().await.unwrap();
    }
}

async fn read_phase(cfg: &Config, engine: IoEngineKind) {
    let objects = if cfg.quick { 64 } else { 512 };
    let obj = 1usize << 20;
    let (store, path) = fresh(cfg, engine, (objects as u64 * obj as u64) * 2).await;
    let value = blobcask::Bytes::from(vec![7u8; obj]);
    for i in 0..objects {
        store.put(format!("obj/{i}"), value.clone()).await.unwrap();
    }
    let raw = open_direct(&path);
    // Only written blocks: a read of a fallocated-but-unwritten extent
    // returns zeros without touching the device and would flatter raw.
    // (Until 2026-11-25 raw read the file's first 64 MiB, of which the
    // store had written 78 %.)
    let written = WrittenBlocks::of(&raw).expect("the file's written blocks");
    println!(
        "raw reads: random blocks among the file's {} written ones (of {})",
        written.blocks(),
        raw.metadata().unwrap().len() / 4096
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut buf = aligned(8192);
    // The rows take turns every 50 reads (a few ms), so a drift of the
    // device's latency (this machine's changes within seconds) falls on
    // every row alike instead of on whichever ran then.
    let rounds = if cfg.quick { 80 } else { 200 };
    let per = 50;
    let blocking = blobcask::blocking::Store::from(store.clone());
    #[cfg(target_os = "linux")]
    let uring = local_reader(store.clone(), &path);
    let (mut t_local, mut t_uring_raw): (Vec<Duration>, Vec<Duration>) = (vec![], vec![]);
    let (mut cpu_local, mut cpu_uring_raw) = (Duration::ZERO, Duration::ZERO);
    // The current-thread runtime reads a store of its own (the same
    // objects): a ring whose eventfd this process's multi-thread runtime
    // also watches wakes that runtime's reactor at every completion too,
    // which is a cost of sharing one store between runtimes, not of a
    // current-thread runtime.
    let current = current_thread_reader(
        cfg.dir.join("current-thread.blobcask"),
        engine,
        objects,
        obj,
    );
    let (mut t_current, mut cpu_current) = (vec![], Duration::ZERO);
    let (mut t_task, mut t_task_unaligned, mut cpu_task) = (vec![], vec![], Duration::ZERO);
    let (mut t_raw, mut t_raw2, mut t_bc, mut t_bc_unaligned, mut t_blocking) =
        (vec![], vec![], vec![], vec![], vec![]);
    // CPU time (user + system, every thread of the process) of the rows
    // that run on this thread's runtime: raw, async, blocking.
    let (mut cpu_raw, mut cpu_bc, mut cpu_blocking) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let cpu = process_cpu();
        for _ in 0..per {
            let off = written.sample(&mut rng, 1);
            let b = &mut as_bytes_mut(&mut buf)[..4096];
            let t = Instant::now();
            raw.read_exact_at(b, off).unwrap();
            t_raw.push(t.elapsed());
        }
        cpu_raw += process_cpu() - cpu;
        // The device work of a 4 KiB read at an unaligned offset: the two
        // blocks it straddles, in one request.
        for _ in 0..per {
            let off = written.sample(&mut rng, 2);
            let b = &mut as_bytes_mut(&mut buf)[..8192];
            let t = Instant::now();
            raw.read_exact_at(b, off).unwrap();
            t_raw2.push(t.elapsed());
        }
        let cpu = process_cpu();
        for _ in 0..per {
            let key = format!("obj/{}", rng.random_range(0..objects));
            let off = rng.random_range(0..(obj as u64 / 4096)) * 4096;
            let t = Instant::now();
            let got = store.read(&key, off, 4096).await.unwrap();
            t_bc.push(t.elapsed());
            assert_eq!(got.len(), 4096);
        }
        cpu_bc += process_cpu() - cpu;
        let cpu = process_cpu();
        for _ in 0..per {
            let key = format!("obj/{}", rng.random_range(0..objects));
            let off = rng.random_range(0..(obj as u64 / 4096)) * 4096;
            let t = Instant::now();
            let got = blocking.read(&key, off, 4096).unwrap();
            t_blocking.push(t.elapsed());
            assert_eq!(got.len(), 4096);
        }
        cpu_blocking += process_cpu() - cpu;
        for _ in 0..per {
            let key = format!("obj/{}", rng.random_range(0..objects));
            let off = rng.random_range(0..obj as u64 - 4096);
            let t = Instant::now();
            let got = store.read(&key, off, 4096).await.unwrap();
            t_bc_unaligned.push(t.elapsed());
            assert_eq!(got.len(), 4096);
        }
        #[cfg(target_os = "linux")]
        {
            let reads = random_reads(&mut rng, per, objects, obj, true);
            let raw_offsets = (0..per).map(|_| written.sample(&mut rng, 1)).collect();
            let ((local, cpu_l), (raw, cpu_r)) = uring.round((reads, raw_offsets)).await;
            t_local.extend(local);
            t_uring_raw.extend(raw);
            cpu_local += cpu_l;
            cpu_uring_raw += cpu_r;
        }
        let reads = random_reads(&mut rng, per, objects, obj, true);
        let (times, cpu) = current.round(reads).await;
        t_current.extend(times);
        cpu_current += cpu;
        // The same in a task of this runtime (on a worker thread, which
        // drives the reactor itself when it has nothing else to run; the
        // rows above await in `block_on`, whose thread does not).
        let reads = random_reads(&mut rng, per, objects, obj, true);
        let unaligned = random_reads(&mut rng, per, objects, obj, false);
        let task_store = store.clone();
        let ((times, cpu), (times_u, _)) = tokio::spawn(async move {
            let s = &task_store;
            let read = |key: String, off| async move { s.read(&key, off, 4096).await };
            (
                timed_reads(reads, read).await,
                timed_reads(unaligned, read).await,
            )
        })
        .await
        .expect("reader task");
        t_task.extend(times);
        t_task_unaligned.extend(times_u);
        cpu_task += cpu;
    }
    for v in [
        &mut t_raw,
        &mut t_raw2,
        &mut t_bc,
        &mut t_bc_unaligned,
        &mut t_blocking,
        &mut t_local,
        &mut t_uring_raw,
        &mut t_current,
        &mut t_task,
        &mut t_task_unaligned,
    ] {
        v.sort();
    }
    println!(
        "read: random 4 KiB, 1 in flight, {} samples each",
        t_raw.len()
    );
    println!(
        "| path | p50 µs | p99 µs | p50 ratio to raw 4 KiB | p50 ratio to raw of the same blocks |"
    );
    println!("|---|---|---|---|---|");
    let raw50 = us(pct(&t_raw, 0.5));
    let raw2_50 = us(pct(&t_raw2, 0.5));
    // Each row: (figure id, label, samples, p50 of raw reads of the same
    // blocks, runtime flavour).
    let (task, block_on) = (
        Some("multi-thread, spawned task"),
        Some("multi-thread, block_on"),
    );
    let mut rows = vec![
        ("raw", "raw pread O_DIRECT, 4 KiB", &t_raw, raw50, None),
        (
            "raw_2_blocks",
            "raw pread O_DIRECT, 2 blocks (8 KiB)",
            &t_raw2,
            raw2_50,
            None,
        ),
        (
            "async.task",
            "Store::read (async) in a task, 4 KiB-aligned offset",
            &t_task,
            raw50,
            task,
        ),
        (
            "async.task.unaligned",
            "Store::read (async) in a task, any offset (2 blocks)",
            &t_task_unaligned,
            raw2_50,
            task,
        ),
        (
            "blocking",
            "blocking::Store::read, 4 KiB-aligned offset",
            &t_blocking,
            raw50,
            None,
        ),
        (
            "async.block_on",
            "Store::read (async) in block_on, 4 KiB-aligned offset",
            &t_bc,
            raw50,
            block_on,
        ),
        (
            "async.block_on.unaligned",
            "Store::read (async) in block_on, any offset (2 blocks)",
            &t_bc_unaligned,
            raw2_50,
            block_on,
        ),
        (
            "async.current_thread",
            "Store::read (async) on a tokio current-thread runtime",
            &t_current,
            raw50,
            Some("current-thread"),
        ),
    ];
    if !t_local.is_empty() {
        rows.push((
            "tokio_uring.read_at",
            "tokio-uring read_at O_DIRECT, 4 KiB",
            &t_uring_raw,
            raw50,
            Some("tokio-uring"),
        ));
        rows.push((
            "tokio_uring.local_store",
            "tokio-uring LocalStore::read, 4 KiB-aligned offset",
            &t_local,
            raw50,
            Some("tokio-uring"),
        ));
    }
    let e = engine_name(engine);
    for (id, name, v, same, runtime) in rows {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {:.2} |",
            us(pct(v, 0.5)),
            us(pct(v, 0.99)),
            us(pct(v, 0.5)) / raw50,
            us(pct(v, 0.5)) / same
        );
        let (p50, p99) = (us(pct(v, 0.5)), us(pct(v, 0.99)));
        cfg.figures.record(
            Figure::new("read", &format!("read.qd1.{id}"), name, p50, "µs p50")
                .baseline(same, "raw pread O_DIRECT of the same blocks, p50")
                .ratio(p50 / same)
                .engine(e)
                .runtime(runtime),
        );
        cfg.figures.record(
            Figure::new("read", &format!("read.qd1.{id}.p99"), name, p99, "µs p99")
                .engine(e)
                .runtime(runtime),
        );
    }
    let n = t_raw.len() as f64;
    let per_read = |d: Duration| us(d) / n;
    println!(
        "CPU per 4 KiB read (user + system, whole process): raw {:.1} µs; async Store::read in a task {:.1} µs ({:.2} x raw), in block_on {:.1} µs ({:.2} x raw); blocking {:.1} µs ({:.2} x raw); async on a current-thread runtime {:.1} µs ({:.2} x raw)",
        per_read(cpu_raw),
        per_read(cpu_task),
        per_read(cpu_task) / per_read(cpu_raw),
        per_read(cpu_bc),
        per_read(cpu_bc) / per_read(cpu_raw),
        per_read(cpu_blocking),
        per_read(cpu_blocking) / per_read(cpu_raw),
        per_read(cpu_current),
        per_read(cpu_current) / per_read(cpu_raw),
    );
    let mut cpu_rows = vec![
        ("raw", "raw pread O_DIRECT, 4 KiB", cpu_raw, None),
        (
            "async.task",
            "Store::read (async) in a task",
            cpu_task,
            task,
        ),
        (
            "async.block_on",
            "Store::read (async) in block_on",
            cpu_bc,
            block_on,
        ),
        ("blocking", "blocking::Store::read", cpu_blocking, None),
        (
            "async.current_thread",
            "Store::read (async) on a tokio current-thread runtime",
            cpu_current,
            Some("current-thread"),
        ),
    ];
    if !t_local.is_empty() {
        let uring = Some("tokio-uring");
        cpu_rows.push((
            "tokio_uring.read_at",
            "tokio-uring read_at",
            cpu_uring_raw,
            uring,
        ));
        cpu_rows.push((
            "tokio_uring.local_store",
            "tokio-uring LocalStore::read",
            cpu_local,
            uring,
        ));
    }
    for (id, name, cpu, runtime) in cpu_rows {
        let id = format!("read.qd1.cpu.{id}");
        cfg.figures.record(
            Figure::new("read", &id, name, per_read(cpu), "µs CPU per read")
                .baseline(per_read(cpu_raw), "raw pread O_DIRECT, CPU per read")
                .ratio(per_read(cpu) / per_read(cpu_raw))
                .engine(e)
                .runtime(runtime),
        );
    }
    if !t_local.is_empty() {
        println!(
            "CPU per 4 KiB read on tokio-uring's runtime: its own read_at {:.1} µs ({:.2} x raw); LocalStore::read {:.1} µs ({:.2} x raw)",
            per_read(cpu_uring_raw),
            per_read(cpu_uring_raw) / per_read(cpu_raw),
            per_read(cpu_local),
            per_read(cpu_local) / per_read(cpu_raw),
        );
    }
    store.close().await.unwrap();
}

/// A thread of its own that answers requests one at a time (a round of
/// reads on another runtime), so that its rounds interleave with the read
/// phase's others. Dropped, it ends the thread and waits for it.
struct RoundThread<Req, Resp> {
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
    async fn round(&self, req: Req) -> Resp {
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
type Timed = (Vec<Duration>, Duration);

/// `n` random 4 KiB reads of the read phase's objects (`objects` of `obj`
/// bytes, named `obj/{i}`): each a key and an offset, block-aligned or any.
fn random_reads(
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
async fn timed_reads<F>(reads: Vec<(String, u64)>, read: impl Fn(String, u64) -> F) -> Timed
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

/// `Store::read` on a tokio current-thread runtime of its own, of a store
/// of its own at `path` holding the same objects as the read phase's: the
/// async row without the multi-thread scheduler's hand-offs between
/// workers. Each request is the (key, offset) of each 4 KiB read.
fn current_thread_reader(
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
type LocalRound = (Vec<(String, u64)>, Vec<u64>);

/// `LocalStore::read` inside `tokio_uring::start` (the runtime the handle
/// is for), then tokio-uring's own `read_at` of raw offsets.
#[cfg(target_os = "linux")]
fn local_reader(store: Store, path: &std::path::Path) -> RoundThread<LocalRound, (Timed, Timed)> {
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

async fn upload_phase(cfg: &Config, engine: IoEngineKind) {
    let obj = 64usize << 20;
    let count = if cfg.quick { 2 } else { 8 };
    let total = obj * count;
    let (store, path) = fresh(cfg, engine, total as u64 * 3).await;
    let value = blobcask::Bytes::from(vec![3u8; obj]);
    // Warm-up put so the first extent writes are not only in one figure.
    store.put("warm", value.clone()).await.unwrap();
    store.delete("warm").await.unwrap();
    let t = Instant::now();
    for i in 0..count {
        store.put(format!("big/{i}"), value.clone()).await.unwrap();
    }
    let bc = t.elapsed();
    store.close().await.unwrap();

    // Raw: the same bytes, sequential O_DIRECT pwrite of 1 MiB requests,
    // 16 threads in flight, into the heap region blobcask just wrote (so
    // raw rewrites initialised extents while blobcask wrote fresh ones: the
    // ratio is conservative); once with one fdatasync at the
    // end, once with an fdatasync after every 64 MiB (durable per object,
    // as each put is).
    let chunk = 1u64 << 20;
    let base = 64u64 << 20;
    let rw_one_sync = raw::sequential_write(&path, base, total as u64, chunk, 16);
    let rw_sync_each = (0..count as u64)
        .map(|o| raw::sequential_write(&path, base + o * obj as u64, obj as u64, chunk, 16))
        .sum::<Duration>();
    let mbs = |d: Duration| total as f64 / d.as_secs_f64() / (1 << 20) as f64;
    println!("upload: {count} x 64 MiB");
    println!("| path | MiB/s | ratio to raw (one sync) | ratio to raw (sync per object) |");
    println!("|---|---|---|---|");
    println!(
        "| raw O_DIRECT pwrite 1 MiB x16, one fdatasync at the end | {:.0} | 1.00 | |",
        mbs(rw_one_sync)
    );
    println!(
        "| raw O_DIRECT pwrite 1 MiB x16, fdatasync per 64 MiB | {:.0} | | 1.00 |",
        mbs(rw_sync_each)
    );
    println!(
        "| Store::put (durable) | {:.0} | {:.2} | {:.2} |",
        mbs(bc),
        mbs(bc) / mbs(rw_one_sync),
        mbs(bc) / mbs(rw_sync_each)
    );
    for (id, raw, of) in [
        (
            "upload.put.sync_per_object",
            rw_sync_each,
            "raw O_DIRECT pwrite 1 MiB x16, fdatasync per 64 MiB",
        ),
        (
            "upload.put.one_sync",
            rw_one_sync,
            "raw O_DIRECT pwrite 1 MiB x16, one fdatasync at the end",
        ),
    ] {
        let label = format!("Store::put (durable), {count} x 64 MiB");
        cfg.figures.record(
            Figure::new("upload", id, &label, mbs(bc), "MiB/s")
                .baseline(mbs(raw), of)
                .ratio(mbs(bc) / mbs(raw))
                .engine(engine_name(engine))
                .runtime(Some("multi-thread, block_on")),
        );
    }
}

/// Whole 16 KiB gets, blocking API, same file: the read cache off (every
/// get reads the device) against the cache on, cold (the first read of
/// each object, a miss) and warm (after a second pass admitted them, every
/// get a hit, as shared bytes and as owned bytes, the copy the Node binding
/// asks for).
fn warm_phase(cfg: &Config, engine: IoEngineKind) {
    use blobcask::blocking::Store as Blocking;
    use blobcask::ReadOptions;
    let path = cfg.dir.join("warm.blobcask");
    let _ = std::fs::remove_file(&path);
    let keys: Vec<String> = (0..1024).map(|i| format!("warm/{i}")).collect();
    let open = |cache: u64| {
        Blocking::open(
            &path,
            Options::new()
                .capacity(256 << 20)
                .io_engine(engine)
                .cache_bytes(cache),
        )
        .expect("open")
    };
    let s = open(0);
    for k in &keys {
        s.put(k, vec![7u8; 16 << 10]).unwrap();
    }
    s.close().unwrap();
    let p50 = |s: &Blocking, passes: usize, options: ReadOptions| {
        let mut t = Vec::with_capacity(keys.len() * passes);
        for _ in 0..passes {
            for k in &keys {
                let a = Instant::now();
                std::hint::black_box(s.read_with(k, 0, u64::MAX, options).unwrap());
                t.push(a.elapsed().as_secs_f64() * 1e6);
            }
        }
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let shared = ReadOptions::default();
    let owned = ReadOptions::default().owned(true);
    println!("warm: 16 KiB get p50 (µs), blocking API, 1024 objects");
    println!(
        "| round | cache off (device) | cache on, miss | miss / off | hit | hit, owned | hit / off | cache bytes held |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for round in 0..if cfg.quick { 2 } else { 5 } {
        let off = open(0);
        let device = p50(&off, 1, shared);
        off.close().unwrap();
        let on = open(64 << 20);
        // The first whole read of each object: a miss, not kept.
        let miss = p50(&on, 1, shared);
        // The second keeps it.
        for k in &keys {
            on.get(k).unwrap();
        }
        let hit = p50(&on, 5, shared);
        let hit_owned = p50(&on, 5, owned);
        let held = on.stats().cache.bytes;
        on.close().unwrap();
        println!(
            "| {round} | {device:.1} | {miss:.1} | {:.3} | {hit:.2} | {hit_owned:.2} | {:.4} | {held} |",
            miss / device,
            hit / device
        );
        let off = "cache off (every get reads the device), p50";
        cfg.figures.record(
            Figure::new("warm", "warm.get16k.off", off, device, "µs p50")
                .engine(engine_name(engine)),
        );
        for (id, label, p50) in [
            ("warm.get16k.miss", "cache on, miss", miss),
            ("warm.get16k.hit", "cache on, hit", hit),
            (
                "warm.get16k.hit_owned",
                "cache on, hit, owned bytes",
                hit_owned,
            ),
        ] {
            cfg.figures.record(
                Figure::new("warm", id, label, p50, "µs p50")
                    .baseline(device, off)
                    .ratio(p50 / device)
                    .engine(engine_name(engine)),
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}

async fn commit_phase(cfg: &Config, engine: IoEngineKind) {
    let size = 16usize << 10;
    let secs = Duration::from_secs(if cfg.quick { 2 } else { 5 });
    let (store, path) = fresh(cfg, engine, 4 << 30).await;
    let value = blobcask::Bytes::from(vec![9u8; size]);
    let mut results = vec![];
    // Per writer count: the groups the store wrote (puts, and 4 KiB
    // tuple-block writes, per group), which the device floor replays.
    let mut shapes = vec![];
    for writers in [1usize, 16, 64] {
        // Untimed, each writer's 512 keys once: the timed puts overwrite,
        // so their values go into space written before, as the raw
        // baseline's do (a put into never-written space pays the file
        // system's extent conversion, measured apart in
        // benches/log/2026-11-25-baselines-written-space.md).
        let warm: Vec<_> = (0..writers)
            .map(|w| {
                let (store, value) = (store.clone(), value.clone());
                tokio::spawn(async move {
                    for i in 0..512 {
                        store.put(format!("w{w}/{i}"), value.clone()).await.unwrap();
                    }
                })
            })
            .collect();
        for t in warm {
            t.await.unwrap();
        }
        let before = store.stats();
        let (rate, puts) = writers_window(&store, &value, writers, secs).await;
        results.push((writers, rate));
        let after = store.stats();
        let groups = (after.commit_groups - before.commit_groups).max(1) as f64;
        let meta = (after.device_bytes_written - before.device_bytes_written)
            .saturating_sub(after.user_bytes_written - before.user_bytes_written);
        let blocks = meta as f64 / 4096.0;
        shapes.push((
            writers,
            (puts / groups).round().max(1.0) as u64,
            (blocks / groups).round().max(1.0) as u64,
        ));
    }
    // Many writers against one raw writer, taking turns.
    let many = many_writers_in_turns(
        &store,
        &value,
        &cfg.dir,
        secs,
        if cfg.quick { 3 } else { 5 },
    )
    .await;
    // One writer, rows taking turns (the device drifts within seconds).
    // Its floors are the io_uring engine's I/O: only with that engine.
    #[cfg(target_os = "linux")]
    let turns = if engine == IoEngineKind::IoUring {
        let (store, dir) = (store.clone(), cfg.dir.clone());
        tokio::task::spawn_blocking(move || one_writer_in_turns(&store, &dir, secs))
            .await
            .unwrap()
    } else {
        Vec::new()
    };
    store.close().await.unwrap();

    // Raw: one writer, 16 KiB O_DIRECT write + fdatasync into already
    // written space of the same file (64 to 128 MiB in; the floors below
    // write 64 to 256 MiB in). A write into an unwritten extent costs a
    // file-system journal commit at its sync (about 2 x here), so a
    // baseline there would flatter the store.
    let raw = open_direct(&path);
    let written = WrittenBlocks::of(&raw).expect("the file's written blocks");
    assert!(
        written.covers(64 << 20, 192 << 20),
        "the commit phase's baselines need 64..256 MiB of the store file written"
    );
    let buf = aligned(size);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut n = 0u64;
    let t = Instant::now();
    while t.elapsed() < secs {
        let off = (64u64 << 20) + rng.random_range(0..4096u64) * size as u64;
        raw.write_all_at(as_bytes(&buf), off).unwrap();
        raw.sync_data().unwrap();
        n += 1;
    }
    let raw_rate = n as f64 / t.elapsed().as_secs_f64();
    println!("commit: durable 16 KiB puts");
    println!("| path | ops/s | ratio to raw 1-writer write+fdatasync |");
    println!("|---|---|---|");
    println!("| raw O_DIRECT write + fdatasync, 1 writer | {raw_rate:.0} | 1.00 |");
    let e = engine_name(engine);
    let raw_of = "raw O_DIRECT write + fdatasync, 1 writer";
    // Rows with a window of their own, as records.
    let window = |id: String, label: &str, rate: f64, runtime: Option<&str>| {
        Figure::new("commit", &id, label, rate, "ops/s")
            .baseline(raw_rate, raw_of)
            .ratio(rate / raw_rate)
            .engine(e)
            .runtime(runtime)
    };
    for (w, r) in results {
        println!(
            "| Store::put (async), {w} writers | {r:.0} | {:.2} |",
            r / raw_rate
        );
        let label = format!("Store::put (async), {w} writers");
        let spawned = Some("multi-thread, spawned tasks");
        cfg.figures
            .record(window(format!("commit.window.{w}w"), &label, r, spawned));
    }
    #[cfg(target_os = "linux")]
    let shapes: Vec<_> = shapes.into_iter().filter(|&(w, _, _)| w > 1).collect();
    for (name, rate) in uring_floor::rates(&path, secs, &shapes) {
        println!("| {name} | {rate:.0} | {:.2} |", rate / raw_rate);
        let id = format!("commit.window.floor.{}", slug(&name));
        cfg.figures.record(window(id, &name, rate, None));
    }
    println!(
        "\ncommit: many writers and one raw writer taking turns, {} rounds of {}s windows (order rotating); ratios within each round",
        many.len(),
        secs.as_secs()
    );
    println!("| path | median ops/s | median ratio to raw 1-writer write+fdatasync, same round | ratios, each round |");
    println!("|---|---|---|---|");
    println!(
        "| raw O_DIRECT write + fdatasync, 1 writer | {:.0} | 1.00 | |",
        median(many.iter().map(|r| r[0]).collect())
    );
    for (col, w) in [(1usize, 16), (2, 64)] {
        let each: Vec<f64> = many.iter().map(|r| r[col] / r[0]).collect();
        let list = each
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "| Store::put (async), {w} writers | {:.0} | {:.2} | {list} |",
            median(many.iter().map(|r| r[col]).collect()),
            median(each)
        );
        let label = format!("Store::put (async), {w} writers, in turns with one raw writer");
        let id = format!("commit.turns.{w}w");
        let rate = median(many.iter().map(|r| r[col]).collect());
        let raw = median(many.iter().map(|r| r[0]).collect());
        let ratio = median(many.iter().map(|r| r[col] / r[0]).collect());
        let of = "raw O_DIRECT write + fdatasync, 1 writer, same rounds (median)";
        cfg.figures.record(
            Figure::new("commit", &id, &label, rate, "ops/s")
                .baseline(raw, of)
                .ratio(ratio)
                .engine(e)
                .runtime(Some("multi-thread, spawned tasks")),
        );
    }
    #[cfg(target_os = "linux")]
    if !turns.is_empty() {
        println!(
            "\ncommit: one durable writer of 16 KiB puts, rows taking turns every {TURN} puts"
        );
        println!("| path | p50 µs | ratio (raw p50 / row p50) |");
        println!("|---|---|---|");
        let base = turns.first().map_or(f64::NAN, |r| r.1);
        for (name, p50) in turns {
            println!("| {name} | {p50:.1} | {:.2} |", base / p50);
            // The ratio is raw p50 / row p50: a rate ratio, as above.
            let runtime = name.contains("current-thread").then_some("current-thread");
            let id = format!("commit.1w_turns.{}", slug(&name));
            cfg.figures.record(
                Figure::new("commit", &id, &name, p50, "µs p50")
                    .baseline(base, "raw: pwrite 16 KiB + fdatasync, p50")
                    .ratio(base / p50)
                    .engine(e)
                    .runtime(runtime),
            );
        }
    }
}

/// The median of rates or ratios (the upper one of an even count); NaN
/// for none.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `writers` tasks putting 16 KiB values (keys `w{w}/{0..512}`, each put
/// once before) for `secs`: puts per second and puts done.
async fn writers_window(
    store: &Store,
    value: &blobcask::Bytes,
    writers: usize,
    secs: Duration,
) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + secs;
    let t = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (store, value, done) = (store.clone(), value.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < stop {
                    // A bounded key space: later rounds overwrite.
                    store
                        .put(format!("w{w}/{}", i % 512), value.clone())
                        .await
                        .unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let puts = done.load(Ordering::Relaxed) as f64;
    (puts / t.elapsed().as_secs_f64(), puts)
}

/// Rounds of three windows in rotating order: one raw writer (16 KiB
/// O_DIRECT write + `fdatasync` at random places of a file of its own,
/// written in full before), 16 and 64 writers putting into `store` (whose
/// keys for them were put before). Each round: [raw, 16, 64] ops/s.
async fn many_writers_in_turns(
    store: &Store,
    value: &blobcask::Bytes,
    dir: &std::path::Path,
    secs: Duration,
    rounds: usize,
) -> Vec<[f64; 3]> {
    const RAW_FILE: u64 = 64 << 20;
    let path = dir.join("raw-writers.bin");
    std::fs::File::create(&path).expect("raw writer file");
    raw::sequential_write(&path, 0, RAW_FILE, 1 << 20, 1);
    let file = Arc::new(open_direct(&path));
    let mut out = Vec::new();
    for round in 0..rounds {
        let mut row = [0.0; 3];
        for turn in 0..3 {
            let which = (round + turn) % 3;
            row[which] = match which {
                0 => {
                    let file = file.clone();
                    tokio::task::spawn_blocking(move || {
                        let buf = aligned(16 << 10);
                        let mut rng = rand::rngs::StdRng::seed_from_u64(round as u64);
                        let (t, mut n) = (Instant::now(), 0u64);
                        while t.elapsed() < secs {
                            let off = rng.random_range(0..RAW_FILE / (16 << 10)) * (16 << 10);
                            file.write_all_at(as_bytes(&buf), off).unwrap();
                            file.sync_data().unwrap();
                            n += 1;
                        }
                        n as f64 / t.elapsed().as_secs_f64()
                    })
                    .await
                    .unwrap()
                }
                1 => writers_window(store, value, 16, secs).await.0,
                _ => writers_window(store, value, 64, secs).await.0,
            };
        }
        out.push(row);
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    out
}

/// Puts (or raw writes) per turn of [`one_writer_in_turns`].
#[cfg(target_os = "linux")]
const TURN: usize = 50;

/// One durable writer, every row in turn, `TURN` operations at a time, for
/// about `secs` per row in all: (row, p50 µs), the raw baseline first.
/// Raw rows write a file of their own (`dir/raw-writer.bin`, written once
/// before, so no row pays for never-written space); store rows put the
/// same 512 keys, each put once before.
#[cfg(target_os = "linux")]
fn one_writer_in_turns(store: &Store, dir: &std::path::Path, secs: Duration) -> Vec<(String, f64)> {
    use raw::{Ring, SyncBy};
    const RAW_FILE: u64 = 256 << 20;
    let path = dir.join("raw-writer.bin");
    std::fs::File::create(&path).expect("raw writer file");
    raw::sequential_write(&path, 0, RAW_FILE, 1 << 20, 1);
    let file = open_direct(&path);
    let mut ring = Ring::new(open_direct(&path));
    let (value, image) = (aligned(16384), aligned(4096));
    // Values over the first 64 MiB, tuple-block images over 4 MiB after.
    let value_at = |n: u64| (n * 7919 % 4096) * 16384;
    let image_at = |n: u64| (200 << 20) + (n * 31 % 1024) * 4096;

    let blocking = blobcask::blocking::Store::from(store.clone());
    let bytes = blobcask::Bytes::from(vec![9u8; 16384]);
    for k in 0..512 {
        blocking.put(format!("t/{k}"), bytes.clone()).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime");
    let names = [
        "raw: pwrite 16 KiB + fdatasync",
        "raw io_uring: write 16 KiB, then fsync through the ring",
        "raw io_uring: 16 KiB + 4 KiB writes at once, then fdatasync(2) (the blocking put's I/O)",
        "raw io_uring: 16 KiB + 4 KiB writes at once, then fsync through the ring (the async put's I/O)",
        "blocking::Store::put, keys in turn",
        "blocking::Store::put, random keys",
        "Store::put (async) on a tokio current-thread runtime, keys in turn",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (t, mut n) = (Instant::now(), 0u64);
    while t.elapsed() < secs * names.len() as u32 {
        for (row, times) in times.iter_mut().enumerate() {
            for _ in 0..TURN {
                n += 1;
                let key = format!("t/{}", n % 512);
                let start = Instant::now();
                match row {
                    0 => {
                        file.write_all_at(as_bytes(&value), value_at(n)).unwrap();
                        file.sync_data().unwrap();
                    }
                    1 => ring.write_then_sync(&[(&value, value_at(n))], SyncBy::Ring),
                    2 | 3 => {
                        let sync = if row == 2 {
                            SyncBy::Syscall
                        } else {
                            SyncBy::Ring
                        };
                        ring.write_then_sync(&[(&value, value_at(n)), (&image, image_at(n))], sync);
                    }
                    4 => {
                        blocking.put(key, bytes.clone()).unwrap();
                    }
                    5 => {
                        let key = format!("t/{}", rng.random_range(0..512u32));
                        blocking.put(key, bytes.clone()).unwrap();
                    }
                    _ => {
                        rt.block_on(store.put(key, bytes.clone())).unwrap();
                    }
                }
                times.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    drop(ring);
    let _ = std::fs::remove_file(&path);
    names
        .iter()
        .zip(times)
        .map(|(name, mut t)| {
            t.sort_by(f64::total_cmp);
            (
                name.to_string(),
                t.get(t.len() / 2).copied().unwrap_or(f64::NAN),
            )
        })
        .collect()
}

/// What io_uring itself gives on this machine, without the store: the
/// floors the commit phase's rows are read against.
#[cfg(target_os = "linux")]
mod uring_floor {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use blobcask::io::AlignedBuf;

    /// Offset of the `n`th 16 KiB write: written space of the store file
    /// (the store is closed by then), 64 MiB in.
    fn at(n: u64) -> u64 {
        (64 << 20) + (n * 7919 % 4096) * 16384
    }

    /// (row name, puts per second) on tokio-uring's own runtime:
    /// * one writer doing a 16 KiB write then `sync_data`, awaited (the
    ///   runtime's floor for one durable put);
    /// * per `(writers, puts, blocks)` of `shapes`, the groups the store
    ///   wrote for that many writers: `puts` values of 16 KiB (spread over
    ///   the file, then side by side) and `blocks` 4 KiB tuple-block
    ///   writes spread over it, issued at once, then one `sync_data` (the
    ///   device's floor for that row).
    pub fn rates(path: &Path, secs: Duration, shapes: &[(usize, u64, u64)]) -> Vec<(String, f64)> {
        let file = super::open_direct(path);
        let shapes = shapes.to_vec();
        std::thread::spawn(move || {
            tokio_uring::start(async move {
                let file = tokio_uring::fs::File::from_std(file);
                let mut out = Vec::new();
                let mut buf = AlignedBuf::zeroed(16384);
                let (t, mut n) = (Instant::now(), 0u64);
                while t.elapsed() < secs {
                    let (r, b) = file.write_at(buf, at(n)).submit().await;
                    r.expect("tokio-uring write");
                    buf = b;
                    file.sync_data().await.expect("tokio-uring sync");
                    n += 1;
                }
                out.push((
                    "tokio-uring write_at + sync_data, 1 writer (no store)".to_string(),
                    n as f64 / t.elapsed().as_secs_f64(),
                ));
                for ((writers, group, blocks), side_by_side) in shapes
                    .iter()
                    .flat_map(|&s| [(s, false), (s, true)])
                {
                    let (t, mut puts) = (Instant::now(), 0u64);
                    while t.elapsed() < secs {
                        // Values spread over the file (where overwrites
                        // leave the free pieces a group's puts take), or
                        // side by side (a fresh store's, merged by the
                        // block layer into one request); tuple blocks
                        // spread.
                        let values = (0..group).map(|i| {
                            let off = if side_by_side {
                                (128 << 20) + ((puts + i) % 8192) * 16384
                            } else {
                                at(1_000_003 + puts * 2 + i)
                            };
                            (16384, off)
                        });
                        let spread = (0..blocks).map(|i| (4096, at(puts * 2 + i)));
                        let writes = values.chain(spread).map(|(size, off)| {
                            file.write_at(AlignedBuf::zeroed(size), off).submit()
                        });
                        for (r, _) in futures::future::join_all(writes).await {
                            r.expect("tokio-uring write");
                        }
                        file.sync_data().await.expect("tokio-uring sync");
                        puts += group;
                    }
                    let values = if side_by_side { "side by side" } else { "spread" };
                    out.push((
                        format!(
                            "device floor of the {writers}-writer row: its groups ({group} x 16 KiB {values} + {blocks} x 4 KiB spread) at once, then sync_data (no store)"
                        ),
                        puts as f64 / t.elapsed().as_secs_f64(),
                    ));
                }
                file.close().await.expect("close");
                out
            })
        })
        .join()
        .expect("tokio-uring floor thread")
    }
}

/// Drops the page cache (needs root); says whether it could.
fn drop_page_cache() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .is_ok_and(|s| s.success())
}

async fn fs_phase(cfg: &Config) {
    let sizes: &[usize] = if cfg.quick {
        &[16 << 10, 1 << 20]
    } else {
        &[4 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20]
    };
    println!("\n## file per object vs blobcask: random 4 KiB range reads, 1 in flight");
    println!("| object size | objects | file: open+pread+close p50 µs | blobcask p50 µs | blobcask faster by | page cache |");
    println!("|---|---|---|---|---|---|");
    for &size in sizes {
        let n = ((256usize << 20) / size).clamp(64, 4096);
        let dir = cfg.dir.join("fs-objects");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = cfg.dir.join("fs-compare.blobcask");
        let _ = std::fs::remove_file(&path);
        let store = blobcask::blocking::Store::open(
            &path,
            Options::new().capacity((n * size) as u64 * 2 + (64 << 20)),
        )
        .unwrap();
        let value = vec![0x5au8; size];
        let items: Vec<(String, Vec<u8>)> =
            (0..n).map(|i| (format!("o{i}"), value.clone())).collect();
        store.bulk_load(items).unwrap();
        for i in 0..n {
            std::fs::write(dir.join(format!("o{i}")), &value).unwrap();
        }
        let dropped = drop_page_cache();
        let mut rng = rand::rngs::StdRng::seed_from_u64(size as u64);
        let (mut files, mut bc) = (vec![], vec![]);
        for _ in 0..4 {
            for _ in 0..250 {
                let i = rng.random_range(0..n);
                let off = rng.random_range(0..(size as u64 / 4096)) * 4096;
                let t = Instant::now();
                let f = std::fs::File::open(dir.join(format!("o{i}"))).unwrap();
                let mut buf = vec![0u8; 4096];
                f.read_exact_at(&mut buf, off).unwrap();
                drop(f);
                files.push(t.elapsed());
            }
            for _ in 0..250 {
                let i = rng.random_range(0..n);
                let off = rng.random_range(0..(size as u64 / 4096)) * 4096;
                let t = Instant::now();
                store.read(format!("o{i}"), off, 4096).unwrap();
                bc.push(t.elapsed());
            }
        }
        files.sort();
        bc.sort();
        let (f50, b50) = (us(pct(&files, 0.5)), us(pct(&bc, 0.5)));
        println!(
            "| {} KiB | {n} | {f50:.1} | {b50:.1} | {:.2}× | {} |",
            size >> 10,
            f50 / b50,
            if dropped {
                "dropped"
            } else {
                "not dropped (not root): files read from RAM"
            }
        );
        let label = format!(
            "blobcask::blocking::Store::read of {} KiB objects (page cache {})",
            size >> 10,
            if dropped { "dropped" } else { "not dropped" }
        );
        let id = format!("fs.read4k.{}k", size >> 10);
        cfg.figures.record(
            Figure::new("fs", &id, &label, b50, "µs p50")
                .baseline(f50, "file per object: open + pread + close, p50")
                .ratio(f50 / b50)
                .engine("auto (the default)"),
        );
        store.close().unwrap();
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `Store::backup` against a sequential copy of the same number of bytes,
/// alternating, for three object sizes.
async fn backup_phase(cfg: &Config) {
    println!("\n## backup: Store::backup vs sequential copy of as many bytes");
    let total: u64 = if cfg.quick { 128 << 20 } else { 512 << 20 };
    let rounds = if cfg.quick { 2 } else { 3 };
    for size in [16u64 << 10, 1 << 20, 32 << 20] {
        let (store, path) = fresh(cfg, IoEngineKind::IoUring, 4 * total).await;
        let n = total / size;
        let value = blobcask::Bytes::from(vec![0x5au8; size as usize]);
        store
            .bulk_load((0..n).map(|i| (format!("obj/{i:08}"), value.clone())))
            .await
            .unwrap();
        let (mut raw_t, mut backup_t) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let copy = cfg.dir.join("raw-copy");
            let _ = std::fs::remove_file(&copy);
            let (p, c) = (path.clone(), copy.clone());
            raw_t.push(
                tokio::task::spawn_blocking(move || {
                    raw::sequential_copy(&p, &c, total, 4 << 20, 4)
                })
                .await
                .unwrap(),
            );
            std::fs::remove_file(&copy).unwrap();
            let dest = cfg.dir.join("backup-copy");
            let _ = std::fs::remove_file(&dest);
            let report = store.backup(&dest).await.unwrap();
            assert_eq!(report.objects, n);
            backup_t.push(report.elapsed);
            std::fs::remove_file(&dest).unwrap();
        }
        raw_t.sort();
        backup_t.sort();
        let (r, b) = (raw_t[raw_t.len() / 2], backup_t[backup_t.len() / 2]);
        let mib = total as f64 / (1 << 20) as f64;
        println!(
            "{:>6} KiB x {n:>6}: sequential copy {:7.1} MiB/s, backup {:7.1} MiB/s, backup speed / copy speed {:.2} (medians of {rounds})",
            size >> 10,
            mib / r.as_secs_f64(),
            mib / b.as_secs_f64(),
            r.as_secs_f64() / b.as_secs_f64(),
        );
        let label = format!("Store::backup of {n} objects of {} KiB", size >> 10);
        cfg.figures.record(
            Figure::new(
                "backup",
                &format!("backup.{}k", size >> 10),
                &label,
                mib / b.as_secs_f64(),
                "MiB/s",
            )
            .baseline(
                mib / r.as_secs_f64(),
                "sequential copy of as many bytes (median)",
            )
            .ratio(r.as_secs_f64() / b.as_secs_f64())
            .engine("io_uring"),
        );
        store.close().await.unwrap();
    }
}

/// Filling a store that starts at the default size and grows, against the
/// same puts into a store created at its final size, alternating rounds.
async fn growth_phase(cfg: &Config) {
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
