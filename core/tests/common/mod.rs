//! Helpers shared by the behaviour suites.
#![allow(dead_code)]

use std::path::PathBuf;

use blobcask::{IndexKind, IoEngineKind, Options, Store};

/// One configuration a behaviour runs against.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub engine: IoEngineKind,
    pub index: IndexKind,
}

impl From<IoEngineKind> for Setup {
    fn from(engine: IoEngineKind) -> Self {
        Setup {
            engine,
            index: IndexKind::Hash,
        }
    }
}

/// Every I/O engine with every index backend.
pub fn setups() -> Vec<Setup> {
    let mut out = vec![];
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        for index in IndexKind::ALL {
            out.push(Setup { engine, index });
        }
    }
    out
}

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

pub fn options(setup: impl Into<Setup>) -> Options {
    let setup = setup.into();
    Options::new()
        .capacity(64 << 20)
        .io_engine(setup.engine)
        .index(setup.index)
}

pub async fn open(t: &TempStore, setup: impl Into<Setup>) -> Store {
    Store::open(&t.path, options(setup))
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

/// The newest valid superblock copy of a store image.
pub fn superblock(image: &[u8]) -> blobcask::format::Superblock {
    use blobcask::format::{Superblock, BLOCK_SIZE};
    [0, BLOCK_SIZE]
        .iter()
        .filter_map(|&at| {
            Superblock::decode(&image[at..at + BLOCK_SIZE])
                .ok()
                .flatten()
        })
        .max_by_key(|s| s.seq)
        .expect("no valid superblock copy")
}
