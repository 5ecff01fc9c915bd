//! The index image a clean close writes and the next open loads instead of
//! every tuple block (format 6). Invariant 10: derived state costs time,
//! never objects: a damaged, stale or dropped image is detected, reported
//! and replaced by a scan; a crash anywhere in the close that writes it, or
//! after a read-write open that dropped it, loses nothing.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use blobcask::blocking::Store;
use blobcask::internals::{Superblock, BLOCK_SIZE};
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::{IndexKind, Options, PutOptions};
use common::pattern;

const DEVICE: usize = 8 << 20;

fn options(index: IndexKind) -> Options {
    Options::new().inline_threshold(512).index(index)
}

/// Inline and heap values (one past 16 blocks, so its checksums are in a
/// trailer table), an expiring one, overwrites that change where a value
/// lives, deletions. Returns what the store holds.
fn workload(store: &Store) -> BTreeMap<String, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..60u64 {
        let size = match i % 4 {
            0 => 40,
            1 => 500,
            2 => 6000,
            _ => 70_000 + i as usize,
        };
        let key = format!("obj/{i:03}");
        let value = pattern(i, size);
        store.put(&key, value.clone()).unwrap();
        model.insert(key, value);
    }
    // Overwrites: inline to heap and heap to inline.
    for i in [0u64, 2, 5] {
        let key = format!("obj/{i:03}");
        let value = pattern(100 + i, if i == 0 { 9000 } else { 30 });
        store.put(&key, value.clone()).unwrap();
        model.insert(key, value);
    }
    for i in [7u64, 8, 9] {
        let key = format!("obj/{i:03}");
        store.delete(&key).unwrap();
        model.remove(&key);
    }
    let value = pattern(999, 300);
    store
        .put_with(
            "expires/later",
            value.clone(),
            PutOptions::default().ttl(Duration::from_secs(3600)),
        )
        .unwrap();
    model.insert("expires/later".into(), value);
    model
}

fn assert_holds(store: &Store, model: &BTreeMap<String, Vec<u8>>, what: &str) {
    assert_eq!(store.stats().objects, model.len() as u64, "{what}: objects");
    for (k, v) in model {
        let got = store
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get {k}: {e}"));
        assert_eq!(&got[..], &v[..], "{what}: value of {k}");
    }
}

fn superblock(image: &[u8]) -> Superblock {
    common::superblock(image)
}

/// A store on the in-memory device after the workload and a clean close.
fn closed_store(index: IndexKind) -> (Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let dev = Arc::new(MemDevice::new(DEVICE));
    let store = Store::open_with_engine(dev.clone(), options(index)).unwrap();
    let model = workload(&store);
    store.close().unwrap();
    (dev.volatile_image(), model)
}

fn open_image(image: Vec<u8>, options: Options) -> (Arc<MemDevice>, Store) {
    let dev = Arc::new(MemDevice::from_image(image));
    let store = Store::open_with_engine(dev.clone(), options).unwrap();
    (dev, store)
}

#[test]
fn every_backend_reopens_from_its_image_with_every_object_and_the_same_figures() {
    for index in IndexKind::ALL {
        let dev = Arc::new(MemDevice::new(DEVICE));
        let store = Store::open_with_engine(dev.clone(), options(index)).unwrap();
        let model = workload(&store);
        let before = store.stats();
        store.close().unwrap();
        let image = dev.volatile_image();
        let sb = superblock(&image);
        assert!(sb.index_image.is_some(), "{index:?}: no image named");
        assert_eq!(sb.format_version, 6, "{index:?}");

        // Read-only: loaded from the image, nothing written.
        let (ro_dev, ro) = open_image(image.clone(), options(index).read_only(true));
        let r = ro.stats().recovery;
        assert!(r.from_image && r.clean && r.is_empty(), "{index:?}: {r:?}");
        assert_holds(&ro, &model, "read-only open from the image");
        let st = ro.stats();
        // The image counts as metadata while it is named.
        let image_bytes = st.metadata_bytes - before.metadata_bytes;
        assert!(image_bytes > 0 && image_bytes.is_multiple_of(BLOCK_SIZE as u64));
        assert_eq!(
            (
                st.objects,
                st.logical_bytes,
                st.allocated_bytes,
                st.free_bytes + image_bytes
            ),
            (
                before.objects,
                before.logical_bytes,
                before.allocated_bytes,
                before.free_bytes
            ),
            "{index:?}"
        );
        if index.is_ordered() {
            let keys: Vec<String> = ro
                .list("")
                .unwrap()
                .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
                .collect();
            assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>(), "{index:?}");
        }
        ro.close().unwrap();
        assert_eq!(ro_dev.volatile_image(), image, "a read-only open wrote");

        // `check`'s open: every block read, the image agrees with them.
        let (_, scanned) = open_image(
            image.clone(),
            options(index).read_only(true).scan_metadata(true),
        );
        let r = scanned.stats().recovery;
        assert!(!r.from_image && r.is_empty(), "{index:?}: {r:?}");
        assert_holds(&scanned, &model, "scanning open");

        // Read-write: the image stays named until the first change, which
        // drops it from the superblock first; its space is free again.
        let (rw_dev, rw) = open_image(image.clone(), options(index));
        assert!(rw.stats().recovery.from_image);
        assert_eq!(rw_dev.volatile_image(), image, "{index:?}: the open wrote");
        rw.put("late", pattern(5, 2000)).unwrap();
        let dropped = superblock(&rw_dev.volatile_image());
        assert_eq!(dropped.index_image, None, "{index:?}");
        assert!(dropped.format_version <= 5);
        assert_eq!(
            rw.stats().free_bytes + rw.stats().allocated_bytes,
            before.free_bytes + before.allocated_bytes,
            "{index:?}: the image's pieces are free again"
        );
        rw.close().unwrap();
        let (_, again) = open_image(rw_dev.volatile_image(), options(index));
        assert!(again.stats().recovery.from_image);
        let mut model = model.clone();
        model.insert("late".into(), pattern(5, 2000));
        assert_holds(&again, &model, "after a second close");
    }
}

#[test]
fn an_open_and_close_that_change_nothing_write_nothing_and_keep_the_image() {
    let (image, model) = closed_store(IndexKind::Hash);
    let (dev, store) = open_image(image.clone(), options(IndexKind::Hash));
    assert_eq!(dev.writes(), 0, "the open wrote");
    assert_holds(&store, &model, "read-write open from the image");
    assert_eq!(dev.writes(), 0, "reads wrote");
    store.close().unwrap();
    assert_eq!(dev.writes(), 0, "an unchanged store was written to");
    let (_, again) = open_image(dev.volatile_image(), options(IndexKind::Hash));
    assert!(again.stats().recovery.from_image);
    assert_holds(&again, &model, "second open");
}

#[test]
fn a_crash_after_a_read_write_open_finds_no_image_and_loses_nothing() {
    let (image, mut model) = closed_store(IndexKind::Hash);
    let (dev, store) = open_image(image, options(IndexKind::Hash));
    assert!(store.stats().recovery.from_image);
    store.put("after-open", pattern(3, 700)).unwrap();
    store.delete("obj/001").unwrap();
    model.insert("after-open".into(), pattern(3, 700));
    model.remove("obj/001");
    // Killed: no close.
    dev.crash_now();
    drop(store);
    for mode in [CrashMode::DropUnsynced, CrashMode::KeepUnsynced] {
        let (_, back) = open_image(dev.crash_image(mode), options(IndexKind::Hash));
        let r = back.stats().recovery;
        assert!(!r.from_image && !r.clean, "{mode:?}: {r:?}");
        assert_holds(&back, &model, "after the crash");
    }
}

#[test]
fn a_cut_anywhere_in_the_close_that_writes_the_image_loses_nothing() {
    // How many writes the close makes.
    let dev = Arc::new(MemDevice::new(DEVICE));
    let store = Store::open_with_engine(dev.clone(), options(IndexKind::BTree)).unwrap();
    let model = workload(&store);
    let start = dev.writes();
    store.close().unwrap();
    let total = dev.writes() - start;
    assert!(total >= 3, "the close wrote {total} times");
    let mut loaded = 0;
    for cut in 1..=total {
        let dev = Arc::new(MemDevice::new(DEVICE));
        let store = Store::open_with_engine(dev.clone(), options(IndexKind::BTree)).unwrap();
        workload(&store);
        dev.crash_after_writes(cut);
        let _ = store.close();
        drop(store);
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::LastOnly,
            CrashMode::Random(cut),
        ] {
            let what = format!("cut at write {cut}/{total} {mode:?}");
            let (_, back) = open_image(dev.crash_image(mode), options(IndexKind::BTree));
            let r = back.stats().recovery;
            assert!(r.repaired.is_empty(), "{what}: {r:?}");
            loaded += usize::from(r.from_image);
            assert_holds(&back, &model, &what);
            back.close().unwrap();
        }
    }
    // Only a cut after the superblock named the image can load it.
    assert!(loaded < 4 * total as usize, "every cut loaded an image");
}

/// Where the image lies in a store image: its header block and its payload
/// length.
fn image_span(image: &[u8]) -> (usize, usize) {
    let r = superblock(image).index_image.expect("an image");
    let at = r.start as usize * BLOCK_SIZE;
    let payload = u64::from_le_bytes(image[at + 48..at + 56].try_into().unwrap()) as usize;
    (at, payload)
}

/// An image of keys (ordered indexes) and one of key fingerprints (the
/// hash index's) alike.
#[test]
fn a_flipped_byte_anywhere_in_the_image_is_reported_and_costs_no_object() {
    for index in [IndexKind::Fst, IndexKind::Hash] {
        a_flipped_byte_is_reported(index);
    }
}

fn a_flipped_byte_is_reported(index: IndexKind) {
    let (image, model) = closed_store(index);
    let (at, payload) = image_span(&image);
    // The header, every 97th byte of the payload (the image spans one
    // piece here: the payload follows the header), and its last byte.
    let offsets: Vec<usize> = (0..BLOCK_SIZE)
        .step_by(61)
        .chain((0..payload).step_by(97).map(|p| BLOCK_SIZE + p))
        .chain([BLOCK_SIZE + payload - 1])
        .collect();
    assert!(offsets.len() > 60);
    for off in offsets {
        let mut bad = image.clone();
        bad[at + off] ^= 0x10;
        let what = format!("{index:?}: byte {off} of the image flipped");
        let (dev, store) = open_image(bad.clone(), options(index).read_only(true));
        let r = store.stats().recovery;
        assert!(!r.from_image, "{what}: the damaged image was loaded");
        assert!(
            r.repaired.iter().any(|l| l.contains("index image")),
            "{what}: not reported: {r:?}"
        );
        assert_holds(&store, &model, &what);
        store.close().unwrap();
        assert_eq!(dev.volatile_image(), bad, "{what}: a read-only open wrote");
    }
    // A read-write open drops it; the next close writes a whole one.
    let mut bad = image.clone();
    bad[at + BLOCK_SIZE + payload / 2] ^= 1;
    let (dev, store) = open_image(bad, options(index));
    assert!(!store.stats().recovery.from_image);
    assert_eq!(superblock(&dev.volatile_image()).index_image, None);
    store.close().unwrap();
    let (_, back) = open_image(dev.volatile_image(), options(index));
    let r = back.stats().recovery;
    assert!(r.from_image && r.is_empty(), "{r:?}");
    assert_holds(&back, &model, "after the image was rewritten");
}

/// Publishes `sb` to both superblock copies of a store image.
fn republish(image: &mut [u8], sb: &Superblock) {
    let block = sb.encode();
    for copy in 0..2 {
        image[copy * BLOCK_SIZE..(copy + 1) * BLOCK_SIZE].copy_from_slice(&block);
    }
}

#[test]
fn an_image_of_another_state_is_never_loaded() {
    let (image, model) = closed_store(IndexKind::Hash);
    let sb = superblock(&image);
    let r = sb.index_image.unwrap();
    // Stamped with a sequence the store was not closed at; then a clean
    // sequence the image does not carry; then another piece.
    let cases: Vec<(&str, Superblock)> = vec![
        ("stale stamp", {
            let mut s = sb.clone();
            s.index_image = Some(blobcask::internals::ImageRef {
                seq: r.seq - 1,
                ..r
            });
            s
        }),
        ("newer clean close", {
            let mut s = sb.clone();
            s.clean_seq += 1;
            s.index_image = Some(blobcask::internals::ImageRef {
                seq: s.clean_seq,
                ..r
            });
            s
        }),
        ("moved", {
            let mut s = sb.clone();
            s.index_image = Some(blobcask::internals::ImageRef {
                start: r.start + 1,
                order: 0,
                ..r
            });
            s
        }),
    ];
    for (what, sb) in cases {
        let mut bad = image.clone();
        republish(&mut bad, &sb);
        let (_, store) = open_image(bad, options(IndexKind::Hash).read_only(true));
        let rep = store.stats().recovery;
        assert!(!rep.from_image, "{what}: loaded");
        assert!(
            rep.repaired.iter().any(|l| l.contains("index image")),
            "{what}: not reported: {rep:?}"
        );
        assert_holds(&store, &model, what);
    }
}

#[test]
fn a_salvage_open_reads_every_block() {
    let (image, model) = closed_store(IndexKind::BTree);
    let (_, store) = open_image(
        image,
        options(IndexKind::BTree).read_only(true).salvage(true),
    );
    assert!(!store.stats().recovery.from_image);
    assert_holds(&store, &model, "salvage open");
}

#[test]
fn a_store_that_never_committed_writes_no_image_and_its_open_writes_nothing() {
    // A clean sequence of 0 means "not closed cleanly": no image can be
    // stamped with it.
    let dev = Arc::new(MemDevice::new(DEVICE));
    Store::open_with_engine(dev.clone(), options(IndexKind::Hash))
        .unwrap()
        .close()
        .unwrap();
    let image = dev.volatile_image();
    assert_eq!(superblock(&image).index_image, None);
    let (dev, store) = open_image(image, options(IndexKind::Hash));
    assert!(store.stats().recovery.repaired.is_empty());
    assert_eq!(dev.writes(), 0);
}

#[test]
fn a_full_store_grows_for_its_image_and_one_that_cannot_closes_without_one() {
    let t = common::temp_path();
    let fixed = || Options::new().capacity(1 << 20).max_capacity(1 << 20);
    let s = Store::open(&t.path, fixed()).unwrap();
    let mut n = 0u64;
    loop {
        match s.put(format!("k{n:05}"), pattern(n, 300)) {
            Ok(_) => n += 1,
            Err(e) => {
                assert_eq!(e.kind(), blobcask::ErrorKind::NoSpace, "{e}");
                break;
            }
        }
    }
    s.close().unwrap();
    // Full and not allowed to grow: no image, the store as it was.
    let sb = superblock(&std::fs::read(&t.path).unwrap());
    assert_eq!((sb.index_image, sb.capacity), (None, 1 << 20));
    let check = |s: &Store| {
        assert_eq!(s.stats().objects, n - 1);
        for i in 1..n {
            assert_eq!(s.get(format!("k{i:05}")).unwrap(), pattern(i, 300));
        }
    };
    // Allowed to grow: the close grows the store for its image, as a put
    // would for an object.
    let growable = || Options::new().max_capacity(64 << 20);
    let s = Store::open(&t.path, growable()).unwrap();
    s.delete("k00000").unwrap();
    assert_eq!(s.stats().capacity, 1 << 20);
    s.close().unwrap();
    let sb = superblock(&std::fs::read(&t.path).unwrap());
    assert!(sb.index_image.is_some());
    assert!(sb.capacity > 1 << 20, "{}", sb.capacity);
    let s = Store::open(&t.path, growable().read_only(true)).unwrap();
    assert!(s.stats().recovery.from_image);
    check(&s);
}

/// The image's magic (its header's first 8 bytes).
fn image_magic(image: &[u8]) -> &[u8] {
    let (at, _) = image_span(image);
    &image[at..at + 8]
}

/// The hash index holds key fingerprints, not keys, so its image records
/// fingerprints (`BCINDEX2`): it serves the hash index only; an index that
/// holds keys scans instead (reported, nothing lost). An image of keys
/// (`BCINDEX1`, the ordered indexes') serves the hash index too. Keys of a
/// hash store, read from its tuple blocks, are every key.
#[test]
fn a_hash_image_holds_fingerprints_and_serves_the_hash_index_only() {
    let (image, model) = closed_store(IndexKind::Hash);
    assert_eq!(image_magic(&image), b"BCINDEX2");
    let keys = |store: &Store| -> Vec<String> {
        let mut keys: Vec<String> = store
            .keys()
            .unwrap()
            .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
            .collect();
        keys.sort();
        keys
    };
    let want: Vec<String> = model.keys().cloned().collect();

    let (_, hash) = open_image(image.clone(), options(IndexKind::Hash).read_only(true));
    let r = hash.stats().recovery;
    assert!(r.from_image && r.is_empty(), "{r:?}");
    assert_holds(&hash, &model, "hash index from its image");
    assert_eq!(keys(&hash), want);
    assert!(hash.contains("expires/later"));
    assert!(!hash.contains("obj/007"), "a deleted key");
    hash.close().unwrap();

    for index in [IndexKind::BTree, IndexKind::Fst] {
        let (_, other) = open_image(image.clone(), options(index).read_only(true));
        let r = other.stats().recovery;
        assert!(!r.from_image, "{index:?} loaded fingerprints: {r:?}");
        assert!(
            r.repaired.iter().any(|l| l.contains("fingerprints")),
            "{index:?}: {r:?}"
        );
        assert_holds(&other, &model, "an ordered index over a hash image");
        assert_eq!(keys(&other), want, "{index:?}");
    }

    let (keyed, model) = closed_store(IndexKind::BTree);
    assert_eq!(image_magic(&keyed), b"BCINDEX1");
    let (_, hash) = open_image(keyed, options(IndexKind::Hash).read_only(true));
    let r = hash.stats().recovery;
    assert!(r.from_image && r.is_empty(), "{r:?}");
    assert_holds(&hash, &model, "hash index from an image of keys");
}

/// Listing a hash store reads its keys from the tuple blocks: while
/// another thread keeps overwriting and adding keys (inline and heap
/// values, so entries are linked before their blocks are written), every
/// key that existed before the listing began is listed, once.
#[test]
fn listing_a_hash_store_under_overwrites_finds_every_key_once() {
    let dev = Arc::new(MemDevice::new(32 << 20));
    let store = Store::open_with_engine(dev, options(IndexKind::Hash)).unwrap();
    for i in 0..400u64 {
        store.put(format!("k/{i:04}"), pattern(i, 64)).unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let size = if n.is_multiple_of(3) { 3000 } else { 80 };
                store
                    .put(format!("k/{:04}", n % 400), pattern(n, size))
                    .unwrap();
                store.put(format!("new/{n}"), pattern(n, 30)).unwrap();
                n += 1;
            }
            n
        })
    };
    for round in 0..15 {
        let mut seen = std::collections::HashSet::new();
        for e in store.keys().unwrap() {
            let key = String::from_utf8(e.unwrap().key.to_vec()).unwrap();
            assert!(
                seen.insert(key.clone()),
                "round {round}: {key} listed twice"
            );
        }
        for i in 0..400u64 {
            assert!(
                seen.contains(&format!("k/{i:04}")),
                "round {round}: k/{i:04} missing"
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.join().unwrap() > 0);
}

/// With buffered durability a put is acknowledged (and linked) before its
/// group writes its tuple block, up to `max_delay` later: listing a hash
/// store and backing it up read keys from the blocks, so they first see
/// those groups written.
#[test]
fn listing_and_backing_up_a_buffered_hash_store_finds_unwritten_keys() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(IndexKind::Hash).durability(blobcask::Durability::Buffered {
        max_delay: Duration::from_secs(600),
    });
    let store = Store::open(dir.path().join("s"), options.capacity(16 << 20)).unwrap();
    let mut want = Vec::new();
    for i in 0..50u64 {
        let key = format!("k/{i:03}");
        store
            .put(&key, pattern(i, if i % 5 == 0 { 3000 } else { 90 }))
            .unwrap();
        want.push(key);
    }
    let mut keys: Vec<String> = store
        .keys()
        .unwrap()
        .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, want);
    store.put("late", pattern(99, 40)).unwrap();
    let copy = dir.path().join("copy");
    store.backup(&copy).unwrap();
    store.close().unwrap();
    let copy = Store::open(&copy, Options::new().read_only(true)).unwrap();
    assert_eq!(copy.get("late").unwrap(), pattern(99, 40));
    for (i, key) in want.iter().enumerate() {
        assert_eq!(
            copy.get(key).unwrap(),
            pattern(i as u64, if i % 5 == 0 { 3000 } else { 90 })
        );
    }
}
