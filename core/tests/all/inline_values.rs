//! Inline values live in their tuple blocks, not in RAM: a read takes the
//! value from the block's current slot (checked with the slot, invariant
//! 5). These suites race such reads against commits that rewrite the same
//! blocks, and check values across reopen, backup and both engines.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::blocking::Store;
use blobcask::{IoEngineKind, Options};
use common::temp_path;

/// A value that names its key and generation and checks itself.
fn value_of(key: &str, generation: u64) -> Vec<u8> {
    let mut v = format!("{key}#{generation}#").into_bytes();
    // One length per key: a stale value is told apart by its content only.
    v.resize(
        40 + (crc32c::crc32c(key.as_bytes()) % 90) as usize,
        generation as u8,
    );
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// The generation of a value read under `key`: panics on a torn value, a
/// foreign one or a stale one (older than `floor`).
fn check(key: &str, v: &[u8], floor: u64) -> u64 {
    let (body, crc) = v.split_at(v.len() - 4);
    assert_eq!(
        crc32c::crc32c(body).to_le_bytes(),
        crc,
        "torn value under {key}"
    );
    let text = String::from_utf8_lossy(body);
    let mut parts = text.splitn(3, '#');
    assert_eq!(parts.next(), Some(key), "another key's value");
    let generation: u64 = parts.next().unwrap().parse().unwrap();
    assert!(
        generation >= floor,
        "{key}: generation {generation} read after {floor} was acknowledged"
    );
    generation
}

/// Readers (blocking and async) race two writers that overwrite keys packed
/// into a few tuple blocks (and a third that deletes and puts again keys of
/// its own, read by a fourth reader that accepts only their absence or
/// their own whole values), so nearly every commit rewrites a block some
/// reader is reading, and (cache on) reads are served from tuple blocks the
/// cache kept before later rewrites. No read may fail, return a torn or
/// foreign value, or go back before a generation acknowledged before it
/// began (it fails when a slot read during a rewrite is taken for damage,
/// or when a kept block is searched by key without the version).
#[test]
fn reads_of_inline_values_race_rewrites_of_their_blocks() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        for cache in [0u64, 8 << 20] {
            let t = temp_path();
            let s = Store::open(
                &t.path,
                Options::new()
                    .capacity(32 << 20)
                    .io_engine(engine)
                    .cache_bytes(cache),
            )
            .unwrap();
            const KEYS: u64 = 48;
            let key = |i: u64| format!("k{i:02}");
            // Per key: the newest generation acknowledged.
            let acked: Arc<Vec<AtomicU64>> =
                Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
            for i in 0..KEYS {
                s.put(key(i), value_of(&key(i), 0)).unwrap();
            }
            let stop = Arc::new(AtomicBool::new(false));
            let reads = Arc::new(AtomicU64::new(0));
            let mut threads = Vec::new();
            for w in 0..2u64 {
                let (s, acked, stop) = (s.clone(), acked.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    let mut n = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        // Writer w owns the keys of its parity.
                        let i = (n * 7 + w) % KEYS;
                        let i = i - i % 2 + w;
                        let generation = n * 2 + w;
                        s.put(key(i), value_of(&key(i), generation)).unwrap();
                        acked[i as usize].store(generation, Ordering::Release);
                        n += 1;
                    }
                }));
            }
            // A third writer deletes and puts again keys of their own
            // (tuples leave blocks and come back, moving their neighbours).
            const CHURN: u64 = 16;
            let churn_key = |i: u64| format!("c{i:02}");
            {
                let (s, stop) = (s.clone(), stop.clone());
                threads.push(std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let k = churn_key(n % CHURN);
                        if n.is_multiple_of(3) {
                            match s.delete(&k) {
                                Ok(()) => {}
                                Err(e) => assert_eq!(e.kind(), blobcask::ErrorKind::NotFound),
                            }
                        } else {
                            s.put(&k, value_of(&k, n)).unwrap();
                        }
                        n += 1;
                    }
                }));
            }
            {
                let (s, stop, reads) = (s.clone(), stop.clone(), reads.clone());
                threads.push(std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let k = churn_key(n * 7 % CHURN);
                        match s.get(&k) {
                            Ok(v) => {
                                check(&k, &v, 0);
                            }
                            Err(e) => assert_eq!(e.kind(), blobcask::ErrorKind::NotFound, "{e}"),
                        }
                        reads.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                }));
            }
            for r in 0..3u64 {
                let (s, acked, stop, reads) =
                    (s.clone(), acked.clone(), stop.clone(), reads.clone());
                threads.push(std::thread::spawn(move || {
                    let mut n = r;
                    while !stop.load(Ordering::Relaxed) {
                        let i = (n * 13) % KEYS;
                        let floor = acked[i as usize].load(Ordering::Acquire);
                        let v = if n % 2 == 0 {
                            s.get(key(i)).unwrap()
                        } else {
                            futures::executor::block_on(s.as_async().get(key(i))).unwrap()
                        };
                        check(&key(i), &v, floor);
                        reads.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                }));
            }
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(1500) {
                std::thread::sleep(Duration::from_millis(50));
            }
            stop.store(true, Ordering::Relaxed);
            for th in threads {
                th.join().unwrap();
            }
            let reads = reads.load(Ordering::Relaxed);
            assert!(reads > 300, "{engine:?}: {reads} reads");
            // Every value reads back after a reopen, from the device.
            s.close().unwrap();
            let s = Store::open(&t.path, Options::new().io_engine(engine).cache_bytes(0)).unwrap();
            for i in 0..KEYS {
                let floor = acked[i as usize].load(Ordering::Acquire);
                let got = check(&key(i), &s.get(key(i)).unwrap(), floor);
                assert_eq!(got, floor, "{engine:?}: the newest acknowledged value");
                assert!(s.stat(key(i)).unwrap().inline);
            }
            s.close().unwrap();
        }
    }
}
