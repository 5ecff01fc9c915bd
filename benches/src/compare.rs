//! Comparative benchmark: the same workload against blobcask (both I/O
//! engines), a file per object in a directory tree (written with fsync),
//! and SQLite BLOBs (`--features sqlite`), in one run on one machine.
//!
//! ```text
//! cargo run --release -p blobcask-bench --features sqlite --bin compare -- \
//!     [--dir DIR] [--concurrency 16] [--sizes 1K,16K,64K,256K,1M,4M,32M] [--budget 128M]
//! ```
//!
//! Phases per engine and object size (sizes are not powers of two: each is
//! the nominal size + 1/8): put (create + durable commit), stat, random
//! 4 KiB range read at random offsets, whole-object get, overwrite, delete.
//! Each size moves about `--budget` bytes. Reported per phase: ops/s, MB/s,
//! p50/p99/p999 latency; per engine and size: write amplification (bytes
//! the process wrote to storage, from /proc/self/io, per user byte) and
//! space amplification (bytes on disk per user byte). The page cache is
//! dropped before read phases when running as root (blobcask bypasses it
//! anyway with O_DIRECT). Prints a table and writes compare.csv and
//! compare.json next to the stores. Not included yet: fjall, RocksDB
//! (its C++ build takes ~50 minutes here), charts, peak memory per engine.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use blobcask::{IoEngineKind, Options};
use rand::{Rng, SeedableRng};

trait Engine: Sync {
    fn name(&self) -> String;
    fn put(&self, key: &str, value: &[u8]);
    fn get(&self, key: &str) -> usize;
    fn read(&self, key: &str, offset: u64, len: usize) -> usize;
    fn stat(&self, key: &str) -> u64;
    fn delete(&self, key: &str);
    fn bytes_on_disk(&self) -> u64;
}

struct Blobcask(blobcask::blocking::Store, &'static str);

impl Engine for Blobcask {
    fn name(&self) -> String {
        format!("blobcask ({})", self.1)
    }
    fn put(&self, key: &str, value: &[u8]) {
        self.0.put(key, value.to_vec()).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        self.0.get(key).unwrap().len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        self.0.read(key, offset, len as u64).unwrap().len()
    }
    fn stat(&self, key: &str) -> u64 {
        self.0.stat(key).unwrap().size
    }
    fn delete(&self, key: &str) {
        self.0.delete(key).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        let s = self.0.stats();
        s.capacity - s.free_bytes
    }
}

/// A file per object under a two-level directory tree, fsync'd on write.
struct Files(PathBuf);

impl Files {
    fn path(&self, key: &str) -> PathBuf {
        let h = key
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
        self.0
            .join(format!("{:02x}", h % 256))
            .join(key.replace('/', "_"))
    }
}

impl Engine for Files {
    fn name(&self) -> String {
        "file per object".into()
    }
    fn put(&self, key: &str, value: &[u8]) {
        let p = self.path(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let tmp = p.with_extension("tmp");
        let f = File::create(&tmp).unwrap();
        f.write_all_at(value, 0).unwrap();
        f.sync_data().unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        std::fs::read(self.path(key)).unwrap().len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        let f = File::open(self.path(key)).unwrap();
        let mut buf = vec![0u8; len];
        let mut n = 0;
        while n < len {
            match f.read_at(&mut buf[n..], offset + n as u64).unwrap() {
                0 => break,
                k => n += k,
            }
        }
        n
    }
    fn stat(&self, key: &str) -> u64 {
        std::fs::metadata(self.path(key)).unwrap().len()
    }
    fn delete(&self, key: &str) {
        std::fs::remove_file(self.path(key)).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            std::fs::read_dir(p)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| match e.metadata() {
                            Ok(m) if m.is_dir() => walk(&e.path()) + m.blocks() * 512,
                            Ok(m) => m.blocks() * 512,
                            Err(_) => 0,
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        walk(&self.0)
    }
}

#[cfg(feature = "sqlite")]
struct Sqlite(Mutex<rusqlite::Connection>, PathBuf);

#[cfg(feature = "sqlite")]
impl Engine for Sqlite {
    fn name(&self) -> String {
        "SQLite BLOBs (WAL, synchronous=FULL)".into()
    }
    fn put(&self, key: &str, value: &[u8]) {
        let db = self.0.lock().unwrap();
        db.execute(
            "INSERT OR REPLACE INTO blobs (k, v) VALUES (?1, ?2)",
            rusqlite::params![key, value],
        )
        .unwrap();
    }
    fn get(&self, key: &str) -> usize {
        let db = self.0.lock().unwrap();
        db.query_row("SELECT v FROM blobs WHERE k = ?1", [key], |r| {
            r.get::<_, Vec<u8>>(0)
        })
        .unwrap()
        .len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        let db = self.0.lock().unwrap();
        let rowid: i64 = db
            .query_row("SELECT rowid FROM blobs WHERE k = ?1", [key], |r| r.get(0))
            .unwrap();
        let blob = db
            .blob_open(rusqlite::MAIN_DB, "blobs", "v", rowid, true)
            .unwrap();
        let mut buf = vec![0u8; len];
        blob.read_at(&mut buf, offset as usize).unwrap()
    }
    fn stat(&self, key: &str) -> u64 {
        let db = self.0.lock().unwrap();
        db.query_row("SELECT length(v) FROM blobs WHERE k = ?1", [key], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as u64
    }
    fn delete(&self, key: &str) {
        let db = self.0.lock().unwrap();
        db.execute("DELETE FROM blobs WHERE k = ?1", [key]).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", self.1.display())).ok())
            .map(|m| m.blocks() * 512)
            .sum()
    }
}

/// Bytes this process has caused to be written to storage.
fn io_write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("write_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn drop_page_cache() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .is_ok_and(|s| s.success())
}

struct PhaseResult {
    engine: String,
    size: usize,
    phase: &'static str,
    ops: usize,
    bytes: u64,
    elapsed: Duration,
    lat: Vec<Duration>,
}

impl PhaseResult {
    fn pct(&self, p: f64) -> f64 {
        if self.lat.is_empty() {
            return 0.0;
        }
        self.lat[((self.lat.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e6
    }
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Runs `op(i)` for i in 0..n on `threads` threads; latencies per op.
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
    let elapsed = t.elapsed();
    let mut lat = lat.into_inner().unwrap();
    lat.sort();
    PhaseResult {
        engine: engine.name(),
        size,
        phase: name,
        ops: n,
        bytes: bytes_per_op * n as u64,
        elapsed,
        lat,
    }
}

fn parse_size(s: &str) -> usize {
    let (num, mul) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().expect("size") * mul
}

struct Amp {
    engine: String,
    size: usize,
    write_amp: f64,
    space_amp: f64,
}

fn run_engine(
    engine: &dyn Engine,
    size: usize,
    n: usize,
    threads: usize,
    out: &mut Vec<PhaseResult>,
    amps: &mut Vec<Amp>,
) {
    let value: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    let key = |i: usize| format!("obj/{i:06}");
    let w0 = io_write_bytes();
    out.push(phase(engine, size, "put", n, threads, size as u64, |i| {
        engine.put(&key(i), &value)
    }));
    let written = io_write_bytes() - w0;
    amps.push(Amp {
        engine: engine.name(),
        size,
        write_amp: written as f64 / (size * n) as f64,
        space_amp: engine.bytes_on_disk() as f64 / (size * n) as f64,
    });
    out.push(phase(engine, size, "stat", n, threads, 0, |i| {
        assert_eq!(engine.stat(&key(i)), size as u64)
    }));
    drop_page_cache();
    let reads = n.clamp(500, 4000);
    out.push(phase(engine, size, "read 4K", reads, threads, 4096, |i| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        let off = rng.random_range(0..size.saturating_sub(4096).max(1)) as u64;
        engine.read(&key(rng.random_range(0..n)), off, 4096);
    }));
    drop_page_cache();
    out.push(phase(engine, size, "get", n, threads, size as u64, |i| {
        assert_eq!(engine.get(&key(i)), size)
    }));
    out.push(phase(
        engine,
        size,
        "overwrite",
        n,
        threads,
        size as u64,
        |i| engine.put(&key(i), &value),
    ));
    out.push(phase(engine, size, "delete", n, threads, 0, |i| {
        engine.delete(&key(i))
    }));
}

fn main() {
    let mut dir = PathBuf::from("target/bench/compare");
    let mut threads = 16usize;
    let mut sizes = "1K,16K,64K,256K,1M,4M,32M".to_string();
    let mut budget = 128usize << 20;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--dir" => dir = PathBuf::from(v()),
            "--concurrency" => threads = v().parse().expect("concurrency"),
            "--sizes" => sizes = v(),
            "--budget" => budget = parse_size(&v()),
            _ => {
                eprintln!("usage: compare [--dir DIR] [--concurrency N] [--sizes 1K,16K,..] [--budget 128M]");
                std::process::exit(2);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut results = Vec::new();
    let mut amps = Vec::new();
    for nominal in sizes.split(',').map(parse_size) {
        // Not a power of two: nominal + 1/8.
        let size = nominal + nominal / 8;
        let n = (budget / size).clamp(8, 20_000);
        let capacity = ((size + 4096) * n * 3) as u64 + (256 << 20);
        for (label, kind) in [
            ("io_uring", IoEngineKind::IoUring),
            ("portable", IoEngineKind::Portable),
        ] {
            let path = dir.join(format!("blobcask-{label}.store"));
            let _ = std::fs::remove_file(&path);
            let store = blobcask::blocking::Store::open(
                &path,
                Options::new().capacity(capacity).io_engine(kind),
            )
            .unwrap();
            run_engine(
                &Blobcask(store.clone(), label),
                size,
                n,
                threads,
                &mut results,
                &mut amps,
            );
            store.close().unwrap();
            let _ = std::fs::remove_file(&path);
        }
        let fs_dir = dir.join("files");
        let _ = std::fs::remove_dir_all(&fs_dir);
        std::fs::create_dir_all(&fs_dir).unwrap();
        run_engine(
            &Files(fs_dir.clone()),
            size,
            n,
            threads,
            &mut results,
            &mut amps,
        );
        let _ = std::fs::remove_dir_all(&fs_dir);
        #[cfg(feature = "sqlite")]
        {
            let db_path = dir.join("sqlite.db");
            for s in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{s}", db_path.display()));
            }
            let db = rusqlite::Connection::open(&db_path).unwrap();
            db.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE blobs (k TEXT PRIMARY KEY, v BLOB NOT NULL);")
                .unwrap();
            run_engine(
                &Sqlite(Mutex::new(db), db_path.clone()),
                size,
                n,
                threads,
                &mut results,
                &mut amps,
            );
        }
        eprintln!("size {size} done");
    }
    println!("| engine | object size | phase | ops/s | MB/s | p50 µs | p99 µs | p999 µs |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut csv =
        String::from("engine,size,phase,ops,ops_per_sec,mb_per_sec,p50_us,p99_us,p999_us\n");
    let mut json = Vec::new();
    for r in &results {
        println!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
            r.engine,
            r.size,
            r.phase,
            r.ops_per_sec(),
            r.mb_per_sec(),
            r.pct(0.5),
            r.pct(0.99),
            r.pct(0.999)
        );
        csv.push_str(&format!(
            "\"{}\",{},{},{},{:.1},{:.3},{:.1},{:.1},{:.1}\n",
            r.engine,
            r.size,
            r.phase,
            r.ops,
            r.ops_per_sec(),
            r.mb_per_sec(),
            r.pct(0.5),
            r.pct(0.99),
            r.pct(0.999)
        ));
        json.push(format!(
            "{{\"engine\":\"{}\",\"size\":{},\"phase\":\"{}\",\"ops\":{},\"ops_per_sec\":{:.1},\"mb_per_sec\":{:.3},\"p50_us\":{:.1},\"p99_us\":{:.1},\"p999_us\":{:.1}}}",
            r.engine,
            r.size,
            r.phase,
            r.ops,
            r.ops_per_sec(),
            r.mb_per_sec(),
            r.pct(0.5),
            r.pct(0.99),
            r.pct(0.999)
        ));
    }
    println!("\n| engine | object size | write amplification | space amplification |");
    println!("|---|---|---|---|");
    for a in &amps {
        println!(
            "| {} | {} | {:.2} | {:.2} |",
            a.engine, a.size, a.write_amp, a.space_amp
        );
    }
    std::fs::write(dir.join("compare.csv"), csv).unwrap();
    std::fs::write(
        dir.join("compare.json"),
        format!("[\n{}\n]\n", json.join(",\n")),
    )
    .unwrap();
    eprintln!("wrote {}/compare.csv and compare.json", dir.display());
}
