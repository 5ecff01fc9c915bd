//! The `upload` phase: 64 MiB objects through `put` against sequential
//! `O_DIRECT` pwrite of the same bytes (1 MiB requests, 16 in flight) and
//! fdatasync.

use std::time::{Duration, Instant};

use blobcask::IoEngineKind;

use blobcask_bench::figures::Figure;
use blobcask_bench::raw;

use super::{engine_name, fresh, Config};

pub(crate) async fn upload_phase(cfg: &Config, engine: IoEngineKind) {
    let obj = 64usize << 20;
    let count = if cfg.quick { 2 } else { 8 };
    let total = obj * count;
    let (store, path) = fresh(cfg, engine, total as u64 * 3).await;
    let value = blobcask::Bytes::from(vec![3u8; obj]);
    // Warm-up put so the first extent writes are not only in one figure.
    store.put("warm", value.clone()).await.unwrap();
    store.delete("warm").await.unwrap();
    let t = Instant::now();
    for i in 0..count {
        store.put(format!("big/{i}"), value.clone()).await.unwrap();
    }
    let bc = t.elapsed();
    store.close().await.unwrap();

    // Raw: the same bytes, sequential O_DIRECT pwrite of 1 MiB requests,
    // 16 threads in flight, into the heap region blobcask just wrote (so
    // raw rewrites initialised extents while blobcask wrote fresh ones: the
    // ratio is conservative); once with one fdatasync at the
    // end, once with an fdatasync after every 64 MiB (durable per object,
    // as each put is).
    let chunk = 1u64 << 20;
    let base = 64u64 << 20;
    let rw_one_sync = raw::sequential_write(&path, base, total as u64, chunk, 16);
    let rw_sync_each = (0..count as u64)
        .map(|o| raw::sequential_write(&path, base + o * obj as u64, obj as u64, chunk, 16))
        .sum::<Duration>();
    let mbs = |d: Duration| total as f64 / d.as_secs_f64() / (1 << 20) as f64;
    println!("upload: {count} x 64 MiB");
    println!("| path | MiB/s | ratio to raw (one sync) | ratio to raw (sync per object) |");
    println!("|---|---|---|---|");
    println!(
        "| raw O_DIRECT pwrite 1 MiB x16, one fdatasync at the end | {:.0} | 1.00 | |",
        mbs(rw_one_sync)
    );
    println!(
        "| raw O_DIRECT pwrite 1 MiB x16, fdatasync per 64 MiB | {:.0} | | 1.00 |",
        mbs(rw_sync_each)
    );
    println!(
        "| Store::put (durable) | {:.0} | {:.2} | {:.2} |",
        mbs(bc),
        mbs(bc) / mbs(rw_one_sync),
        mbs(bc) / mbs(rw_sync_each)
    );
    for (id, raw, of) in [
        (
            "upload.put.sync_per_object",
            rw_sync_each,
            "raw O_DIRECT pwrite 1 MiB x16, fdatasync per 64 MiB",
        ),
        (
            "upload.put.one_sync",
            rw_one_sync,
            "raw O_DIRECT pwrite 1 MiB x16, one fdatasync at the end",
        ),
    ] {
        let label = format!("Store::put (durable), {count} x 64 MiB");
        cfg.figures.record(
            Figure::new("upload", id, &label, mbs(bc), "MiB/s")
                .baseline(mbs(raw), of)
                .ratio(mbs(bc) / mbs(raw))
                .engine(engine_name(engine))
                .runtime(Some("multi-thread, block_on")),
        );
    }
}
