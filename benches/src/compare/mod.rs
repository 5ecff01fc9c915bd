//! Comparative benchmark: one workload against the raw device, blobcask
//! (both I/O engines), a file per object, SQLite BLOBs, fjall and RocksDB
//! with blob files, in one process on one machine, so every figure can be
//! read as a ratio to the others.
//!
//! Phases per engine and object size, as in the blobd and BlobDB write-ups:
//! put (create + durable commit), stat, random 4 KiB range read at random
//! offsets, whole-object get, mixed (one writer overwriting while the other
//! threads do random 4 KiB reads), warm get, overwrite, delete. Sizes are
//! nominal + 1/8 so none is a power of two; each size moves about `budget`
//! bytes.
//!
//! Warm get: whole-object gets with keys drawn from a Zipf distribution
//! (exponent 1) over a hot set of at most [`WARM_SET_BYTES`] (so it fits
//! blobcask's default 64 MiB read cache), after two untimed passes over the
//! hot set (blobcask admits an object at its second whole read). Each engine
//! serves it from whatever it caches — its own cache, the page cache, a
//! memory map — which is the point of the phase.
//!
//! Per phase: ops/s, MB/s, p50/p99/p999 latency. Per engine and size:
//! write amplification (bytes the process wrote to storage during put, from
//! /proc/self/io, per user byte), space amplification (bytes on disk after
//! put per user byte) and peak memory (growth of the resident set over the
//! engine's run, from VmHWM after resetting it; memory the kernel's page
//! cache holds for an engine is not counted). The page cache is dropped
//! before read phases when running as root; otherwise the report says so.

pub mod chart;
pub mod engines;
pub mod report;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use blobcask::Bytes;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::{Distribution, Zipf};

pub use engines::Engine;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub dir: PathBuf,
    pub engines: Vec<String>,
    /// Nominal object sizes; each is run at nominal + nominal/8 bytes.
    pub sizes: Vec<usize>,
    /// Bytes each size moves in its put phase.
    pub budget: usize,
    /// Operations in flight (threads).
    pub concurrency: usize,
}

impl Config {
    pub fn new(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            engines: engines::ALL
                .iter()
                .filter(|e| engines::available(e))
                .map(|e| e.to_string())
                .collect(),
            sizes: [1, 16, 64, 256, 1024, 4096, 32768]
                .iter()
                .map(|k| k << 10)
                .collect(),
            budget: 128 << 20,
            concurrency: 16,
        }
    }
}

/// One phase of one engine at one object size.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    pub engine: String,
    pub size: usize,
    pub phase: &'static str,
    pub ops: usize,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Sorted latencies.
    pub lat: Vec<Duration>,
}

impl PhaseResult {
    /// Latency percentile in microseconds (`p` in 0..=1).
    pub fn pct(&self, p: f64) -> f64 {
        if self.lat.is_empty() {
            return 0.0;
        }
        self.lat[((self.lat.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e6
    }
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Whole-run figures of one engine at one object size.
#[derive(Clone, Debug)]
pub struct EngineRun {
    pub engine: String,
    pub size: usize,
    pub write_amp: f64,
    pub space_amp: f64,
    pub peak_mem_bytes: u64,
    pub range_reads: bool,
}

/// Everything a run measured.
#[derive(Default, Debug)]
pub struct Report {
    pub phases: Vec<PhaseResult>,
    pub runs: Vec<EngineRun>,
    /// False when the page cache could not be dropped before read phases.
    pub cache_dropped: bool,
    pub concurrency: usize,
}

/// Runs every configured engine at every size; `progress` gets a line per
/// finished engine run.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Report {
    std::fs::create_dir_all(&cfg.dir).unwrap();
    let mut report = Report {
        cache_dropped: true,
        concurrency: cfg.concurrency,
        ..Report::default()
    };
    for &nominal in &cfg.sizes {
        let size = nominal + nominal / 8;
        let n = (cfg.budget / size).clamp(8, 20_000);
        let mut value = vec![0u8; size];
        rand::rngs::StdRng::seed_from_u64(size as u64).fill_bytes(&mut value);
        let value = Bytes::from(value);
        for name in &cfg.engines {
            let dir = cfg.dir.join(name);
            let mem = MemoryWatch::start();
            let mut run = run_engine(name, &dir, &value, n, cfg.concurrency, &mut report);
            run.peak_mem_bytes = mem.peak_growth();
            progress(&format!(
                "{} at {} B: done (peak memory +{:.1} MiB)",
                run.engine,
                size,
                run.peak_mem_bytes as f64 / (1 << 20) as f64
            ));
            report.runs.push(run);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    report
}

fn key(i: usize) -> String {
    format!("obj/{i:06}")
}

/// All phases of engine `name` at one object size. The engine is closed and
/// opened again after the write phases (the open is timed as phase "open")
/// and before each cold read phase (untimed), with the page cache dropped,
/// so reads start from the device, not from the engine's own caches; only
/// the warm phase, after the cold ones, reads from caches on purpose.
fn run_engine(
    name: &str,
    dir: &std::path::Path,
    value: &Bytes,
    n: usize,
    threads: usize,
    report: &mut Report,
) -> EngineRun {
    let size = value.len();
    let engine = engines::open(name, dir, size, n, true);
    let w0 = io_write_bytes();
    let engine_ref = engine.as_ref();
    report.phases.push(phase(
        engine_ref,
        size,
        "put",
        n,
        threads,
        size as u64,
        |i| engine_ref.put(&key(i), value),
    ));
    engine.settle();
    let written = io_write_bytes() - w0;
    let run = EngineRun {
        engine: engine.name(),
        size,
        write_amp: written as f64 / (size * n) as f64,
        space_amp: engine.bytes_on_disk() as f64 / (size * n) as f64,
        peak_mem_bytes: 0,
        range_reads: engine.range_reads(),
    };
    drop(engine);
    report.cache_dropped &= drop_page_cache();
    let t = Instant::now();
    let mut engine = engines::open(name, dir, size, n, false);
    report.phases.push(PhaseResult {
        engine: engine.name(),
        size,
        phase: "open",
        ops: 1,
        bytes: 0,
        elapsed: t.elapsed(),
        lat: vec![t.elapsed()],
    });
    let e = engine.as_ref();
    report
        .phases
        .push(phase(e, size, "stat", n, threads, 0, |i| {
            assert_eq!(e.stat(&key(i)), size as u64)
        }));
    // Every cold read phase starts from a new instance and an empty page
    // cache: what one phase left in an engine's own cache (redb keeps whole
    // values in up to 1 GiB, and its stat reads them) would serve the next.
    let cold = |engine: Box<dyn Engine>, report: &mut Report| {
        drop(engine);
        report.cache_dropped &= drop_page_cache();
        engines::open(name, dir, size, n, false)
    };
    let reads = n.clamp(500, 4000);
    let read_4k = |e: &dyn Engine, i: usize| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        let off = rng.random_range(0..size.saturating_sub(4096).max(1)) as u64;
        e.read(&key(rng.random_range(0..n)), off, 4096);
    };
    engine = cold(engine, report);
    let e = engine.as_ref();
    report
        .phases
        .push(phase(e, size, "read 4K", reads, threads, 4096, |i| {
            read_4k(e, i)
        }));
    engine = cold(engine, report);
    let e = engine.as_ref();
    report
        .phases
        .push(phase(e, size, "get", n, threads, size as u64, |i| {
            assert_eq!(e.get(&key(i)), size)
        }));
    engine = cold(engine, report);
    let engine = engine.as_ref();
    let (reads_result, writes_result) =
        mixed(engine, value, n, reads, threads, |i| read_4k(engine, i));
    report.phases.push(reads_result);
    report.phases.push(writes_result);
    report
        .phases
        .push(warm_get(engine, size, n, reads, threads));
    report.phases.push(phase(
        engine,
        size,
        "overwrite",
        n,
        threads,
        size as u64,
        |i| engine.put(&key(i), value),
    ));
    report
        .phases
        .push(phase(engine, size, "delete", n, threads, 0, |i| {
            engine.delete(&key(i))
        }));
    run
}

/// Bytes of values in the warm phase's hot set: room to spare in
/// blobcask's default 64 MiB read cache.
pub const WARM_SET_BYTES: usize = 48 << 20;

/// The warm phase: `reads` whole-object gets of keys drawn with Zipf
/// (exponent 1.0) from the hot set — the first min(n, WARM_SET_BYTES /
/// size) objects, rank 1 being object 0 — after two untimed passes over the
/// hot set. Keys and draws are made before the clock starts, so the timed
/// op is the get alone.
fn warm_get(
    engine: &dyn Engine,
    size: usize,
    n: usize,
    reads: usize,
    threads: usize,
) -> PhaseResult {
    let hot = n.min(WARM_SET_BYTES / size).max(1);
    let keys: Vec<String> = (0..hot).map(key).collect();
    let get = |i: usize| assert_eq!(engine.get(&keys[i]), size);
    // Two passes, one after the other: blobcask's cache admits an object at
    // its second whole read. Untimed (the results are dropped).
    for _ in 0..2 {
        phase(engine, size, "warm-up", hot, threads, 0, get);
    }
    let zipf = Zipf::new(hot as f64, 1.0).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(size as u64 ^ 0x5eed);
    let picks: Vec<usize> = (0..reads)
        .map(|_| zipf.sample(&mut rng) as usize - 1)
        .collect();
    phase(engine, size, "warm get", reads, threads, size as u64, |i| {
        get(picks[i])
    })
}

/// Runs `op(i)` for i in 0..n on `threads` threads; latency of each op.
fn phase(
    engine: &dyn Engine,
    size: usize,
    name: &'static str,
    n: usize,
    threads: usize,
    bytes_per_op: u64,
    op: impl Fn(usize) + Sync,
) -> PhaseResult {
    let next = AtomicUsize::new(0);
    let lat = Mutex::new(Vec::with_capacity(n));
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let t = Instant::now();
                    op(i);
                    mine.push(t.elapsed());
                }
                lat.lock().unwrap().extend(mine);
            });
        }
    });
    finish(engine, size, name, n, bytes_per_op, t.elapsed(), lat)
}

/// One writer overwrites random objects while `threads - 1` readers do
/// `reads` random 4 KiB range reads; the writer stops when the readers are
/// done. Returns the readers' and the writer's results.
fn mixed(
    engine: &dyn Engine,
    value: &Bytes,
    n: usize,
    reads: usize,
    threads: usize,
    read_op: impl Fn(usize) + Sync,
) -> (PhaseResult, PhaseResult) {
    let size = value.len();
    let readers = threads.saturating_sub(1).max(1);
    let next = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let read_lat = Mutex::new(Vec::with_capacity(reads));
    let mut write_lat = Vec::new();
    let t = Instant::now();
    let mut read_elapsed = Duration::ZERO;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= reads {
                            break;
                        }
                        let t = Instant::now();
                        read_op(i + 1_000_000);
                        mine.push(t.elapsed());
                    }
                    read_lat.lock().unwrap().extend(mine);
                })
            })
            .collect();
        let writer = s.spawn(|| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut lat = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                engine.put(&key(rng.random_range(0..n)), value);
                lat.push(t.elapsed());
            }
            lat
        });
        for h in handles {
            h.join().unwrap();
        }
        read_elapsed = t.elapsed();
        done.store(true, Ordering::Relaxed);
        write_lat = writer.join().unwrap();
    });
    let writes = write_lat.len();
    let write_elapsed = t.elapsed();
    (
        finish(
            engine,
            size,
            "mixed read",
            reads,
            4096,
            read_elapsed,
            read_lat,
        ),
        finish(
            engine,
            size,
            "mixed write",
            writes,
            size as u64,
            write_elapsed,
            Mutex::new(write_lat),
        ),
    )
}

fn finish(
    engine: &dyn Engine,
    size: usize,
    phase: &'static str,
    ops: usize,
    bytes_per_op: u64,
    elapsed: Duration,
    lat: Mutex<Vec<Duration>>,
) -> PhaseResult {
    let mut lat = lat.into_inner().unwrap();
    lat.sort();
    PhaseResult {
        engine: engine.name(),
        size,
        phase,
        ops,
        bytes: bytes_per_op * ops as u64,
        elapsed,
        lat,
    }
}

/// Bytes this process has caused to be written to storage.
fn io_write_bytes() -> u64 {
    proc_field("/proc/self/io", "write_bytes:")
}

fn proc_field(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)
                    .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn drop_page_cache() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Peak resident-set growth over one engine's run: freed heap is returned
/// to the OS first (malloc_trim), the kernel's high-water mark is reset
/// (`/proc/self/clear_refs` = 5), and the peak is read at the end.
struct MemoryWatch {
    base_kb: u64,
}

impl MemoryWatch {
    fn start() -> MemoryWatch {
        #[allow(unsafe_code)]
        // SAFETY: malloc_trim only releases free heap pages back to the OS.
        unsafe {
            libc::malloc_trim(0);
        }
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        MemoryWatch {
            base_kb: proc_field("/proc/self/status", "VmRSS:"),
        }
    }
    fn peak_growth(&self) -> u64 {
        proc_field("/proc/self/status", "VmHWM:").saturating_sub(self.base_kb) * 1024
    }
}
