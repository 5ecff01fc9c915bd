//! Every byte is verified (invariant 5, `core/INVARIANTS.md`): one byte
//! flipped in the data of an object written by any write path, of any size
//! from 1 byte to more than 16 MiB, makes every read API that would return
//! it fail with `Corrupt` naming the key and the offset; ranges that do not
//! touch the damaged block still read exactly. Also: a damaged object of
//! the newest group after a kill rolls back alone and is reported
//! (invariant 6).

use crate::common;

use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::internals::tuple::{self, TupleValue};
use blobcask::internals::BLOCK_SIZE;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::{ErrorKind, Options};
use common::{device_offset, expect_corrupt, pattern, tuple_of};

/// How an object was written.
#[derive(Debug, Clone, Copy)]
enum WritePath {
    Put,
    AsyncPut,
    Multipart,
    BulkLoad,
}

const PATHS: [WritePath; 4] = [
    WritePath::Put,
    WritePath::AsyncPut,
    WritePath::Multipart,
    WritePath::BulkLoad,
];

fn write(s: &Store, path: WritePath, key: &str, v: &[u8]) {
    match path {
        WritePath::Put => {
            s.put(key, v.to_vec()).unwrap();
        }
        WritePath::AsyncPut => {
            futures::executor::block_on(s.as_async().put(key, v.to_vec())).unwrap();
        }
        WritePath::Multipart => {
            let up = s.begin_upload(key, v.len() as u64).unwrap();
            // Parts of 1 MiB + 1 block, written back to front.
            let part = (1 << 20) + 4096;
            let mut parts: Vec<usize> = (0..v.len().max(1)).step_by(part).collect();
            parts.reverse();
            for at in parts {
                let end = (at + part).min(v.len());
                let bytes = v[at..end].to_vec();
                let crc = crc32c::crc32c(&bytes);
                if !bytes.is_empty() {
                    up.write_part_checked(at as u64, bytes, crc).unwrap();
                }
            }
            up.commit().unwrap();
        }
        WritePath::BulkLoad => {
            s.bulk_load([(key.to_string(), v.to_vec())]).unwrap();
        }
    }
}

/// One case: write, close, flip object byte `pos`, reopen, read every way.
fn flip_and_read(path: WritePath, size: usize, inline_threshold: usize, table: bool) -> usize {
    let dev_size = (size * 2 + (16 << 20)).next_power_of_two();
    let dev = Arc::new(MemDevice::new(dev_size));
    let opts = || Options::new().inline_threshold(inline_threshold);
    let s = Store::open_with_engine(dev.clone(), opts()).unwrap();
    let key = format!("obj/{path:?}/{size}");
    let v = pattern(size as u64 * 7 + 1, size);
    write(&s, path, &key, &v);
    s.close().unwrap();
    let mut image = dev.volatile_image();
    let t = tuple_of(&image, &key);
    if size as u64 <= inline_threshold as u64 {
        // Inline: the value is inside its tuple block, covered by the
        // slot's checksum; a flip there is a damaged slot, which open
        // refuses after a clean close (recovery test below).
        assert!(matches!(t.value, TupleValue::Inline(_)));
        return 0;
    }
    let pos = if table {
        // A byte of the trailer checksum table.
        tuple::table_offset(size as u64) + 1
    } else {
        size as u64 / 2
    };
    let at = device_offset(&t, pos);
    image[at] ^= 0x5a;
    let s = Store::open_with_engine(Arc::new(MemDevice::from_image(image)), opts()).unwrap();
    let what = format!("{path:?} {size} B{}", if table { " (table)" } else { "" });
    let a = s.as_async();
    let block = pos / BLOCK_SIZE as u64 * BLOCK_SIZE as u64;
    let mut reads = 0;
    let covering = [(block, 1), (pos.saturating_sub(10), 20), (0, u64::MAX)];
    for (off, len) in covering.into_iter().filter(|_| !table) {
        expect_corrupt(s.read(&key, off, len), &key, &what);
        expect_corrupt(
            futures::executor::block_on(a.read(&key, off, len)),
            &key,
            &what,
        );
        reads += 2;
    }
    expect_corrupt(s.get(&key), &key, &what);
    expect_corrupt(futures::executor::block_on(a.get(&key)), &key, &what);
    reads += 2;
    if !table {
        // A range in another block still reads, exactly.
        let other = if block >= BLOCK_SIZE as u64 {
            0
        } else {
            block + BLOCK_SIZE as u64
        };
        if other < size as u64 {
            let got = s.read(&key, other, 100).unwrap();
            let end = (other as usize + 100).min(size);
            assert_eq!(&got[..], &v[other as usize..end], "{what}: other block");
        }
    }
    let scrub = s.scrub().unwrap();
    assert_eq!(scrub.damaged.len(), 1, "{what}: scrub {scrub:?}");
    reads
}

#[test]
fn a_flipped_data_byte_is_corrupt_on_every_read_path() {
    let sizes = [
        1,
        100,
        513,
        4095,
        4096,
        4097,
        16 * 4096,     // 16 blocks: checksums in the tuple
        16 * 4096 + 1, // 17 blocks: trailer table
        (1 << 20) + 5,
        (2 << 20) + 3,
        (17 << 20) + 4099, // more than one 16 MiB piece
    ];
    let mut reads = 0;
    for path in PATHS {
        for &size in &sizes {
            // Small sizes on the heap too (inline threshold 0).
            reads += flip_and_read(path, size, 0, false);
            if size <= 512 {
                reads += flip_and_read(path, size, 512, false);
            }
        }
        reads += flip_and_read(path, 16 * 4096 + 1, 0, true);
        reads += flip_and_read(path, (2 << 20) + 3, 0, true);
    }
    eprintln!("{reads} reads of damaged objects, every one Corrupt");
    assert!(reads > 300);
}

/// A cleanly closed store opens from its index image without reading a
/// tuple block: a damaged inline value is then refused by the read that
/// would return it, and by `check`'s open, which reads every block.
#[test]
fn a_flipped_inline_value_byte_is_refused_by_a_scanning_open_and_by_its_read() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let v = pattern(9, 300);
    s.put("small", v.clone()).unwrap();
    s.close().unwrap();
    let mut image = dev.volatile_image();
    let at = image.windows(32).position(|w| w == &v[100..132]).unwrap();
    image[at] ^= 1;
    let err = Store::open_with_engine(
        Arc::new(MemDevice::from_image(image.clone())),
        Options::new().scan_metadata(true),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("tuple block"), "{err}");
    let s = Store::open_with_engine(
        Arc::new(MemDevice::from_image(image)),
        Options::new().cache_bytes(0),
    )
    .unwrap();
    assert!(s.stats().recovery.from_image);
    let err = s.get("small").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
}

/// Invariant 5 for inline values, which are not kept in RAM: a read takes
/// the value from its tuple block's slot and checks the slot, so damage
/// after open is found by the read that would return it — `Corrupt`, never
/// the damaged bytes — for every value of that block, and by a scrub.
#[test]
fn an_inline_value_damaged_after_open_is_refused_at_read() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    // The read cache off: every read goes to the device.
    let s = Store::open_with_engine(dev.clone(), Options::new().cache_bytes(0)).unwrap();
    let v = pattern(9, 300);
    let w = pattern(3, 200);
    s.put("small", v.clone()).unwrap();
    s.put("other", w.clone()).unwrap();
    assert_eq!(&s.get("small").unwrap()[..], &v[..]);
    // Both slots of the block hold the value (each write alternates): damage
    // every copy, so the current slot surely is.
    let image = dev.volatile_image();
    let copies: Vec<usize> = image
        .windows(32)
        .enumerate()
        .filter(|(_, win)| *win == &v[100..132])
        .map(|(at, _)| at)
        .collect();
    assert_eq!(copies.len(), 2, "two slots hold the value");
    for at in copies {
        dev.flip(at + 5);
    }
    let refused = |r: blobcask::Result<bytes::Bytes>, key: &str| {
        let e = r.expect_err("damaged bytes were served");
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        let m = e.to_string();
        assert!(m.contains(key) && m.contains("tuple block"), "{m}");
    };
    refused(s.get("small"), "small");
    refused(s.read("small", 100, 10), "small");
    refused(
        futures::executor::block_on(s.as_async().get("small")),
        "small",
    );
    // The slot's checksum covers the whole block: its other values too.
    refused(s.get("other"), "other");
    // A scrub finds it too (it checks the slots reads use).
    let report = s.scrub().unwrap();
    assert!(
        report.damaged.iter().any(|d| d.contains("tuple block")),
        "{report:?}"
    );
    assert_eq!(s.stat("small").unwrap().size, 300, "metadata is in RAM");
}

#[test]
fn write_part_checked_refuses_bytes_that_do_not_match() {
    let dev = Arc::new(MemDevice::new(8 << 20));
    let s = Store::open_with_engine(dev, Options::new()).unwrap();
    let up = s.begin_upload("u", 3 * 4096).unwrap();
    let part = pattern(1, 4096);
    let err = up
        .write_part_checked(0, part.clone(), crc32c::crc32c(&part) ^ 1)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("CRC32C"), "{err}");
    // Nothing was written: the range still counts as missing.
    up.write_part_checked(4096, part.clone(), crc32c::crc32c(&part))
        .unwrap();
    up.write_part(8192, part.clone()).unwrap();
    let err = up.commit().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.to_string().contains("from 0 were never written"),
        "{err}"
    );
}

/// "One damaged object rolls back its whole group" (issue 13): after a kill,
/// one byte flipped in one object of the newest group rolls back that
/// object alone, to its previous version, and says so; the intact ones of
/// the group stay.
#[test]
fn a_damaged_object_of_the_newest_group_rolls_back_alone() {
    let dev = Arc::new(MemDevice::new(32 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let keys: Vec<String> = (0..16).map(|i| format!("group/{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        s.put(k, pattern(i as u64, 20_000)).unwrap();
    }
    // Sixteen puts at once: they share commit groups.
    std::thread::scope(|sc| {
        for (i, k) in keys.iter().enumerate() {
            let s = s.clone();
            sc.spawn(move || s.put(k, pattern(100 + i as u64, 30_000)).unwrap());
        }
    });
    let newest = keys
        .iter()
        .max_by_key(|k| s.stat(k).unwrap().version)
        .unwrap()
        .clone();
    // Killed: no close. Everything acknowledged is durable.
    let mut image = dev.crash_image(CrashMode::DropUnsynced);
    drop(s);
    let t = tuple_of(&image, &newest);
    let at = device_offset(&t, 12_345);
    image[at] ^= 0x80;
    let s =
        Store::open_with_engine(Arc::new(MemDevice::from_image(image)), Options::new()).unwrap();
    let r = s.stats().recovery;
    assert!(!r.clean);
    assert_eq!(r.rolled_back_objects, 1, "{r:?}");
    assert_eq!(r.rolled_back_groups, 0, "{r:?}");
    assert!(r.details[0].contains(&newest), "{r:?}");
    for (i, k) in keys.iter().enumerate() {
        let want = if *k == newest {
            pattern(i as u64, 20_000)
        } else {
            pattern(100 + i as u64, 30_000)
        };
        assert_eq!(s.get(k).unwrap(), want, "{k}");
    }
}
