//! What io_uring itself gives on this machine, without the store: the
//! floors the commit phase's rows are read against.

use std::path::Path;
use std::time::{Duration, Instant};

use blobcask::io::AlignedBuf;

/// Offset of the `n`th 16 KiB write: written space of the store file
/// (the store is closed by then), 64 MiB in.
fn at(n: u64) -> u64 {
    (64 << 20) + (n * 7919 % 4096) * 16384
}

/// (row name, puts per second) on tokio-uring's own runtime:
/// * one writer doing a 16 KiB write then `sync_data`, awaited (the
///   runtime's floor for one durable put);
/// * per `(writers, puts, blocks)` of `shapes`, the groups the store
///   wrote for that many writers: `puts` values of 16 KiB (spread over
///   the file, then side by side) and `blocks` 4 KiB tuple-block
///   writes spread over it, issued at once, then one `sync_data` (the
///   device's floor for that row).
pub fn rates(path: &Path, secs: Duration, shapes: &[(usize, u64, u64)]) -> Vec<(String, f64)> {
    let file = super::open_direct(path);
    let shapes = shapes.to_vec();
    std::thread::spawn(move || {
        tokio_uring::start(async move {
            let file = tokio_uring::fs::File::from_std(file);
            let mut out = Vec::new();
            let mut buf = AlignedBuf::zeroed(16384);
            let (t, mut n) = (Instant::now(), 0u64);
            while t.elapsed() < secs {
                let (r, b) = file.write_at(buf, at(n)).submit().await;
                r.expect("tokio-uring write");
                buf = b;
                file.sync_data().await.expect("tokio-uring sync");
                n += 1;
            }
            out.push((
                "tokio-uring write_at + sync_data, 1 writer (no store)".to_string(),
                n as f64 / t.elapsed().as_secs_f64(),
            ));
            for ((writers, group, blocks), side_by_side) in shapes
                .iter()
                .flat_map(|&s| [(s, false), (s, true)])
            {
                let (t, mut puts) = (Instant::now(), 0u64);
                while t.elapsed() < secs {
                    // Values spread over the file (where overwrites
                    // leave the free pieces a group's puts take), or
                    // side by side (a fresh store's, merged by the
                    // block layer into one request); tuple blocks
                    // spread.
                    let values = (0..group).map(|i| {
                        let off = if side_by_side {
                            (128 << 20) + ((puts + i) % 8192) * 16384
                        } else {
                            at(1_000_003 + puts * 2 + i)
                        };
                        (16384, off)
                    });
                    let spread = (0..blocks).map(|i| (4096, at(puts * 2 + i)));
                    let writes = values.chain(spread).map(|(size, off)| {
                        file.write_at(AlignedBuf::zeroed(size), off).submit()
                    });
                    for (r, _) in futures::future::join_all(writes).await {
                        r.expect("tokio-uring write");
                    }
                    file.sync_data().await.expect("tokio-uring sync");
                    puts += group;
                }
                let values = if side_by_side { "side by side" } else { "spread" };
                out.push((
                    format!(
                        "device floor of the {writers}-writer row: its groups ({group} x 16 KiB {values} + {blocks} x 4 KiB spread) at once, then sync_data (no store)"
                    ),
                    puts as f64 / t.elapsed().as_secs_f64(),
                ));
            }
            file.close().await.expect("close");
            out
        })
    })
    .join()
    .expect("tokio-uring floor thread")
}
