//! Helpers shared by the behaviour suites.
#![allow(dead_code)]

use std::path::PathBuf;

use blobcask::{IoEngineKind, Options, Store};

/// The engines every behaviour runs against.
pub const ENGINES: [IoEngineKind; 2] = [IoEngineKind::IoUring, IoEngineKind::Portable];

/// A temporary directory that lives as long as the returned guard.
pub struct TempStore {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn temp_path() -> TempStore {
    let dir = tempfile::Builder::new()
        .prefix("blobcask-test")
        .tempdir_in(
            std::env::var("BLOBCASK_TEST_DIR")
                .unwrap_or_else(|_| std::env::temp_dir().display().to_string()),
        )
        .expect("tempdir");
    let path = dir.path().join("store.blobcask");
    TempStore { dir, path }
}

pub fn options(engine: IoEngineKind) -> Options {
    Options::new().capacity(64 << 20).io_engine(engine)
}

pub async fn open(t: &TempStore, engine: IoEngineKind) -> Store {
    Store::open(&t.path, options(engine))
        .await
        .expect("open store")
}

/// Deterministic pseudo-random bytes for a value.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
