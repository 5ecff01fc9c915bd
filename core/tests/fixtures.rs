//! Format fixtures: stores written by format versions 1 and 2, checked in,
//! must keep opening with the same content (and the corrupt ones must keep
//! being refused or refusing their damaged object), so a format change
//! cannot silently break existing stores (invariant 4, `core/INVARIANTS.md`).
//!
//! Regenerate the current version's files (only when the format version
//! changes, keeping the old files):
//! `BLOBCASK_WRITE_FIXTURES=1 cargo test -p blobcask --test fixtures`

mod common;

use std::path::PathBuf;

use blobcask::blocking::Store;
use blobcask::{ErrorKind, IoEngineKind, Options};
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

/// Writes the format-2 fixtures (the format-1 ones were written by the
/// format-1 build and stay as they are).
fn write_fixtures() {
    let good = dir().join("v2-good.blobcask");
    let _ = std::fs::remove_file(&good);
    let s = Store::open(&good, options()).unwrap();
    s.put("overwritten", pattern(4, 9000)).unwrap();
    s.put("deleted", pattern(9, 5000)).unwrap();
    for (k, v) in contents() {
        s.put(k, v).unwrap();
    }
    s.put("v2/table", pattern(8, 100_000)).unwrap();
    s.delete("deleted").unwrap();
    s.close().unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let sb = blobcask::format::Superblock::decode(&bytes[..4096])
        .unwrap()
        .unwrap();
    // Corrupt metadata: both slots of the first tuple block damaged.
    let mut meta = bytes.clone();
    let first = sb.meta_extents[0].start as usize * 4096;
    meta[first + 50] ^= 0xff;
    meta[first + 4096 + 50] ^= 0xff;
    std::fs::write(dir().join("v2-corrupt.blobcask"), meta).unwrap();
    // Damaged data: one byte of "heap/odd" (its bytes are unique).
    let mut data = bytes;
    let v = pattern(3, 50_001);
    let at = data
        .windows(64)
        .position(|w| w == &v[30_000..30_064])
        .unwrap();
    data[at] ^= 0x01;
    std::fs::write(dir().join("v2-damaged-data.blobcask"), data).unwrap();
}

fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(name);
    std::fs::copy(dir().join(name), &p).unwrap();
    (tmp, p)
}

#[test]
fn v2_store_opens_with_its_content() {
    if std::env::var("BLOBCASK_WRITE_FIXTURES").is_ok_and(|v| v == "1") {
        write_fixtures();
    }
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
    // The store keeps working under this build, upgraded to format 2 (a
    // format-1 build now refuses it instead of misreading it).
    s.put("new", pattern(7, 3000)).unwrap();
    s.close().unwrap();
    let head = std::fs::read(&path).unwrap();
    let sb = blobcask::format::Superblock::decode(&head[..4096])
        .unwrap()
        .unwrap();
    assert_eq!(sb.format_version, 2);
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
