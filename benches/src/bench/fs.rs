//! The `fs` phase: random 4 KiB range reads of objects of several sizes
//! through `blocking::Store::read` against a file per object (open +
//! pread + close), the page cache dropped first when running as root.

use std::os::unix::fs::FileExt;
use std::time::Instant;

use blobcask::Options;

use blobcask_bench::figures::Figure;
use rand::{Rng, SeedableRng};

use super::{pct, us, Config};

/// Drops the page cache (needs root); says whether it could.
fn drop_page_cache() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) async fn fs_phase(cfg: &Config) {
    let sizes: &[usize] = if cfg.quick {
        &[16 << 10, 1 << 20]
    } else {
        &[4 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20]
    };
    println!("\n## file per object vs blobcask: random 4 KiB range reads, 1 in flight");
    println!("| object size | objects | file: open+pread+close p50 µs | blobcask p50 µs | blobcask faster by | page cache |");
    println!("|---|---|---|---|---|---|");
    for &size in sizes {
        let n = ((256usize << 20) / size).clamp(64, 4096);
        let dir = cfg.dir.join("fs-objects");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = cfg.dir.join("fs-compare.blobcask");
        let _ = std::fs::remove_file(&path);
        let store = blobcask::blocking::Store::open(
            &path,
            Options::new().capacity((n * size) as u64 * 2 + (64 << 20)),
        )
        .unwrap();
        let value = vec![0x5au8; size];
        let items: Vec<(String, Vec<u8>)> =
            (0..n).map(|i| (format!("o{i}"), value.clone())).collect();
        store.bulk_load(items).unwrap();
        for i in 0..n {
            std::fs::write(dir.join(format!("o{i}")), &value).unwrap();
        }
        let dropped = drop_page_cache();
        let mut rng = rand::rngs::StdRng::seed_from_u64(size as u64);
        let (mut files, mut bc) = (vec![], vec![]);
        for _ in 0..4 {
            for _ in 0..250 {
                let i = rng.random_range(0..n);
                let off = rng.random_range(0..(size as u64 / 4096)) * 4096;
                let t = Instant::now();
                let f = std::fs::File::open(dir.join(format!("o{i}"))).unwrap();
                let mut buf = vec![0u8; 4096];
                f.read_exact_at(&mut buf, off).unwrap();
                drop(f);
                files.push(t.elapsed());
            }
            for _ in 0..250 {
                let i = rng.random_range(0..n);
                let off = rng.random_range(0..(size as u64 / 4096)) * 4096;
                let t = Instant::now();
                store.read(format!("o{i}"), off, 4096).unwrap();
                bc.push(t.elapsed());
            }
        }
        files.sort();
        bc.sort();
        let (f50, b50) = (us(pct(&files, 0.5)), us(pct(&bc, 0.5)));
        println!(
            "| {} KiB | {n} | {f50:.1} | {b50:.1} | {:.2}× | {} |",
            size >> 10,
            f50 / b50,
            if dropped {
                "dropped"
            } else {
                "not dropped (not root): files read from RAM"
            }
        );
        let label = format!(
            "blobcask::blocking::Store::read of {} KiB objects (page cache {})",
            size >> 10,
            if dropped { "dropped" } else { "not dropped" }
        );
        let id = format!("fs.read4k.{}k", size >> 10);
        cfg.figures.record(
            Figure::new("fs", &id, &label, b50, "µs p50")
                .baseline(f50, "file per object: open + pread + close, p50")
                .ratio(f50 / b50)
                .engine("auto (the default)"),
        );
        store.close().unwrap();
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
