//! The commit phase's one durable writer with every row in turn (on
//! Linux, with the io_uring engine): raw pwrite + fdatasync, raw io_uring
//! floors of a put's I/O, blocking puts and async puts on a current-thread
//! runtime, in `block_on` of a multi-thread runtime (a `#[tokio::main]`
//! program's own future) and in a task spawned on it.

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use blobcask::Store;

use blobcask_bench::raw::{self, aligned, as_bytes, open_direct};
use rand::{Rng, SeedableRng};

/// The row of [`one_writer_in_turns`] whose puts run in a spawned task.
#[cfg(target_os = "linux")]
const SPAWNED: usize = 8;

/// Puts (or raw writes) per turn of [`one_writer_in_turns`].
#[cfg(target_os = "linux")]
pub(crate) const TURN: usize = 50;

/// One durable writer, every row in turn, `TURN` operations at a time, for
/// about `secs` per row in all: (row, p50 µs), the raw baseline first.
/// Raw rows write a file of their own (`dir/raw-writer.bin`, written once
/// before, so no row pays for never-written space); store rows put the
/// same 512 keys, each put once before.
#[cfg(target_os = "linux")]
pub(crate) fn one_writer_in_turns(
    store: &Store,
    dir: &std::path::Path,
    secs: Duration,
) -> Vec<(String, f64)> {
    use raw::{Ring, SyncBy};
    const RAW_FILE: u64 = 256 << 20;
    let path = dir.join("raw-writer.bin");
    std::fs::File::create(&path).expect("raw writer file");
    raw::sequential_write(&path, 0, RAW_FILE, 1 << 20, 1);
    let file = open_direct(&path);
    let mut ring = Ring::new(open_direct(&path));
    let (value, image) = (aligned(16384), aligned(4096));
    // Values over the first 64 MiB, tuple-block images over 4 MiB after.
    let value_at = |n: u64| (n * 7919 % 4096) * 16384;
    let image_at = |n: u64| (200 << 20) + (n * 31 % 1024) * 4096;

    let blocking = blobcask::blocking::Store::from(store.clone());
    let bytes = blobcask::Bytes::from(vec![9u8; 16384]);
    for k in 0..512 {
        blocking.put(format!("t/{k}"), bytes.clone()).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime");
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("multi-thread runtime");
    let names = [
        "raw: pwrite 16 KiB + fdatasync",
        "raw io_uring: write 16 KiB, then fsync through the ring",
        "raw io_uring: 16 KiB + 4 KiB writes at once, then fdatasync(2) (the blocking put's I/O)",
        "raw io_uring: 16 KiB + 4 KiB writes at once, then fsync through the ring (the async put's I/O)",
        "blocking::Store::put, keys in turn",
        "blocking::Store::put, random keys",
        "Store::put (async) on a tokio current-thread runtime, keys in turn",
        "Store::put (async) in block_on of a tokio multi-thread runtime, keys in turn",
        "Store::put (async) in a task spawned on a tokio multi-thread runtime, keys in turn",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let (t, mut n) = (Instant::now(), 0u64);
    while t.elapsed() < secs * names.len() as u32 {
        for (row, times) in times.iter_mut().enumerate() {
            if row == SPAWNED {
                // The turn's puts in one task, each timed inside it: the
                // spawn and the join are not a put's cost.
                let (store, bytes, from) = (store.clone(), bytes.clone(), n);
                n += TURN as u64;
                let task = multi.spawn(async move {
                    let mut t = Vec::with_capacity(TURN);
                    for i in 1..=TURN as u64 {
                        let key = format!("t/{}", (from + i) % 512);
                        let start = Instant::now();
                        store.put(key, bytes.clone()).await.unwrap();
                        t.push(start.elapsed().as_secs_f64() * 1e6);
                    }
                    t
                });
                times.extend(multi.block_on(task).unwrap());
                continue;
            }
            for _ in 0..TURN {
                n += 1;
                let key = format!("t/{}", n % 512);
                let start = Instant::now();
                match row {
                    0 => {
                        file.write_all_at(as_bytes(&value), value_at(n)).unwrap();
                        file.sync_data().unwrap();
                    }
                    1 => ring.write_then_sync(&[(&value, value_at(n))], SyncBy::Ring),
                    2 | 3 => {
                        let sync = if row == 2 {
                            SyncBy::Syscall
                        } else {
                            SyncBy::Ring
                        };
                        ring.write_then_sync(&[(&value, value_at(n)), (&image, image_at(n))], sync);
                    }
                    4 => {
                        blocking.put(key, bytes.clone()).unwrap();
                    }
                    5 => {
                        let key = format!("t/{}", rng.random_range(0..512u32));
                        blocking.put(key, bytes.clone()).unwrap();
                    }
                    6 => {
                        rt.block_on(store.put(key, bytes.clone())).unwrap();
                    }
                    _ => {
                        multi.block_on(store.put(key, bytes.clone())).unwrap();
                    }
                }
                times.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    drop(ring);
    let _ = std::fs::remove_file(&path);
    names
        .iter()
        .zip(times)
        .map(|(name, mut t)| {
            t.sort_by(f64::total_cmp);
            (
                name.to_string(),
                t.get(t.len() / 2).copied().unwrap_or(f64::NAN),
            )
        })
        .collect()
}
