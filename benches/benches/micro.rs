//! Criterion micro benchmarks of the engine's parts: index operations per
//! backend, buddy allocation, tuple encode/decode, and one 4 KiB read
//! through each I/O path. `cargo bench -p blobcask-bench --bench micro`
//! measures; CI runs them once each in test mode (`cargo test --benches`).

use std::hint::black_box;

use blobcask::internals::tuple::{Piece, Tuple, TupleValue};
use blobcask::internals::BuddyAllocator;
use blobcask::{internals::build_index, IndexKind};
use blobcask::{Bytes, IoEngineKind, Options};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};

/// URL-like keys, as a crawler or CDN would store.
fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("https://cdn.example.com/img/{:04}/{i:08}.jpg", i % 997).into_bytes())
        .collect()
}

fn index_ops(c: &mut Criterion) {
    let keys = keys(100_000);
    let mut g = c.benchmark_group("index");
    for kind in [IndexKind::Hash, IndexKind::BTree, IndexKind::Fst] {
        let mut idx = build_index(kind);
        idx.load(
            keys.iter()
                .enumerate()
                .map(|(i, k)| (k.clone().into_boxed_slice(), i as u64))
                .collect(),
        );
        // Let a background-built backend (FST) fold its build in first.
        for _ in 0..10_000 {
            if !idx.needs_maintenance() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            } else {
                idx.maintain();
                break;
            }
        }
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("get", kind.name()), |b| {
            b.iter(|| {
                i = (i + 7919) % keys.len();
                black_box(idx.get(&keys[i]))
            })
        });
        let mut j = 0u64;
        // A new key each time under the one free entry id, as the engine
        // reuses the id a removal frees (ids name one key at a time).
        let free = keys.len() as u64;
        g.bench_function(BenchmarkId::new("insert+remove", kind.name()), |b| {
            b.iter(|| {
                j += 1;
                let k = format!("new/{j}");
                idx.insert(k.as_bytes(), free);
                black_box(idx.remove(k.as_bytes()))
            })
        });
    }
    g.finish();
}

fn allocator(c: &mut Criterion) {
    let mut g = c.benchmark_group("buddy");
    // 64 GiB of 4 KiB blocks, pieces up to 16 MiB (order 12).
    let mut a = BuddyAllocator::new(0, 16 << 20, 12);
    for (name, size) in [
        ("alloc+free 18K", 18 << 10),
        ("alloc+free 4.5M", 4608 << 10),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let pieces = a.alloc_object(black_box(size)).unwrap();
                for p in pieces {
                    a.free(p);
                }
            })
        });
    }
    g.finish();
}

fn tuples(c: &mut Criterion) {
    let mut g = c.benchmark_group("tuple");
    let heap = Tuple {
        key: b"https://cdn.example.com/img/0042/00001234.jpg"
            .to_vec()
            .into_boxed_slice(),
        version: 123_456,
        created_micros: 1_700_000_000_000_000,
        size: 18 << 10,
        expires_micros: None,
        value: TupleValue::Heap {
            pieces: vec![
                Piece {
                    start: 4096,
                    order: 2,
                },
                Piece {
                    start: 77,
                    order: 0,
                },
            ],
            sums: blobcask::internals::tuple::Checksums::Blocks(vec![0xdead_beef; 5].into()),
            unsynced: true,
        },
    };
    let inline = Tuple {
        value: TupleValue::Inline(Bytes::from(vec![7u8; 300])),
        size: 300,
        ..heap.clone()
    };
    for (name, t) in [("heap", &heap), ("inline 300 B", &inline)] {
        let mut buf = Vec::with_capacity(4096);
        g.bench_function(BenchmarkId::new("encode", name), |b| {
            b.iter(|| {
                buf.clear();
                black_box(t).encode_into(&mut buf);
                black_box(buf.len())
            })
        });
        let mut enc = Vec::new();
        t.encode_into(&mut enc);
        g.bench_function(BenchmarkId::new("decode", name), |b| {
            b.iter(|| black_box(Tuple::decode(black_box(&enc)).unwrap()))
        });
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("micro-read");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("read 4K of a 1 MiB object");
    for (label, kind) in [
        ("io_uring", IoEngineKind::IoUring),
        ("portable", IoEngineKind::Portable),
    ] {
        let path = dir.join(format!("{label}.blobcask"));
        let store = blobcask::blocking::Store::open(
            &path,
            Options::new().capacity(256 << 20).io_engine(kind),
        )
        .unwrap();
        let objects = 64u64;
        for i in 0..objects {
            store.put(format!("o{i}"), vec![i as u8; 1 << 20]).unwrap();
        }
        let mut x = 1u64;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (
                format!("o{}", (x >> 40) % objects),
                (x >> 20) % ((1 << 20) - 4096),
            )
        };
        g.bench_function(BenchmarkId::new("blocking", label), |b| {
            b.iter_batched(
                &mut next,
                |(k, off)| black_box(store.read(&k, off, 4096).unwrap()),
                BatchSize::SmallInput,
            )
        });
        let async_store = store.as_async().clone();
        g.bench_function(BenchmarkId::new("async", label), |b| {
            b.iter_batched(
                &mut next,
                |(k, off)| black_box(rt.block_on(async_store.read(&k, off, 4096)).unwrap()),
                BatchSize::SmallInput,
            )
        });
        store.close().unwrap();
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, index_ops, allocator, tuples, reads);
criterion_main!(benches);
