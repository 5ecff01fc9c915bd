//! Atomic batches and `get_many`: puts and deletes with their own
//! conditions committed all or nothing, the failed operation named, a key
//! at most once, inline and heap values, on both I/O engines with every
//! index backend. (Cut at every write: `crash.rs`,
//! `every_crash_point_of_atomic_batches_finds_each_whole_or_absent`.)

use crate::common;

use blobcask::{BatchOutcome, ErrorKind, PutMode, PutOptions, Store, MAX_BATCH_OPS};
use common::*;

/// Runs an async behaviour once per engine and index backend on a fresh
/// store.
macro_rules! on_every_engine {
    ($name:ident, |$store:ident, $t:ident, $engine:ident| $body:block) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            for $engine in setups() {
                let $t = temp_path();
                let $store = open(&$t, $engine).await;
                $body
            }
        }
    };
}

fn put_info(o: &BatchOutcome) -> &blobcask::ObjectInfo {
    match o {
        BatchOutcome::Put(info) => info,
        other => panic!("expected a put's outcome, got {other:?}"),
    }
}

/// Sizes on both sides of the inline threshold, of one device request and
/// of the 1 MiB limit of values synced with their group.
const SIZES: [usize; 6] = [0, 300, 5000, 70_000, 1 << 20, (1 << 20) + 4097];

on_every_engine!(
    a_batch_commits_puts_and_deletes_together_and_survives_reopen,
    |s, t, e| {
        s.put("old", pattern(1, 9000)).await.unwrap();
        s.put("gone", pattern(2, 100)).await.unwrap();
        let mut b = s.batch();
        for (i, size) in SIZES.iter().enumerate() {
            b.put(format!("k{i}"), pattern(i as u64 + 10, *size));
        }
        b.put("old", pattern(3, 200))
            .delete("gone")
            .delete("never-was");
        assert_eq!(b.len(), SIZES.len() + 3);
        let out = b.commit().await.unwrap();
        assert!(b.is_empty(), "a committed batch is empty afterwards");
        assert_eq!(out.len(), SIZES.len() + 3);
        let versions: Vec<u64> = out
            .iter()
            .take(SIZES.len() + 1)
            .map(|o| put_info(o).version)
            .collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{e:?}: versions follow the batch's order: {versions:?}"
        );
        for (i, size) in SIZES.iter().enumerate() {
            assert_eq!(put_info(&out[i]).size, *size as u64);
        }
        assert_eq!(
            out[SIZES.len() + 1],
            BatchOutcome::Deleted { existed: true }
        );
        assert_eq!(
            out[SIZES.len() + 2],
            BatchOutcome::Deleted { existed: false }
        );
        let check = |s: Store| async move {
            for (i, size) in SIZES.iter().enumerate() {
                let got = s.get(format!("k{i}")).await.unwrap();
                assert!(got == pattern(i as u64 + 10, *size)[..], "{e:?}: k{i}");
            }
            assert_eq!(s.get("old").await.unwrap(), pattern(3, 200));
            assert!(!s.contains("gone") && !s.contains("never-was"));
            assert_eq!(s.stats().objects, SIZES.len() as u64 + 1);
        };
        check(s.clone()).await;
        s.close().await.unwrap();
        check(open(&t, e).await).await;
    }
);

on_every_engine!(
    a_failed_condition_aborts_the_whole_batch_and_names_the_operation,
    |s, _t, e| {
        let taken = s.put("taken", pattern(1, 700)).await.unwrap();
        s.put("kept", pattern(2, 50)).await.unwrap();
        let before = s.stats();
        let mut b = s.batch();
        b.put("fresh", pattern(3, 200_000))
            .delete("kept")
            .put_with("taken", pattern(4, 10), PutMode::Create.into())
            .put("later", pattern(5, 10));
        let err = b.commit().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{e:?}: {err}");
        assert_eq!(err.batch_op(), Some(2), "{e:?}: {err}");
        assert!(
            err.to_string()
                .contains("batch operation 2 (put \"taken\")"),
            "{err}"
        );
        // Nothing of it happened, and the staged heap value's space is free
        // again.
        assert!(!s.contains("fresh") && !s.contains("later"));
        assert_eq!(s.get("kept").await.unwrap(), pattern(2, 50));
        assert_eq!(s.stat("taken").await.unwrap().version, taken.version);
        let after = s.stats();
        assert_eq!(after.objects, before.objects);
        assert_eq!(after.allocated_bytes, before.allocated_bytes, "{e:?}");

        // Compare-and-swap on versions, for puts and deletes.
        let kept = s.stat("kept").await.unwrap().version;
        let mut b = s.batch();
        b.put_with(
            "taken",
            pattern(6, 10),
            PutMode::Update(taken.version + 100).into(),
        )
        .delete("kept");
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::VersionMismatch, Some(0))
        );
        let mut b = s.batch();
        b.put("x", pattern(7, 10))
            .delete_if_version("kept", kept + 1);
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::VersionMismatch, Some(1))
        );
        assert!(err.to_string().contains("(delete \"kept\")"), "{err}");
        let mut b = s.batch();
        b.delete_if_version("never-was", 1);
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::VersionMismatch, Some(0))
        );
        assert!(!s.contains("x"));

        let mut b = s.batch();
        b.put_with(
            "taken",
            pattern(8, 10),
            PutMode::Update(taken.version).into(),
        )
        .delete_if_version("kept", kept)
        .put_with("new", pattern(9, 10), PutMode::Create.into());
        b.commit().await.unwrap();
        assert_eq!(s.get("taken").await.unwrap(), pattern(8, 10));
        assert!(!s.contains("kept"));
        assert_eq!(s.get("new").await.unwrap(), pattern(9, 10));
    }
);

on_every_engine!(the_same_key_twice_in_a_batch_is_refused, |s, _t, e| {
    let mut b = s.batch();
    b.put("a", pattern(1, 10))
        .put("b", pattern(2, 10))
        .delete("a");
    let err = b.commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{e:?}: {err}");
    assert_eq!(err.batch_op(), Some(2));
    assert!(
        err.to_string().contains("operation 0 has the same key"),
        "{err}"
    );
    assert!(!s.contains("a") && !s.contains("b"));
});

on_every_engine!(
    bad_operations_are_refused_before_anything_is_written,
    |s, _t, e| {
        let before = s.stats();
        let mut b = s.batch();
        b.put("a", pattern(1, 10)).put("", pattern(2, 10));
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::InvalidArgument, Some(1)),
            "{e:?}"
        );
        let mut b = s.batch();
        let ttl = PutOptions::default().ttl(std::time::Duration::ZERO);
        b.put("a", pattern(1, 10))
            .put_with("b", pattern(2, 10), ttl);
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::InvalidArgument, Some(1))
        );
        // More operations than a batch may hold: `TooLarge`, nothing written.
        let mut b = s.batch();
        for i in 0..=MAX_BATCH_OPS {
            b.delete(format!("k{i}"));
        }
        let err = b.commit().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooLarge, "{err}");
        assert_eq!(err.batch_op(), None);
        // A value larger than the heap can be: `TooLarge`, naming it.
        let mut b = s.batch();
        b.put("a", pattern(1, 10)).put("huge", vec![0u8; 80 << 20]);
        let err = b.commit().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.batch_op()),
            (ErrorKind::TooLarge, Some(1)),
            "{err}"
        );
        let after = s.stats();
        assert_eq!(
            (after.objects, after.allocated_bytes),
            (before.objects, before.allocated_bytes)
        );
    }
);

on_every_engine!(an_empty_batch_commits_nothing, |s, _t, _e| {
    s.put("a", pattern(1, 10)).await.unwrap();
    let v = s.stat("a").await.unwrap().version;
    assert_eq!(s.batch().commit().await.unwrap(), vec![]);
    // No version was taken by it.
    assert_eq!(s.put("a", pattern(1, 10)).await.unwrap().version, v + 1);
});

on_every_engine!(
    a_batch_as_large_as_allowed_commits_in_one_piece,
    |s, t, e| {
        let n = 1500;
        let mut b = s.batch();
        for i in 0..n {
            b.put(
                format!("key/{i:05}"),
                pattern(i, 100 + (i as usize % 7) * 600),
            );
        }
        let out = b.commit().await.unwrap();
        assert_eq!(out.len(), n as usize);
        let first = put_info(&out[0]).version;
        let last = put_info(&out[n as usize - 1]).version;
        assert_eq!(
            last - first,
            n - 1,
            "{e:?}: one version per operation, in one run"
        );
        s.close().await.unwrap();
        let s = open(&t, e).await;
        assert_eq!(s.stats().objects, n);
        let mut b = s.batch();
        for i in 0..n {
            b.delete(format!("key/{i:05}"));
        }
        b.commit().await.unwrap();
        assert_eq!(s.stats().objects, 0);
    }
);

on_every_engine!(
    racing_batches_with_one_create_succeed_exactly_once,
    |s, _t, _e| {
        let tries = (0..8).map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut b = s.batch();
                b.put(format!("mine/{i}"), pattern(i, 300)).put_with(
                    "shared",
                    pattern(i, 300),
                    PutMode::Create.into(),
                );
                b.commit().await
            })
        });
        let results = futures::future::join_all(tries).await;
        let won: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.as_ref().unwrap().is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(won.len(), 1, "exactly one create wins: {won:?}");
        for (i, r) in results.iter().enumerate() {
            assert_eq!(s.contains(format!("mine/{i}")), r.as_ref().unwrap().is_ok());
        }
    }
);

on_every_engine!(
    get_many_returns_each_value_in_order_and_none_for_a_miss,
    |s, _t, _e| {
        s.put("a", pattern(1, 10)).await.unwrap();
        s.put("c", pattern(3, 90_000)).await.unwrap();
        let got = s.get_many(["c", "b", "a", "c"]).await.unwrap();
        let want = [
            Some(pattern(3, 90_000)),
            None,
            Some(pattern(1, 10)),
            Some(pattern(3, 90_000)),
        ];
        assert_eq!(got.len(), 4);
        for (g, w) in got.iter().zip(want.iter()) {
            assert_eq!(g.as_deref(), w.as_deref());
        }
        assert_eq!(s.get_many(Vec::<&str>::new()).await.unwrap(), vec![]);
        // Its future is `Send` (a binding runs it on another thread).
        let s2 = s.clone();
        let spawned = tokio::spawn(async move { s2.get_many(vec![b"a".to_vec()]).await });
        assert_eq!(
            spawned.await.unwrap().unwrap()[0].as_deref(),
            Some(&pattern(1, 10)[..])
        );
        let err = s.get_many(["a", ""]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
);

#[test]
fn the_blocking_batch_and_get_many_match_the_async_ones() {
    let t = temp_path();
    let s = blobcask::blocking::Store::open(&t.path, options(blobcask::IoEngineKind::Portable))
        .unwrap();
    let info = s.put("a", pattern(1, 10)).unwrap();
    let mut b = s.batch();
    b.put("b", pattern(2, 70_000))
        .delete_if_version("a", info.version)
        .put_with("a2", pattern(3, 10), PutMode::Create.into());
    let out = b.commit().unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[1], BatchOutcome::Deleted { existed: true });
    let got = s.get_many(["a", "b", "a2"]).unwrap();
    assert_eq!(got[0], None);
    assert_eq!(got[1].as_deref(), Some(&pattern(2, 70_000)[..]));
    assert_eq!(got[2].as_deref(), Some(&pattern(3, 10)[..]));
    let mut b = s.batch();
    b.put("c", pattern(4, 10))
        .put_with("b", pattern(5, 10), PutMode::Create.into());
    let err = b.commit().unwrap_err();
    assert_eq!(
        (err.kind(), err.batch_op()),
        (ErrorKind::AlreadyExists, Some(1))
    );
    assert!(!s.contains("c"));
}

/// A batch may change one tuple block per operation, and its group must
/// fit the metadata journal whole. On a full heap (no room for a larger
/// journal) a batch over more blocks than the journal holds is refused
/// whole, before anything changes, where single changes would be split
/// into several groups; the store stays usable, and a batch that fits
/// commits.
#[test]
fn a_batch_the_journal_cannot_hold_on_a_full_heap_is_refused_whole() {
    use blobcask::blocking::Store;
    let dev = std::sync::Arc::new(blobcask::io::fault::MemDevice::new(8 << 20));
    let s = Store::open_with_engine(dev.clone(), blobcask::Options::new()).unwrap();
    // 600 inline objects: ~50 tuple blocks with state, more than the 32
    // journal slots an 8 MiB store starts with.
    let small = |i: u64, round: u64| pattern(i * 31 + round, 300);
    for i in 0..600 {
        s.put(format!("s{i:04}"), small(i, 0)).unwrap();
    }
    let mut n = 0u64;
    while s.put(format!("big{n}"), pattern(n, 100_000)).is_ok() {
        n += 1;
    }
    assert!(s.stats().free_bytes < 128 << 10, "the heap is full");
    let mut b = s.batch();
    for i in 0..600 {
        b.put(format!("s{i:04}"), small(i, 1));
    }
    let err = b.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoSpace, "{err}");
    assert_eq!(err.batch_op(), None);
    for i in 0..600 {
        assert_eq!(s.get(format!("s{i:04}")).unwrap(), small(i, 0));
    }
    let mut b = s.batch();
    for i in 0..20 {
        b.put(format!("s{i:04}"), small(i, 2));
    }
    b.commit().unwrap();
    s.close().unwrap();
    let s = Store::open_with_engine(dev, blobcask::Options::new().create(false)).unwrap();
    for i in 0..600 {
        let want = if i < 20 { small(i, 2) } else { small(i, 0) };
        assert_eq!(s.get(format!("s{i:04}")).unwrap(), want, "s{i:04}");
    }
}

/// Readers racing a batch's commit never see part of it: once any of its
/// puts is visible, all are (visibility only grows here, so a reader that
/// finds the first key and then misses the last saw a partial batch). The
/// batch spans many tuple blocks, so the metadata area grows while it is
/// applied.
#[test]
fn readers_never_see_part_of_a_batch() {
    let t = temp_path();
    let s = blobcask::blocking::Store::open(&t.path, options(blobcask::IoEngineKind::Portable))
        .unwrap();
    for round in 0..6 {
        let first = format!("r{round}/0000");
        let last = format!("r{round}/0999");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (s, stop) = (s.clone(), stop.clone());
            let (first, last) = (first.clone(), last.clone());
            std::thread::spawn(move || {
                let mut partial = 0;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    if s.contains(&first) && !s.contains(&last) {
                        partial += 1;
                    }
                }
                partial
            })
        };
        let mut b = s.batch();
        for i in 0..1000 {
            b.put(format!("r{round}/{i:04}"), pattern(i, 400));
        }
        b.commit().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Release);
        let partial = reader.join().unwrap();
        assert_eq!(partial, 0, "round {round}: a reader saw part of the batch");
    }
}
