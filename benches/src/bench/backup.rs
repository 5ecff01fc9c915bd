//! The `backup` phase (only when asked for): `Store::backup` against a
//! sequential copy of as many bytes of the store file, for three object
//! sizes.

use blobcask::IoEngineKind;

use blobcask_bench::figures::Figure;
use blobcask_bench::raw;

use super::{fresh, Config};

/// `Store::backup` against a sequential copy of the same number of bytes,
/// alternating, for three object sizes.
pub(crate) async fn backup_phase(cfg: &Config) {
    println!("\n## backup: Store::backup vs sequential copy of as many bytes");
    let total: u64 = if cfg.quick { 128 << 20 } else { 512 << 20 };
    let rounds = if cfg.quick { 2 } else { 3 };
    for size in [16u64 << 10, 1 << 20, 32 << 20] {
        let (store, path) = fresh(cfg, IoEngineKind::IoUring, 4 * total).await;
        let n = total / size;
        let value = blobcask::Bytes::from(vec![0x5au8; size as usize]);
        store
            .bulk_load((0..n).map(|i| (format!("obj/{i:08}"), value.clone())))
            .await
            .unwrap();
        let (mut raw_t, mut backup_t) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let copy = cfg.dir.join("raw-copy");
            let _ = std::fs::remove_file(&copy);
            let (p, c) = (path.clone(), copy.clone());
            raw_t.push(
                tokio::task::spawn_blocking(move || {
                    raw::sequential_copy(&p, &c, total, 4 << 20, 4)
                })
                .await
                .unwrap(),
            );
            std::fs::remove_file(&copy).unwrap();
            let dest = cfg.dir.join("backup-copy");
            let _ = std::fs::remove_file(&dest);
            let report = store.backup(&dest).await.unwrap();
            assert_eq!(report.objects, n);
            backup_t.push(report.elapsed);
            std::fs::remove_file(&dest).unwrap();
        }
        raw_t.sort();
        backup_t.sort();
        let (r, b) = (raw_t[raw_t.len() / 2], backup_t[backup_t.len() / 2]);
        let mib = total as f64 / (1 << 20) as f64;
        println!(
            "{:>6} KiB x {n:>6}: sequential copy {:7.1} MiB/s, backup {:7.1} MiB/s, backup speed / copy speed {:.2} (medians of {rounds})",
            size >> 10,
            mib / r.as_secs_f64(),
            mib / b.as_secs_f64(),
            r.as_secs_f64() / b.as_secs_f64(),
        );
        let label = format!("Store::backup of {n} objects of {} KiB", size >> 10);
        cfg.figures.record(
            Figure::new(
                "backup",
                &format!("backup.{}k", size >> 10),
                &label,
                mib / b.as_secs_f64(),
                "MiB/s",
            )
            .baseline(
                mib / r.as_secs_f64(),
                "sequential copy of as many bytes (median)",
            )
            .ratio(r.as_secs_f64() / b.as_secs_f64())
            .engine("io_uring"),
        );
        store.close().await.unwrap();
    }
}
