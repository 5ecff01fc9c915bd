//! The `commit` phase: durable 16 KiB puts from 1, 16 and 64 concurrent
//! writers against one raw writer doing `O_DIRECT` write + fdatasync, in
//! windows of their own and in turns; with the io_uring engine, one writer
//! with every row in turn (`one_writer`) and io_uring's own floors
//! (`uring_floor`).

#[cfg(target_os = "linux")]
mod one_writer;
#[cfg(target_os = "linux")]
mod uring_floor;

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::{IoEngineKind, Store};

use blobcask_bench::figures::{slug, Figure};
use blobcask_bench::raw::{self, aligned, as_bytes, open_direct, WrittenBlocks};
use rand::{Rng, SeedableRng};

#[cfg(target_os = "linux")]
use one_writer::{one_writer_in_turns, TURN};

use super::{engine_name, fresh, median, Config};

pub(crate) async fn commit_phase(cfg: &Config, engine: IoEngineKind) {
    let size = 16usize << 10;
    let secs = Duration::from_secs(if cfg.quick { 2 } else { 5 });
    let (store, path) = fresh(cfg, engine, 4 << 30).await;
    let value = blobcask::Bytes::from(vec![9u8; size]);
    let mut results = vec![];
    // Per writer count: the groups the store wrote (puts, and 4 KiB
    // tuple-block writes, per group), which the device floor replays.
    let mut shapes = vec![];
    for writers in [1usize, 16, 64] {
        // Untimed, each writer's 512 keys once: the timed puts overwrite,
        // so their values go into space written before, as the raw
        // baseline's do (a put into never-written space pays the file
        // system's extent conversion, measured apart in
        // benches/log/2026-11-25-baselines-written-space.md).
        let warm: Vec<_> = (0..writers)
            .map(|w| {
                let (store, value) = (store.clone(), value.clone());
                tokio::spawn(async move {
                    for i in 0..512 {
                        store.put(format!("w{w}/{i}"), value.clone()).await.unwrap();
                    }
                })
            })
            .collect();
        for t in warm {
            t.await.unwrap();
        }
        let before = store.stats();
        let (rate, puts) = writers_window(&store, &value, writers, secs).await;
        results.push((writers, rate));
        let after = store.stats();
        let groups = (after.commit_groups - before.commit_groups).max(1) as f64;
        let meta = (after.device_bytes_written - before.device_bytes_written)
            .saturating_sub(after.user_bytes_written - before.user_bytes_written);
        let blocks = meta as f64 / 4096.0;
        shapes.push((
            writers,
            (puts / groups).round().max(1.0) as u64,
            (blocks / groups).round().max(1.0) as u64,
        ));
    }
    // Many writers against one raw writer, taking turns.
    let many = many_writers_in_turns(
        &store,
        &value,
        &cfg.dir,
        secs,
        if cfg.quick { 3 } else { 5 },
    )
    .await;
    // One writer, rows taking turns (the device drifts within seconds).
    // Its floors are the io_uring engine's I/O: only with that engine.
    #[cfg(target_os = "linux")]
    let turns = if engine == IoEngineKind::IoUring {
        let (store, dir) = (store.clone(), cfg.dir.clone());
        tokio::task::spawn_blocking(move || one_writer_in_turns(&store, &dir, secs))
            .await
            .unwrap()
    } else {
        Vec::new()
    };
    store.close().await.unwrap();

    // Raw: one writer, 16 KiB O_DIRECT write + fdatasync into already
    // written space of the same file (64 to 128 MiB in; the floors below
    // write 64 to 256 MiB in). A write into an unwritten extent costs a
    // file-system journal commit at its sync (about 2 x here), so a
    // baseline there would flatter the store.
    let raw = open_direct(&path);
    let written = WrittenBlocks::of(&raw).expect("the file's written blocks");
    assert!(
        written.covers(64 << 20, 192 << 20),
        "the commit phase's baselines need 64..256 MiB of the store file written"
    );
    let buf = aligned(size);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut n = 0u64;
    let t = Instant::now();
    while t.elapsed() < secs {
        let off = (64u64 << 20) + rng.random_range(0..4096u64) * size as u64;
        raw.write_all_at(as_bytes(&buf), off).unwrap();
        raw.sync_data().unwrap();
        n += 1;
    }
    let raw_rate = n as f64 / t.elapsed().as_secs_f64();
    println!("commit: durable 16 KiB puts");
    println!("| path | ops/s | ratio to raw 1-writer write+fdatasync |");
    println!("|---|---|---|");
    println!("| raw O_DIRECT write + fdatasync, 1 writer | {raw_rate:.0} | 1.00 |");
    let e = engine_name(engine);
    let raw_of = "raw O_DIRECT write + fdatasync, 1 writer";
    // Rows with a window of their own, as records.
    let window = |id: String, label: &str, rate: f64, runtime: Option<&str>| {
        Figure::new("commit", &id, label, rate, "ops/s")
            .baseline(raw_rate, raw_of)
            .ratio(rate / raw_rate)
            .engine(e)
            .runtime(runtime)
    };
    for (w, r) in results {
        println!(
            "| Store::put (async), {w} writers | {r:.0} | {:.2} |",
            r / raw_rate
        );
        let label = format!("Store::put (async), {w} writers");
        let spawned = Some("multi-thread, spawned tasks");
        cfg.figures
            .record(window(format!("commit.window.{w}w"), &label, r, spawned));
    }
    #[cfg(target_os = "linux")]
    let shapes: Vec<_> = shapes.into_iter().filter(|&(w, _, _)| w > 1).collect();
    for (name, rate) in uring_floor::rates(&path, secs, &shapes) {
        println!("| {name} | {rate:.0} | {:.2} |", rate / raw_rate);
        let id = format!("commit.window.floor.{}", slug(&name));
        cfg.figures.record(window(id, &name, rate, None));
    }
    println!(
        "\ncommit: many writers and one raw writer taking turns, {} rounds of {}s windows (order rotating); ratios within each round",
        many.len(),
        secs.as_secs()
    );
    println!("| path | median ops/s | median ratio to raw 1-writer write+fdatasync, same round | ratios, each round |");
    println!("|---|---|---|---|");
    println!(
        "| raw O_DIRECT write + fdatasync, 1 writer | {:.0} | 1.00 | |",
        median(many.iter().map(|r| r[0]).collect())
    );
    for (col, w) in [(1usize, 16), (2, 64)] {
        let each: Vec<f64> = many.iter().map(|r| r[col] / r[0]).collect();
        let list = each
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "| Store::put (async), {w} writers | {:.0} | {:.2} | {list} |",
            median(many.iter().map(|r| r[col]).collect()),
            median(each)
        );
        let label = format!("Store::put (async), {w} writers, in turns with one raw writer");
        let id = format!("commit.turns.{w}w");
        let rate = median(many.iter().map(|r| r[col]).collect());
        let raw = median(many.iter().map(|r| r[0]).collect());
        let ratio = median(many.iter().map(|r| r[col] / r[0]).collect());
        let of = "raw O_DIRECT write + fdatasync, 1 writer, same rounds (median)";
        cfg.figures.record(
            Figure::new("commit", &id, &label, rate, "ops/s")
                .baseline(raw, of)
                .ratio(ratio)
                .engine(e)
                .runtime(Some("multi-thread, spawned tasks")),
        );
    }
    #[cfg(target_os = "linux")]
    if !turns.is_empty() {
        println!(
            "\ncommit: one durable writer of 16 KiB puts, rows taking turns every {TURN} puts"
        );
        println!("| path | p50 µs | ratio (raw p50 / row p50) |");
        println!("|---|---|---|");
        let base = turns.first().map_or(f64::NAN, |r| r.1);
        for (name, p50) in turns {
            println!("| {name} | {p50:.1} | {:.2} |", base / p50);
            // The ratio is raw p50 / row p50: a rate ratio, as above.
            let runtime = if name.contains("current-thread") {
                Some("current-thread")
            } else if name.contains("block_on of a tokio multi-thread") {
                Some("multi-thread, block_on")
            } else if name.contains("spawned on a tokio multi-thread") {
                Some("multi-thread, spawned task")
            } else {
                None
            };
            let id = format!("commit.1w_turns.{}", slug(&name));
            cfg.figures.record(
                Figure::new("commit", &id, &name, p50, "µs p50")
                    .baseline(base, "raw: pwrite 16 KiB + fdatasync, p50")
                    .ratio(base / p50)
                    .engine(e)
                    .runtime(runtime),
            );
        }
    }
}

/// `writers` tasks putting 16 KiB values (keys `w{w}/{0..512}`, each put
/// once before) for `secs`: puts per second and puts done.
async fn writers_window(
    store: &Store,
    value: &blobcask::Bytes,
    writers: usize,
    secs: Duration,
) -> (f64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + secs;
    let t = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (store, value, done) = (store.clone(), value.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < stop {
                    // A bounded key space: later rounds overwrite.
                    store
                        .put(format!("w{w}/{}", i % 512), value.clone())
                        .await
                        .unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let puts = done.load(Ordering::Relaxed) as f64;
    (puts / t.elapsed().as_secs_f64(), puts)
}

/// Rounds of three windows in rotating order: one raw writer (16 KiB
/// O_DIRECT write + `fdatasync` at random places of a file of its own,
/// written in full before), 16 and 64 writers putting into `store` (whose
/// keys for them were put before). Each round: [raw, 16, 64] ops/s.
async fn many_writers_in_turns(
    store: &Store,
    value: &blobcask::Bytes,
    dir: &std::path::Path,
    secs: Duration,
    rounds: usize,
) -> Vec<[f64; 3]> {
    const RAW_FILE: u64 = 64 << 20;
    let path = dir.join("raw-writers.bin");
    std::fs::File::create(&path).expect("raw writer file");
    raw::sequential_write(&path, 0, RAW_FILE, 1 << 20, 1);
    let file = Arc::new(open_direct(&path));
    let mut out = Vec::new();
    for round in 0..rounds {
        let mut row = [0.0; 3];
        for turn in 0..3 {
            let which = (round + turn) % 3;
            row[which] = match which {
                0 => {
                    let file = file.clone();
                    tokio::task::spawn_blocking(move || {
                        let buf = aligned(16 << 10);
                        let mut rng = rand::rngs::StdRng::seed_from_u64(round as u64);
                        let (t, mut n) = (Instant::now(), 0u64);
                        while t.elapsed() < secs {
                            let off = rng.random_range(0..RAW_FILE / (16 << 10)) * (16 << 10);
                            file.write_all_at(as_bytes(&buf), off).unwrap();
                            file.sync_data().unwrap();
                            n += 1;
                        }
                        n as f64 / t.elapsed().as_secs_f64()
                    })
                    .await
                    .unwrap()
                }
                1 => writers_window(store, value, 16, secs).await.0,
                _ => writers_window(store, value, 64, secs).await.0,
            };
        }
        out.push(row);
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    out
}
