//! Whether `get_ranges` should merge nearby ranges into one store read:
//! eight 16 KiB ranges of a 4 MiB object, with gaps of 0 to 256 KiB between
//! them, read through `get_ranges` (ranges under `COALESCE_GAP` apart
//! merged) and as eight concurrent `get_range` calls (one read each).
//! `cargo bench -p blobcask-object-store --bench get_ranges`; CI runs it
//! once in test mode (`cargo test --benches`).

use std::ops::Range;

use blobcask::{Options, Store};
#[cfg(not(feature = "object_store_014"))]
use blobcask_object_store::v013::{object_store, BlobcaskObjectStore};
#[cfg(feature = "object_store_014")]
use blobcask_object_store::v014::{object_store, BlobcaskObjectStore};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use futures::future::try_join_all;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

const OBJECT: usize = 4 << 20;
const RANGE: u64 = 16 << 10;
const RANGES: u64 = 8;

fn ranges(gap: u64) -> Vec<Range<u64>> {
    (0..RANGES)
        .map(|i| {
            let start = i * (RANGE + gap);
            start..start + RANGE
        })
        .collect()
}

fn get_ranges(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // On the disk, not /tmp (which may be tmpfs): the question is device reads.
    let dir = tempfile::tempdir_in(std::env::var_os("CARGO_TARGET_TMPDIR").unwrap_or(".".into()))
        .expect("temporary directory");
    let path = Path::from("tables/t/part-0.parquet");
    let objects = rt.block_on(async {
        let store = Store::open(
            dir.path().join("bench.bcask"),
            Options::default().capacity(64 << 20),
        )
        .await
        .expect("open store");
        let objects = BlobcaskObjectStore::new(store);
        let data: Vec<u8> = (0..OBJECT).map(|i| (i * 31 % 251) as u8).collect();
        objects.put(&path, data.into()).await.expect("put");
        objects
    });
    let mut g = c.benchmark_group("get_ranges");
    for gap in [0u64, 4 << 10, 16 << 10, 256 << 10] {
        let rs = ranges(gap);
        let label = format!("gap {} KiB", gap >> 10);
        g.bench_function(BenchmarkId::new("merged", &label), |b| {
            b.iter(|| {
                rt.block_on(objects.get_ranges(&path, &rs))
                    .expect("get_ranges")
            })
        });
        g.bench_function(BenchmarkId::new("one read per range", &label), |b| {
            b.iter(|| {
                rt.block_on(try_join_all(
                    rs.iter().map(|r| objects.get_range(&path, r.clone())),
                ))
                .expect("get_range")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, get_ranges);
criterion_main!(benches);
