//! Random operation sequences checked against a `BTreeMap` model, with
//! reopens in between, on both I/O engines.

use crate::common;

use std::collections::BTreeMap;

use blobcask::{ErrorKind, IndexKind, IoEngineKind, PutMode, Store, PART_ALIGN};
use common::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

fn random_size(rng: &mut StdRng) -> usize {
    match rng.random_range(0..10) {
        0..=3 => rng.random_range(0..700),
        4..=7 => rng.random_range(700..70_000),
        8 => rng.random_range(70_000..600_000),
        _ => rng.random_range(600_000..3_000_000),
    }
}

/// A random atomic batch against the model: puts (plain, create-only or
/// compare-and-swap, right or wrong version) and deletes (plain or of a
/// version), sometimes a key twice. The model changes only when every
/// condition holds; otherwise the store must name the first operation
/// that fails, and change nothing.
async fn run_batch(
    store: &Store,
    model: &mut BTreeMap<String, Vec<u8>>,
    rng: &mut StdRng,
    step: usize,
) -> bool {
    let mut b = store.batch();
    let mut next = model.clone();
    // The first operation expected to fail: its index and kind.
    let mut refused: Option<(usize, ErrorKind)> = None;
    // A key twice is refused before any condition is looked at.
    let mut twice: Option<usize> = None;
    let mut seen = std::collections::HashSet::new();
    for i in 0..rng.random_range(1..8) {
        let key = format!("key/{}", rng.random_range(0..40));
        let current = match store.stat(&key).await {
            Ok(info) => Some(info.version),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NotFound, "step {step}: {e}");
                None
            }
        };
        let mut fail = |kind| {
            refused.get_or_insert((i, kind));
        };
        if !seen.insert(key.clone()) {
            twice.get_or_insert(i);
        }
        let version = match rng.random_range(0..4) {
            0 => current.map_or(1, |v| v + 1),
            _ => current.unwrap_or(1),
        };
        match rng.random_range(0..10) {
            0..=5 => {
                let v = pattern(rng.random(), random_size(rng).min(200_000));
                let mode = match rng.random_range(0..3) {
                    0 => PutMode::Overwrite,
                    1 => PutMode::Create,
                    _ => PutMode::Update(version),
                };
                match (mode, current) {
                    (PutMode::Create, Some(_)) => fail(ErrorKind::AlreadyExists),
                    (PutMode::Update(w), c) if c != Some(w) => fail(ErrorKind::VersionMismatch),
                    _ => {}
                }
                b.put_with(&key, v.clone(), mode.into());
                next.insert(key, v);
            }
            6..=7 => {
                b.delete(&key);
                next.remove(&key);
            }
            _ => {
                if current != Some(version) {
                    fail(ErrorKind::VersionMismatch);
                }
                b.delete_if_version(&key, version);
                next.remove(&key);
            }
        }
    }
    let refused = twice.map(|i| (i, ErrorKind::InvalidArgument)).or(refused);
    match (b.commit().await, refused) {
        (Ok(out), None) => {
            assert_eq!(out.len(), seen.len(), "step {step}");
            *model = next;
            true
        }
        (Err(e), Some((i, kind))) => {
            assert_eq!(
                (e.kind(), e.batch_op()),
                (kind, Some(i)),
                "step {step}: {e}"
            );
            false
        }
        (Err(e), None) => {
            assert_eq!(e.kind(), ErrorKind::NoSpace, "step {step}: {e}");
            false
        }
        (Ok(_), Some(r)) => panic!("step {step}: a batch committed that {r:?} should refuse"),
    }
}

async fn run_model(engine: Setup, seed: u64, ops: usize) {
    let t = temp_path();
    let mut store = open(&t, engine).await;
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    // Batches refused and committed.
    let mut batches = [0usize; 2];
    for step in 0..ops {
        let key = format!("key/{}", rng.random_range(0..40));
        match rng.random_range(0..100) {
            0..=34 => {
                let v = pattern(rng.random(), random_size(&mut rng));
                match store.put(&key, v.clone()).await {
                    Ok(info) => {
                        assert_eq!(info.size, v.len() as u64);
                        model.insert(key, v);
                    }
                    Err(e) => assert_eq!(e.kind(), ErrorKind::NoSpace, "step {step}: {e}"),
                }
            }
            35..=49 => {
                let r = store.delete(&key).await;
                match model.remove(&key) {
                    Some(_) => r.unwrap(),
                    None => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound),
                }
            }
            50..=64 => match model.get(&key) {
                Some(v) => assert!(store.get(&key).await.unwrap() == v[..], "step {step}"),
                None => assert_eq!(
                    store.get(&key).await.unwrap_err().kind(),
                    ErrorKind::NotFound
                ),
            },
            65..=79 => {
                let Some(v) = model.get(&key) else { continue };
                let off = rng.random_range(0..=v.len());
                let len = rng.random_range(0..10_000);
                let got = store.read(&key, off as u64, len as u64).await.unwrap();
                let end = (off + len).min(v.len());
                assert!(got == v[off..end], "step {step}: read {off}+{len}");
            }
            80..=89 => {
                let v = pattern(rng.random(), random_size(&mut rng));
                let up = match store.begin_upload(&key, v.len() as u64).await {
                    Ok(u) => u,
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::NoSpace);
                        continue;
                    }
                };
                let part = PART_ALIGN as usize * rng.random_range(1..20);
                let mut starts: Vec<usize> = (0..v.len()).step_by(part).collect();
                starts.shuffle(&mut rng);
                for s in starts {
                    up.write_part(s as u64, v[s..(s + part).min(v.len())].to_vec())
                        .await
                        .unwrap();
                }
                if rng.random_bool(0.2) {
                    up.abort().await.unwrap();
                } else {
                    up.commit().await.unwrap();
                    model.insert(key, v);
                }
            }
            90..=95 => match model.get(&key) {
                Some(v) => assert_eq!(store.stat(&key).await.unwrap().size, v.len() as u64),
                None => assert!(!store.contains(&key)),
            },
            96..=97 => {
                batches[usize::from(run_batch(&store, &mut model, &mut rng, step).await)] += 1
            }
            _ => {
                store.close().await.unwrap();
                store = open(&t, engine).await;
            }
        }
        let st = store.stats();
        assert_eq!(st.objects, model.len() as u64, "step {step}");
        assert_eq!(
            st.logical_bytes,
            model.values().map(|v| v.len() as u64).sum::<u64>()
        );
        if step % 50 == 0 {
            // Listings with every index: byte order, sizes, as the model.
            for prefix in ["", "key/1"] {
                let listed: Vec<(String, u64)> = store
                    .list(prefix)
                    .unwrap()
                    .map(|e| {
                        let e = e.unwrap();
                        (String::from_utf8(e.key.to_vec()).unwrap(), e.size)
                    })
                    .collect();
                let want: Vec<(String, u64)> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .map(|(k, v)| (k.clone(), v.len() as u64))
                    .collect();
                assert_eq!(listed, want, "step {step}, prefix {prefix:?}");
            }
        }
    }
    assert!(
        batches[0] > 0 && batches[1] > 0,
        "seed {seed}: batches refused and committed: {batches:?}"
    );
    // A last reopen must rebuild exactly the model.
    store.close().await.unwrap();
    let store: Store = open(&t, engine).await;
    for (k, v) in &model {
        assert!(store.get(k).await.unwrap() == v[..]);
    }
    let st = store.stats();
    assert_eq!(st.objects, model.len() as u64);
    assert_eq!(
        st.free_bytes + st.allocated_bytes + st.metadata_bytes + 2 * 4096,
        st.capacity,
        "allocator rebuilt from live objects accounts for every block"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_a_btreemap_on_io_uring_with_each_index() {
    for seed in 0..3 {
        let index = IndexKind::ALL[seed as usize % 3];
        run_model(
            Setup {
                engine: IoEngineKind::IoUring,
                index,
            },
            seed,
            700,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_a_btreemap_on_portable_with_each_index() {
    for seed in 10..13 {
        let index = IndexKind::ALL[seed as usize % 3];
        run_model(
            Setup {
                engine: IoEngineKind::Portable,
                index,
            },
            seed,
            700,
        )
        .await;
    }
}
