//! A whole store image, built once (clean close, and killed without close),
//! damaged at fuzz-chosen bytes, then opened: never a panic; open fails
//! only with `Corrupt`; and every byte a read returns is a byte the key
//! really held — invariant 5 (never wrong bytes). With an empty recovery
//! report, every key reads exactly its acknowledged value or `Corrupt`
//! (invariant 6: nothing lost or reverted silently).
#![no_main]
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use arbitrary::Arbitrary;
use blobcask::blocking::Store;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::{ErrorKind, Options};
use libfuzzer_sys::fuzz_target;

struct Image {
    bytes: Vec<u8>,
    /// Non-zero bytes: where damage can be seen.
    live: Vec<usize>,
    /// Every version each key held; the last one is the acknowledged one
    /// (None: deleted).
    history: BTreeMap<String, Vec<Option<Vec<u8>>>>,
}

fn value(seed: u64, len: usize) -> Vec<u8> {
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

fn build(clean: bool) -> Image {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let mut history: BTreeMap<String, Vec<Option<Vec<u8>>>> = BTreeMap::new();
    let sizes = [0usize, 100, 600, 4096, 9000, 70_000, 150_000];
    for i in 0..60u64 {
        let key = format!("k{}", i % 13);
        if i % 7 == 3 {
            if s.delete(&key).is_ok() {
                history.entry(key).or_default().push(None);
            }
            continue;
        }
        let v = value(i, sizes[(i as usize * 5) % sizes.len()]);
        s.put(&key, v.clone()).unwrap();
        history.entry(key).or_default().push(Some(v));
    }
    let bytes = if clean {
        s.close().unwrap();
        dev.volatile_image()
    } else {
        let b = dev.crash_image(CrashMode::DropUnsynced);
        drop(s);
        b
    };
    let live = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    Image {
        bytes,
        live,
        history,
    }
}

#[derive(Arbitrary, Debug)]
struct Damage {
    killed: bool,
    flips: Vec<(u32, u8)>,
}

fuzz_target!(|d: Damage| {
    static CLEAN: OnceLock<Image> = OnceLock::new();
    static KILLED: OnceLock<Image> = OnceLock::new();
    let img = if d.killed {
        KILLED.get_or_init(|| build(false))
    } else {
        CLEAN.get_or_init(|| build(true))
    };
    let mut bytes = img.bytes.clone();
    for (at, mask) in d.flips.iter().take(3) {
        let at = img.live[*at as usize % img.live.len()];
        bytes[at] ^= mask | 1;
    }
    let s = match Store::open_with_engine(Arc::new(MemDevice::from_image(bytes)), Options::new())
    {
        Ok(s) => s,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return;
        }
    };
    let quiet = s.stats().recovery.is_empty();
    for (key, versions) in &img.history {
        match s.get(key) {
            Ok(got) => {
                assert!(
                    versions.iter().flatten().any(|v| v[..] == got[..]),
                    "{key}: bytes it never held"
                );
                if quiet && d.flips.len() == 1 {
                    assert_eq!(
                        versions.last().unwrap().as_deref(),
                        Some(&got[..]),
                        "{key}: reverted without a report"
                    );
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if quiet && d.flips.len() == 1 {
                    assert!(versions.last().unwrap().is_none(), "{key}: lost without a report");
                }
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{key}: {e}"),
        }
    }
});
