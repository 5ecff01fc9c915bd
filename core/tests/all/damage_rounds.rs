//! One byte flipped anywhere in a whole store image — data or metadata,
//! after a clean close and after a kill — then opened, read-write and
//! read-only: never wrong bytes (invariant 5), and never an acknowledged
//! object lost, reverted, or a deleted one back without open refusing the
//! store or its recovery report saying so (invariant 6), and the read-only
//! open (what `blobcask check` runs) reaches the same verdict as the
//! read-write one. See `core/INVARIANTS.md`.
//!
//! CI runs a short mode; `BLOBCASK_LONG=1` runs 1000 rounds per image kind.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::internals::block::BLOCK_PAYLOAD;
use blobcask::internals::tuple::inline_len;
use blobcask::internals::BLOCK_SIZE;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::{ErrorKind, Options, RecoveryReport};
use common::{pattern, superblock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Every value each key held, in order; `None` for a delete. The last entry
/// is the acknowledged state.
type History = BTreeMap<String, Vec<Option<Vec<u8>>>>;

struct Image {
    name: &'static str,
    bytes: Vec<u8>,
    /// Non-zero bytes anywhere (mostly object data).
    live: Vec<usize>,
    /// Non-zero bytes of the metadata: superblock copies and tuple blocks.
    meta: Vec<usize>,
    history: History,
}

/// How a built image ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Closed cleanly (with its checkpoint).
    Clean,
    /// Killed: never closed.
    Killed,
    /// Closed cleanly after the mixed operations, reopened, then the bulk
    /// load and more changes, and killed: its checkpoint and the blocks
    /// written since.
    KilledAfterCheckpoint,
}

/// A workload over every write path and size class: inline, in-tuple
/// checksums, trailer tables, multipart, bulk load, overwrites, deletes.
fn build(name: &'static str, end: End, seed: u64) -> Image {
    let mut dev = Arc::new(MemDevice::new(12 << 20));
    let mut s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut history: History = BTreeMap::new();
    let sizes = [0, 1, 300, 600, 4096, 10_000, 65_536, 70_000, 300_000];
    // Tuple blocks filled first: long keys fill several blocks to the last
    // byte, so nothing written later goes there; `sync()` then rewrites
    // their home slots, and the later groups take every journal slot in
    // turn, so their state is in their home slots only: a flipped byte
    // there cannot be repaired and must be refused.
    const PER_BLOCK: usize = 4;
    let key_len = format!("early00/{}", "e".repeat(600)).len();
    let room = BLOCK_PAYLOAD - PER_BLOCK * inline_len(key_len, 0, false);
    let value_len = |i: usize| room / PER_BLOCK + usize::from(i % PER_BLOCK < room % PER_BLOCK);
    assert!(value_len(0) <= 1024, "inline at the default threshold");
    for i in 0..24u64 {
        let key = format!("early{i:02}/{}", "e".repeat(600));
        let v = pattern(seed * 100 + i, value_len(i as usize));
        s.put(&key, v.clone()).unwrap();
        history.entry(key).or_default().push(Some(v));
    }
    s.sync().unwrap();
    for i in 0..120u64 {
        let key = format!("k{:02}", rng.random_range(0..30));
        match rng.random_range(0..10) {
            0 | 1 => {
                if s.delete(&key).is_ok() {
                    history.entry(key).or_default().push(None);
                }
            }
            2 => {
                let size = rng.random_range(1..200_000usize);
                let v = pattern(seed * 1000 + i, size);
                let up = s.begin_upload(&key, size as u64).unwrap();
                let part = 64 << 10;
                for at in (0..size).step_by(part).rev() {
                    up.write_part(at as u64, v[at..(at + part).min(size)].to_vec())
                        .unwrap();
                }
                up.commit().unwrap();
                history.entry(key).or_default().push(Some(v));
            }
            _ => {
                let size = sizes[rng.random_range(0..sizes.len())];
                let v = pattern(seed * 1000 + i, size);
                s.put(&key, v.clone()).unwrap();
                history.entry(key).or_default().push(Some(v));
            }
        }
    }
    if end == End::KilledAfterCheckpoint {
        s.close().unwrap();
        dev = Arc::new(MemDevice::from_image(dev.volatile_image()));
        s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
        for i in 0..30u64 {
            let key = format!("k{:02}", rng.random_range(0..30));
            if i % 5 == 0 {
                if s.delete(&key).is_ok() {
                    history.entry(key).or_default().push(None);
                }
            } else {
                let v = pattern(seed * 3000 + i, sizes[rng.random_range(0..sizes.len())]);
                s.put(&key, v.clone()).unwrap();
                history.entry(key).or_default().push(Some(v));
            }
        }
    }
    let batch: Vec<(String, Vec<u8>)> = (0..8u64)
        .map(|i| (format!("bulk{i}"), pattern(seed * 7 + i, 5000 * i as usize)))
        .collect();
    s.bulk_load(batch.clone()).unwrap();
    for (k, v) in batch {
        history.entry(k).or_default().push(Some(v));
    }
    let bytes = if end == End::Clean {
        s.close().unwrap();
        dev.volatile_image()
    } else {
        // Killed: nothing after the last acknowledged call; everything
        // acknowledged is durable, the clean-close record is missing.
        let b = dev.crash_image(CrashMode::DropUnsynced);
        drop(s);
        b
    };
    if end == End::KilledAfterCheckpoint {
        // Undamaged, it opens from the checkpoint and the blocks since.
        let back = Store::open_with_engine(
            Arc::new(MemDevice::from_image(bytes.clone())),
            Options::new().read_only(true),
        )
        .unwrap();
        let r = back.stats().recovery;
        assert!(r.from_image && !r.clean, "{r:?}");
    }
    let live: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    let sb = superblock(&bytes);
    let mut regions = vec![(0, 2 * BLOCK_SIZE)];
    for e in sb
        .meta_extents
        .iter()
        .chain(&sb.journal)
        .chain(&sb.change_map)
    {
        regions.push((e.start as usize * BLOCK_SIZE, BLOCK_SIZE << e.order));
    }
    // The index image's first piece.
    if let Some(i) = sb.index_image {
        regions.push((i.start as usize * BLOCK_SIZE, BLOCK_SIZE << i.order));
    }
    let meta = live
        .iter()
        .copied()
        .filter(|&i| regions.iter().any(|&(a, n)| (a..a + n).contains(&i)))
        .collect();
    Image {
        name,
        bytes,
        live,
        meta,
        history,
    }
}

/// What one opened image serves, key by key.
#[derive(Debug, PartialEq)]
enum Seen {
    Bytes(Vec<u8>),
    Missing,
    Corrupt,
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Refused,
    Opened(RecoveryReport, BTreeMap<String, Seen>),
}

fn open(bytes: Vec<u8>, options: Options, history: &History) -> Verdict {
    let dev = Arc::new(MemDevice::from_image(bytes));
    // A panic fails the test: open never panics, whatever the bytes.
    let s = match Store::open_with_engine(dev, options) {
        Ok(s) => s,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return Verdict::Refused;
        }
    };
    let mut seen = BTreeMap::new();
    for key in history.keys() {
        let got = match s.get(key) {
            Ok(b) => Seen::Bytes(b.to_vec()),
            Err(e) if e.kind() == ErrorKind::NotFound => Seen::Missing,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corrupt, "{key}: {e}");
                Seen::Corrupt
            }
        };
        // A range read agrees with the whole read (or fails as Corrupt).
        if let Seen::Bytes(b) = &got {
            if b.len() > 10 {
                match s.read(key, 3, 7) {
                    Ok(r) => assert_eq!(&r[..], &b[3..10], "{key}: range"),
                    Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{key}: {e}"),
                }
            }
        }
        seen.insert(key.clone(), got);
    }
    Verdict::Opened(s.stats().recovery, seen)
}

#[derive(Default, Debug)]
struct Tally {
    rounds: usize,
    refused: usize,
    quiet: usize,
    reported: usize,
    corrupt_reads: usize,
    wrong_bytes: Vec<String>,
    silent_losses: Vec<String>,
    disagreements: Vec<String>,
}

fn round(img: &Image, rng: &mut StdRng, t: &mut Tally) {
    // Half the rounds hit metadata, which is a small part of the image.
    let pool = if rng.random_bool(0.5) {
        &img.meta
    } else {
        &img.live
    };
    let at = pool[rng.random_range(0..pool.len())];
    let mut bytes = img.bytes.clone();
    bytes[at] ^= rng.random_range(1..=255u8);
    let what = format!("{} image, byte {at}", img.name);
    t.rounds += 1;
    let rw = open(bytes.clone(), Options::new(), &img.history);
    let ro = open(bytes, Options::new().read_only(true), &img.history);
    if rw != ro {
        t.disagreements.push(what.clone());
    }
    let Verdict::Opened(report, seen) = rw else {
        t.refused += 1;
        return;
    };
    if report.is_empty() {
        t.quiet += 1;
    } else {
        t.reported += 1;
    }
    for (key, got) in seen {
        let versions = &img.history[&key];
        let acked = versions.last().unwrap();
        match got {
            Seen::Corrupt => t.corrupt_reads += 1,
            Seen::Bytes(b) => {
                if !versions.iter().flatten().any(|v| *v == b) {
                    t.wrong_bytes
                        .push(format!("{what}: {key} served bytes it never held"));
                } else if report.is_empty() && acked.as_deref() != Some(&b[..]) {
                    t.silent_losses.push(format!(
                        "{what}: {key} {} without a report",
                        if acked.is_none() {
                            "came back after its delete"
                        } else {
                            "was reverted"
                        }
                    ));
                }
            }
            Seen::Missing => {
                if report.is_empty() && acked.is_some() {
                    t.silent_losses
                        .push(format!("{what}: {key} lost without a report"));
                }
            }
        }
    }
}

#[test]
fn one_flipped_byte_anywhere_never_serves_wrong_bytes_nor_loses_silently() {
    let long = std::env::var("BLOBCASK_LONG").is_ok_and(|v| v == "1");
    let per_kind = if long { 1000 } else { 120 };
    let mut t = Tally::default();
    let mut rng = StdRng::seed_from_u64(2026);
    for img in [
        build("clean", End::Clean, 1),
        build("killed", End::Killed, 2),
        build("killed after a checkpoint", End::KilledAfterCheckpoint, 3),
    ] {
        for _ in 0..per_kind {
            round(&img, &mut rng, &mut t);
        }
    }
    eprintln!(
        "{} rounds: {} refused (Corrupt), {} opened with an empty report, {} opened with a report; \
         {} reads refused as Corrupt; {} served wrong bytes, {} silent losses, {} read-only disagreements",
        t.rounds,
        t.refused,
        t.quiet,
        t.reported,
        t.corrupt_reads,
        t.wrong_bytes.len(),
        t.silent_losses.len(),
        t.disagreements.len()
    );
    assert!(
        t.wrong_bytes.is_empty(),
        "{:#?}",
        &t.wrong_bytes[..t.wrong_bytes.len().min(10)]
    );
    assert!(
        t.silent_losses.is_empty(),
        "{:#?}",
        &t.silent_losses[..t.silent_losses.len().min(10)]
    );
    assert!(
        t.disagreements.is_empty(),
        "{:#?}",
        &t.disagreements[..t.disagreements.len().min(10)]
    );
    // The rounds reached every outcome: damage refused, read as Corrupt.
    assert!(t.refused > 0 && t.corrupt_reads > 0, "{t:?}");
}
