//! The `warm` phase: whole 16 KiB gets through the blocking API with the
//! read cache off, and on (a miss, then hits), on the same store file.

use std::time::Instant;

use blobcask::{IoEngineKind, Options};

use blobcask_bench::figures::Figure;

use super::{engine_name, Config};

/// Whole 16 KiB gets, blocking API, same file: the read cache off (every
/// get reads the device) against the cache on, cold (the first read of
/// each object, a miss) and warm (after a second pass admitted them, every
/// get a hit, as shared bytes and as owned bytes, the copy the Node binding
/// asks for).
pub(crate) fn warm_phase(cfg: &Config, engine: IoEngineKind) {
    use blobcask::blocking::Store as Blocking;
    use blobcask::ReadOptions;
    let path = cfg.dir.join("warm.blobcask");
    let _ = std::fs::remove_file(&path);
    let keys: Vec<String> = (0..1024).map(|i| format!("warm/{i}")).collect();
    let open = |cache: u64| {
        Blocking::open(
            &path,
            Options::new()
                .capacity(256 << 20)
                .io_engine(engine)
                .cache_bytes(cache),
        )
        .expect("open")
    };
    let s = open(0);
    for k in &keys {
        s.put(k, vec![7u8; 16 << 10]).unwrap();
    }
    s.close().unwrap();
    let p50 = |s: &Blocking, passes: usize, options: ReadOptions| {
        let mut t = Vec::with_capacity(keys.len() * passes);
        for _ in 0..passes {
            for k in &keys {
                let a = Instant::now();
                std::hint::black_box(s.read_with(k, 0, u64::MAX, options).unwrap());
                t.push(a.elapsed().as_secs_f64() * 1e6);
            }
        }
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let shared = ReadOptions::default();
    let owned = ReadOptions::default().owned(true);
    println!("warm: 16 KiB get p50 (µs), blocking API, 1024 objects");
    println!(
        "| round | cache off (device) | cache on, miss | miss / off | hit | hit, owned | hit / off | cache bytes held |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for round in 0..if cfg.quick { 2 } else { 5 } {
        let off = open(0);
        let device = p50(&off, 1, shared);
        off.close().unwrap();
        let on = open(64 << 20);
        // The first whole read of each object: a miss, not kept.
        let miss = p50(&on, 1, shared);
        // The second keeps it.
        for k in &keys {
            on.get(k).unwrap();
        }
        let hit = p50(&on, 5, shared);
        let hit_owned = p50(&on, 5, owned);
        let held = on.stats().cache.bytes;
        on.close().unwrap();
        println!(
            "| {round} | {device:.1} | {miss:.1} | {:.3} | {hit:.2} | {hit_owned:.2} | {:.4} | {held} |",
            miss / device,
            hit / device
        );
        let off = "cache off (every get reads the device), p50";
        cfg.figures.record(
            Figure::new("warm", "warm.get16k.off", off, device, "µs p50")
                .engine(engine_name(engine)),
        );
        for (id, label, p50) in [
            ("warm.get16k.miss", "cache on, miss", miss),
            ("warm.get16k.hit", "cache on, hit", hit),
            (
                "warm.get16k.hit_owned",
                "cache on, hit, owned bytes",
                hit_owned,
            ),
        ] {
            cfg.figures.record(
                Figure::new("warm", id, label, p50, "µs p50")
                    .baseline(device, off)
                    .ratio(p50 / device)
                    .engine(engine_name(engine)),
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}
