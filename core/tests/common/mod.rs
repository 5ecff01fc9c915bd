//! Helpers shared by the behaviour suites.
#![allow(dead_code)]

use std::path::PathBuf;

use blobcask::internals::block::{
    choose_slot, decode_slot, journal_block, SlotContent, SlotIdentity,
};
use blobcask::internals::tuple::{Tuple, TupleValue};
use blobcask::internals::BLOCK_SIZE;
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
    // A fixed size (the store cannot grow past it), so suites that fill
    // the store see `NoSpace`; growth has its own suite (`growth.rs`).
    Options::new()
        .capacity(64 << 20)
        .max_capacity(64 << 20)
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
pub fn superblock(image: &[u8]) -> blobcask::internals::Superblock {
    use blobcask::internals::Superblock;
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

/// The live tuple of `key` in an image: the largest version in any tuple
/// block's state (and, in a journaled store, any journal image).
pub fn tuple_of(image: &[u8], key: &str) -> Tuple {
    let sb = superblock(image);
    let mut best: Option<Tuple> = None;
    let mut consider = |slot: &SlotContent| {
        if let SlotContent::Valid { tuples, .. } = slot {
            for t in tuples.iter().filter(|t| &*t.key == key.as_bytes()) {
                if best.as_ref().is_none_or(|b| b.version < t.version) {
                    best = Some(t.clone());
                }
            }
        }
    };
    let mut no = 0u32;
    // A two-slot store's block is two slots; a journaled store's is its one
    // home slot, and the journal's images.
    let step = sb.layout().slots_per_block() as usize;
    for e in &sb.meta_extents {
        let start = e.start as usize * BLOCK_SIZE;
        for pair in image[start..start + (BLOCK_SIZE << e.order)].chunks_exact(step * BLOCK_SIZE) {
            let id = SlotIdentity {
                store_id: sb.store_id,
                block_no: no,
            };
            no += 1;
            let slots: Vec<SlotContent> = pair
                .chunks_exact(BLOCK_SIZE)
                .map(|b| decode_slot(id, b))
                .collect();
            match slots.as_slice() {
                [a, b] => {
                    if let Ok(Some(w)) = choose_slot(&[a.clone(), b.clone()]) {
                        consider(&slots[w]);
                    }
                }
                [a] => consider(a),
                _ => {}
            }
        }
    }
    if let Some(j) = &sb.journal {
        let start = j.start as usize * BLOCK_SIZE;
        for b in image[start..start + (BLOCK_SIZE << j.order)].chunks_exact(BLOCK_SIZE) {
            if let Some(block_no) = journal_block(b) {
                let id = SlotIdentity {
                    store_id: sb.store_id,
                    block_no,
                };
                consider(&decode_slot(id, b));
            }
        }
    }
    best.unwrap()
}

/// Device byte holding object byte `pos` of `t`.
pub fn device_offset(t: &Tuple, pos: u64) -> usize {
    let TupleValue::Heap { pieces, .. } = &t.value else {
        panic!("not a heap object")
    };
    let mut at = 0;
    for p in pieces {
        if pos < at + p.len_bytes() {
            return (p.offset() + pos - at) as usize;
        }
        at += p.len_bytes();
    }
    panic!("{pos} past the pieces")
}

/// Names of this process's threads.
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect()
}

/// The io_uring driver's fallback completion thread (for executors
/// without a reactor; `blobcask-uring-completions`, cut to 15 bytes by the
/// kernel) was never started in this process.
pub fn assert_no_fallback_thread() {
    let names = thread_names();
    assert!(
        !names.iter().any(|n| n.starts_with("blobcask-uring")),
        "the io_uring fallback completion thread was started: {names:?}"
    );
}

/// `r` is a `Corrupt` error naming `key` and an offset: damaged bytes are
/// reported, never served.
pub fn expect_corrupt(r: blobcask::Result<bytes::Bytes>, key: &str, what: &str) {
    match r {
        Ok(_) => panic!("{what}: {key}: damaged bytes were served"),
        Err(e) => {
            assert_eq!(e.kind(), blobcask::ErrorKind::Corrupt, "{what}: {e}");
            let m = e.to_string();
            assert!(m.contains(key), "{what}: no key in {m}");
            assert!(m.contains("offset"), "{what}: no offset in {m}");
        }
    }
}
