//! The read cache's warm-up after open (`store/warm.rs`): small objects
//! are memory hits from their first get after a restart, the warm-up stays
//! inside the cache's free room, never serves a damaged block (invariant 5,
//! `core/INVARIANTS.md`), and can be turned off; small objects are admitted
//! at their first read while the cache has room; the cache's bound can be
//! a fraction of memory.

use crate::common;

use std::time::{Duration, Instant};

use blobcask::blocking::Store;
use blobcask::{CacheStats, ErrorKind, IndexKind, IoEngineKind, Options};
use common::{pattern, temp_path};

const ENGINES: [IoEngineKind; 2] = [IoEngineKind::IoUring, IoEngineKind::Portable];

fn key(i: usize) -> String {
    format!("object/{i:06}")
}

/// A store of `n` 100-byte objects (inline), closed cleanly.
fn filled(t: &common::TempStore, n: usize) -> Vec<Vec<u8>> {
    let values: Vec<Vec<u8>> = (0..n).map(|i| pattern(i as u64, 100)).collect();
    let s = Store::open(&t.path, Options::new().capacity(64 << 20)).expect("create");
    s.bulk_load((0..n).map(|i| (key(i), values[i].clone())))
        .expect("load");
    s.close().expect("close");
    values
}

/// The cache's figures once the warm-up is done (it runs on the
/// maintenance thread after open).
fn settled(s: &Store) -> CacheStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let c = s.stats().cache;
        if !c.warming {
            return c;
        }
        assert!(Instant::now() < deadline, "still warming after 60 s: {c:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn small_objects_are_memory_hits_from_their_first_get_after_a_reopen() {
    let n = 3000;
    for engine in ENGINES {
        for index in IndexKind::ALL {
            let t = temp_path();
            let values = filled(&t, n);
            let s = Store::open(
                &t.path,
                Options::new()
                    .io_engine(engine)
                    .index(index)
                    .cache_bytes(64 << 20),
            )
            .expect("reopen");
            let warm = settled(&s);
            assert!(warm.warmed_blocks > 0, "{engine:?} {index:?}: {warm:?}");
            assert!(warm.bytes <= warm.capacity, "{warm:?}");
            for (i, v) in values.iter().enumerate() {
                assert_eq!(&s.get(key(i)).expect("get")[..], &v[..], "{i}");
            }
            let after = s.stats().cache;
            assert_eq!(
                (after.hits - warm.hits, after.misses - warm.misses),
                (n as u64, 0),
                "{engine:?} {index:?}: every first get a hit: {after:?}"
            );
            s.close().expect("close");
        }
    }
}

/// With the warm-up off, the first gets go to the device.
#[test]
fn warm_up_off_reads_nothing_ahead() {
    let t = temp_path();
    let values = filled(&t, 500);
    let s = Store::open(&t.path, Options::new().warm_up(false)).expect("reopen");
    let c = s.stats().cache;
    assert_eq!(
        (c.warmed_blocks, c.warming, c.bytes),
        (0, false, 0),
        "{c:?}"
    );
    assert_eq!(&s.get(key(7)).unwrap()[..], &values[7][..]);
    assert_eq!(s.stats().cache.misses, 1);
    // And with the cache off there is nothing to warm.
    s.close().unwrap();
    let s = Store::open(&t.path, Options::new().cache_bytes(0)).expect("reopen");
    assert_eq!(s.stats().cache, CacheStats::default());
    assert_eq!(&s.get(key(8)).unwrap()[..], &values[8][..]);
}

/// A cache smaller than the blocks: the warm-up fills its room and stops;
/// every object still reads back right.
#[test]
fn the_warm_up_stops_at_the_cache_bound() {
    let t = temp_path();
    let values = filled(&t, 20_000);
    let cap = 256 << 10;
    let s = Store::open(&t.path, Options::new().cache_bytes(cap)).expect("reopen");
    let c = settled(&s);
    assert!(c.warmed_blocks > 0, "{c:?}");
    assert!(c.bytes <= cap, "past the bound: {c:?}");
    // 20 000 objects take more blocks than 256 KiB holds.
    assert!(c.bytes > cap / 2, "{c:?}");
    for (i, v) in values.iter().enumerate().step_by(37) {
        assert_eq!(&s.get(key(i)).unwrap()[..], &v[..]);
    }
    assert!(s.stats().cache.bytes <= cap);
}

/// Invariant 5: a tuple block damaged on the device is not warmed, and
/// the read of an object in it is `Corrupt`, never its bytes.
#[test]
fn a_damaged_block_is_never_warmed_nor_served() {
    let t = temp_path();
    let values = filled(&t, 400);
    let mut image = std::fs::read(&t.path).unwrap();
    // Every copy of object 123's value (its block's slots), one byte each.
    let v = &values[123];
    let at: Vec<usize> = image
        .windows(v.len())
        .enumerate()
        .filter(|(_, w)| w == v)
        .map(|(i, _)| i)
        .collect();
    assert!(!at.is_empty(), "the value is not in the image");
    for i in at {
        image[i + 50] ^= 0x40;
    }
    std::fs::write(&t.path, &image).unwrap();
    let s = Store::open(&t.path, Options::new()).expect("reopen");
    assert!(s.stats().recovery.from_image, "{:?}", s.stats().recovery);
    settled(&s);
    let err = s.get(key(123)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    // Twice: the damage is not cached either.
    assert_eq!(s.get(key(123)).unwrap_err().kind(), ErrorKind::Corrupt);
    // Objects in other blocks read back.
    assert_eq!(&s.get(key(0)).unwrap()[..], &values[0][..]);
    assert_eq!(&s.get(key(399)).unwrap()[..], &values[399][..]);
}

/// A heap object of at most a block is kept at its first read while the
/// cache has room; a larger one still at its second.
#[test]
fn small_objects_are_admitted_at_their_first_read_while_there_is_room() {
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(
            &t.path,
            Options::new()
                .capacity(64 << 20)
                .io_engine(engine)
                .inline_threshold(0)
                .cache_bytes(8 << 20),
        )
        .unwrap();
        let (small, large) = (pattern(1, 3000), pattern(2, 9000));
        s.put("small", small.clone()).unwrap();
        s.put("large", large.clone()).unwrap();
        assert_eq!(s.get("small").unwrap(), small);
        assert_eq!(s.get("small").unwrap(), small);
        let c = s.stats().cache;
        assert_eq!((c.hits, c.misses), (1, 1), "{engine:?}: {c:?}");
        assert_eq!(s.get("large").unwrap(), large);
        assert_eq!(s.get("large").unwrap(), large);
        let c = s.stats().cache;
        assert_eq!((c.hits, c.misses), (1, 3), "{engine:?}: {c:?}");
    }
}

#[test]
fn the_cache_bound_can_be_a_fraction_of_memory() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new().cache_fraction(0.01)).unwrap();
    let cap = s.stats().cache.capacity;
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    // 1 % of the system's memory, or of a lower cgroup limit.
    assert!(cap > 0 && cap <= total_kib * 1024 / 100 + 1, "{cap}");
    s.close().unwrap();
    // The last of cache_bytes and cache_fraction wins.
    let s = Store::open(
        &t.path,
        Options::new().cache_fraction(0.5).cache_bytes(1 << 20),
    )
    .unwrap();
    assert_eq!(s.stats().cache.capacity, 1 << 20);
    s.close().unwrap();
    for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let err = Store::open(&t.path, Options::new().cache_fraction(bad)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad}: {err}");
        assert!(err.to_string().contains("cache_fraction"), "{err}");
    }
    // Refused before anything was written: the store opens as it was.
    Store::open(&t.path, Options::new()).unwrap();
}

/// Close (and a read-only open) while the warm-up reads: close waits for
/// its batch and returns; the store reopens with every object.
#[test]
fn close_during_the_warm_up_loses_nothing() {
    let t = temp_path();
    let values = filled(&t, 20_000);
    for read_only in [false, true] {
        for _ in 0..5 {
            let s = Store::open(&t.path, Options::new().read_only(read_only)).expect("reopen");
            s.close().expect("close while warming");
        }
    }
    let s = Store::open(&t.path, Options::new()).expect("reopen");
    assert_eq!(s.stats().objects, 20_000);
    assert!(s.stats().recovery.from_image, "{:?}", s.stats().recovery);
    for (i, v) in values.iter().enumerate().step_by(101) {
        assert_eq!(&s.get(key(i)).unwrap()[..], &v[..]);
    }
}
