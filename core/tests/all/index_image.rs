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
        assert!(sb.change_map.is_some(), "{index:?}: no change map named");
        assert_eq!(sb.format_version, 7, "{index:?}");

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
        let keys: Vec<String> = ro
            .list("")
            .unwrap()
            .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
            .collect();
        assert_eq!(keys, model.keys().cloned().collect::<Vec<_>>(), "{index:?}");
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

        // Read-write: the image and its change map stay named while the
        // store changes (the map marks what was written since); the
        // superblock is not rewritten and the image keeps its pieces.
        let (rw_dev, rw) = open_image(image.clone(), options(index));
        assert!(rw.stats().recovery.from_image);
        assert_eq!(rw_dev.volatile_image(), image, "{index:?}: the open wrote");
        rw.put("late", pattern(5, 2000)).unwrap();
        let kept = superblock(&rw_dev.volatile_image());
        assert_eq!(
            (kept.index_image, kept.change_map, kept.format_version),
            (sb.index_image, sb.change_map, 7),
            "{index:?}"
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

/// Invariant 10: after a crash, open loads the image of the last clean
/// close and reads only the blocks written since (its change map), and
/// finds exactly what a read of every block finds.
#[test]
fn a_crash_after_changes_loads_the_checkpoint_and_the_blocks_written_since() {
    for index in [IndexKind::Hash, IndexKind::BTree] {
        let (image, mut model) = closed_store(index);
        let (dev, store) = open_image(image, options(index));
        assert!(store.stats().recovery.from_image);
        store.put("after-open", pattern(3, 700)).unwrap();
        store.put("obj/002", pattern(4, 20_000)).unwrap();
        store.delete("obj/001").unwrap();
        model.insert("after-open".into(), pattern(3, 700));
        model.insert("obj/002".into(), pattern(4, 20_000));
        model.remove("obj/001");
        // Killed: no close.
        dev.crash_now();
        drop(store);
        for mode in [CrashMode::DropUnsynced, CrashMode::KeepUnsynced] {
            let what = format!("{index:?} {mode:?}");
            let crashed = dev.crash_image(mode);
            let (_, back) = open_image(crashed.clone(), options(index));
            let r = back.stats().recovery;
            assert!(r.from_image && !r.clean, "{what}: {r:?}");
            assert!(r.repaired.is_empty(), "{what}: {r:?}");
            assert_holds(&back, &model, &what);
            // `check` reads every block: the image agrees with every block
            // the map does not mark.
            let (_, full) = open_image(crashed, options(index).read_only(true).scan_metadata(true));
            let r = full.stats().recovery;
            assert!(!r.from_image && r.repaired.is_empty(), "{what}: {r:?}");
            assert_holds(&full, &model, &what);
            // The next clean close writes a new checkpoint.
            back.close().unwrap();
        }
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
        // `keys` (no order) and `list` (byte order) in turn.
        let listing = if round % 2 == 0 {
            store.keys().unwrap()
        } else {
            store.list("k/").unwrap()
        };
        let mut last: Option<String> = None;
        for e in listing {
            let key = String::from_utf8(e.unwrap().key.to_vec()).unwrap();
            assert!(
                seen.insert(key.clone()),
                "round {round}: {key} listed twice"
            );
            if round % 2 == 1 {
                assert!(key.starts_with("k/"), "round {round}: {key}");
                assert!(last.as_ref().is_none_or(|l| *l < key), "round {round}");
                last = Some(key);
            }
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

/// A hash store whose tuple blocks span several of a listing's large
/// reads, with a run of emptied blocks (a gap the reads do not cover) and
/// blocks of scattered deletes: by prefix and by range, every key once, in
/// byte order, as a model holds them; after a reopen (the index image)
/// too.
#[test]
fn listing_a_hash_store_of_many_tuple_blocks_matches_a_model() {
    let dev = Arc::new(MemDevice::new(64 << 20));
    let store = Store::open_with_engine(dev.clone(), options(IndexKind::Hash)).unwrap();
    let key = |i: u64| format!("k/{i:05}");
    // ~150 bytes a tuple: about 9 MiB of tuple blocks.
    store
        .bulk_load((0..60_000u64).map(|i| (key(i), pattern(i, 100))))
        .unwrap();
    let mut model: std::collections::BTreeSet<String> = (0..60_000).map(key).collect();
    for i in (20_000..32_000).chain((40_000..60_000).step_by(7)) {
        store.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    let listed = |keys: blobcask::Keys| -> Vec<String> {
        keys.map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
            .collect()
    };
    let check = |store: &Store, when: &str| {
        assert_eq!(
            listed(store.list("k/").unwrap()),
            model.iter().cloned().collect::<Vec<_>>(),
            "{when}"
        );
        assert_eq!(
            listed(store.range("k/19990".."k/45000").unwrap()),
            model
                .range("k/19990".to_owned().."k/45000".to_owned())
                .cloned()
                .collect::<Vec<_>>(),
            "{when}"
        );
        assert_eq!(listed(store.list("k/2").unwrap()), Vec::<String>::new());
    };
    check(&store, "open");
    store.close().unwrap();
    let store = Store::open_with_engine(dev, options(IndexKind::Hash)).unwrap();
    check(&store, "reopened");
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
    let listed: Vec<String> = store
        .list("k/")
        .unwrap()
        .map(|e| String::from_utf8(e.unwrap().key.to_vec()).unwrap())
        .collect();
    assert_eq!(listed, want);
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

/// Changes made after a checkpoint: new objects inline and heap,
/// overwrites (in place, inline to heap and back) and deletes of the
/// image's objects. Stops at the first that fails (a cut device) and
/// returns it: (key, value; `None` a delete), applied or not.
fn changes_after_checkpoint(
    store: &Store,
    model: &mut BTreeMap<String, Vec<u8>>,
) -> Option<(String, Option<Vec<u8>>)> {
    // First a small inline value over one of the image's: its block's
    // first write since the checkpoint goes through the journal, its mark
    // with it (a cut may keep the one and lose the other).
    let mut ops: Vec<(String, Option<Vec<u8>>)> = vec![("obj/004".into(), Some(pattern(250, 30)))];
    for i in 0..16u64 {
        let size = if i % 3 == 0 { 5000 } else { 100 };
        ops.push((format!("new/{i:02}"), Some(pattern(200 + i, size))));
    }
    for i in 10..14u64 {
        let size = if i % 2 == 0 { 60 } else { 7000 };
        ops.push((format!("obj/{i:03}"), Some(pattern(300 + i, size))));
    }
    for i in [20u64, 21, 24] {
        ops.push((format!("obj/{i:03}"), None));
    }
    ops.push(("obj/030".into(), Some(pattern(400, 80_000))));
    ops.push(("new/03".into(), None));
    for (k, v) in ops {
        let r = match &v {
            Some(v) => store.put(&k, v.clone()).map(|_| ()),
            None => store.delete(&k).map(|_| ()),
        };
        if r.is_err() {
            return Some((k, v));
        }
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
    None
}

/// What a store holds of `keys`: each one's value, or none.
fn contents(store: &Store, keys: &[String]) -> Vec<Option<Vec<u8>>> {
    keys.iter()
        .map(|k| match store.get(k) {
            Ok(v) => Some(v.to_vec()),
            Err(e) if e.kind() == blobcask::ErrorKind::NotFound => None,
            Err(e) => panic!("get {k}: {e}"),
        })
        .collect()
}

/// Invariant 10 at every cut: a crash at any write after a checkpoint (in
/// every crash mode) loses nothing acknowledged, and the open from the
/// checkpoint finds exactly what a read of every tuple block finds, which
/// never disagrees with the image on a block the change map leaves
/// unmarked.
#[test]
fn a_cut_at_every_write_after_a_checkpoint_finds_what_a_full_scan_finds() {
    for index in [IndexKind::Hash, IndexKind::BTree] {
        let (image, base) = closed_store(index);
        // How many writes the changes make.
        let (dev, store) = open_image(image.clone(), options(index));
        let start = dev.writes();
        let mut model = base.clone();
        assert!(changes_after_checkpoint(&store, &mut model).is_none());
        let total = dev.writes() - start;
        drop(store);
        // Every key the changes touch (one is deleted again at their end).
        let mut keys: Vec<String> = model.keys().chain(base.keys()).cloned().collect();
        keys.push("new/03".into());
        keys.sort();
        keys.dedup();
        let mut loaded = 0;
        for cut in 1..=total {
            let (dev, store) = open_image(image.clone(), options(index));
            dev.crash_after_writes(cut);
            let mut model = base.clone();
            let inflight = changes_after_checkpoint(&store, &mut model);
            drop(store);
            for mode in [
                CrashMode::DropUnsynced,
                CrashMode::KeepUnsynced,
                CrashMode::LastOnly,
                CrashMode::Random(cut),
            ] {
                let what = format!("{index:?}: cut at write {cut}/{total} {mode:?}");
                let crashed = dev.crash_image(mode);
                let (_, full) = open_image(
                    crashed.clone(),
                    options(index).read_only(true).scan_metadata(true),
                );
                // It may not serve (a torn map), but never disagrees with
                // a block an open from it would take from it.
                let r = full.stats().recovery;
                assert!(
                    !r.repaired
                        .iter()
                        .any(|l| l.contains("differs") || l.contains("objects, the tuple blocks")),
                    "{what}: the image disagrees with the blocks: {r:?}"
                );
                let (_, back) = open_image(crashed, options(index));
                let r = back.stats().recovery;
                loaded += usize::from(r.from_image);
                // What it holds: every acknowledged change, the one in
                // flight applied or not.
                let mut expect = model.clone();
                let mut alternative = model.clone();
                if let Some((k, v)) = &inflight {
                    match v {
                        Some(v) => alternative.insert(k.clone(), v.clone()),
                        None => alternative.remove(k),
                    };
                }
                let got = contents(&back, &keys);
                let of = |m: &BTreeMap<String, Vec<u8>>| {
                    keys.iter().map(|k| m.get(k).cloned()).collect::<Vec<_>>()
                };
                if got != of(&expect) {
                    std::mem::swap(&mut expect, &mut alternative);
                }
                assert!(got == of(&expect), "{what}: lost or changed objects: {r:?}");
                assert_eq!(
                    (back.stats().objects, full.stats().objects),
                    (expect.len() as u64, expect.len() as u64),
                    "{what}: {r:?} {inflight:?}"
                );
                assert_eq!(
                    contents(&full, &keys),
                    got,
                    "{what}: differs from a full scan"
                );
                back.close().unwrap();
            }
        }
        // A cut's torn change map costs a full read of the blocks; most
        // cuts load the checkpoint.
        assert!(
            loaded > 2 * total as usize,
            "{index:?}: {loaded} of {} opens loaded the checkpoint",
            4 * total
        );
    }
}

/// Enough changes after a checkpoint that new tuple blocks get their
/// first writes (straight to their home slots) and the metadata journal
/// comes round several times (homes rewritten, journal slots reused): after
/// a crash, every one of those blocks is found through the change map.
#[test]
fn blocks_first_written_or_out_of_the_journal_since_a_checkpoint_are_found() {
    for index in [IndexKind::Hash, IndexKind::Fst] {
        let (image, mut model) = closed_store(index);
        let (dev, store) = open_image(image, options(index));
        for i in 0..400u64 {
            let key = format!("many/{i:04}");
            let value = pattern(500 + i, 200 + (i as usize % 7) * 20);
            store.put(&key, value.clone()).unwrap();
            model.insert(key, value);
        }
        // The image's own blocks changed (through the journal), then the
        // journal brought round past their images by other changes.
        for i in (0..60u64).filter(|i| i % 4 < 2) {
            let key = format!("obj/{i:03}");
            let value = pattern(700 + i, 100);
            store.put(&key, value.clone()).unwrap();
            model.insert(key, value);
        }
        for round in 0..3u64 {
            for i in (0..400u64).step_by(7) {
                let key = format!("many/{:04}", (i * 13 + round) % 400);
                let value = pattern(900 + i + round, 150);
                store.put(&key, value.clone()).unwrap();
                model.insert(key, value);
            }
        }
        dev.crash_now();
        drop(store);
        let crashed = dev.crash_image(CrashMode::DropUnsynced);
        let (_, back) = open_image(crashed.clone(), options(index).read_only(true));
        let r = back.stats().recovery;
        assert!(r.from_image && r.repaired.is_empty(), "{index:?}: {r:?}");
        assert_holds(&back, &model, &format!("{index:?} from the checkpoint"));
        let (_, full) = open_image(crashed, options(index).read_only(true).scan_metadata(true));
        let r = full.stats().recovery;
        assert!(r.repaired.is_empty(), "{index:?}: {r:?}");
        assert_holds(&full, &model, &format!("{index:?} read in full"));
    }
}

/// The index image and change map the superblock names (stamp, map start).
fn checkpoint_of(image: &[u8]) -> Option<(u64, u64)> {
    let sb = superblock(image);
    Some((sb.index_image?.seq, sb.change_map?.start))
}

/// Waits (up to 10 s) until `f` holds.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    (0..1000).any(|_| {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
        false
    })
}

/// A store that keeps running writes new checkpoints by itself (idle, past
/// `checkpoint_after` block writes): a crash after one reads only what was
/// written since it. A cut at any write of the put before it and of the
/// checkpoint itself, in every crash mode, loses nothing acknowledged.
#[test]
fn a_running_store_writes_checkpoints_by_itself_and_a_cut_in_one_loses_nothing() {
    let index = IndexKind::Hash;
    let opts = || options(index).checkpoint_after(1);
    let (image, mut model) = closed_store(index);
    let first = checkpoint_of(&image).expect("a checkpoint");
    let (dev, store) = open_image(image.clone(), opts());
    let start = dev.writes();
    store.put("late", pattern(77, 300)).unwrap();
    assert!(
        eventually(|| checkpoint_of(&dev.volatile_image()).is_some_and(|c| c.0 > first.0)),
        "no checkpoint was written"
    );
    // (Its last write, the superblock's second copy, lands after it is
    // named: wait for the count to settle.)
    let mut total = dev.writes();
    while {
        std::thread::sleep(Duration::from_millis(300));
        let now = dev.writes();
        std::mem::replace(&mut total, now) != now
    } {}
    let total = total - start;
    model.insert("late".into(), pattern(77, 300));
    // Nothing written since: a crash now loads it and reads no block.
    dev.crash_now();
    drop(store);
    let (_, back) = open_image(
        dev.crash_image(CrashMode::DropUnsynced),
        opts().read_only(true),
    );
    let r = back.stats().recovery;
    assert!(r.from_image && r.clean && r.is_empty(), "{r:?}");
    assert_holds(
        &back,
        &model,
        "after a checkpoint written in the background",
    );
    assert!(total >= 4, "the put and the checkpoint wrote {total} times");
    for cut in 1..=total {
        let (dev, store) = open_image(image.clone(), opts());
        dev.crash_after_writes(cut);
        let acked = store.put("late", pattern(77, 300)).is_ok();
        // The checkpoint starts after the put, at an idle tick.
        eventually(|| dev.crashed() && !store.stats().cache.warming);
        std::thread::sleep(Duration::from_millis(250));
        drop(store);
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::LastOnly,
            CrashMode::Random(cut),
        ] {
            let what = format!("cut at write {cut}/{total} {mode:?}");
            let (_, back) = open_image(dev.crash_image(mode), opts().read_only(true));
            let mut expect = model.clone();
            if !acked && back.get("late").is_err() {
                expect.remove("late");
            }
            assert_holds(&back, &expect, &what);
            let r = back.stats().recovery;
            assert!(
                !r.repaired.iter().any(|l| l.contains("differs")),
                "{what}: {r:?}"
            );
        }
    }
}

/// A flipped byte anywhere in the change map of a store cut by a crash
/// after changes: the map is refused (never read as fewer marks), the open
/// reads every block instead, reports it, and loses nothing.
#[test]
fn a_flipped_byte_in_the_change_map_is_reported_and_costs_no_object() {
    let (image, mut model) = closed_store(IndexKind::Hash);
    let (dev, store) = open_image(image, options(IndexKind::Hash));
    for i in 0..40u64 {
        let key = format!("since/{i:02}");
        let value = pattern(600 + i, 150 + i as usize * 100);
        store.put(&key, value.clone()).unwrap();
        model.insert(key, value);
    }
    store.delete("obj/003").unwrap();
    model.remove("obj/003");
    dev.crash_now();
    drop(store);
    let crashed = dev.crash_image(CrashMode::DropUnsynced);
    let map = superblock(&crashed).change_map.expect("a change map");
    let at = map.start as usize * BLOCK_SIZE;
    let len = BLOCK_SIZE << map.order;
    for off in (0..len).step_by(89).chain([len - 1]) {
        let mut bad = crashed.clone();
        bad[at + off] ^= 0x04;
        let what = format!("byte {off} of the change map flipped");
        let (_, store) = open_image(bad, options(IndexKind::Hash).read_only(true));
        let r = store.stats().recovery;
        assert!(!r.from_image, "{what}: the damaged map was used: {r:?}");
        assert!(
            r.repaired.iter().any(|l| l.contains("change map")),
            "{what}: not reported: {r:?}"
        );
        assert_holds(&store, &model, &what);
    }
}

/// A damaged home slot beside a whole journal image of it (after a clean
/// close the journal still holds images of the blocks it last wrote), in a
/// store cut by a crash after a change since its checkpoint: the open from
/// the checkpoint weighs the block's copies as a scan of every block does,
/// and serves its objects from the journal's copy.
#[test]
fn a_damaged_home_beside_its_journal_image_is_served_from_the_journal() {
    let (closed, mut model) = closed_store(IndexKind::Hash);
    let (dev, store) = open_image(closed, options(IndexKind::Hash));
    store.put("since", pattern(44, 70_000)).unwrap();
    model.insert("since".into(), pattern(44, 70_000));
    dev.crash_now();
    drop(store);
    let image = dev.crash_image(CrashMode::DropUnsynced);
    let sb = superblock(&image);
    let journal = sb.journal.expect("a journal");
    let extent = sb.meta_extents[0];
    let home_of = |block: usize| (extent.start as usize + block) * BLOCK_SIZE;
    // A block of the first extent that holds tuples and whose journal
    // images are all from before the checkpoint (not one the change since
    // wrote: that one is read anyway).
    let stamp = sb.index_image.unwrap().seq;
    let images: Vec<(usize, u64)> = (0..1usize << journal.order)
        .map(|s| (journal.start as usize + s) * BLOCK_SIZE)
        .filter(|&at| image[at..at + 4] == *b"BCT4")
        .map(|at| {
            let block = u32::from_le_bytes(image[at + 4..at + 8].try_into().unwrap());
            let seq = u64::from_le_bytes(image[at + 16..at + 24].try_into().unwrap());
            (block as usize, seq)
        })
        .collect();
    let block = images
        .iter()
        .map(|&(b, _)| b)
        .find(|&b| {
            b < 1 << extent.order
                && image[home_of(b) + 24] != 0
                && images.iter().all(|&(o, seq)| o != b || seq <= stamp)
        })
        .expect("a journal image from before the checkpoint of a block with tuples");
    let mut bad = image.clone();
    bad[home_of(block) + 60] ^= 0x20;
    let (_, store) = open_image(bad.clone(), options(IndexKind::Hash).read_only(true));
    let r = store.stats().recovery;
    assert!(r.from_image, "{r:?}");
    assert_holds(&store, &model, "served beside a damaged home");
    let (_, full) = open_image(
        bad,
        options(IndexKind::Hash).read_only(true).scan_metadata(true),
    );
    assert_holds(&full, &model, "a scan of every block");
}
