//! The whole store on the in-memory fault device against a BTreeMap model,
//! with power cuts: after each cut the reopened store must hold either the
//! state before or after the interrupted operation (a compaction, cut or
//! not, changes no content).
#![no_main]
use std::collections::BTreeMap;
use std::sync::Arc;

use arbitrary::Arbitrary;
use blobcask::blocking::Store;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::Options;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Put { key: u8, size: u16, fill: u8 },
    Delete { key: u8 },
    Read { key: u8, offset: u16, len: u16 },
    Crash { after_writes: u8, mode: u8 },
    /// Compacts; `cut` > 0 cuts the power after that many of its writes.
    Compact { cut: u8, mode: u8 },
}

fn value(size: u16, fill: u8) -> Vec<u8> {
    (0..size as usize * 3).map(|i| fill.wrapping_add(i as u8)).collect()
}

/// How the cut leaves the writes not yet synced.
fn crash_mode(mode: u8) -> CrashMode {
    match mode % 4 {
        0 => CrashMode::DropUnsynced,
        1 => CrashMode::KeepUnsynced,
        2 => CrashMode::LastOnly,
        _ => CrashMode::Random(mode as u64),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut dev = Arc::new(MemDevice::new(2 << 20));
    let mut store = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for op in ops.into_iter().take(60) {
        match op {
            Op::Put { key, size, fill } => {
                let k = format!("k{}", key % 16);
                let v = value(size, fill);
                if store.put(&k, v.clone()).is_ok() {
                    model.insert(k, v);
                }
            }
            Op::Delete { key } => {
                let k = format!("k{}", key % 16);
                let r = store.delete(&k);
                assert_eq!(r.is_ok(), model.remove(&k).is_some());
            }
            Op::Read { key, offset, len } => {
                let k = format!("k{}", key % 16);
                match (store.read(&k, offset as u64, len as u64), model.get(&k)) {
                    (Ok(b), Some(v)) => {
                        let start = (offset as usize).min(v.len());
                        let end = (start + len as usize).min(v.len());
                        assert_eq!(&b[..], &v[start..end]);
                    }
                    (Err(_), Some(v)) => assert!(offset as usize > v.len()),
                    (Err(_), None) => {}
                    (Ok(_), None) => panic!("read of a missing key succeeded"),
                }
            }
            Op::Compact { cut, mode } => {
                if cut == 0 {
                    store.compact().expect("compact");
                } else {
                    dev.crash_after_writes(cut as u64 % 16);
                    let _ = store.compact();
                    drop(store);
                    dev = Arc::new(MemDevice::from_image(dev.crash_image(crash_mode(mode))));
                    store = Store::open_with_engine(dev.clone(), Options::new())
                        .expect("reopen after a cut in a compaction");
                }
                assert_eq!(store.stats().objects, model.len() as u64, "compaction changed the count");
                for (k, v) in &model {
                    assert_eq!(store.get(k).expect("object lost by compaction")[..], v[..]);
                }
            }
            Op::Crash { after_writes, mode } => {
                // Cut the power during the next put, then recover.
                dev.crash_after_writes(after_writes as u64 % 4 + 1);
                let k = "victim".to_string();
                let v = value(700, after_writes);
                let before = model.clone();
                let acked = store.put(&k, v.clone()).is_ok();
                let mut after = model.clone();
                after.insert(k.clone(), v);
                drop(store);
                dev = Arc::new(MemDevice::from_image(dev.crash_image(crash_mode(mode))));
                store = Store::open_with_engine(dev.clone(), Options::new()).expect("reopen after a cut");
                let holds = |m: &BTreeMap<String, Vec<u8>>| {
                    store.stats().objects == m.len() as u64
                        && m.iter().all(|(k, v)| store.get(k).map(|b| b == v[..]).unwrap_or(false))
                };
                if acked {
                    assert!(holds(&after), "acknowledged put lost");
                    model = after;
                } else if holds(&after) {
                    model = after;
                } else {
                    assert!(holds(&before), "state is neither before nor after the cut put");
                    model = before;
                }
            }
        }
    }
});
