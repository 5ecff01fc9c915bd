//! Opening a store whose metadata has random bytes flipped gives `Corrupt`
//! or a store in which every object present is one of the versions its key
//! really held: never a panic, never another object's bytes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::format::{Superblock, BLOCK_SIZE};
use blobcask::io::fault::MemDevice;
use blobcask::{ErrorKind, Options};
use common::pattern;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn build() -> (Vec<u8>, BTreeMap<String, Vec<Vec<u8>>>) {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let mut history: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for i in 0..600u64 {
        let key = format!("obj/{}", rng.random_range(0..80));
        if rng.random_bool(0.45) && history.contains_key(&key) {
            let _ = s.delete(&key);
            continue;
        }
        let v = pattern(i, rng.random_range(1..30_000));
        s.put(&key, v.clone()).unwrap();
        history.entry(key).or_default().push(v);
    }
    s.close().unwrap();
    (dev.volatile_image(), history)
}

#[test]
fn flipped_metadata_bytes_give_corrupt_or_only_true_versions() {
    let (image, history) = build();
    let sb = Superblock::decode(&image[..BLOCK_SIZE])
        .ok()
        .flatten()
        .or_else(|| {
            Superblock::decode(&image[BLOCK_SIZE..2 * BLOCK_SIZE])
                .ok()
                .flatten()
        })
        .unwrap();
    // Metadata: the two superblock slots and every metadata extent.
    let mut regions = vec![(0usize, 2 * BLOCK_SIZE)];
    for e in &sb.meta_extents {
        regions.push((e.start as usize * BLOCK_SIZE, BLOCK_SIZE << e.order));
    }
    let mut rng = StdRng::seed_from_u64(9);
    let (mut opened, mut refused) = (0, 0);
    for round in 0..600 {
        let mut img = image.clone();
        for _ in 0..rng.random_range(1..6) {
            let (start, len) = regions[rng.random_range(0..regions.len())];
            // Hit written bytes most of the time: a block's header or tuples.
            let at = start + rng.random_range(0..len);
            img[at] ^= 1 << rng.random_range(0..8);
        }
        let outcome = std::panic::catch_unwind(|| {
            Store::open_with_engine(Arc::new(MemDevice::from_image(img)), Options::new())
        });
        let Ok(result) = outcome else {
            panic!("round {round}: open panicked");
        };
        match result {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corrupt, "round {round}: {e}");
                refused += 1;
            }
            Ok(s) => {
                opened += 1;
                let mut present = 0;
                for (key, versions) in &history {
                    if !s.contains(key) {
                        continue;
                    }
                    present += 1;
                    match s.get(key) {
                        Ok(got) => assert!(
                            versions.iter().any(|v| v[..] == got[..]),
                            "round {round}: {key} returned bytes it never held"
                        ),
                        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "round {round}: {e}"),
                    }
                }
                assert_eq!(
                    s.stats().objects,
                    present,
                    "round {round}: keys that never existed"
                );
            }
        }
    }
    eprintln!("{opened} corrupted images opened (checked), {refused} refused as Corrupt");
    assert!(opened > 0 && refused > 0);
}
