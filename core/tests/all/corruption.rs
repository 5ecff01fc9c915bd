//! Opening a store whose metadata has random bytes flipped gives `Corrupt`
//! or a store in which every object present is one of the versions its key
//! really held: never a panic, never another object's bytes.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::internals::BLOCK_SIZE;
use blobcask::io::fault::{CrashMode, MemDevice};
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
            Store::open_with_engine(Arc::new(MemDevice::from_image(img)), scanning())
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

/// A plain open of a damaged store. These suites damage tuple blocks of
/// cleanly closed stores, whose index image an open would otherwise load
/// without reading a tuple block (damage there is then found by the reads
/// of the objects it holds, and by `check`): they read every block, as
/// `check` does.
fn scanning() -> Options {
    Options::new().scan_metadata(true)
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
            match Store::open_with_engine(Arc::new(MemDevice::from_image(img)), scanning()) {
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

/// Byte offsets of the tuple-block slots in `image`'s metadata extents
/// that were ever written (not all zero).
fn written_metadata_blocks(image: &[u8]) -> Vec<usize> {
    superblock(image)
        .meta_extents
        .iter()
        .flat_map(|e| (0..1usize << e.order).map(move |i| (e.start as usize + i) * BLOCK_SIZE))
        .filter(|&at| image[at..at + BLOCK_SIZE].iter().any(|&b| b != 0))
        .collect()
}

/// A salvage open (`Options::salvage`, read-only) of a store an open
/// refuses because a tuple block's newest copy is damaged: the damaged
/// block is skipped and named, and every object still served is exactly
/// its key's last version (older ones only when the report says a group was
/// rolled back); a key deleted last is never back. Each written tuple block
/// slot is damaged in turn, in a journaled store and in a two-slot one
/// (whose older slot holds an older state: serving it would fail here).
#[test]
fn a_salvage_open_skips_a_lost_block_and_serves_only_the_rest() {
    for create in [Options::new(), Options::new().create_format_3()] {
        salvage_around_each_block(create);
    }
}

fn salvage_around_each_block(create: Options) {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), create).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut last: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    let mut history: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for i in 0..900u64 {
        let key = format!("obj/{:03}", rng.random_range(0..300));
        if rng.random_bool(0.2) && last.get(&key).is_some_and(Option::is_some) {
            s.delete(&key).unwrap();
            last.insert(key, None);
            continue;
        }
        // Small values (inline) and larger ones (heap), in many blocks.
        let v = pattern(i, rng.random_range(1..3_000));
        s.put(&key, v.clone()).unwrap();
        history.entry(key.clone()).or_default().push(v.clone());
        last.insert(key, Some(v));
    }
    // Last, one group over many blocks (a bulk load) and a put into one of
    // them: that block's newest copy is the newest group's only block, and
    // without it the load's group looks short of a block.
    let load: Vec<(String, Vec<u8>)> = (0..200u64)
        .map(|i| {
            (
                format!("load/{i:03}"),
                pattern(5000 + i, 300 + i as usize * 7),
            )
        })
        .collect();
    s.bulk_load(load.iter().map(|(k, v)| (k.clone(), v.clone())))
        .unwrap();
    for (k, v) in load {
        history.entry(k.clone()).or_default().push(v.clone());
        last.insert(k, Some(v));
    }
    let v = pattern(9999, 310);
    s.put("load/000", v.clone()).unwrap();
    history
        .entry("load/000".into())
        .or_default()
        .push(v.clone());
    last.insert("load/000".into(), Some(v));
    s.close().unwrap();
    let image = dev.volatile_image();
    let blocks = written_metadata_blocks(&image);
    assert!(blocks.len() > 4, "{} written tuple blocks", blocks.len());
    let salvage = || Options::new().read_only(true).salvage(true);
    let damaged = |ats: &[usize]| {
        let mut img = image.clone();
        for &at in ats {
            img[at + 100] ^= 0x04;
        }
        img
    };
    let open = |img: &[u8], o: Options| {
        Store::open_with_engine(Arc::new(MemDevice::from_image(img.to_vec())), o)
    };
    // Every object served is its key's last version; a key deleted last
    // stays deleted. Returns how many live objects are missing.
    let only_last_versions = |s: &Store, what: &str| {
        let mut missing = 0;
        for (key, want) in &last {
            match (s.get(key), want) {
                (Ok(got), Some(v)) if got[..] == v[..] => {}
                (Ok(got), want) => panic!(
                    "{what}: {key} served a version that is not its last ({}; one it held: {})",
                    if want.is_some() {
                        "an older one"
                    } else {
                        "it was deleted"
                    },
                    history[key].iter().any(|v| v[..] == got[..])
                ),
                (Err(e), Some(_)) => {
                    assert_eq!(e.kind(), ErrorKind::NotFound, "{what}: {key}: {e}");
                    missing += 1;
                }
                (Err(e), None) => assert_eq!(e.kind(), ErrorKind::NotFound, "{what}: {key}: {e}"),
            }
        }
        missing
    };
    // One damaged block: the store was closed cleanly, so nothing is
    // rolled back; the block's objects are missing, the rest is exact.
    let mut lost = Vec::new();
    let mut repaired = 0;
    for &at in &blocks {
        let img = damaged(&[at]);
        // Damage that loses nothing (a copy elsewhere holds the same state)
        // is repaired by a plain open: nothing to salvage there.
        match open(&img, scanning()) {
            Ok(_) => {
                repaired += 1;
                continue;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "block at {at}: {e}"),
        }
        let e = open(&img, Options::new().salvage(true))
            .err()
            .map(|e| e.kind());
        assert_eq!(
            e,
            Some(ErrorKind::InvalidArgument),
            "salvage without read_only"
        );
        let s = open(&img, salvage()).unwrap();
        let report = s.stats().recovery;
        assert_eq!(report.skipped.len(), 1, "{report:?}");
        assert!(
            report.skipped[0].contains("its objects are skipped"),
            "{report:?}"
        );
        assert_eq!(
            (report.rolled_back_groups, report.rolled_back_objects),
            (0, 0),
            "block at {at}: a cleanly closed store rolled back: {report:?}"
        );
        assert!(report.clean, "block at {at}: {report:?}");
        let missing = only_last_versions(&s, &format!("block at {at}"));
        assert!(missing > 0, "block at {at}: nothing was lost with it");
        lost.push(at);
    }
    // Two damaged blocks (the case where an older copy of one block could
    // stand in for a key lost with the other): exact, or refused.
    let (mut pairs, mut refused) = (0, 0);
    for (n, &a) in lost.iter().enumerate() {
        for &b in lost.iter().skip(n + 1) {
            match open(&damaged(&[a, b]), salvage()) {
                Ok(s) => {
                    only_last_versions(&s, &format!("blocks at {a} and {b}"));
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
                    refused += 1;
                }
            }
            pairs += 1;
        }
    }
    eprintln!(
        "{} damaged blocks salvaged around, {repaired} repaired by a plain open; \
         {pairs} pairs ({refused} refused)",
        lost.len()
    );
    assert!(lost.len() > 4, "{} salvaged", lost.len());
}

/// A crash cut a multi-block group (a bulk load over existing blocks) and
/// a block of an older group is damaged: a salvage open either refuses
/// (the rollback could bring back an older version of an object lost with
/// the block) or serves only acknowledged last versions (the cut load's
/// objects present with their new value or absent); never other bytes.
#[test]
fn a_salvage_open_after_a_crash_is_exact_or_refused() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new().create_format_3()).unwrap();
    let mut last: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for i in 0..300u64 {
        let key = format!("obj/{:03}", i % 120);
        let v = pattern(i, 200 + (i as usize * 53) % 2500);
        s.put(&key, v.clone()).unwrap();
        last.insert(key, v);
    }
    // Overwrites that move keys to new blocks, in one group, cut part way.
    let load: Vec<(String, Vec<u8>)> = (0..120u64)
        .map(|i| (format!("obj/{i:03}"), pattern(7000 + i, 3000)))
        .collect();
    // Where the load's last writes (its tuple blocks) go: count them on a
    // copy, then cut the real one two writes before its end.
    let total = {
        s.sync().unwrap();
        let copy = Arc::new(MemDevice::from_image(dev.volatile_image()));
        let c = Store::open_with_engine(copy.clone(), Options::new()).unwrap();
        let from = copy.writes();
        c.bulk_load(load.iter().map(|(k, v)| (k.clone(), v.clone())))
            .unwrap();
        copy.writes() - from
    };
    dev.crash_after_writes(total - 1);
    let acked = s
        .bulk_load(load.iter().map(|(k, v)| (k.clone(), v.clone())))
        .is_ok();
    assert!(!acked, "the cut load was acknowledged");
    drop(s);
    let (mut exact, mut refused) = (0, 0);
    for mode in [CrashMode::KeepUnsynced, CrashMode::DropUnsynced] {
        let image = dev.crash_image(mode);
        let slots = written_metadata_blocks(&image);
        for &at in &slots {
            let mut img = image.clone();
            img[at + 100] ^= 0x04;
            let o = Options::new().read_only(true).salvage(true);
            let s = match Store::open_with_engine(Arc::new(MemDevice::from_image(img)), o) {
                Ok(s) => s,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
                    refused += 1;
                    continue;
                }
            };
            for (key, want) in &last {
                let new = load.iter().find(|(k, _)| k == key).map(|(_, v)| v);
                match s.get(key) {
                    Ok(got) => assert!(
                        got[..] == want[..] || new.is_some_and(|n| got[..] == n[..]),
                        "slot at {at}: {key} served an older version"
                    ),
                    // A flip that reads as a torn newer write rolls its block
                    // back, and the older tuple's pieces may have been reused:
                    // refused by their checksums, as in a plain open.
                    Err(e) => assert!(
                        matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Corrupt),
                        "slot at {at}: {key}: {e}"
                    ),
                }
            }
            exact += 1;
        }
    }
    eprintln!("{exact} salvage opens exact, {refused} refused");
    assert!(exact + refused > 4);
}

/// A crash cut the newest group (a bulk load over some blocks, through
/// the journal) and one home slot, which holds its block's state from
/// before that group, has a flipped byte: rolling back the cut group must
/// not cascade into the acknowledged group before it (only the newest group
/// can be cut). An open either serves every acknowledged object or refuses
/// the store; it never drops them as "interrupted".
#[test]
fn a_damaged_home_under_a_cut_group_never_rolls_back_an_acknowledged_one() {
    let dev = Arc::new(MemDevice::new(8 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let first: Vec<(String, Vec<u8>)> = (0..200u64)
        .map(|i| {
            (
                format!("k/{i:03}"),
                pattern(i, 200 + (i as usize * 31) % 700),
            )
        })
        .collect();
    s.bulk_load(first.iter().map(|(k, v)| (k.clone(), v.clone())))
        .unwrap();
    s.close().unwrap();
    let base = dev.volatile_image();
    // Over the first blocks only: the acknowledged load's other blocks are
    // not the cut group's (a cascade would empty them silently).
    let second: Vec<(String, Vec<u8>)> = first
        .iter()
        .take(40)
        .map(|(k, v)| (k.clone(), v.iter().map(|b| b ^ 0x5a).collect()))
        .collect();
    let load = |s: &Store| s.bulk_load(second.iter().map(|(k, v)| (k.clone(), v.clone())));
    // The second load's writes, counted on a copy; then cut near its end
    // (its tuple blocks partly written, not synced).
    let total = {
        let copy = Arc::new(MemDevice::from_image(base.clone()));
        let c = Store::open_with_engine(copy.clone(), Options::new()).unwrap();
        let from = copy.writes();
        load(&c).unwrap();
        copy.writes() - from
    };
    let (mut cuts, mut served, mut refused) = (0, 0, 0);
    for cut in (1..total).rev().take(6) {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
        dev.crash_after_writes(cut);
        if load(&s).is_ok() {
            continue;
        }
        drop(s);
        cuts += 1;
        let image = dev.crash_image(CrashMode::KeepUnsynced);
        let homes = written_metadata_blocks(&image);
        for &at in &homes {
            let mut img = image.clone();
            img[at + 200] ^= 0x10;
            match Store::open_with_engine(Arc::new(MemDevice::from_image(img)), scanning()) {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Corrupt, "cut {cut}, home at {at}: {e}");
                    refused += 1;
                }
                Ok(s) => {
                    for (k, v) in &first {
                        match s.get(k) {
                            Ok(got) => assert!(
                                got[..] == v[..] || second.iter().any(|(_, n)| got[..] == n[..]),
                                "cut {cut}, home at {at}: {k} returned bytes it never held"
                            ),
                            Err(e) => assert_eq!(
                                e.kind(),
                                ErrorKind::Corrupt,
                                "cut {cut}, home at {at}: acknowledged {k} is gone: {e}"
                            ),
                        }
                    }
                    served += 1;
                }
            }
        }
    }
    eprintln!("{cuts} cuts: {served} opens served every acknowledged object, {refused} refused");
    assert!(cuts > 0, "no cut failed the load");
}
