//! `Store::local`: the handle for tokio-uring's thread-per-core runtime.
//! Its reads go out on the runtime's own ring and must return exactly what
//! `Store::read` returns (inline and heap objects, multi-piece objects,
//! trailer tables, any range), report a damaged block as `Corrupt` rather
//! than serve it (invariant 5), refuse bad input with the same kinds
//! (invariant 3), and say `Unsupported` outside a tokio-uring runtime
//! instead of panicking. Its writes take the store's commit path, which
//! under tokio-uring's runtime needs no completion thread.
//!
//! No test in this file may wait on a store's ring outside a tokio
//! runtime: `writes_inside_tokio_uring_start_no_completion_thread` looks
//! for the store's fallback completion thread process-wide.
#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Seek, SeekFrom, Write};

use blobcask::internals::tuple::{self, TupleValue};
use blobcask::internals::BLOCK_SIZE;
use blobcask::{ErrorKind, IoEngineKind, LocalStore, Options, Store};
use common::{
    assert_no_fallback_thread, device_offset, expect_corrupt, pattern, temp_path, tuple_of,
    TempStore,
};
use rand::{Rng, SeedableRng};

/// Inline threshold of these stores (the default).
const INLINE: usize = blobcask::DEFAULT_INLINE_THRESHOLD;

/// Small pieces, so that objects of a few hundred KiB have several.
fn options() -> Options {
    Options::new()
        .capacity(32 << 20)
        .io_engine(IoEngineKind::IoUring)
        .max_piece_size(64 << 10)
}

async fn open(t: &TempStore) -> Store {
    Store::open(&t.path, options()).await.expect("open store")
}

/// Sizes covering inline values, one block, block edges, several pieces,
/// a trailer table (more than 16 blocks) and more than one 1 MiB device
/// request.
const SIZES: [usize; 11] = [
    0,
    1,
    INLINE,
    INLINE + 1,
    4096,
    4097,
    16 * 4096,
    16 * 4096 + 1,
    300_001,
    (1 << 20) + 4096 + 3,
    (2 << 20) + 5,
];

fn key(size: usize) -> String {
    format!("obj/{size}")
}

fn value(size: usize) -> Vec<u8> {
    pattern(size as u64 * 31 + 7, size)
}

/// Ranges of a `size`-byte object at unaligned offsets: around block,
/// piece (64 KiB) and request (1 MiB) boundaries, the tail, clipped ones.
fn ranges(size: u64, rng: &mut rand::rngs::StdRng) -> Vec<(u64, u64)> {
    let mut out = vec![(0, u64::MAX), (0, 1), (size, 10)];
    for edge in [4096u64, 65_536, 1 << 20] {
        if edge < size {
            out.push((edge - 3, 7));
            out.push((edge - 1000, 5000));
        }
    }
    if size > 0 {
        out.push((size - 1, 100));
        out.push((size / 2 + 1, size));
    }
    for _ in 0..20 {
        let off = rng.random_range(0..=size);
        let len = rng.random_range(0..=(size - off).min(300_000) + 10);
        out.push((off, len));
    }
    out
}

fn expected(v: &[u8], off: u64, len: u64) -> &[u8] {
    let start = off as usize;
    let end = off.saturating_add(len).min(v.len() as u64) as usize;
    &v[start..end]
}

#[test]
fn round_trip_inline_heap_and_unaligned_ranges() {
    let t = temp_path();
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().expect("local handle");
        for size in SIZES {
            let info = local.put(key(size), value(size)).await.unwrap();
            assert_eq!(info.size, size as u64);
            assert_eq!(info.inline, size <= INLINE, "{size} B");
        }
        let stats = store.stats();
        assert_eq!(stats.io_engine, "io_uring");
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut reads = 0;
        for size in SIZES {
            let v = value(size);
            let k = key(size);
            assert_eq!(&local.get(&k).await.unwrap()[..], &v[..], "get {size} B");
            for (off, len) in ranges(size as u64, &mut rng) {
                let got = local.read(&k, off, len).await.unwrap();
                assert_eq!(
                    &got[..],
                    expected(&v, off, len),
                    "read {size} B at {off}+{len}"
                );
                // The same bytes as the store's own read path.
                assert_eq!(got, store.read(&k, off, len).await.unwrap());
                reads += 1;
            }
        }
        assert!(reads > 250, "{reads} reads");
        store.close().await.unwrap();
    });
}

#[test]
fn objects_of_several_pieces_and_overwrites_read_back() {
    let t = temp_path();
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        // Interleaved puts and deletes fragment the heap, so a later
        // object's pieces are not back to back on the device.
        for i in 0..24u64 {
            local
                .put(format!("frag/{i}"), pattern(i, 64 << 10))
                .await
                .unwrap();
        }
        for i in (0..24u64).step_by(2) {
            local.delete(format!("frag/{i}")).await.unwrap();
        }
        let v = pattern(99, 5 * (64 << 10) + 123);
        local.put("big", v.clone()).await.unwrap();
        store.close().await.unwrap();
        let image = std::fs::read(&t.path).unwrap();
        let tup = tuple_of(&image, "big");
        let TupleValue::Heap { pieces, .. } = &tup.value else {
            panic!("not a heap object");
        };
        let apart = pieces
            .windows(2)
            .filter(|w| w[0].offset() + w[0].len_bytes() != w[1].offset())
            .count();
        assert!(pieces.len() >= 5, "{pieces:?}");
        assert!(apart > 0, "pieces all back to back: {pieces:?}");

        let store = open(&t).await;
        let local = store.local().unwrap();
        assert_eq!(&local.get("big").await.unwrap()[..], &v[..]);
        // Every piece boundary, crossed by a small unaligned range.
        let mut at = 0u64;
        for p in pieces {
            at += p.len_bytes();
            if at < v.len() as u64 {
                let got = local.read("big", at - 5, 11).await.unwrap();
                assert_eq!(&got[..], expected(&v, at - 5, 11), "across {at}");
            }
        }
        // An overwrite is read at its new version.
        let w = pattern(100, 70_000);
        local.put("big", w.clone()).await.unwrap();
        assert_eq!(&local.get("big").await.unwrap()[..], &w[..]);
        store.close().await.unwrap();
    });
}

/// Flips object byte `pos` of `key` in the closed store's file.
fn flip(t: &TempStore, key: &str, pos: u64) {
    let image = std::fs::read(&t.path).unwrap();
    let at = device_offset(&tuple_of(&image, key), pos) as u64;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&t.path)
        .unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    b[0] ^= 0x5a;
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&b).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn a_flipped_byte_on_disk_is_corrupt_never_served() {
    let t = temp_path();
    // (size, object byte to flip): checksums in the tuple; a trailer table
    // (its data, then the table itself); a 2 MiB object, second request.
    let cases: [(usize, u64); 4] = [
        (20_000, 9_000),
        (300_001, 150_000),
        (300_001 + 1, tuple::table_offset(300_002) + 1),
        ((2 << 20) + 5, (1 << 20) + 77),
    ];
    tokio_uring::start(async {
        let store = open(&t).await;
        for (size, _) in cases {
            store.put(key(size), value(size)).await.unwrap();
        }
        store.close().await.unwrap();
    });
    for (size, pos) in cases {
        flip(&t, &key(size), pos);
    }
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        for (size, pos) in cases {
            let k = key(size);
            let v = value(size);
            let table = pos >= size as u64;
            let what = format!("{size} B, byte {pos} flipped");
            let block = pos / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;
            let mut covering = vec![(0, u64::MAX)];
            if !table {
                covering.extend([(block, 1), (pos - 10, 20), (block - 1, 4098)]);
            }
            for (off, len) in covering {
                expect_corrupt(local.read(&k, off, len).await, &k, &what);
                // The store's own path agrees.
                expect_corrupt(store.read(&k, off, len).await, &k, &what);
            }
            expect_corrupt(local.get(&k).await, &k, &what);
            if !table {
                // A range in another block still reads, exactly.
                let other = if block >= 8192 { 100 } else { block + 4096 };
                let got = local.read(&k, other, 1000).await.unwrap();
                assert_eq!(&got[..], expected(&v, other, 1000), "{what}: other block");
            }
        }
        store.close().await.unwrap();
    });
}

#[test]
fn bad_input_gets_the_same_error_kinds_as_store_read() {
    let t = temp_path();
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        local.put("heap", value(10_000)).await.unwrap();
        local.put("inline", value(10)).await.unwrap();
        let long = "k".repeat(blobcask::MAX_KEY_LEN + 1);
        let cases: [(&str, u64, ErrorKind); 6] = [
            ("missing", 0, ErrorKind::NotFound),
            ("", 0, ErrorKind::InvalidArgument),
            ("heap", 10_001, ErrorKind::InvalidArgument),
            ("heap", u64::MAX, ErrorKind::InvalidArgument),
            ("inline", 11, ErrorKind::InvalidArgument),
            (&long, 0, ErrorKind::TooLarge),
        ];
        for (k, off, kind) in cases {
            let e = local.read(k, off, 10).await.unwrap_err();
            assert_eq!(e.kind(), kind, "{k:.10} at {off}: {e}");
            let s = store.read(k, off, 10).await.unwrap_err();
            assert_eq!(s.kind(), kind, "{k:.10} at {off}: {s}");
        }
        assert_eq!(
            local.get("missing").await.unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            local.delete("missing").await.unwrap_err().kind(),
            ErrorKind::NotFound
        );
        // The end of an object is an empty read, not an error.
        assert!(local.read("heap", 10_000, 10).await.unwrap().is_empty());
        local.delete("heap").await.unwrap();
        assert_eq!(
            local.read("heap", 0, 1).await.unwrap_err().kind(),
            ErrorKind::NotFound
        );
        store.close().await.unwrap();
        // A closed store: the handle's calls and new handles are refused.
        assert_eq!(
            local.read("inline", 0, 1).await.unwrap_err().kind(),
            ErrorKind::Closed
        );
        assert_eq!(store.local().unwrap_err().kind(), ErrorKind::Closed);
    });
}

#[test]
fn sixty_four_concurrent_reads_on_one_ring() {
    let t = temp_path();
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        let sizes: Vec<usize> = (0..16).map(|i| 600 + i * 37_000).collect();
        for &size in &sizes {
            local.put(key(size), value(size)).await.unwrap();
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let reqs: Vec<(usize, u64, u64)> = (0..64)
            .map(|i| {
                let size = sizes[i % sizes.len()];
                let off = rng.random_range(0..size as u64);
                (size, off, rng.random_range(1..20_000))
            })
            .collect();
        // 64 futures polled together: their reads are queued on the ring
        // before any completes.
        let got = futures::future::join_all(
            reqs.iter()
                .map(|&(size, off, len)| local.read(key(size), off, len)),
        )
        .await;
        for (&(size, off, len), r) in reqs.iter().zip(got) {
            assert_eq!(&r.unwrap()[..], expected(&value(size), off, len));
        }
        // And from 64 tasks, each with a clone of the handle.
        let tasks: Vec<_> = reqs
            .iter()
            .map(|&(size, off, len)| {
                let l = local.clone();
                tokio_uring::spawn(async move { l.read(key(size), off, len).await })
            })
            .collect();
        for (&(size, off, len), task) in reqs.iter().zip(tasks) {
            let r = task.await.unwrap();
            assert_eq!(&r.unwrap()[..], expected(&value(size), off, len));
        }
        store.close().await.unwrap();
    });
}

/// The store's ring waits through the runtime's reactor: the fallback
/// completion thread (`blobcask-uring-completions`, the kernel's name cut
/// to 15 bytes) that serves executors without a reactor never starts.
#[test]
fn writes_inside_tokio_uring_start_no_completion_thread() {
    let t = temp_path();
    tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        assert_eq!(store.stats().io_engine, "io_uring");
        let before = store.stats().commit_groups;
        for i in 0..50u64 {
            let size = [10usize, 5_000, 100_000][i as usize % 3];
            local.put(format!("w/{i}"), pattern(i, size)).await.unwrap();
            if i % 4 == 0 {
                local.delete(format!("w/{i}")).await.unwrap();
            }
        }
        // Concurrent writers: a leader and followers.
        let puts = (0..16u64).map(|i| local.put(format!("c/{i}"), pattern(i, 9_000)));
        for r in futures::future::join_all(puts).await {
            r.unwrap();
        }
        assert!(store.stats().commit_groups > before);
        assert_no_fallback_thread();
        for i in (1..50u64).filter(|i| i % 4 != 0) {
            let size = [10usize, 5_000, 100_000][i as usize % 3];
            assert_eq!(
                &local.get(format!("w/{i}")).await.unwrap()[..],
                &pattern(i, size)[..]
            );
        }
        store.close().await.unwrap();
        assert_no_fallback_thread();
    });
}

#[test]
fn outside_a_tokio_uring_runtime_is_unsupported_not_a_panic() {
    let t = temp_path();
    let unsupported = |r: blobcask::Result<LocalStore>, what: &str| match r {
        Ok(_) => panic!("{what}: a handle outside tokio-uring"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{what}: {e}");
            assert!(e.to_string().contains("tokio_uring::start"), "{what}: {e}");
        }
    };
    // Made and used inside, then used after the runtime is gone.
    let (store, local) = tokio_uring::start(async {
        let store = open(&t).await;
        let local = store.local().unwrap();
        local.put("k", value(5000)).await.unwrap();
        local.put("i", value(5)).await.unwrap();
        (store, local)
    });
    // No runtime at all.
    unsupported(store.local(), "no runtime");
    for k in ["k", "i"] {
        let e = futures::executor::block_on(local.read(k, 0, 10)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains(k), "{e}");
    }
    let e = futures::executor::block_on(local.put("k", vec![1u8])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let e = futures::executor::block_on(local.delete("k")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    // A multi-thread tokio runtime.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        unsupported(store.local(), "multi-thread tokio");
        let e = local.read("k", 0, 10).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    });
    // A current-thread tokio runtime (with a LocalSet, as tokio-uring
    // runs): only tokio-uring's own probe tells it apart.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, async {
        unsupported(store.local(), "current-thread tokio");
        let e = local.read("k", 0, 10).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    });
    // Back inside a (new) tokio-uring runtime, the same handle works.
    tokio_uring::start(async {
        assert_eq!(&local.get("k").await.unwrap()[..], &value(5000)[..]);
        drop(local);
        store.close().await.unwrap();
    });
}

#[test]
fn a_store_on_a_caller_supplied_engine_has_no_local_handle() {
    tokio_uring::start(async {
        let dev = std::sync::Arc::new(blobcask::io::fault::MemDevice::new(8 << 20));
        let store = Store::open_with_engine(dev, Options::new()).await.unwrap();
        let e = store.local().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        store.close().await.unwrap();
    });
}

/// `LocalStore` must stay `!Send` (it holds tokio-uring's thread-bound
/// file): this only compiles while it is. Two blanket impls of one trait
/// make the call ambiguous exactly when the type is `Send`.
#[test]
fn the_local_handle_is_not_send() {
    trait AmbiguousIfSend<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSend<()> for T {}
    struct IsSend;
    impl<T: ?Sized + Send> AmbiguousIfSend<IsSend> for T {}
    <LocalStore as AmbiguousIfSend<_>>::check();
}
