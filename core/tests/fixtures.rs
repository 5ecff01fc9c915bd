//! Format fixtures: stores written by format version 1, checked in, must
//! keep opening with the same content (and the corrupt one must keep being
//! refused), so a format change cannot silently break existing stores.
//!
//! Regenerate (only when the format version changes, keeping the old files):
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

fn write_fixtures() {
    let good = dir().join("v1-good.blobcask");
    let _ = std::fs::remove_file(&good);
    let s = Store::open(&good, options()).unwrap();
    s.put("overwritten", pattern(4, 9000)).unwrap();
    s.put("deleted", pattern(9, 5000)).unwrap();
    for (k, v) in contents() {
        s.put(k, v).unwrap();
    }
    s.delete("deleted").unwrap();
    s.close().unwrap();
    // The corrupt one: both slots of the first tuple block damaged.
    let mut bytes = std::fs::read(&good).unwrap();
    let sb = blobcask::format::Superblock::decode(&bytes[..4096])
        .unwrap()
        .unwrap();
    let first = sb.meta_extents[0].start as usize * 4096;
    bytes[first + 50] ^= 0xff;
    bytes[first + 4096 + 50] ^= 0xff;
    std::fs::write(dir().join("v1-corrupt.blobcask"), bytes).unwrap();
}

fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(name);
    std::fs::copy(dir().join(name), &p).unwrap();
    (tmp, p)
}

#[test]
fn v1_store_opens_with_its_content() {
    if std::env::var("BLOBCASK_WRITE_FIXTURES").is_ok_and(|v| v == "1") {
        write_fixtures();
    }
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
    // The store keeps working under this build.
    s.put("new", pattern(7, 3000)).unwrap();
    s.close().unwrap();
    let s = Store::open(&path, options()).unwrap();
    assert_eq!(s.get("new").unwrap(), pattern(7, 3000));
}

#[test]
fn v1_corrupt_store_is_refused() {
    let (_tmp, path) = copy("v1-corrupt.blobcask");
    let err = Store::open(&path, options()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
}
