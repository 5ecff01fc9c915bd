//! Format fixtures: stores written by format versions 1 to 6, checked in,
//! must keep opening with the same content (and the corrupt ones must keep
//! being refused or refusing their damaged object), so a format change
//! cannot silently break existing stores (invariant 4, `core/INVARIANTS.md`).
//!
//! Regenerate the current version's files (only when the format version
//! changes, keeping the old files):
//! `BLOBCASK_WRITE_FIXTURES=1 cargo test -p blobcask --test all fixtures::`

use crate::common;

use std::path::PathBuf;

use blobcask::blocking::Store;
use std::time::{Duration, SystemTime};

use blobcask::{ErrorKind, IoEngineKind, Options, PutOptions};
use common::pattern;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn options() -> Options {
    Options::new()
        .capacity(1 << 20)
        .io_engine(IoEngineKind::Portable)
}

/// The content of the v1 fixture: inline, heap, multi-piece, overwritten
/// and deleted objects.
fn contents() -> Vec<(String, Vec<u8>)> {
    vec![
        ("inline/small".into(), pattern(1, 100)),
        ("heap/16k".into(), pattern(2, 16 << 10)),
        ("heap/odd".into(), pattern(3, 50_001)),
        ("overwritten".into(), pattern(5, 7000)),
        ("empty".into(), Vec::new()),
        ("binary/\u{0}\u{ff}".into(), pattern(6, 300)),
    ]
}

/// Writes the format-5 fixture (the format-1 to 4 ones were written by
/// their builds and stay as they are; git history has their writers; the
/// v4 one by `write_fixture` with no fill): the v2 content, and objects
/// with an expiry, one far ahead and one already past.
fn write_fixtures() {
    // Format 7: the v4 content, closed cleanly with its checkpoint (index
    // image and change map); then the same changed after a reopen and cut
    // by a crash (no close): its checkpoint and the blocks written since.
    // (v6 was written by the build before format 7 the same way; the v5
    // file by the build before format 6 with 8 KiB pieces, so that 13,000
    // small objects took more than the superblock's 200 metadata extents:
    // `options().max_piece_size(8 << 10)`, `FILL`.)
    write_fixture("v7-good.blobcask", options(), 0);
    let dev = std::sync::Arc::new(blobcask::io::fault::MemDevice::from_image(
        std::fs::read(dir().join("v7-good.blobcask")).unwrap(),
    ));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    for (k, v) in crashed_changes() {
        match v {
            Some(v) => s.put(k, v).map(|_| ()),
            None => s.delete(k).map(|_| ()),
        }
        .unwrap();
    }
    dev.crash_now();
    drop(s);
    std::fs::write(
        dir().join("v7-crashed.blobcask"),
        dev.crash_image(blobcask::io::fault::CrashMode::DropUnsynced),
    )
    .unwrap();
}

/// What the v7-crashed fixture changed after its checkpoint: (key, value;
/// `None` a delete).
fn crashed_changes() -> Vec<(String, Option<Vec<u8>>)> {
    vec![
        ("since/inline".into(), Some(pattern(20, 300))),
        ("since/heap".into(), Some(pattern(21, 20_000))),
        ("inline/small".into(), Some(pattern(22, 80))),
        ("heap/16k".into(), None),
    ]
}

/// Small objects that push the v5 fixture's metadata past 200 extents.
const FILL: u64 = 13_000;

fn fill(i: u64) -> (String, Vec<u8>) {
    (format!("fill/{i:05}"), pattern(1000 + i, 100))
}

fn write_fixture(name: &str, options: Options, fill_objects: u64) {
    let good = dir().join(name);
    let _ = std::fs::remove_file(&good);
    let s = Store::open(&good, options).unwrap();
    s.bulk_load((0..fill_objects).map(fill)).unwrap();
    for (k, v) in contents() {
        s.put(k, v).unwrap();
    }
    let far = PutOptions::default().ttl(Duration::from_secs(60 * 365 * 24 * 3600));
    s.put_with("ttl/far-inline", pattern(10, 200), far).unwrap();
    s.put_with("ttl/far-heap", pattern(11, 30_000), far)
        .unwrap();
    // Long enough to be in the file at close (the reaper would remove it
    // first), expired by the time the fixture is read.
    let gone = PutOptions::default().ttl(Duration::from_secs(2));
    s.put_with("ttl/gone", pattern(12, 9000), gone).unwrap();
    s.close().unwrap();
    std::thread::sleep(Duration::from_secs(3));
}

fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(name);
    std::fs::copy(dir().join(name), &p).unwrap();
    (tmp, p)
}

/// A store with the v3/v4 fixture content opens read-only with it (the
/// expired object invisible), and read-write its reaper removes the expired
/// object; it keeps its layout, and is closed as version `closed`: a
/// format-3 store stays 3, a journaled one gets an index image (version 6)
/// when there is room for one.
fn opens_with_its_content_and_expiries(name: &str, version: u32, closed: u32) {
    let (_tmp, path) = copy(name);
    let head = std::fs::read(&path).unwrap();
    let as_written = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(as_written.format_version, version, "{name}");
    let s = Store::open(&path, options().read_only(true)).unwrap();
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
    assert_eq!(s.get("ttl/far-inline").unwrap(), pattern(10, 200));
    assert_eq!(s.get("ttl/far-heap").unwrap(), pattern(11, 30_000));
    let expires = s.stat("ttl/far-heap").unwrap().expires.unwrap();
    assert!(expires > SystemTime::now() + Duration::from_secs(30 * 365 * 24 * 3600));
    // Expired when it was written: invisible, though still on disk.
    assert_eq!(s.get("ttl/gone").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(!s.contains("ttl/gone"));
    // Not counted, still on disk (a read-only open removes nothing).
    let before = s.stats().allocated_bytes;
    s.close().unwrap();
    // Read-write, the reaper removes it for good: its heap blocks free.
    let s = Store::open(&path, options()).unwrap();
    let reaped = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        s.stats().allocated_bytes == before - 12288
    });
    assert!(
        reaped,
        "the expired object was not removed: {before} {:?}",
        s.stats()
    );
    // It keeps working, and keeps its layout (a format-3 store is not
    // converted: a format-3 build still opens it).
    for i in 0..50u64 {
        s.put(format!("more/{i}"), pattern(100 + i, 700)).unwrap();
    }
    s.close().unwrap();
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, closed);
    let s = Store::open(&path, options()).unwrap();
    assert_eq!(s.stats().recovery.from_image, closed >= 6);
    for i in 0..50u64 {
        assert_eq!(s.get(format!("more/{i}")).unwrap(), pattern(100 + i, 700));
    }
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
    s.close().unwrap();
}

#[test]
fn v4_store_opens_with_its_content_and_expiries() {
    opens_with_its_content_and_expiries("v4-good.blobcask", 4, 7);
}

/// Format 5: the v4 content over 13,000 small objects whose metadata needs
/// an extent table; all of it opens, and it keeps its extent table.
#[test]
fn v5_store_with_an_extent_table_opens_with_its_content_and_expiries() {
    let head = std::fs::read(dir().join("v5-good.blobcask")).unwrap();
    let count = u16::from_le_bytes([head[56], head[57]]);
    assert!(count > 200, "the v5 fixture has {count} extents");
    // Its 2 MiB are nearly full: the close grows it for its index image.
    opens_with_its_content_and_expiries("v5-good.blobcask", 5, 7);
    let (_tmp, path) = copy("v5-good.blobcask");
    let s = Store::open(&path, options().read_only(true)).unwrap();
    for i in 0..FILL {
        let (k, v) = fill(i);
        assert_eq!(s.get(&k).unwrap(), v, "{k}");
    }
}

/// Format 7: a journaled store closed cleanly with its checkpoint (index
/// image and change map), loaded by the open; and one cut by a crash after
/// changes since its checkpoint, recovered from the checkpoint and the
/// blocks written since.
#[test]
fn v7_stores_open_from_their_checkpoint_clean_and_after_a_crash() {
    let (_tmp, path) = copy("v7-good.blobcask");
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, 7);
    assert!(sb.index_image.is_some() && sb.change_map.is_some());
    drop(head);
    opens_with_its_content_and_expiries("v7-good.blobcask", 7, 7);

    let (_tmp, path) = copy("v7-crashed.blobcask");
    let s = Store::open(&path, options().read_only(true)).unwrap();
    let r = s.stats().recovery;
    assert!(r.from_image && !r.clean && r.repaired.is_empty(), "{r:?}");
    let mut expect: std::collections::BTreeMap<String, Vec<u8>> = contents().into_iter().collect();
    for (k, v) in crashed_changes() {
        match v {
            Some(v) => expect.insert(k, v),
            None => expect.remove(&k),
        };
    }
    for (k, v) in &expect {
        assert_eq!(s.get(k).unwrap(), v[..], "{k}");
    }
    assert_eq!(s.get("heap/16k").unwrap_err().kind(), ErrorKind::NotFound);
    drop(s);
    // Read-write: recovered the same, and closed cleanly.
    let s = Store::open(&path, options()).unwrap();
    for (k, v) in &expect {
        assert_eq!(s.get(k).unwrap(), v[..], "{k}");
    }
    s.close().unwrap();
    let s = Store::open(&path, options().read_only(true)).unwrap();
    let r = s.stats().recovery;
    assert!(r.from_image && r.clean && r.is_empty(), "{r:?}");
}

/// Format 6: a journaled store closed cleanly with its index image (no
/// change map: written by the build before format 7), loaded by the open
/// (no tuple block read).
#[test]
fn v6_store_with_an_index_image_opens_from_it_with_its_content() {
    if std::env::var("BLOBCASK_WRITE_FIXTURES").is_ok_and(|v| v == "1") {
        write_fixtures();
    }
    let (_tmp, path) = copy("v6-good.blobcask");
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, 6);
    assert!(sb.index_image.is_some());
    let s = Store::open(&path, options().read_only(true)).unwrap();
    assert!(s.stats().recovery.from_image);
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
    drop(s);
    opens_with_its_content_and_expiries("v6-good.blobcask", 6, 7);
}

#[test]
fn v3_store_opens_with_its_content_and_expiries() {
    opens_with_its_content_and_expiries("v3-good.blobcask", 3, 3);
}

#[test]
fn v2_store_opens_with_its_content() {
    let (_tmp, path) = copy("v2-good.blobcask");
    let s = Store::open(&path, options()).unwrap();
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
    assert_eq!(s.get("v2/table").unwrap(), pattern(8, 100_000));
    assert!(!s.contains("deleted"));
    assert!(s.stats().recovery.is_empty());
    assert!(s.stats().recovery.clean);
    let scrub = s.scrub().unwrap();
    assert_eq!((scrub.unverified, scrub.damaged.len()), (0, 0));
    s.close().unwrap();
    // Opened read-write, it is now a format-3 store (a format-2 build
    // refuses it rather than misreading an expiry).
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, 3);
}

#[test]
fn v2_corrupt_store_is_refused() {
    let (_tmp, path) = copy("v2-corrupt.blobcask");
    let err = Store::open(&path, options()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
}

#[test]
fn v2_damaged_object_is_refused_others_read() {
    let (_tmp, path) = copy("v2-damaged-data.blobcask");
    let s = Store::open(&path, options().read_only(true)).unwrap();
    let err = s.get("heap/odd").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("offset 28672"), "{err}");
    assert_eq!(s.get("heap/16k").unwrap(), pattern(2, 16 << 10));
    assert_eq!(s.scrub().unwrap().damaged.len(), 1);
}

#[test]
fn v1_store_opens_with_its_content() {
    // Open a copy: opening writes (clean-close record), the fixture must stay.
    let (_tmp, path) = copy("v1-good.blobcask");
    let s = Store::open(&path, options()).unwrap();
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
    assert!(!s.contains("deleted"));
    assert_eq!(s.stats().objects, contents().len() as u64);
    assert!(s.stat("inline/small").unwrap().inline);
    assert!(!s.stat("heap/16k").unwrap().inline);
    // Written without stored settings, under the old default threshold: a
    // two-slot store keeps it (512 B), not the 1 KiB of new stores (it
    // keeps the 200-extent ceiling of its format).
    assert!(!s.put("mid", pattern(8, 700)).unwrap().inline);
    s.delete("mid").unwrap();
    // The store keeps working under this build, upgraded to format 3 (a
    // format-1 build now refuses it instead of misreading it).
    s.put("new", pattern(7, 3000)).unwrap();
    s.close().unwrap();
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::internals::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, 3);
    let s = Store::open(&path, options()).unwrap();
    assert_eq!(s.get("new").unwrap(), pattern(7, 3000));
    for (k, v) in contents() {
        assert_eq!(s.get(&k).unwrap(), v[..], "{k}");
    }
}

#[test]
fn v1_corrupt_store_is_refused() {
    let (_tmp, path) = copy("v1-corrupt.blobcask");
    let err = Store::open(&path, options()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
}
