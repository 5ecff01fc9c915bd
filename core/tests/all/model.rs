//! Random operation sequences checked against a `BTreeMap` model, with
//! reopens in between, on both I/O engines.

use crate::common;

use std::collections::BTreeMap;

use blobcask::{ErrorKind, IndexKind, IoEngineKind, Store, PART_ALIGN};
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

async fn run_model(engine: Setup, seed: u64, ops: usize) {
    let t = temp_path();
    let mut store = open(&t, engine).await;
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
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
