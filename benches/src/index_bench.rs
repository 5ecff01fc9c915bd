//! Index backends side by side: insert and lookup rates, RAM per key
//! (measured by a counting global allocator, not estimated), and store open
//! time (the index is rebuilt from tuple blocks at open).
//!
//! ```text
//! cargo run --release -p blobcask-bench --bin index-bench -- [--keys N] [--open-keys N]
//! ```
//!
//! Defaults: 1,000,000 URL-like keys (~80 bytes) for the index figures and
//! a 1,000,000-object store for the open figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ops::Bound;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use blobcask::{internals::build_index as build, IndexKind};
use blobcask::{Options, Store};
use rand::{Rng, SeedableRng};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts bytes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// URL-like keys: host, user, album and photo id, ~80 bytes on average.
fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let hosts = [
        "cdn.example.com",
        "media.example.org",
        "img.static-host.net",
    ];
    (0..n)
        .map(|i| {
            format!(
                "https://{}/u/{:07}/albums/{}-{:04}/photo-{:08}.jpg",
                hosts[rng.random_range(0..hosts.len())],
                rng.random_range(0..200_000),
                ["summer", "family", "work", "misc"][rng.random_range(0..4)],
                rng.random_range(0..3000),
                i
            )
            .into_bytes()
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn lookups(ix: &dyn blobcask::internals::KeyIndex, probe: &[Vec<u8>]) -> (Duration, usize) {
    let mut batches = vec![];
    let mut found = 0;
    for chunk in probe.chunks(100) {
        let t = Instant::now();
        for k in chunk {
            found += ix.get(k).is_some() as usize;
        }
        batches.push(t.elapsed() / chunk.len() as u32);
    }
    (median(batches), found)
}

fn main() {
    let mut n = 1_000_000usize;
    let mut open_n = 1_000_000usize;
    let mut value_size = 100usize;
    let mut store_only = false;
    let mut inline_threshold = blobcask::DEFAULT_INLINE_THRESHOLD;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keys" => n = args.next().and_then(|v| v.parse().ok()).expect("--keys N"),
            "--open-keys" => {
                open_n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--open-keys N")
            }
            "--value-size" => {
                value_size = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--value-size N")
            }
            "--store-only" => store_only = true,
            "--inline-threshold" => {
                inline_threshold = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--inline-threshold N")
            }
            _ => {
                eprintln!(
                    "usage: index-bench [--keys N] [--open-keys N] [--value-size N] [--inline-threshold N] [--store-only]"
                );
                std::process::exit(2);
            }
        }
    }
    if !store_only {
        index_part(n);
    }

    // Whole-store RAM per object and open time, on one store file opened
    // with each backend.
    let dir = std::path::Path::new("target/bench");
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("index-bench.blobcask");
    let _ = std::fs::remove_file(&path);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let okeys = keys(open_n, 7);
    let key_avg = okeys.iter().map(Vec::len).sum::<usize>() as f64 / open_n as f64;
    let created = rt.block_on(async {
        let store = Store::open(
            &path,
            Options::new()
                .capacity(4 << 30)
                .inline_threshold(inline_threshold),
        )
        .await
        .unwrap();
        let t = Instant::now();
        let per = open_n.div_ceil(64);
        let mut tasks = vec![];
        for chunk in okeys.chunks(per) {
            let (store, chunk) = (store.clone(), chunk.to_vec());
            tasks.push(tokio::spawn(async move {
                for k in chunk {
                    store.put(k, vec![7u8; value_size]).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let elapsed = t.elapsed();
        let st = store.stats();
        store.close().await.unwrap();
        (elapsed, st)
    });
    let (created, st) = created;
    println!(
        "\nstore with {open_n} objects ({value_size}-byte values, inline threshold {inline_threshold}, keys of {key_avg:.1} bytes on average), created by 64 concurrent writers in {created:.2?}\n"
    );
    // Space: everything not free (heap pieces, metadata extents and journal,
    // superblocks) per byte of values and keys.
    let used = st.capacity - st.free_bytes;
    let key_bytes = key_avg * open_n as f64;
    let mib = |b: f64| b / (1 << 20) as f64;
    println!(
        "space: {:.1} MiB used ({:.1} MiB metadata) for {:.1} MiB of values and {:.1} MiB of keys: {:.3} x values and keys ({:.3} x values alone)\n",
        mib(used as f64),
        mib(st.metadata_bytes as f64),
        mib(st.logical_bytes as f64),
        mib(key_bytes),
        used as f64 / (st.logical_bytes as f64 + key_bytes),
        used as f64 / st.logical_bytes as f64,
    );
    println!("| backend | open (rebuild) | RAM per object, whole store (FST: after its build) | minus key bytes |");
    println!("|---|---|---|---|");
    for kind in IndexKind::ALL {
        let before = live();
        let t = Instant::now();
        let store = blobcask::blocking::Store::open(&path, Options::new().index(kind)).unwrap();
        let open = t.elapsed();
        assert_eq!(store.stats().objects, open_n as u64);
        if kind == IndexKind::Fst {
            // Let the background FST build finish and be swapped in.
            std::thread::sleep(Duration::from_secs(8));
        }
        let ram = (live() - before) as f64 / open_n as f64;
        store.close().unwrap();
        drop(store);
        println!(
            "| {} | {:.2?} | {:.1} B | {:.1} B |",
            kind.name(),
            open,
            ram,
            ram - key_avg
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// Each index backend alone: inserts, bulk load, RAM per key, lookups.
fn index_part(n: usize) {
    let ks = keys(n, 1);
    let avg = ks.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let hits: Vec<Vec<u8>> = (0..100_000)
        .map(|_| ks[rng.random_range(0..n)].clone())
        .collect();
    let misses = keys(100_000, 99);
    println!("{n} keys, average {avg:.1} bytes\n");
    println!("| backend | insert/s | bulk load (open) | compact after | RAM/key after inserts | RAM/key after bulk load | lookup hit p50 | lookup miss p50 | ordered |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut hash_ram = 0.0;
    for kind in IndexKind::ALL {
        // One at a time, as commits do.
        let before = live();
        let t = Instant::now();
        let mut ix = build(kind);
        for (i, k) in ks.iter().enumerate() {
            ix.insert(k, i as u64);
        }
        let insert_rate = n as f64 / t.elapsed().as_secs_f64();
        let ram_inserts = (live() - before) as f64 / n as f64;
        let (hit, found) = lookups(ix.as_ref(), &hits);
        assert_eq!(found, hits.len());
        let (miss, found) = lookups(ix.as_ref(), &misses);
        assert_eq!(found, 0);
        let ordered = ix
            .range(Bound::Unbounded, Bound::Unbounded, 1, &mut Vec::new())
            .is_ok();
        drop(ix);
        // All at once, as open does: the keys arrive boxed (as decoded from
        // tuple blocks) and whatever the backend does not keep is freed.
        let before = live();
        let pairs: Vec<(Box<[u8]>, u64)> = ks
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone().into_boxed_slice(), i as u64))
            .collect();
        let t = Instant::now();
        let mut ix = build(kind);
        ix.load(pairs);
        let load = t.elapsed();
        // The FST serves from a sorted layer at once and builds behind it:
        // wait for the build so the memory figure is the steady state.
        if kind == IndexKind::Fst {
            while !ix.needs_maintenance() {
                std::thread::sleep(Duration::from_millis(5));
            }
            ix.maintain();
        }
        let ready = t.elapsed();
        let ram_load = (live() - before) as f64 / n as f64;
        if kind == IndexKind::Hash {
            hash_ram = ram_load;
        }
        drop(ix);
        println!(
            "| {} | {:.0} | {:.2?} | {:.2?} | {:.1} B | {:.1} B ({:.2} × hash) | {:.0} ns | {:.0} ns | {} |",
            kind.name(),
            insert_rate,
            load,
            ready,
            ram_inserts,
            ram_load,
            ram_load / hash_ram,
            hit.as_nanos(),
            miss.as_nanos(),
            if ordered { "yes" } else { "no" }
        );
    }
    drop(ks);
}
