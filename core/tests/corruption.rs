//! Opening a store whose metadata has random bytes flipped gives `Corrupt`
//! or a store in which every object present is one of the versions its key
//! really held: never a panic, never another object's bytes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::format::BLOCK_SIZE;
use blobcask::io::fault::MemDevice;
use blobcask::{ErrorKind, Options};
use common::{pattern, superblock};
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
    let sb = superblock(&image);
    // Metadata: the two superblock slots and every metadata extent.
    let mut regions = vec![(0usize, 2 * BLOCK_SIZE)];
    for e in sb.meta_extents.iter().chain(&sb.journal) {
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

/// The case random flips did not reach: a tuple block's newer slot is
/// damaged, so open falls back to the older slot, whose tuple points at
/// pieces freed since, reused by another object and freed again (so the
/// allocator's overlap check cannot see it). Every metadata slot is damaged
/// in turn; open must refuse the store or serve only bytes each key really
/// held (sizes differ per version, so foreign bytes show). Fails when the
/// checksum check of fallback slots in `open` is removed.
#[test]
fn damaged_newer_slot_never_serves_reused_pieces() {
    let dev = Arc::new(MemDevice::new(8 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let mut history: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    // Long keys spread the tuples over several blocks, so later puts land
    // in other blocks than the one whose older slot is used.
    for round in 0..6u64 {
        for k in 0..60u64 {
            let key = format!("k{k:02}/{}", "x".repeat(200));
            let v = pattern(round * 1000 + k, (6000 + round * 500 + k * 37) as usize);
            s.put(&key, v.clone()).unwrap();
            history.entry(key).or_default().push(v);
        }
    }
    // The victim: one more overwrite frees the pieces of its last version
    // (its block is full of long-key tuples, so nothing else lands there
    // and that block's older slot keeps the freed version). Then 200 new
    // objects take every low free piece, the freed ones too, and are
    // deleted again: a stale tuple pointing at those pieces no longer
    // overlaps a live piece at open; only its checksum shows the change.
    let long = |name: String| format!("{name}/{}", "x".repeat(200));
    let victim = long("k01".into());
    let v = pattern(99_999, 5000);
    s.put(&victim, v.clone()).unwrap();
    history.get_mut(&victim).unwrap().push(v);
    for i in 0..200u64 {
        s.put(long(format!("n{i:03}")), pattern(50_000 + i, 8537))
            .unwrap();
    }
    for i in 0..200u64 {
        s.delete(long(format!("n{i:03}"))).unwrap();
    }
    s.close().unwrap();
    let image = dev.volatile_image();
    let sb = superblock(&image);
    let (mut refused, mut served) = (0, 0);
    for e in sb.meta_extents.iter().chain(&sb.journal) {
        let start = e.start as usize * BLOCK_SIZE;
        for blk in 0..(1usize << e.order) {
            let at = start + blk * BLOCK_SIZE;
            if image[at..at + BLOCK_SIZE].iter().all(|&x| x == 0) {
                continue;
            }
            let mut img = image.clone();
            img[at + 8] ^= 0x40; // inside the slot header: the slot is invalid
            match Store::open_with_engine(Arc::new(MemDevice::from_image(img)), Options::new()) {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "slot at {at}: {e}");
                    refused += 1;
                }
                Ok(s) => {
                    served += 1;
                    for (key, versions) in &history {
                        match s.get(key) {
                            Ok(got) => assert!(
                                versions.iter().any(|v| v[..] == got[..]),
                                "slot at {at}: {key} served bytes it never held"
                            ),
                            Err(e) => assert!(
                                matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Corrupt),
                                "slot at {at}: {e}"
                            ),
                        }
                    }
                }
            }
        }
    }
    eprintln!("{refused} damaged images refused, {served} opened");
    assert!(refused > 0, "no damaged slot fell back onto reused pieces");
}
