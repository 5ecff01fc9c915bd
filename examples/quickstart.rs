//! Quickstart: store every file under a directory, read each back whole and
//! by random ranges, verify every byte, reopen, and report.
//!
//! ```text
//! cargo run --release -p blobcask-examples --bin quickstart -- [DIR] [--store PATH] [--keep]
//! ```
//!
//! DIR defaults to the current directory (`.git` and `target` are skipped).
//! The store is a temporary file unless `--store` is given; `--keep` leaves
//! it in place for the `blobcask` CLI to poke at.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blobcask::blocking::Store;
use blobcask::Options;
use rand::{Rng, SeedableRng};

/// Files larger than this are left out, so the demo stays quick.
const MAX_FILE: u64 = 256 << 20;
const RANGE_READS: usize = 5000;
const RANGE_LEN: u64 = 4096;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let name = entry.file_name();
        if ty.is_dir() && name != ".git" && name != "target" && name != "node_modules" {
            walk(&entry.path(), out)?;
        } else if ty.is_file() && entry.metadata()?.len() <= MAX_FILE {
            out.push(entry.path());
        }
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("quickstart: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut dir = PathBuf::from(".");
    let mut store_path = None;
    let mut keep = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => {
                store_path = Some(PathBuf::from(args.next().ok_or("--store needs a path")?))
            }
            "--keep" => keep = true,
            "-h" | "--help" => {
                println!("usage: quickstart [DIR] [--store PATH] [--keep]");
                return Ok(());
            }
            _ => dir = PathBuf::from(a),
        }
    }
    let mut files = Vec::new();
    walk(&dir, &mut files)?;
    files.sort();
    let contents: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter_map(|p| {
            let key = p
                .strip_prefix(&dir)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned();
            std::fs::read(p).ok().map(|v| (key, v))
        })
        .collect();
    let total: u64 = contents.iter().map(|(_, v)| v.len() as u64).sum();
    println!(
        "{} files, {} bytes under {}",
        contents.len(),
        total,
        dir.display()
    );

    let temp = std::env::temp_dir().join(format!(
        "blobcask-quickstart-{}.blobcask",
        std::process::id()
    ));
    let path = store_path.unwrap_or(temp);
    let _ = std::fs::remove_file(&path);
    let capacity = (total * 2 + (64 << 20)).next_power_of_two();
    let options = Options::new().capacity(capacity);
    let store = Store::open(&path, options.clone())?;

    let t = Instant::now();
    for (key, value) in &contents {
        store.put(key, value.clone())?;
    }
    let put_time = t.elapsed();
    println!(
        "stored  {} objects in {:.2?} ({:.1} MB/s, {:.0} puts/s; each put durable before it returns)",
        contents.len(),
        put_time,
        total as f64 / put_time.as_secs_f64() / 1e6,
        contents.len() as f64 / put_time.as_secs_f64()
    );

    // Reopen: the index and allocator are rebuilt from the tuple blocks.
    store.close()?;
    let t = Instant::now();
    let store = Store::open(&path, options)?;
    let r = store.stats().recovery;
    println!(
        "reopened in {:.2?} (recovery from tuple blocks: {})",
        t.elapsed(),
        if r.is_empty() && r.clean {
            "closed cleanly, nothing to roll back or repair".to_string()
        } else {
            format!(
                "rolled back {} groups, {} object versions; repaired {}",
                r.rolled_back_groups,
                r.rolled_back_objects,
                r.repaired.len()
            )
        }
    );

    let t = Instant::now();
    for (key, value) in &contents {
        let got = store.get(key)?;
        if got != value[..] {
            return Err(format!("{key}: read back differs").into());
        }
    }
    let get_time = t.elapsed();
    println!(
        "verified every object whole in {:.2?} ({:.1} MB/s; every 4 KiB block checked against its CRC32C by the store, then compared here)",
        get_time,
        total as f64 / get_time.as_secs_f64() / 1e6
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut lat = Vec::with_capacity(RANGE_READS);
    let non_empty: Vec<_> = contents.iter().filter(|(_, v)| !v.is_empty()).collect();
    for _ in 0..RANGE_READS.min(non_empty.len() * 50) {
        let (key, value) = non_empty[rng.random_range(0..non_empty.len())];
        let off = rng.random_range(0..value.len() as u64);
        let t = Instant::now();
        let got = store.read(key, off, RANGE_LEN)?;
        lat.push(t.elapsed());
        let end = (off + RANGE_LEN).min(value.len() as u64) as usize;
        if got != value[off as usize..end] {
            return Err(format!("{key}: range {off}+{RANGE_LEN} differs").into());
        }
    }
    lat.sort();
    println!(
        "verified {} random {}-byte range reads: p50 {:.1?}  p99 {:.1?}  max {:.1?}",
        lat.len(),
        RANGE_LEN,
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0)
    );

    // The read cache (on by default) keeps an object from its second whole
    // read on; a third pass is then served from RAM.
    let mut third = Duration::ZERO;
    for pass in 0..2 {
        let t = Instant::now();
        for (key, value) in &contents {
            if store.get(key)? != value[..] {
                return Err(format!("{key}: read back differs").into());
            }
        }
        third = if pass == 1 { t.elapsed() } else { third };
    }
    let c = store.stats().cache;
    println!(
        "read every object whole twice more: the third pass took {:.2?} ({:.1} MB/s); read cache {} hits, {} misses, {} of {} bytes held",
        third,
        total as f64 / third.as_secs_f64() / 1e6,
        c.hits,
        c.misses,
        c.bytes,
        c.capacity
    );

    let s = store.stats();
    let inline = contents
        .iter()
        .filter(|(k, _)| store.stat(k).map(|i| i.inline).unwrap_or(false))
        .count();
    println!("stats:");
    println!("  objects            {}", s.objects);
    println!("  inline objects     {inline} (<= inline threshold, no heap piece)");
    println!("  logical bytes      {}", s.logical_bytes);
    println!("  heap bytes         {}", s.allocated_bytes);
    println!("  metadata bytes     {}", s.metadata_bytes);
    println!("  free bytes         {} of {}", s.free_bytes, s.capacity);
    if let Some(a) = s.space_amplification() {
        println!("  space amplification {a:.3} (device bytes in use / user bytes)");
    }
    println!(
        "  io engine          {} (direct I/O: {})",
        s.io_engine, s.direct_io
    );
    store.close()?;
    if keep {
        println!("store kept at {}", path.display());
    } else {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
