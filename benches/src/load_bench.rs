//! Small values and bulk loads, in one run:
//!
//! * `bulk_load` of 64 KiB objects next to the raw sequential write of the
//!   same bytes on the same file (O_DIRECT, 1 MiB x 16, one fdatasync);
//! * `bulk_load` of 1 KiB objects in objects/s, next to `put` in a loop and
//!   `put` from 64 concurrent writers;
//! * the inline threshold: put/get rates and space amplification by value
//!   size (100 B .. 64 KiB) with the threshold below (0) and above (2048,
//!   the maximum) each size.
//!
//! ```text
//! cargo run --release -p blobcask-bench --bin load-bench -- [--dir DIR] [--quick]
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::{Bytes, Options, Store};

use blobcask_bench::raw;

fn fresh(dir: &std::path::Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

fn value(seed: u64, len: usize) -> Bytes {
    Bytes::from(blobcask_bench::pattern(seed, len))
}

fn main() {
    let mut dir = PathBuf::from("target/bench");
    let mut quick = false;
    let mut phase = String::from("all");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = PathBuf::from(args.next().expect("--dir DIR")),
            "--quick" => quick = true,
            "--phase" => phase = args.next().expect("--phase all|bulk|inline"),
            _ => {
                eprintln!("usage: load-bench [--dir DIR] [--quick] [--phase all|bulk|inline]");
                std::process::exit(2);
            }
        }
    }
    std::fs::create_dir_all(&dir).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if phase == "all" || phase == "bulk" {
            bulk_large(&dir, quick).await;
            bulk_small(&dir, quick).await;
        }
        if phase == "all" || phase == "inline" {
            inline_sweep(&dir, quick).await;
        }
    });
}

async fn bulk_large(dir: &std::path::Path, quick: bool) {
    let n = if quick { 2048 } else { 8192 };
    let size = 64 << 10;
    let total = (n * size) as u64;
    let capacity = total * 2 + (256 << 20);
    // Raw on fresh space: a new preallocated file of the store's size, so
    // both pay the file system's first write to unwritten extents.
    let raw_path = fresh(dir, "load-large-raw.img");
    std::fs::File::create(&raw_path)
        .and_then(|f| f.set_len(capacity))
        .unwrap();
    let fresh_fd = std::fs::OpenOptions::new()
        .write(true)
        .open(&raw_path)
        .unwrap();
    #[allow(unsafe_code)]
    // SAFETY: plain syscall on an open descriptor.
    unsafe {
        libc::posix_fallocate(
            std::os::fd::AsRawFd::as_raw_fd(&fresh_fd),
            0,
            capacity as i64,
        );
    }
    drop(fresh_fd);
    let raw_fresh = raw::sequential_write(&raw_path, 64 << 20, total, 1 << 20, 16);
    let _ = std::fs::remove_file(&raw_path);

    let path = fresh(dir, "load-large.blobcask");
    let store = Store::open(&path, Options::new().capacity(capacity))
        .await
        .unwrap();
    let items: Vec<(String, Bytes)> = (0..n)
        .map(|i| (format!("large/{i:06}"), value(i as u64, size)))
        .collect();
    let report = store.bulk_load(items.clone()).await.unwrap();
    let groups = store.stats().commit_groups;
    // The same keys twice more: the second load goes to the store's other
    // half (the first copies are still live while it is written) and frees
    // the first; the third reuses space the first one wrote.
    store.bulk_load(items.clone()).await.unwrap();
    let rewritten = store.bulk_load(items).await.unwrap();
    store.close().await.unwrap();
    // Raw again, over the region of the store file blobcask just wrote
    // (already-written extents: the device's best case).
    let raw = raw::sequential_write(&path, 64 << 20, total, 1 << 20, 16);
    let mbs = |d: Duration| total as f64 / d.as_secs_f64() / (1 << 20) as f64;
    println!("bulk load: {n} x 64 KiB ({} MiB)", total >> 20);
    println!("| path | MiB/s | ratio to raw (written space) | ratio to raw (fresh space) |");
    println!("|---|---|---|---|");
    let row = |name: &str, d: Duration| {
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} |",
            mbs(d),
            mbs(d) / mbs(raw),
            mbs(d) / mbs(raw_fresh)
        )
    };
    row(
        "raw O_DIRECT sequential write 1 MiB x16 + fdatasync, written space",
        raw,
    );
    row(
        "raw O_DIRECT sequential write 1 MiB x16 + fdatasync, fresh preallocated file",
        raw_fresh,
    );
    if let Some(d) = sqlite_load(dir, n, size) {
        row("SQLite BLOBs, one transaction (WAL, synchronous=FULL)", d);
    }
    row(
        &format!(
            "Store::bulk_load, fresh store ({} groups, {groups} group writes)",
            report.groups
        ),
        report.elapsed,
    );
    row(
        "Store::bulk_load again, third time (over space written before)",
        rewritten.elapsed,
    );
    let _ = std::fs::remove_file(&path);
}

async fn bulk_small(dir: &std::path::Path, quick: bool) {
    let n = if quick { 20_000 } else { 100_000 };
    println!("\n1 KiB objects ({n}), objects/s:");
    println!("| path | inline threshold | objects/s | ratio to put loop |");
    println!("|---|---|---|---|");
    for threshold in [512usize, 2048] {
        let path = fresh(dir, "load-small.blobcask");
        let opts = Options::new().capacity(1 << 30).inline_threshold(threshold);
        let store = Store::open(&path, opts.clone()).await.unwrap();
        let items: Vec<(String, Bytes)> = (0..n)
            .map(|i| (format!("small/{i:07}"), value(i as u64, 1024)))
            .collect();
        let report = store.bulk_load(items.clone()).await.unwrap();
        store.close().await.unwrap();

        // put in a loop, for a bounded time.
        let path2 = fresh(dir, "load-small-put.blobcask");
        let store = Store::open(&path2, opts.clone()).await.unwrap();
        let t = Instant::now();
        let mut done = 0u64;
        while t.elapsed() < Duration::from_secs(3) && (done as usize) < n {
            let (k, v) = &items[done as usize];
            store.put(k, v.clone()).await.unwrap();
            done += 1;
        }
        let loop_rate = done as f64 / t.elapsed().as_secs_f64();
        store.close().await.unwrap();

        // put from 64 concurrent writers.
        let path3 = fresh(dir, "load-small-par.blobcask");
        let store = Store::open(&path3, opts).await.unwrap();
        let items = Arc::new(items);
        let t = Instant::now();
        let tasks: Vec<_> = (0..64)
            .map(|w| {
                let (store, items) = (store.clone(), items.clone());
                tokio::spawn(async move {
                    for (k, v) in items.iter().skip(w).step_by(64) {
                        store.put(k, v.clone()).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let par_rate = n as f64 / t.elapsed().as_secs_f64();
        store.close().await.unwrap();
        println!("| Store::put in a loop | {threshold} | {loop_rate:.0} | 1.00 |");
        println!(
            "| Store::put, 64 writers | {threshold} | {par_rate:.0} | {:.1} |",
            par_rate / loop_rate
        );
        println!(
            "| Store::bulk_load | {threshold} | {:.0} | {:.1} |",
            report.objects_per_sec(),
            report.objects_per_sec() / loop_rate
        );
        if threshold == 512 {
            if let Some(d) = sqlite_load(dir, n, 1024) {
                let rate = n as f64 / d.as_secs_f64();
                println!(
                    "| SQLite BLOBs, one transaction | - | {rate:.0} | {:.1} |",
                    rate / loop_rate
                );
            }
        }
        for p in [path, path2, path3] {
            let _ = std::fs::remove_file(p);
        }
    }
}

async fn inline_sweep(dir: &std::path::Path, quick: bool) {
    println!(
        "\ninline threshold by value size (bulk-loaded, then random gets and concurrent puts):"
    );
    println!("| value size | threshold | stored | space amplification | puts/s (64 writers) | gets/s (1 reader) | warm gets/s (hot set of 1000) |");
    println!("|---|---|---|---|---|---|---|");
    for size in [100usize, 1024, 1536, 2048, 4096, 16 << 10, 64 << 10] {
        for threshold in [0usize, 2048] {
            let n = ((if quick { 16 } else { 64 } << 20) / size).min(50_000);
            let path = fresh(dir, "inline.blobcask");
            let store = Store::open(
                &path,
                Options::new().capacity(1 << 30).inline_threshold(threshold),
            )
            .await
            .unwrap();
            let items: Vec<(String, Bytes)> = (0..n)
                .map(|i| (format!("v/{i:07}"), value(i as u64, size)))
                .collect();
            store.bulk_load(items.clone()).await.unwrap();
            let st = store.stats();
            let amp = st.space_amplification().unwrap_or(0.0);
            let inline = store.stat(&items[0].0).await.unwrap().inline;
            // gets: 2000 random, one at a time.
            let t = Instant::now();
            let mut x = 12345u64;
            for _ in 0..2000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (k, _) = &items[(x >> 33) as usize % n];
                store.get(k).await.unwrap();
            }
            let gets = 2000.0 / t.elapsed().as_secs_f64();
            // Warm gets: a hot set read over and over (the read cache keeps
            // what is read twice).
            let hot = n.min(1000);
            for _ in 0..2 {
                for (k, _) in items.iter().take(hot) {
                    store.get(k).await.unwrap();
                }
            }
            let misses = store.stats().cache.misses;
            let t = Instant::now();
            for _ in 0..5 {
                for (k, _) in items.iter().take(hot) {
                    store.get(k).await.unwrap();
                }
            }
            let warm = (5 * hot) as f64 / t.elapsed().as_secs_f64();
            let warm_misses = store.stats().cache.misses - misses;
            // puts: 4000 overwrites of random keys from 64 writers (the
            // tuple blocks they change are spread over the store).
            let items = Arc::new(items);
            let t = Instant::now();
            let tasks: Vec<_> = (0..64u64)
                .map(|w| {
                    let (store, items) = (store.clone(), items.clone());
                    tokio::spawn(async move {
                        let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                        for _ in 0..4000 / 64 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let (k, v) = &items[(x % items.len() as u64) as usize];
                            store.put(k, v.clone()).await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            let puts = (4000 / 64 * 64) as f64 / t.elapsed().as_secs_f64();
            store.close().await.unwrap();
            println!(
                "| {size} | {threshold} | {} | {amp:.2} | {puts:.0} | {gets:.0} | {warm:.0} ({warm_misses} misses) |",
                if inline { "inline" } else { "heap" }
            );
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Loads `n` values of `size` bytes into SQLite in one transaction (WAL,
/// synchronous=FULL, so the commit is durable like a blobcask batch).
#[cfg(feature = "sqlite")]
fn sqlite_load(dir: &std::path::Path, n: usize, size: usize) -> Option<Duration> {
    let path = fresh(dir, "load.sqlite");
    let _ = std::fs::remove_file(dir.join("load.sqlite-wal"));
    let mut db = rusqlite::Connection::open(&path).ok()?;
    db.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE blobs (k TEXT PRIMARY KEY, v BLOB NOT NULL);")
        .ok()?;
    let items: Vec<(String, Bytes)> = (0..n)
        .map(|i| (format!("k/{i:07}"), value(i as u64, size)))
        .collect();
    let t = Instant::now();
    let tx = db.transaction().ok()?;
    {
        let mut stmt = tx
            .prepare("INSERT INTO blobs (k, v) VALUES (?1, ?2)")
            .ok()?;
        for (k, v) in &items {
            stmt.execute(rusqlite::params![k, &v[..]]).ok()?;
        }
    }
    tx.commit().ok()?;
    let d = t.elapsed();
    drop(db);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(dir.join("load.sqlite-wal"));
    let _ = std::fs::remove_file(dir.join("load.sqlite-shm"));
    Some(d)
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_load(_: &std::path::Path, _: usize, _: usize) -> Option<Duration> {
    None
}
