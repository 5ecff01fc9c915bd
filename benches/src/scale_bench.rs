//! Scale: what a store of N small objects costs to open, to hold in RAM
//! and to read right after a restart (issue "Scale").
//!
//! For each N: N objects (100 B or 4 KiB values, keys of 20 to 60 bytes)
//! are bulk loaded with the default options and the store closed. Then,
//! each in a fresh process (so nothing of the load is in its memory):
//!
//! * **open after a clean close**: `Store::open` plus the first get;
//! * **RSS per object**: the process's anonymous memory (`RssAnon` in
//!   `/proc/self/status`) after the open minus before it, over N, opened
//!   with `cache_bytes = 0` (the cache is memory the user chose);
//! * **get p50, first touch** (each key's first read after the open: a
//!   device read unless the open brought its block into memory) and
//!   **warm** (the same keys again), 20k random keys;
//! * **after the warm-up** (blobcask): reopened with `cache_fraction(0.25)`,
//!   the time until the read cache's warm-up is done, then each key's
//!   first get (p50) and the share of them the cache served;
//! * **bytes on disk per object**: what the store holds allocated
//!   (capacity minus free bytes) over N;
//! * **open after kill -9**: a child opens the store, puts 1000 objects
//!   one by one and is killed with SIGKILL; the next open is timed
//!   (`--no-kill` leaves this step out);
//! * **every object read back** (`--verify`): a last child reopens the
//!   store and reads every object in turn, comparing each with the value
//!   stored; it reports the time and the process's peak anonymous memory.
//!
//! LMDB (heed) and SQLite run the same steps in the same run when asked
//! (`--engines`, their features): loaded in transactions of 100k puts,
//! reopened in a fresh process after their files' pages were dropped from
//! the page cache (`posix_fadvise(DONTNEED)`), so their first gets read
//! the disk too. Their RSS is anonymous memory as well (LMDB's map is
//! file-backed and not counted, as the kernel can drop it).
//!
//! ```text
//! cargo run --release -p blobcask-bench --bin scale-bench -- \
//!     [--n 1M,4M] [--value 100] [--index hash|btree|fst] [--dir DIR] [--json FILE] [--quick] [--keep]
//!     [--no-kill] [--verify]
//!     [--engines blobcask,lmdb,sqlite]   # lmdb and sqlite need --features lmdb,sqlite
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blobcask::{IndexKind, Options, Store};
use blobcask_bench::figures::{Figure, Sink};

/// Keys of 20 to 60 bytes, distinct for distinct `i` (their first 16
/// characters are a bijection of `i`), in no sorted order.
fn key(i: u64) -> Vec<u8> {
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let len = 20 + (h >> 32) as usize % 41;
    let mut k = format!("{h:016x}/{i}").into_bytes();
    if k.len() < len {
        k.resize(len, b'.');
    }
    k
}

/// The mean length of the keys of a store of `n` objects.
fn mean_key_len(n: u64) -> f64 {
    (0..n).map(|i| key(i).len() as f64).sum::<f64>() / n.max(1) as f64
}

fn value(i: u64, len: usize) -> Vec<u8> {
    blobcask_bench::pattern(i, len)
}

/// The peak resident set of this process so far (`VmHWM`), bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `RssAnon` of this process, bytes.
fn rss_anon() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn parse_count(s: &str) -> u64 {
    let s = s.trim();
    let (n, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
        Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    n.parse::<u64>().expect("a count such as 1M or 250k") * mul
}

struct Args {
    ns: Vec<u64>,
    value: usize,
    index: IndexKind,
    dir: PathBuf,
    json: Option<PathBuf>,
    quick: bool,
    /// Leave each store in place (for profiling an open).
    keep: bool,
    /// Leave out the open after kill -9 (a full scan: at 100M objects it
    /// needs more memory than the clean open).
    no_kill: bool,
    /// Read every object back and compare it.
    verify: bool,
    child: Option<String>,
    path: Option<PathBuf>,
    n: u64,
    /// Engines to run: blobcask, and with their features lmdb and sqlite.
    engines: Vec<String>,
    engine: String,
}

fn parse_args() -> Args {
    let mut a = Args {
        ns: vec![1_000_000],
        value: 100,
        index: IndexKind::default(),
        dir: PathBuf::from("target/bench"),
        json: None,
        quick: false,
        keep: false,
        no_kill: false,
        verify: false,
        child: None,
        path: None,
        n: 0,
        engines: vec!["blobcask".into()],
        engine: "blobcask".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut next = || it.next().unwrap_or_else(|| panic!("{arg} takes a value"));
        match arg.as_str() {
            "--n" => a.ns = next().split(',').map(parse_count).collect(),
            "--value" => a.value = next().parse().expect("--value BYTES"),
            "--index" => a.index = next().parse().expect("--index hash|btree|fst"),
            "--dir" => a.dir = PathBuf::from(next()),
            "--json" => a.json = Some(PathBuf::from(next())),
            "--quick" => a.quick = true,
            "--keep" => a.keep = true,
            "--no-kill" => a.no_kill = true,
            "--verify" => a.verify = true,
            // Internal: the measuring children.
            "--child" => a.child = Some(next()),
            "--path" => a.path = Some(PathBuf::from(next())),
            "--count" => a.n = next().parse().expect("--count N"),
            "--engines" => a.engines = next().split(',').map(str::to_owned).collect(),
            "--engine" => a.engine = next(),
            _ => {
                eprintln!(
                    "usage: scale-bench [--n 1M,4M] [--value 100] [--index hash|btree|fst] \
                     [--dir DIR] [--json FILE] [--quick] [--keep] [--no-kill] [--verify] \
                     [--engines blobcask,lmdb,sqlite]"
                );
                std::process::exit(2);
            }
        }
    }
    if a.quick {
        a.ns = vec![100_000];
    }
    a
}

fn main() {
    let args = parse_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match args.child.as_deref() {
        Some("open") if args.engine != "blobcask" => others::child_open(&args),
        Some("open") => rt.block_on(child_open(&args)),
        Some("kill") => rt.block_on(child_kill(&args)),
        Some("verify") => rt.block_on(child_verify(&args)),
        Some(other) => panic!("unknown child {other}"),
        None => rt.block_on(parent(&args)),
    }
}

/// Measures one open in this (fresh) process; prints `key=value` lines.
async fn child_open(args: &Args) {
    let path = args.path.as_deref().expect("--path");
    let before = rss_anon();
    let t = Instant::now();
    let store = Store::open(path, Options::new().cache_bytes(0).index(args.index))
        .await
        .expect("open");
    let opened = t.elapsed();
    let first = store.get(key(args.n / 2)).await.expect("first get");
    let open_first = t.elapsed();
    assert_eq!(first.len(), args.value, "the first object's size");
    let rss = rss_anon().saturating_sub(before);
    let report = store.stats().recovery;
    // 20k random keys (fewer in a small store), each read twice.
    let picks = picks(args.n);
    let mut cold = Vec::with_capacity(picks.len());
    let mut warm = Vec::with_capacity(picks.len());
    // The raw device in turn with the first touches: a 4 KiB O_DIRECT
    // `pread` of a random written block of the store's file after each.
    let file = blobcask_bench::raw::open_direct(path);
    let written = blobcask_bench::raw::WrittenBlocks::of(&file).expect("the file's written blocks");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(args.n);
    let mut block = blobcask_bench::raw::aligned(4096);
    let mut raw = Vec::with_capacity(picks.len());
    for (round, times) in [&mut cold, &mut warm].into_iter().enumerate() {
        for &i in &picks {
            let t = Instant::now();
            let v = store.get(key(i)).await.expect("get");
            times.push(t.elapsed());
            assert_eq!(v.len(), args.value);
            if round == 0 {
                let at = written.sample(&mut rng, 1);
                let t = Instant::now();
                std::os::unix::fs::FileExt::read_exact_at(
                    &file,
                    blobcask_bench::raw::as_bytes_mut(&mut block),
                    at,
                )
                .expect("raw pread");
                raw.push(t.elapsed());
            }
        }
    }
    // Every value of a sample is the one stored.
    for &i in picks.iter().take(1000) {
        assert_eq!(
            store.get(key(i)).await.expect("get"),
            value(i, args.value),
            "value of object {i}"
        );
    }
    let st = store.stats();
    // At least: a store kept (`--keep`) from a run also holds the objects
    // its kill -9 child put.
    assert!(
        st.objects >= args.n,
        "{} objects after the open",
        st.objects
    );
    println!("open_s={}", opened.as_secs_f64());
    println!("open_first_get_s={}", open_first.as_secs_f64());
    println!("rss_bytes={rss}");
    println!("cold_p50_us={}", median(&mut cold).as_secs_f64() * 1e6);
    println!("warm_p50_us={}", median(&mut warm).as_secs_f64() * 1e6);
    println!("raw_pread_p50_us={}", median(&mut raw).as_secs_f64() * 1e6);
    println!("disk_bytes={}", st.capacity.saturating_sub(st.free_bytes));
    println!("clean={}", report.clean);
    println!("from_image={}", report.from_image);
    store.close().await.expect("close");
    // Again with a cache of a quarter of memory: the time until its
    // warm-up is done, then each key's first get.
    let t = Instant::now();
    let store = Store::open(path, Options::new().cache_fraction(0.25).index(args.index))
        .await
        .expect("open with a cache");
    while store.stats().cache.warming {
        std::thread::sleep(Duration::from_millis(1));
    }
    let warmed = t.elapsed();
    let mut first = Vec::with_capacity(picks.len());
    for &i in &picks {
        let t = Instant::now();
        let v = store.get(key(i)).await.expect("get");
        first.push(t.elapsed());
        assert_eq!(v.len(), args.value);
    }
    let c = store.stats().cache;
    println!("warm_up_s={}", warmed.as_secs_f64());
    println!(
        "after_warm_up_p50_us={}",
        median(&mut first).as_secs_f64() * 1e6
    );
    println!(
        "after_warm_up_hit_ratio={}",
        c.hits as f64 / (c.hits + c.misses).max(1) as f64
    );
    store.close().await.expect("close");
}

/// Reads every object `0..n` back in order and compares it with the value
/// stored; prints the time, the count and the peak anonymous memory.
async fn child_verify(args: &Args) {
    let path = args.path.as_deref().expect("--path");
    let t = Instant::now();
    let store = Store::open(path, Options::new().index(args.index))
        .await
        .expect("open");
    let opened = t.elapsed();
    let t = Instant::now();
    let mut bytes = 0u64;
    for i in 0..args.n {
        let v = store.get(key(i)).await.expect("get");
        assert!(v == value(i, args.value), "value of object {i}");
        bytes += v.len() as u64;
    }
    let read = t.elapsed();
    assert_eq!(store.stats().objects, args.n, "objects after the open");
    store.close().await.expect("close");
    let peak = peak_rss();
    println!("verify_open_s={}", opened.as_secs_f64());
    println!("verified={}", args.n);
    println!("verified_bytes={bytes}");
    println!("verify_s={}", read.as_secs_f64());
    println!("peak_rss_bytes={peak}");
}

/// Opens, then puts objects one by one until killed.
async fn child_kill(args: &Args) {
    let path = args.path.as_deref().expect("--path");
    let store = Store::open(path, Options::new().index(args.index))
        .await
        .expect("open");
    for j in 0..1000u64 {
        let i = args.n + j;
        store.put(key(i), value(i, args.value)).await.expect("put");
    }
    println!("ready");
    // The parent kills this process now.
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// This program run as the child `what` on the store at `path` of `n`
/// objects.
fn child(args: &Args, engine: &str, what: &str, path: &Path, n: u64) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("own path"));
    c.args([
        "--child",
        what,
        "--path",
        path.to_str().expect("utf-8 path"),
        "--count",
        &n.to_string(),
        "--value",
        &args.value.to_string(),
        "--index",
        args.index.name(),
        "--engine",
        engine,
    ]);
    c
}

fn run_child(args: &Args, engine: &str, what: &str, path: &Path, n: u64) -> Vec<(String, f64)> {
    let out = child(args, engine, what, path, n)
        .stderr(Stdio::inherit())
        .output()
        .expect("child");
    assert!(out.status.success(), "child {what} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            let v = match v {
                "true" => 1.0,
                "false" => 0.0,
                v => v.parse().ok()?,
            };
            Some((k.to_owned(), v))
        })
        .collect()
}

fn kill_after_puts(args: &Args, path: &Path, n: u64) {
    let mut child = child(args, "blobcask", "kill", path, n)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child");
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut out, &mut line).expect("child output");
    assert_eq!(line.trim(), "ready", "the killed child did not get ready");
    // SIGKILL: nothing of the store's close runs.
    child.kill().expect("kill");
    let _ = child.wait();
}

fn get(m: &[(String, f64)], k: &str) -> f64 {
    m.iter().find(|(n, _)| n == k).map_or(f64::NAN, |(_, v)| *v)
}

/// One engine's figures at one N.
struct Row {
    /// `hash`, `btree`, `fst` (blobcask's index), `lmdb`, `sqlite`.
    engine: String,
    load_rate: f64,
    open_s: f64,
    open_first_get_s: f64,
    /// blobcask only: the open after kill -9.
    kill_open_s: Option<f64>,
    rss_per_object: f64,
    disk_per_object: f64,
    first_touch_us: f64,
    /// blobcask only: a raw 4 KiB O_DIRECT `pread` of the store's file,
    /// p50, in turn with the first touches.
    raw_pread_us: Option<f64>,
    warm_us: f64,
    /// blobcask only: open until the cache's warm-up is done, and each
    /// key's first get after it (a cache of a quarter of memory).
    warm_up: Option<(f64, f64, f64)>,
}

impl Row {
    fn of(engine: &str, n: u64, load: Duration, m: &[(String, f64)], disk: f64) -> Row {
        Row {
            engine: engine.to_owned(),
            load_rate: n as f64 / load.as_secs_f64(),
            open_s: get(m, "open_s"),
            open_first_get_s: get(m, "open_first_get_s"),
            kill_open_s: None,
            rss_per_object: get(m, "rss_bytes") / n as f64,
            disk_per_object: disk / n as f64,
            first_touch_us: get(m, "cold_p50_us"),
            raw_pread_us: m
                .iter()
                .any(|(k, _)| k == "raw_pread_p50_us")
                .then(|| get(m, "raw_pread_p50_us")),
            warm_us: get(m, "warm_p50_us"),
            warm_up: m.iter().any(|(k, _)| k == "warm_up_s").then(|| {
                (
                    get(m, "warm_up_s"),
                    get(m, "after_warm_up_p50_us"),
                    get(m, "after_warm_up_hit_ratio"),
                )
            }),
        }
    }

    fn print(&self, n: u64) {
        let kill = self
            .kill_open_s
            .map_or("-".to_owned(), |k| format!("{:.1}", k * 1e3));
        println!(
            "{n:>10} {:>9.0} {:>10.1} {:>11.1} {kill:>10} {:>9.0} {:>9.0} {:>10.1} {:>11.1}   {}",
            self.load_rate,
            self.open_s * 1e3,
            self.open_first_get_s * 1e3,
            self.rss_per_object,
            self.disk_per_object,
            self.first_touch_us,
            self.warm_us,
            self.engine,
        );
        if let Some((secs, p50, hits)) = self.warm_up {
            println!(
                "{:>10} warm-up {:.1} ms, then first gets p50 {p50:.1} µs, {:.1} % hits (cache_fraction 0.25)",
                "",
                secs * 1e3,
                hits * 100.0
            );
        }
    }

    /// Records the row. blobcask's figures carry the same run's LMDB
    /// figure as their baseline where the issue compares them.
    fn record(&self, sink: &Sink, n: u64, vlen: usize, lmdb: Option<&Row>, last: bool) {
        let e = &self.engine;
        let tag = format!("{vlen}b.{n}.{e}");
        let label = |what: &str| format!("{what}, {n} objects of {vlen} B, {e}");
        let fig = |id: String, what: &str, v: f64, unit: &str| {
            Figure::new("scale", &id, &label(what), v, unit).engine(e)
        };
        let vs_lmdb = |f: Figure, ours: f64, theirs: Option<f64>| match theirs {
            Some(t) => f.baseline(t, "LMDB (heed), same run").ratio(ours / t),
            None => f,
        };
        let blobcask = self.kill_open_s.is_some();
        if blobcask {
            sink.record(fig(
                format!("index.open.{tag}"),
                "open after a clean close",
                self.open_s,
                "s",
            ));
            if let Some(k) = self.kill_open_s.filter(|k| k.is_finite()) {
                sink.record(
                    fig(
                        format!("scale.open_kill.{tag}"),
                        "open after kill -9",
                        k,
                        "s",
                    )
                    .baseline(self.open_s, "open after a clean close, same run")
                    .ratio(k / self.open_s),
                );
            }
            sink.record(fig(
                format!("rss.per_object.{e}.{n}"),
                "RssAnon per object, cache_bytes=0",
                self.rss_per_object,
                "B",
            ));
            if last && e == "btree" {
                // Its target leaves out the keys the index holds.
                let keys = mean_key_len(n);
                sink.record(fig(
                    format!("rss.per_object.{e}"),
                    &format!(
                        "RssAnon per object minus the mean key length ({keys:.1} B), cache_bytes=0"
                    ),
                    self.rss_per_object - keys,
                    "B",
                ));
            } else if last {
                sink.record(fig(
                    format!("rss.per_object.{e}"),
                    "RssAnon per object, cache_bytes=0",
                    self.rss_per_object,
                    "B",
                ));
            }
        }
        sink.record(vs_lmdb(
            fig(
                format!("scale.load_rate.{tag}"),
                "bulk load",
                self.load_rate,
                "objects/s",
            ),
            self.load_rate,
            lmdb.filter(|_| blobcask).map(|l| l.load_rate),
        ));
        sink.record(fig(
            format!("scale.open_first_get.{tag}"),
            "open and first get after a clean close",
            self.open_first_get_s * 1e3,
            "ms",
        ));
        sink.record(vs_lmdb(
            fig(
                format!("scale.disk_per_object.{tag}"),
                "bytes on disk per object",
                self.disk_per_object,
                "B",
            ),
            self.disk_per_object,
            lmdb.filter(|_| blobcask).map(|l| l.disk_per_object),
        ));
        let first_touch = fig(
            format!("scale.get_first_touch.{tag}"),
            "get p50, each key's first read after the open",
            self.first_touch_us,
            "µs",
        );
        sink.record(match self.raw_pread_us {
            Some(raw) => first_touch
                .baseline(
                    raw,
                    "raw 4 KiB O_DIRECT pread of the store's file, in turn, p50",
                )
                .ratio(self.first_touch_us / raw),
            None => first_touch,
        });
        sink.record(fig(
            format!("scale.get_warm.{tag}"),
            "get p50, the same keys again",
            self.warm_us,
            "µs",
        ));
        if let Some((secs, p50, hit_ratio)) = self.warm_up {
            sink.record(fig(
                format!("scale.warm_up.{tag}"),
                "open until the cache's warm-up is done (cache_fraction 0.25)",
                secs,
                "s",
            ));
            sink.record(
                fig(
                    format!("scale.get_after_warm_up.{tag}"),
                    "get p50, each key's first read after the warm-up (cache_fraction 0.25)",
                    p50,
                    "µs",
                )
                .baseline(self.first_touch_us, "first read without a cache, same run")
                .ratio(p50 / self.first_touch_us),
            );
            sink.record(fig(
                format!("scale.get_after_warm_up_hits.{tag}"),
                "share of those reads served by the cache",
                hit_ratio,
                "share",
            ));
        }
    }
}

async fn parent(args: &Args) {
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let sink = match &args.json {
        Some(p) => Sink::append(p, args.quick).expect("--json file"),
        None => Sink::none(),
    };
    println!(
        "{:>10} {:>9} {:>10} {:>11} {:>10} {:>9} {:>9} {:>10} {:>11}   engine",
        "objects",
        "load/s",
        "open ms",
        "open+get ms",
        "kill-9 ms",
        "RSS B/obj",
        "disk B/obj",
        "cold p50µs",
        "warm p50µs"
    );
    for (at, &n) in args.ns.iter().enumerate() {
        let path = args
            .dir
            .join(format!("scale-{}-{n}.store", args.index.name()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path, Options::new().index(args.index))
            .await
            .expect("create");
        let vlen = args.value;
        let t = Instant::now();
        store
            .bulk_load((0..n).map(|i| (key(i), value(i, vlen))))
            .await
            .expect("bulk load");
        let load = t.elapsed();
        let loaded_peak = peak_rss();
        store.close().await.expect("close");
        drop(store);
        let closed_peak = peak_rss();
        let clean = run_child(args, "blobcask", "open", &path, n);
        assert_eq!(get(&clean, "clean"), 1.0, "a clean close reads as clean");
        assert_eq!(
            get(&clean, "from_image"),
            1.0,
            "the open used the index image"
        );
        let mut total = n;
        let killed = (!args.no_kill).then(|| {
            kill_after_puts(args, &path, n);
            total = n + 1000;
            run_child(args, "blobcask", "open", &path, total)
        });
        let verified = args
            .verify
            .then(|| run_child(args, "blobcask", "verify", &path, total));
        if !args.keep {
            let _ = std::fs::remove_file(&path);
        }
        let mut ours = Row::of(
            args.index.name(),
            n,
            load,
            &clean,
            get(&clean, "disk_bytes"),
        );
        ours.kill_open_s = Some(killed.map_or(f64::NAN, |k| get(&k, "open_s")));
        ours.print(n);
        println!(
            "{:>10} the loading process's peak RSS: {:.0} B per object after the bulk load, {:.0} B after the close",
            "",
            loaded_peak as f64 / n as f64,
            closed_peak as f64 / n as f64
        );
        if let Some(v) = &verified {
            println!(
                "{:>10} every object read back and verified: {} objects in {:.1} s after an open of {:.2} s; peak RSS {:.2} GiB",
                "",
                get(v, "verified"),
                get(v, "verify_s"),
                get(v, "verify_open_s"),
                get(v, "peak_rss_bytes") / (1u64 << 30) as f64
            );
            sink.record(Figure::new(
                "scale",
                &format!("scale.verify_all.{vlen}b.{n}.{}", args.index.name()),
                &format!("every object read back and compared after a reopen, {total} objects of {vlen} B, {}", args.index.name()),
                get(v, "verify_s"),
                "s",
            ).engine(args.index.name()));
        }
        let mut lmdb = None;
        for engine in args.engines.iter().filter(|e| *e != "blobcask") {
            if let Some(row) = others::run(args, engine, n) {
                row.print(n);
                row.record(&sink, n, vlen, None, false);
                if engine == "lmdb" {
                    lmdb = Some(row);
                }
            }
        }
        ours.record(&sink, n, vlen, lmdb.as_ref(), at + 1 == args.ns.len());
    }
}

/// The random keys a measuring child reads (20k, fewer in a small store).
fn picks(n: u64) -> Vec<u64> {
    let mut x = 0x1234_5678_9ABC_DEF1u64;
    (0..20_000.min(n))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        })
        .collect()
}

/// LMDB and SQLite, each behind its feature.
#[path = "scale_bench/others.rs"]
mod others;
