//! What a listing costs with each index backend: the time to list every
//! key of one store, and one prefix of it, and the memory the listing
//! takes at its peak (a counting global allocator, not an estimate).
//!
//! ```text
//! cargo run --release -p blobcask-bench --no-default-features --bin list-bench -- [--objects N] [--value-size N]
//! ```
//!
//! Defaults: 1,000,000 objects of 100 bytes (inline: the tuple blocks hold
//! keys and values), keys `dir-NNN/obj-NNNNNNNN` (20 bytes) in 1,000
//! directories. One store file, bulk loaded once; each backend opens it
//! (an index image of another kind is not used: the first open of each
//! rebuilds from the tuple blocks, so it is followed by a close and a
//! second open, which loads the image), then lists. The hash index holds
//! no keys: its listing reads them from the tuple blocks (one pass) and
//! sorts the matching ones; the ordered backends page through memory.
//! Also: `keys()` on the hash index (the same pass, no sort), and what the
//! command line tool's `ls` did before (a read-only open as BTree, which
//! reads every tuple block and builds a BTree, then lists).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use blobcask::blocking::Store;
use blobcask::{IndexKind, Options};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator and only counts bytes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size() as isize);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        grew(new as isize - l.size() as isize);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const DIRS: u64 = 1000;

fn key(i: u64) -> String {
    format!("dir-{:03}/obj-{i:08}", i % DIRS)
}

/// One listing's figures: keys seen, the time to its first key (the call
/// that starts it: on the hash index, the pass and the sort), the whole
/// time, and the peak of memory above what was live before it.
struct Run {
    count: usize,
    start: Duration,
    total: Duration,
    peak: isize,
}

/// Runs `list` (which starts a listing and returns how long that took
/// and how many keys it then saw) three times: the run of median total
/// time, with the largest peak of the three.
fn measure(mut list: impl FnMut() -> (Duration, usize)) -> Run {
    let mut runs = Vec::new();
    for _ in 0..3 {
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let t = Instant::now();
        let (start, count) = list();
        let total = t.elapsed();
        let peak = PEAK.load(Ordering::Relaxed) - before;
        runs.push(Run {
            count,
            start,
            total,
            peak,
        });
    }
    let peak = runs.iter().map(|r| r.peak).max().unwrap_or(0);
    runs.sort_by_key(|r| r.total);
    let mut median = runs.swap_remove(1);
    median.peak = peak;
    median
}

/// Starts `keys` (timed) and counts what it gives.
fn timed(keys: impl FnOnce() -> blobcask::Result<blobcask::Keys>) -> (Duration, usize) {
    let t = Instant::now();
    let keys = keys().unwrap();
    let start = t.elapsed();
    (start, keys.map(Result::unwrap).count())
}

fn row(what: &str, r: Run) {
    println!(
        "| {what} | {} | {:.2?} | {:.2?} | {:.1} MiB |",
        r.count,
        r.start,
        r.total,
        r.peak as f64 / (1 << 20) as f64
    );
}

fn main() {
    let mut objects = 1_000_000u64;
    let mut value_size = 100usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |what: &str| {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{what} N"))
        };
        match a.as_str() {
            "--objects" => objects = number("--objects"),
            "--value-size" => value_size = number("--value-size") as usize,
            _ => {
                eprintln!("usage: list-bench [--objects N] [--value-size N]");
                std::process::exit(2);
            }
        }
    }
    let dir = std::path::Path::new("target/bench");
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("list-bench.blobcask");
    let _ = std::fs::remove_file(&path);
    let t = Instant::now();
    let store = Store::open(&path, Options::new().capacity(1 << 30)).unwrap();
    // Loaded in a scrambled order, so no index or block holds them sorted.
    let order = (0..objects).map(|i| (i * 7_919) % objects);
    store
        .bulk_load(order.map(|i| (key(i), vec![7u8; value_size])))
        .unwrap();
    store.close().unwrap();
    let prefix = "dir-042/";
    let in_prefix = (0..objects).filter(|i| i % DIRS == 42).count();
    println!(
        "store: {objects} objects of {value_size} bytes, keys of {} bytes, loaded in {:.2?}; \
         prefix {prefix:?} holds {in_prefix}\n",
        key(0).len(),
        t.elapsed()
    );
    println!("| listing | keys | to start | in all (median of 3) | peak memory above the start |");
    println!("|---|---|---|---|---|");
    for kind in [IndexKind::BTree, IndexKind::Fst, IndexKind::Hash] {
        // The first open as `kind` rebuilds from the tuple blocks (and
        // stores `kind`); the second loads the image its close wrote.
        Store::open(&path, Options::new().index(kind))
            .unwrap()
            .close()
            .unwrap();
        // No warm-up: it fills the read cache in the background, which
        // would count as the listing's memory.
        let store = Store::open(&path, Options::new().warm_up(false)).unwrap();
        assert_eq!(store.stats().index, kind);
        if kind == IndexKind::Fst {
            // Let the background FST build finish.
            std::thread::sleep(Duration::from_secs(5));
        }
        let name = kind.name();
        row(
            &format!("{name}: list(\"\")"),
            measure(|| timed(|| store.list(""))),
        );
        row(
            &format!("{name}: list({prefix:?})"),
            measure(|| timed(|| store.list(prefix))),
        );
        if kind == IndexKind::Hash {
            row(
                "hash: keys() (the same pass, no order)",
                measure(|| timed(|| store.keys())),
            );
        }
        store.close().unwrap();
    }
    // The command line tool's `ls`: a read-only open, then the listing.
    for (what, index) in [
        (
            "ls before: read-only open as btree, then list",
            Some(IndexKind::BTree),
        ),
        ("ls now: read-only open (hash, its image), then list", None),
    ] {
        row(
            &format!("{what}(\"\")"),
            measure(|| {
                let t = Instant::now();
                let mut options = Options::new().read_only(true).warm_up(false);
                if let Some(index) = index {
                    options = options.index(index);
                }
                let store = Store::open(&path, options).unwrap();
                let keys = store.list("").unwrap();
                let start = t.elapsed();
                let n = keys.map(Result::unwrap).count();
                store.close().unwrap();
                (start, n)
            }),
        );
    }
    let _ = std::fs::remove_file(&path);
}
