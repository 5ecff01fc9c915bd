//! A cache store (`Options::eviction`, issue 43): bounded, evicting by
//! S3-FIFO, never an object being read, crash-safe like any delete, its
//! hit ratio that of an offline S3-FIFO simulation of the same trace.
//!
//! Invariants guarded (`INVARIANTS.md`): the cache bound (a cache store
//! never grows past `max_capacity`, or its size without one); 1 and 4 for
//! evictions (a cut anywhere loses only objects being evicted, never a kept
//! one); 2 and 5 (an object a read holds is never evicted, and its bytes
//! are right).

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use blobcask::blocking::Store;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::io::{AlignedBuf, BufResult, IoEngine, IoFuture};
use blobcask::{ErrorKind, Eviction, Options};
use common::pattern;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn cache_options() -> Options {
    Options::new().eviction(Eviction::S3Fifo)
}

/// Size of the `i`-th object of the mixed workloads: inline values, one
/// block, a few blocks, and now and then a large one.
fn mixed_size(rng: &mut StdRng) -> usize {
    match rng.random_range(0..10) {
        0..=2 => rng.random_range(1..1024),
        3..=6 => rng.random_range(1024..20_000),
        7 | 8 => rng.random_range(20_000..100_000),
        _ => rng.random_range(100_000..400_000),
    }
}

/// The cache bound: a put loop of ten times the cache's size, mixed sizes,
/// never fails and never grows the file past `max_capacity`; what is kept
/// reads back exactly; a value larger than the whole cache is `TooLarge`.
#[test]
fn a_cache_never_grows_past_its_bound_under_ten_times_its_size_of_puts() {
    const BOUND: u64 = 4 << 20;
    let t = common::temp_path();
    let s = Store::open(
        &t.path,
        cache_options().capacity(2 << 20).max_capacity(BOUND),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(43);
    let mut model = BTreeMap::new();
    let (mut put, mut i) = (0u64, 0u64);
    while put < 10 * BOUND {
        let size = mixed_size(&mut rng);
        let key = format!("k{i}");
        let seed = rng.random();
        s.put(&key, pattern(seed, size))
            .unwrap_or_else(|e| panic!("put {i} of {size} bytes after {put} bytes: {e}"));
        model.insert(key, (seed, size));
        put += size as u64;
        i += 1;
        let st = s.stats();
        assert!(
            st.capacity <= BOUND,
            "capacity {} after {put} bytes",
            st.capacity
        );
        let file = std::fs::metadata(&t.path).unwrap().len();
        assert!(file <= BOUND, "file of {file} bytes after {put} bytes");
    }
    let st = s.stats();
    assert!(st.evictions > 0 && st.evicted_bytes > 0, "{st:?}");
    let mut kept = 0;
    for (k, (seed, size)) in &model {
        match s.get(k) {
            Ok(b) => {
                assert_eq!(b, pattern(*seed, *size), "{k}");
                kept += 1;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{k}: {e}"),
        }
    }
    assert_eq!(kept, st.objects, "{st:?}");
    assert_eq!(model.len() as u64 - kept, st.evictions, "{st:?}");
    let e = s.put("huge", vec![7u8; 5 << 20]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    // The same loop on a store that does not evict fails for room.
    let t2 = common::temp_path();
    let plain = Store::open(
        &t2.path,
        Options::new().capacity(2 << 20).max_capacity(BOUND),
    )
    .unwrap();
    let full = (0..2000).find_map(|i| plain.put(format!("k{i}"), vec![1u8; 50_000]).err());
    assert_eq!(full.map(|e| e.kind()), Some(ErrorKind::NoSpace));
    s.close().unwrap();
}

/// Without `max_capacity` a cache store keeps the size it was given.
#[test]
fn a_cache_without_max_capacity_keeps_its_size() {
    let t = common::temp_path();
    let s = Store::open(&t.path, cache_options().capacity(2 << 20)).unwrap();
    for i in 0..200 {
        s.put(format!("k{i}"), pattern(i, 30_000)).unwrap();
    }
    let st = s.stats();
    assert_eq!(st.capacity, 2 << 20);
    assert_eq!(st.max_capacity, Some(2 << 20));
    assert!(st.evictions > 0);
}

/// An offline FIFO of `capacity` bytes over `trace` (each request a get,
/// and a put on a miss): whether each request hit.
fn fifo_hits(trace: &[(u32, u64)], capacity: u64) -> Vec<bool> {
    let mut q = VecDeque::new();
    let mut present: HashMap<u32, u64> = HashMap::new();
    let mut used = 0;
    let mut hits = Vec::with_capacity(trace.len());
    for &(k, size) in trace {
        hits.push(present.contains_key(&k));
        if present.contains_key(&k) {
            continue;
        }
        while used + size > capacity {
            let Some(old) = q.pop_front() else { break };
            used -= present.remove(&old).unwrap_or(0);
        }
        q.push_back(k);
        present.insert(k, size);
        used += size;
    }
    hits
}

/// An offline S3-FIFO as `store/evict/policy.rs` describes it (small queue
/// a tenth of the bytes, move on a read, 2-bit counts in main, a ghost of
/// as many keys as are cached): each request a get, and a put on a miss.
/// Returns (hits, misses) and the keys cached at the end.
fn s3fifo_simulation(trace: &[(u32, u64)], capacity: u64) -> ((u64, u64), HashSet<u32>) {
    #[derive(Clone, Copy, PartialEq)]
    enum Q {
        Small,
        Main,
    }
    let mut small: VecDeque<u32> = VecDeque::new();
    let mut main: VecDeque<u32> = VecDeque::new();
    let (mut small_bytes, mut main_bytes) = (0u64, 0u64);
    let mut at: HashMap<u32, (Q, u8, u64)> = HashMap::new();
    let mut ghost: VecDeque<u32> = VecDeque::new();
    let mut ghost_set: HashSet<u32> = HashSet::new();
    let (mut hits, mut misses) = (0, 0);
    for &(k, size) in trace {
        if let Some(e) = at.get_mut(&k) {
            e.1 = (e.1 + 1).min(3);
            hits += 1;
            continue;
        }
        misses += 1;
        while small_bytes + main_bytes + size > capacity {
            let total = small_bytes + main_bytes;
            let from_small = !small.is_empty() && (main.is_empty() || small_bytes * 10 >= total);
            if from_small {
                let Some(v) = small.pop_front() else { break };
                let (_, f, w) = at[&v];
                small_bytes -= w;
                if f > 0 {
                    at.insert(v, (Q::Main, 0, w));
                    main.push_back(v);
                    main_bytes += w;
                } else {
                    at.remove(&v);
                    if ghost_set.insert(v) {
                        ghost.push_back(v);
                    }
                    while ghost.len() > at.len().max(1) {
                        let old = ghost.pop_front().unwrap();
                        ghost_set.remove(&old);
                    }
                }
            } else {
                let Some(v) = main.pop_front() else { break };
                let (_, f, w) = at[&v];
                if f > 0 {
                    at.insert(v, (Q::Main, f - 1, w));
                    main.push_back(v);
                } else {
                    main_bytes -= w;
                    at.remove(&v);
                    if ghost_set.insert(v) {
                        ghost.push_back(v);
                    }
                    while ghost.len() > at.len().max(1) {
                        let old = ghost.pop_front().unwrap();
                        ghost_set.remove(&old);
                    }
                }
            }
        }
        if ghost_set.remove(&k) {
            main.push_back(k);
            main_bytes += size;
            at.insert(k, (Q::Main, 0, size));
        } else {
            small.push_back(k);
            small_bytes += size;
            at.insert(k, (Q::Small, 0, size));
        }
    }
    ((hits, misses), at.into_keys().collect())
}

/// A store of `bytes` on the in-memory device, as a cache.
fn mem_cache(bytes: usize) -> Store {
    let dev = Arc::new(MemDevice::new(bytes));
    Store::open_with_engine(dev, cache_options()).unwrap()
}

/// S3-FIFO's point: a hot set read again and again survives a one-pass
/// scan of cold keys three times the cache's size (every later read of
/// it hits), where a FIFO of the same trace misses it again and again.
#[test]
fn a_hot_set_read_again_and_again_survives_a_scan_of_cold_keys() {
    const SIZE: usize = 16 << 10;
    let s = mem_cache(4 << 20);
    let room = s.stats().free_bytes;
    let hot: Vec<u32> = (0..30).collect();
    let mut trace = Vec::new();
    // Whether it hit.
    let get_or_put = |k: u32, trace: &mut Vec<(u32, u64)>| {
        trace.push((k, SIZE as u64));
        match s.get(format!("k{k}")) {
            Ok(b) => {
                assert_eq!(b, pattern(u64::from(k), SIZE), "k{k}");
                true
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                s.put(format!("k{k}"), pattern(u64::from(k), SIZE)).unwrap();
                false
            }
            Err(e) => panic!("{e}"),
        }
    };
    for _ in 0..3 {
        for &k in &hot {
            get_or_put(k, &mut trace);
        }
    }
    let warm = trace.len();
    let cold = 3 * room as usize / SIZE;
    let mut hot_misses = 0;
    for (i, k) in (1000..1000 + cold as u32).enumerate() {
        assert!(!get_or_put(k, &mut trace), "a cold key hit");
        // The hot set stays hot while the scan runs.
        if i % 40 == 39 {
            for &k in &hot {
                hot_misses += usize::from(!get_or_put(k, &mut trace));
            }
        }
    }
    assert_eq!(hot_misses, 0, "hot keys evicted by a scan");
    assert!(s.stats().evictions as usize > cold / 2);
    let fifo = fifo_hits(&trace, room);
    let fifo_hot_misses = trace
        .iter()
        .zip(&fifo)
        .skip(warm)
        .filter(|((k, _), hit)| *k < 1000 && !**hit)
        .count();
    assert!(
        fifo_hot_misses > hot.len(),
        "a FIFO misses the hot set {fifo_hot_misses} times: the test could not fail"
    );
    let (_, s3) = s3fifo_simulation(&trace, room);
    assert!(hot.iter().all(|k| s3.contains(k)));
}

/// A device whose reads longer than a block wait while `gate` is closed:
/// a whole-object read of a heap value stays in flight (tuple block reads
/// go on).
struct GatedReads {
    dev: MemDevice,
    gate: Arc<AtomicBool>,
    waiting: Arc<AtomicU64>,
}

impl IoEngine for GatedReads {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let small = buf.capacity() <= blobcask::internals::BLOCK_SIZE;
        let read = self.dev.read_at(buf, offset);
        if small || self.gate.load(Ordering::SeqCst) {
            return read;
        }
        let gate = self.gate.clone();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = futures::channel::oneshot::channel();
        std::thread::spawn(move || {
            while !gate.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = tx.send(());
        });
        Box::pin(async move {
            let _ = rx.await;
            read.await
        })
    }
    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        self.dev.write_at(buf, offset)
    }
    fn sync(&self) -> IoFuture<io::Result<()>> {
        self.dev.sync()
    }
    fn size(&self) -> io::Result<u64> {
        self.dev.size()
    }
    fn name(&self) -> &'static str {
        "gated-reads"
    }
    fn direct_io(&self) -> bool {
        false
    }
}

/// Invariants 2 and 5 under eviction: an object whose read is in flight
/// (the read future holds its extent) is never evicted however much is put
/// meanwhile, and the read returns its bytes. The puts read each new
/// object once, so the main queue turns over many times: without the
/// check the held object goes.
#[test]
fn an_object_being_read_is_never_evicted() {
    let gate = Arc::new(AtomicBool::new(true));
    let waiting = Arc::new(AtomicU64::new(0));
    let dev = Arc::new(GatedReads {
        dev: MemDevice::new(4 << 20),
        gate: gate.clone(),
        waiting: waiting.clone(),
    });
    let s = futures::executor::block_on(blobcask::Store::open_with_engine(
        dev,
        cache_options().cache_bytes(0),
    ))
    .unwrap();
    let held = pattern(9, 64 << 10);
    futures::executor::block_on(s.put("held", held.clone())).unwrap();
    gate.store(false, Ordering::SeqCst);
    let mut read = Box::pin(s.get("held"));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    while waiting.load(Ordering::SeqCst) == 0 {
        assert!(read.as_mut().poll(&mut cx).is_pending(), "the read ended");
    }
    let mut evicted_before = 0;
    for i in 0..600u64 {
        let key = format!("k{i}");
        futures::executor::block_on(s.put(&key, pattern(i, 24 << 10))).unwrap();
        // Read once (gated reads of other keys are not wanted: a read of
        // a single block's value is not gated).
        let _ = futures::executor::block_on(s.read(&key, 0, 100));
        assert!(s.contains("held"), "evicted while being read, at put {i}");
        evicted_before = s.stats().evictions;
    }
    assert!(
        evicted_before > 400,
        "{evicted_before} evictions: the queues did not turn over"
    );
    gate.store(true, Ordering::SeqCst);
    let got = futures::executor::block_on(read).unwrap();
    assert_eq!(got, held);
}

/// Invariants 1 and 4 for evictions: a cache workload (puts about three times
/// the device, mixed sizes, with reads) cut at every write, every landing:
/// the reopened store holds only acknowledged objects with their exact
/// bytes (or the interrupted put's), and every object the store still
/// held in memory at the cut (kept, not being evicted) is there.
#[test]
fn every_crash_point_of_a_cache_loses_only_evicted_objects() {
    const DEVICE: usize = 1 << 20;
    let mut rng = StdRng::seed_from_u64(7);
    let work: Vec<(String, Vec<u8>)> = (0..90)
        .map(|i| {
            let size = match rng.random_range(0..4) {
                0 => rng.random_range(1..900),
                1 | 2 => rng.random_range(8000..40_000),
                _ => rng.random_range(40_000..150_000),
            };
            (format!("k{}", i % 50), pattern(rng.random(), size))
        })
        .collect();
    let total: usize = work.iter().map(|(_, v)| v.len()).sum();
    assert!(total > 2 * DEVICE, "{total}");
    cut_a_cache_everywhere(
        DEVICE,
        || cache_options().inline_threshold(512),
        &work,
        1,
        20,
    );
}

/// The same for a cache of small objects past its metadata limit (half of
/// 1 MiB): the puts there evict inline objects for tuple room, and a cut
/// at every seventh write of them, four landings each, loses only objects
/// being evicted.
#[test]
fn every_crash_point_of_a_cache_at_its_metadata_limit_loses_only_evicted_objects() {
    const DEVICE: usize = 1 << 20;
    let mut rng = StdRng::seed_from_u64(43);
    let work: Vec<(String, Vec<u8>)> = (0..700)
        .map(|i| {
            let size = rng.random_range(700..1000);
            (format!("k{}", i % 650), pattern(rng.random(), size))
        })
        .collect();
    cut_a_cache_everywhere(
        DEVICE,
        || cache_options().checkpoint_after(0),
        &work,
        7,
        100,
    );
}

/// Puts `work` into a cache of `device` bytes opened with `opts`, cut at
/// every `stride`-th write (the puts made `evictions` at least), four
/// landings each: every reopen serves only acknowledged bytes, and every
/// object the store still held at the cut is there.
fn cut_a_cache_everywhere(
    device: usize,
    opts: impl Fn() -> Options,
    work: &[(String, Vec<u8>)],
    stride: usize,
    evictions: u64,
) {
    let base = {
        let dev = Arc::new(MemDevice::new(device));
        Store::open_with_engine(dev.clone(), opts())
            .unwrap()
            .close()
            .unwrap();
        dev.volatile_image()
    };
    // Runs the work, with a power cut armed at write `cut` after open:
    // what was acknowledged, the put that failed, and the acknowledged
    // keys the store still held in memory then (kept, not evicted).
    type Run = (BTreeMap<String, Vec<u8>>, Option<usize>, BTreeSet<String>);
    let run = |dev: &Arc<MemDevice>, cut: Option<u64>| -> Run {
        let s = Store::open_with_engine(dev.clone(), opts()).unwrap();
        if let Some(cut) = cut {
            dev.crash_after_writes(cut);
        }
        let mut acked = BTreeMap::new();
        let mut failed = None;
        for (i, (k, v)) in work.iter().enumerate() {
            if s.put(k, v.clone()).is_err() {
                failed = Some(i);
                break;
            }
            acked.insert(k.clone(), v.clone());
            let _ = s.get(k);
        }
        let held = acked.keys().filter(|k| s.contains(k)).cloned().collect();
        if failed.is_none() {
            // The cut may fall in the close's writes (how many the puts
            // made depends on when the maintenance thread placed homes):
            // a close it fails loses nothing acknowledged, as checked below.
            let _ = s.close();
        }
        (acked, failed, held)
    };
    let dry = Arc::new(MemDevice::from_image(base.clone()));
    let (_, failed, _) = run(&dry, None);
    assert!(failed.is_none());
    let writes = {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let s = Store::open_with_engine(dev.clone(), opts()).unwrap();
        let start = dev.writes();
        for (k, v) in work {
            s.put(k, v.clone()).unwrap();
            let _ = s.get(k);
        }
        let n = dev.writes() - start;
        assert!(s.stats().evictions > evictions, "{:?}", s.stats());
        s.close().unwrap();
        n
    };
    let mut points = 0;
    for cut in (1..=writes).step_by(stride) {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let (acked, failed, held) = run(&dev, Some(cut));
        let in_flight = failed.and_then(|i| work.get(i));
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::LastOnly,
            CrashMode::Random(cut * 31 + 7),
        ] {
            let what = format!("cut at write {cut}/{writes} {mode:?} during put {failed:?}");
            let image = dev.crash_image(mode);
            let s = Store::open_with_engine(Arc::new(MemDevice::from_image(image)), opts())
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            let keys: BTreeSet<&String> = work.iter().map(|(k, _)| k).collect();
            for k in keys {
                if !s.contains(k) {
                    // Lost: only an object being evicted may be.
                    let kept = held.contains(k) && in_flight.is_none_or(|(f, _)| f != k);
                    assert!(!kept, "{what}: {k} was kept and is lost");
                    continue;
                }
                let got = s.get(k).unwrap_or_else(|e| panic!("{what}: {k}: {e}"));
                let ok = acked.get(k).is_some_and(|v| got == v[..])
                    || in_flight.is_some_and(|(f, v)| f == k && got == v[..]);
                assert!(ok, "{what}: {k} has bytes of no acknowledged put");
            }
            let st = s.stats();
            assert_eq!(
                st.free_bytes + st.allocated_bytes + st.metadata_bytes + 8192,
                st.capacity,
                "{what}: allocator does not account for every block"
            );
            s.close().unwrap();
            points += 1;
        }
    }
    assert!(points > 200, "only {points} crash images");
}

/// Stats count exactly: hits (reads that found their key), misses (reads
/// of absent keys), evictions and their bytes (every object put and not
/// there at the end, by size).
#[test]
fn stats_count_hits_misses_and_evictions_exactly() {
    let s = mem_cache(2 << 20);
    s.put("a", vec![1u8; 100]).unwrap();
    s.put("b", vec![2u8; 10_000]).unwrap();
    s.get("a").unwrap();
    s.get("a").unwrap();
    s.read("b", 5, 10).unwrap();
    assert_eq!(s.get("zz").unwrap_err().kind(), ErrorKind::NotFound);
    s.stat("zz").unwrap_err();
    assert!(!s.contains("a1"));
    let st = s.stats();
    assert_eq!(
        (st.hits, st.misses, st.evictions, st.evicted_bytes),
        (3, 1, 0, 0)
    );
    let mut sizes = BTreeMap::from([("a".to_string(), 100u64), ("b".to_string(), 10_000)]);
    for i in 0..150u64 {
        let size = 5000 + i * 97;
        s.put(format!("k{i}"), vec![3u8; size as usize]).unwrap();
        sizes.insert(format!("k{i}"), size);
    }
    let st = s.stats();
    let gone: Vec<u64> = sizes
        .iter()
        .filter(|(k, _)| !s.contains(k))
        .map(|(_, v)| *v)
        .collect();
    assert!(!gone.is_empty());
    assert_eq!(st.evictions, gone.len() as u64);
    assert_eq!(st.evicted_bytes, gone.iter().sum::<u64>());
    assert_eq!(st.objects + st.evictions, sizes.len() as u64);
    assert_eq!((st.hits, st.misses), (3, 1));
    // A store that does not evict counts reads too, and no evictions.
    let plain = Store::open_with_engine(Arc::new(MemDevice::new(2 << 20)), Options::new()).unwrap();
    plain.put("a", vec![1u8; 10]).unwrap();
    plain.get("a").unwrap();
    plain.get("b").unwrap_err();
    let st = plain.stats();
    assert_eq!((st.hits, st.misses, st.evictions), (1, 1, 0));
}

/// Zipf ranks: `n` keys, exponent `s`, drawn by inverting the CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    fn draw(&self, rng: &mut StdRng) -> u32 {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u) as u32
    }
}

/// The target: 8 concurrent readers/writers on a Zipf workload
/// larger than the cache (each a get, and a put on a miss, of sizes by
/// key); the store never exceeds its size and its hit ratio is within 5
/// points of an offline S3-FIFO simulation of the same requests.
#[test]
fn a_zipf_workload_hits_as_often_as_an_offline_s3fifo_simulation() {
    const DEVICE: usize = 8 << 20;
    const THREADS: usize = 8;
    const PER_THREAD: usize = 2500;
    const KEYS: usize = 4000;
    let size_of = |k: u32| 4096 * (1 + u64::from(k * 7 % 5));
    let s = mem_cache(DEVICE);
    let room = s.stats().free_bytes;
    let all: u64 = (0..KEYS as u32).map(size_of).sum();
    assert!(
        all > 3 * room,
        "the key space must be larger than the cache"
    );
    let zipf = Arc::new(Zipf::new(KEYS, 0.9));
    let trace = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (s, zipf, trace) = (s.clone(), zipf.clone(), trace.clone());
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                for _ in 0..PER_THREAD {
                    let k = zipf.draw(&mut rng);
                    let key = format!("z{k}");
                    let size = size_of(k) as usize;
                    // The trace in the order the store saw the requests.
                    let mut tr = trace.lock().unwrap();
                    tr.push((k, size as u64));
                    drop(tr);
                    match s.get(&key) {
                        Ok(b) => assert_eq!(b.len(), size),
                        Err(e) if e.kind() == ErrorKind::NotFound => {
                            s.put(&key, vec![k as u8; size]).unwrap();
                        }
                        Err(e) => panic!("{e}"),
                    }
                    let st = s.stats();
                    assert!(st.capacity <= DEVICE as u64);
                }
            });
        }
    });
    let st = s.stats();
    let store_ratio = st.hits as f64 / (st.hits + st.misses) as f64;
    let trace = trace.lock().unwrap();
    let ((hits, misses), _) = s3fifo_simulation(&trace, room);
    let sim_ratio = hits as f64 / (hits + misses) as f64;
    eprintln!(
        "hit ratio: store {store_ratio:.3}, simulation {sim_ratio:.3}; {} evictions",
        st.evictions
    );
    assert!(st.evictions > 0);
    assert!(
        (store_ratio - sim_ratio).abs() <= 0.05,
        "store {store_ratio:.3} vs simulation {sim_ratio:.3}"
    );
    let fifo = fifo_hits(&trace, room).iter().filter(|h| **h).count();
    eprintln!(
        "a FIFO's hit ratio: {:.3}",
        fifo as f64 / trace.len() as f64
    );
}

/// Batches and uploads make room too: a cache store takes atomic batches
/// and multipart uploads of ten times its size.
#[test]
fn batches_and_uploads_evict_to_make_room() {
    let s = mem_cache(2 << 20);
    for i in 0..40u64 {
        let mut b = s.batch();
        for j in 0..4u64 {
            b.put(format!("b{i}/{j}"), pattern(i * 10 + j, 30_000));
        }
        b.commit().unwrap_or_else(|e| panic!("batch {i}: {e}"));
        let up = s.begin_upload(format!("u{i}"), 70_000).unwrap();
        up.write_part(0, pattern(i, 70_000)).unwrap();
        up.commit().unwrap_or_else(|e| panic!("upload {i}: {e}"));
    }
    let st = s.stats();
    assert!(st.evictions > 0, "{st:?}");
    assert_eq!(st.objects + st.evictions, 40 * 5, "{st:?}");
    assert_eq!(s.get("u39").unwrap(), pattern(39, 70_000));
    assert_eq!(s.get("b39/3").unwrap(), pattern(393, 30_000));
}

/// A conditional put into a full cache never loses its own target to the
/// room it makes: the put replaces the version it names (before, the round
/// could evict that key and the put failed `VersionMismatch` with the
/// object gone).
#[test]
fn a_conditional_put_in_a_full_cache_keeps_its_target() {
    let s = mem_cache(16 << 20);
    let mut i = 0;
    while s.stats().evictions == 0 {
        s.put(format!("f{i}"), vec![i as u8; 1 << 20]).unwrap();
        i += 1;
    }
    // The oldest object still there, the policy's first choice.
    let target = (0..i)
        .map(|j| format!("f{j}"))
        .find(|k| s.contains(k))
        .unwrap();
    let version = s.stat(&target).unwrap().version;
    let put = s.put_with(
        &target,
        vec![0xEE; 2 << 20],
        blobcask::PutOptions::default().mode(blobcask::PutMode::Update(version)),
    );
    put.unwrap();
    assert_eq!(s.get(&target).unwrap(), vec![0xEE; 2 << 20]);
}

/// A value that needs heap room does not evict inline objects, which free
/// only tuple room: a working set of small objects outlives a stream of
/// large puts (before, the first round evicted all 4,000 of them).
#[test]
fn large_puts_do_not_evict_inline_objects_for_heap_room() {
    let s = Store::open_with_engine(
        Arc::new(MemDevice::new(16 << 20)),
        cache_options().inline_threshold(1024),
    )
    .unwrap();
    for i in 0..2000 {
        s.put(format!("small/{i}"), vec![7u8; 500]).unwrap();
    }
    for i in 0..40 {
        s.put(format!("big/{i}"), vec![9u8; 1 << 20]).unwrap();
    }
    assert!(s.stats().evictions > 0);
    let kept = (0..2000)
        .filter(|i| s.contains(format!("small/{i}")))
        .count();
    assert_eq!(kept, 2000, "inline objects evicted for heap room");
}

/// A value a cache could not hold even empty is `TooLarge` before any
/// eviction: the objects there stay (before, the round evicted all of them
/// and then failed `NoSpace`).
#[test]
fn a_value_that_can_never_fit_evicts_nothing() {
    let s = mem_cache(16 << 20);
    for i in 0..10 {
        s.put(format!("k{i}"), vec![i as u8; 512 << 10]).unwrap();
    }
    let err = s
        .put("big", vec![1u8; (16 << 20) - (40 << 10)])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert_eq!(s.stats().evictions, 0);
    assert_eq!((0..10).filter(|i| s.contains(format!("k{i}"))).count(), 10);
    let err = s.begin_upload("u", (16 << 20) - (64 << 10)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert_eq!(s.stats().evictions, 0);
}

/// A batch whose condition fails against the cache as it is evicts
/// nothing for it: refused with its own kind, every object still there
/// (before, a full cache evicted for the batch, then refused it).
#[test]
fn a_batch_refused_by_its_condition_evicts_nothing() {
    let s = mem_cache(16 << 20);
    let mut i = 0;
    while s.stats().evictions == 0 {
        s.put(format!("f{i}"), vec![i as u8; 1 << 20]).unwrap();
        i += 1;
    }
    let (evicted, last) = (s.stats().evictions, format!("f{}", i - 1));
    let held = |s: &Store| (0..i).filter(|j| s.contains(format!("f{j}"))).count();
    let before = held(&s);
    let mut b = s.batch();
    for j in 0..8 {
        b.put(format!("new{j}"), vec![1u8; 1 << 20]);
    }
    b.put_with(
        &last,
        vec![2u8; 10],
        blobcask::PutOptions::default().mode(blobcask::PutMode::Create),
    );
    assert_eq!(b.commit().unwrap_err().kind(), ErrorKind::AlreadyExists);
    let mut b = s.batch();
    for j in 0..3 {
        b.put(format!("new{j}"), vec![1u8; 1 << 20]);
    }
    b.delete_if_version(&last, 999_999);
    assert_eq!(b.commit().unwrap_err().kind(), ErrorKind::VersionMismatch);
    assert_eq!(s.stats().evictions, evicted);
    assert_eq!(held(&s), before);
}

/// A cache store on the in-memory device that writes no checkpoint while
/// it runs: its `metadata_bytes` are the metadata area alone (tuple blocks,
/// journal), which a cache holds to half its bound.
fn cache_without_checkpoints(bytes: usize) -> Store {
    let dev = Arc::new(MemDevice::new(bytes));
    Store::open_with_engine(dev, cache_options().checkpoint_after(0)).unwrap()
}

/// A cache of small objects never gets stuck on its metadata: 16 MiB
/// filled with ten times its size of 1,000-B values (inline, in tuple
/// blocks), then a 1 MiB value is taken (before, the tuple blocks had
/// grown to 16.4 MB and the value was `NoSpace` even with every object
/// evicted), and so is one after everything left is deleted.
#[test]
fn a_cache_of_small_objects_still_takes_a_large_value() {
    let s = mem_cache(16 << 20);
    for i in 0..40_000u64 {
        s.put(format!("small/{i}"), pattern(i, 1000))
            .unwrap_or_else(|e| panic!("small put {i}: {e}"));
    }
    let st = s.stats();
    assert!(st.evictions > 0, "{st:?}");
    s.put("big", pattern(7, 1 << 20))
        .unwrap_or_else(|e| panic!("1 MiB after small puts: {e}; {:?}", s.stats()));
    assert_eq!(s.get("big").unwrap(), pattern(7, 1 << 20));
    // The small objects still there read back exactly.
    let kept: Vec<u64> = (0..40_000u64)
        .filter(|i| s.contains(format!("small/{i}")))
        .collect();
    assert!(!kept.is_empty());
    for &i in kept.iter().rev().take(500) {
        assert_eq!(s.get(format!("small/{i}")).unwrap(), pattern(i, 1000));
    }
}

/// A cache's metadata is held to half its bound: small puts past it evict
/// small objects for tuple room instead of growing the tuple blocks, and
/// never a large object, whose tuple frees a few bytes (before, the tuple
/// blocks grew over the heap and the large objects were evicted for them).
#[test]
fn small_puts_at_the_metadata_limit_evict_small_objects_not_large_ones() {
    let s = cache_without_checkpoints(16 << 20);
    for i in 0..4u64 {
        s.put(format!("big/{i}"), pattern(i, 1 << 20)).unwrap();
    }
    for i in 0..40_000u64 {
        s.put(format!("small/{i}"), pattern(i, 1000))
            .unwrap_or_else(|e| panic!("small put {i}: {e}"));
        if i % 1000 == 999 {
            let st = s.stats();
            assert!(st.metadata_bytes <= 8 << 20, "{i}: {st:?}");
        }
    }
    let st = s.stats();
    assert!(st.evictions > 0, "{st:?}");
    // Half of 16 MiB of tuple blocks, three 1,000-B values to a block.
    assert!(st.objects > 5_000, "{st:?}");
    for i in 0..4u64 {
        assert_eq!(s.get(format!("big/{i}")).unwrap(), pattern(i, 1 << 20));
    }
    assert!(s.contains("small/39999"));
}

/// `TooLarge` stays exact after the tuple blocks grew: a value of the
/// heap room a full cache of small objects would have empty (its bound
/// less its metadata and superblocks) is taken, evicting what it must; one
/// a block larger is `TooLarge` before anything is evicted.
#[test]
fn a_full_cache_of_small_objects_takes_any_value_it_could_hold_empty() {
    let s = cache_without_checkpoints(16 << 20);
    for i in 0..30_000u64 {
        s.put(format!("small/{i}"), pattern(i, 700)).unwrap();
    }
    let st = s.stats();
    // The metadata area stopped at half the bound: the rest is room.
    assert!(st.metadata_bytes <= 8 << 20, "{st:?}");
    let room = (16u64 << 20) - st.metadata_bytes - 2 * 4096;
    let evicted = st.evictions;
    let err = s.put("too big", vec![3u8; room as usize + 1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    assert_eq!(s.stats().evictions, evicted);
    // The largest value whose data and checksum table (4 B a block) fit
    // the room.
    let size = (room as usize / 4100) * 4096;
    s.put("largest", pattern(9, size))
        .unwrap_or_else(|e| panic!("{size} B into {room} B of room: {e}; {:?}", s.stats()));
    assert_eq!(s.get("largest").unwrap(), pattern(9, size));
    assert!(s.stats().metadata_bytes <= 8 << 20);
}

/// Atomic batches of small values at the metadata limit evict for tuple
/// room and commit whole; the store is never poisoned by a batch whose
/// tuples do not fit.
#[test]
fn batches_of_small_values_at_the_metadata_limit_commit() {
    let s = cache_without_checkpoints(4 << 20);
    for i in 0..300u64 {
        let mut b = s.batch();
        for j in 0..40u64 {
            b.put(format!("b{i}/{j}"), pattern(i * 100 + j, 1000));
        }
        b.commit().unwrap_or_else(|e| panic!("batch {i}: {e}"));
    }
    let st = s.stats();
    assert!(st.evictions > 0 && st.metadata_bytes <= 2 << 20, "{st:?}");
    for j in 0..40u64 {
        assert_eq!(
            s.get(format!("b299/{j}")).unwrap(),
            pattern(29_900 + j, 1000)
        );
    }
    s.put("after", vec![1u8; 1 << 20]).unwrap();
}

/// An upload's commit into a cache whose tuple blocks are full and at
/// their limit evicts for its tuple and commits (before, it failed
/// `NoSpace` and the upload was lost): values of 1,981 B under 8-B keys
/// make tuples of 2,016 B, two to a block, no byte left.
#[test]
fn an_upload_commit_evicts_for_its_tuple() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(
        dev,
        cache_options().inline_threshold(2048).checkpoint_after(0),
    )
    .unwrap();
    let up = s.begin_upload("upload", 1 << 20).unwrap();
    up.write_part(0, pattern(5, 1 << 20)).unwrap();
    for i in 0..4_000u64 {
        s.put(format!("s{i:07}"), pattern(i, 1981))
            .unwrap_or_else(|e| panic!("small put {i}: {e}"));
    }
    let before = s.stats();
    assert!(before.evictions > 0, "{before:?}");
    up.commit()
        .unwrap_or_else(|e| panic!("commit: {e}; {:?}", s.stats()));
    assert_eq!(s.get("upload").unwrap(), pattern(5, 1 << 20));
    assert!(s.stats().evictions > before.evictions);
    assert_eq!(s.get("s0003999").unwrap(), pattern(3999, 1981));
}

/// A bulk load into a cache store evicts like puts do: loads of mixed
/// sizes, each several times the cache, succeed, the bound is kept, the
/// last objects loaded read back exactly, and so does everything kept
/// (before, the first load failed `NoSpace` once the heap was full).
#[test]
fn a_bulk_load_into_a_cache_evicts_to_make_room() {
    let s = mem_cache(8 << 20);
    let mut rng = StdRng::seed_from_u64(43);
    let mut sizes = BTreeMap::new();
    for round in 0..3u64 {
        let items: Vec<(String, Vec<u8>)> = (0..600u64)
            .map(|i| {
                let n = round * 1000 + i;
                let size = mixed_size(&mut rng);
                sizes.insert(format!("l{n}"), (n, size));
                (format!("l{n}"), pattern(n, size))
            })
            .collect();
        let report = s
            .bulk_load(items)
            .unwrap_or_else(|e| panic!("load {round}: {e}; {:?}", s.stats()));
        assert_eq!(report.objects, 600);
        assert!(s.stats().capacity <= 8 << 20);
    }
    let st = s.stats();
    assert!(st.evictions > 0, "{st:?}");
    assert!(s.contains("l2599"));
    let mut kept = 0;
    for (k, &(n, size)) in &sizes {
        if s.contains(k) {
            assert_eq!(s.get(k).unwrap(), pattern(n, size), "{k}");
            kept += 1;
        }
    }
    assert_eq!(kept, st.objects, "{st:?}");
}

/// A bulk load of small values past a cache's metadata limit evicts for
/// their tuples and commits the rest of a group the tuple blocks could not
/// take (before, the load stopped there with `NoSpace`).
#[test]
fn a_bulk_load_of_small_values_evicts_for_tuple_room() {
    let s = cache_without_checkpoints(4 << 20);
    let items = (0..12_000u64).map(|i| (format!("t{i}"), pattern(i, 1000)));
    let report = s
        .bulk_load(items)
        .unwrap_or_else(|e| panic!("{e}; {:?}", s.stats()));
    assert_eq!(report.objects, 12_000);
    let st = s.stats();
    assert!(st.evictions > 0 && st.metadata_bytes <= 2 << 20, "{st:?}");
    assert_eq!(st.objects + st.evictions, 12_000, "{st:?}");
    for i in (0..12_000u64).rev().take(300) {
        assert_eq!(s.get(format!("t{i}")).unwrap(), pattern(i, 1000));
    }
}

/// A cache's metadata journal grows only to an eighth of its metadata
/// limit (tuple blocks leave it that room), so its batches hold at most
/// that many operations: in a 4 MiB cache full of small objects, a batch
/// of 64 inline values commits and one of 65 is `TooLarge`, nothing
/// evicted for it.
#[test]
fn a_cache_batch_fits_the_journal_its_metadata_limit_leaves_room_for() {
    let s = cache_without_checkpoints(4 << 20);
    for i in 0..6_000u64 {
        s.put(format!("s{i}"), pattern(i, 1000)).unwrap();
    }
    assert!(s.stats().evictions > 0);
    let batch = |n: u64| {
        let mut b = s.batch();
        for j in 0..n {
            b.put(format!("b{n}/{j}"), pattern(j, 1000));
        }
        b.commit()
    };
    let evicted = s.stats().evictions;
    let err = batch(65).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
    // It says what to do about it.
    assert!(
        err.to_string().contains("split the batch")
            && err.to_string().contains("larger max_capacity"),
        "{err}"
    );
    assert_eq!(s.stats().evictions, evicted);
    batch(64).unwrap_or_else(|e| panic!("{e}; {:?}", s.stats()));
    assert_eq!(s.get("b64/63").unwrap(), pattern(63, 1000));
    let st = s.stats();
    assert!(st.metadata_bytes <= 2 << 20, "{st:?}");
}

/// A bulk load into a cache full of small objects takes values that a put
/// takes one at a time: the load writes and commits one batch at a time in
/// a cache, so its own uncommitted values (which cannot be evicted) never
/// need room together. Before, the next batch's value was written while
/// the last one's group committed, and 2–6 loads of 10 failed with
/// `NoSpace` ("nothing left it may evict"). Found by a hostile tester.
#[test]
fn a_bulk_load_into_a_full_cache_takes_values_a_put_takes_alone() {
    const SIZE: usize = 1_400_000;
    for attempt in 0..10u64 {
        let s = mem_cache(4 << 20);
        let mut i = 0u64;
        while s.stats().evictions == 0 {
            s.put(format!("fill/{i}"), pattern(i, 300)).unwrap();
            i += 1;
        }
        for j in 0..4u64 {
            s.put(format!("p{j}"), pattern(j, SIZE))
                .unwrap_or_else(|e| panic!("put {j}: {e}"));
        }
        let items = (0..4u64).map(|j| (format!("l{j}"), pattern(100 + j, SIZE)));
        let report = s
            .bulk_load(items)
            .unwrap_or_else(|e| panic!("attempt {attempt}: {e}"));
        assert_eq!(report.objects, 4);
        // The last value loaded is there and whole.
        assert_eq!(s.get("l3").unwrap(), pattern(103, SIZE));
    }
}
