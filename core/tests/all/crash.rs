//! Power cuts at every write of a workload, on the in-memory fault device.
//!
//! For each crash point the disk image after the cut is built three ways
//! (unsynced writes lost, all landed, each randomly landed/lost/torn) and
//! reopened. Invariants 1 and 4: every acknowledged operation is there with
//! its exact bytes, the one in flight is either fully there or absent,
//! nothing else exists, and the allocator accounts for every block.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::{BulkOptions, Options, PART_ALIGN};
use common::pattern;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const DEVICE: usize = 3 << 20;
/// A growable device starts at the smallest store size and must grow to
/// hold the workload.
const GROWING_DEVICE: usize = 1 << 20;

/// The device a run starts from: fixed at `DEVICE` bytes, or growable.
#[derive(Clone, Copy, Debug)]
enum Device {
    Fixed,
    Growing,
    /// A fixed device holding a format-3 store (two slots per tuple block),
    /// as builds before format 4 made and this one keeps.
    FixedFormat3,
}

impl Device {
    fn blank(self) -> MemDevice {
        match self {
            Device::Fixed | Device::FixedFormat3 => MemDevice::new(DEVICE),
            Device::Growing => MemDevice::new(GROWING_DEVICE).growable(),
        }
    }

    fn with_image(self, image: Vec<u8>) -> MemDevice {
        match self {
            Device::Fixed | Device::FixedFormat3 => MemDevice::from_image(image),
            Device::Growing => MemDevice::from_image(image).growable(),
        }
    }

    fn options(self) -> Options {
        match self {
            Device::FixedFormat3 => options().create_format_3(),
            _ => options(),
        }
    }
}

#[derive(Clone)]
enum Op {
    Put(String, Vec<u8>),
    Upload(String, Vec<u8>),
    Delete(String),
    /// Moves objects down the heap; the content stays as it was.
    Compact,
    /// A bulk load (one commit group when the journal can grow).
    Load(Vec<(String, Vec<u8>)>),
    /// An atomic batch: puts (`Some`) and deletes (`None`), distinct keys.
    Batch(Vec<(String, Option<Vec<u8>>)>),
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Put(k, v) => write!(f, "put {k} ({} bytes)", v.len()),
            Op::Upload(k, v) => write!(f, "upload {k} ({} bytes)", v.len()),
            Op::Delete(k) => write!(f, "delete {k}"),
            Op::Compact => write!(f, "compact"),
            Op::Load(items) => write!(f, "load ({} objects)", items.len()),
            Op::Batch(ops) => write!(f, "batch ({} operations)", ops.len()),
        }
    }
}

fn workload(seed: u64, n: usize, keys: u32) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let key = format!("k{}", rng.random_range(0..keys));
            let size = match rng.random_range(0..4) {
                0 => rng.random_range(0..600),
                1 | 2 => rng.random_range(600..20_000),
                _ => rng.random_range(20_000..90_000),
            };
            match rng.random_range(0..10) {
                0..=5 => Op::Put(key, pattern(rng.random(), size)),
                6 | 7 => Op::Upload(key, pattern(rng.random(), size)),
                _ => Op::Delete(key),
            }
        })
        .collect()
}

fn options() -> Options {
    Options::new().inline_threshold(512)
}

/// Applies `op`; Ok(true) when acknowledged.
fn apply(store: &Store, op: &Op) -> blobcask::Result<()> {
    match op {
        Op::Put(k, v) => store.put(k, v.clone()).map(drop),
        Op::Upload(k, v) => {
            let up = store.begin_upload(k, v.len() as u64)?;
            let part = 2 * PART_ALIGN as usize;
            let mut starts: Vec<usize> = (0..v.len()).step_by(part).collect();
            starts.reverse();
            for s in starts {
                up.write_part(s as u64, v[s..(s + part).min(v.len())].to_vec())?;
            }
            up.commit().map(drop)
        }
        Op::Delete(k) => match store.delete(k) {
            Err(e) if e.kind() == blobcask::ErrorKind::NotFound => Ok(()),
            r => r,
        },
        Op::Compact => store.compact().map(drop),
        Op::Load(items) => store.bulk_load(items.iter().cloned()).map(drop),
        Op::Batch(ops) => {
            let mut b = store.batch();
            for (k, v) in ops {
                match v {
                    Some(v) => b.put(k, v.clone()),
                    None => b.delete(k),
                };
            }
            b.commit().map(drop)
        }
    }
}

fn model_after(model: &BTreeMap<String, Vec<u8>>, op: &Op) -> BTreeMap<String, Vec<u8>> {
    let mut m = model.clone();
    match op {
        Op::Put(k, v) | Op::Upload(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        Op::Delete(k) => {
            m.remove(k);
        }
        Op::Compact => {}
        Op::Load(items) => m.extend(items.iter().cloned()),
        Op::Batch(ops) => {
            for (k, v) in ops {
                match v {
                    Some(v) => m.insert(k.clone(), v.clone()),
                    None => m.remove(k),
                };
            }
        }
    }
    m
}

fn check(
    device: Device,
    image: Vec<u8>,
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    what: &str,
) {
    let len = image.len() as u64;
    let dev = Arc::new(device.with_image(image));
    let store = Store::open_with_engine(dev, device.options())
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let matches = |m: &BTreeMap<String, Vec<u8>>| {
        store.stats().objects == m.len() as u64
            && m.iter()
                .all(|(k, v)| store.get(k).map(|b| b == v[..]).unwrap_or(false))
    };
    assert!(
        matches(before) || matches(after),
        "{what}: state is neither before nor after the interrupted operation"
    );
    let st = store.stats();
    assert_eq!(
        st.free_bytes + st.allocated_bytes + st.metadata_bytes + 8192,
        st.capacity,
        "{what}: allocator does not account for every block"
    );
    // The store covers what its superblock says, never more than the
    // device durably holds (a growth cut before its superblock keeps the
    // old size; the device may then be longer).
    assert!(
        st.capacity <= len,
        "{what}: capacity {} > device {len}",
        st.capacity
    );
    // The recovered store keeps working and survives another reopen.
    store
        .put("after-crash", pattern(1, 9000))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(store.get("after-crash").unwrap(), pattern(1, 9000));
    store.close().unwrap();
}

/// A workload that leaves holes and then compacts: distinct keys of one to
/// five blocks, every other one deleted, a compaction (which must move
/// objects), then overwrites and new objects.
fn compaction_workload(seed: u64) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops: Vec<Op> = (0..40)
        .map(|i| {
            let size = rng.random_range(600..20_000);
            Op::Put(format!("k{i}"), pattern(rng.random(), size))
        })
        .collect();
    ops.extend((0..40).step_by(2).map(|i| Op::Delete(format!("k{i}"))));
    ops.push(Op::Compact);
    ops.extend((0..6).map(|i| Op::Put(format!("k{}", 2 * i + 1), pattern(rng.random(), 9000))));
    ops.push(Op::Compact);
    ops
}

fn crash_everywhere(device: Device, seed: u64, ops: usize) -> usize {
    // On the growing device, mostly distinct keys and twice the operations:
    // more live data than its first size holds.
    let work = match device {
        Device::Fixed | Device::FixedFormat3 => workload(seed, ops, 12),
        Device::Growing => workload(seed, 2 * ops, 1000),
    };
    crash_workload(device, seed, work)
}

fn crash_workload(device: Device, seed: u64, work: Vec<Op>) -> usize {
    // Dry run: how many writes the workload issues after open.
    let dev = Arc::new(device.blank());
    let store = Store::open_with_engine(dev.clone(), device.options()).unwrap();
    store.close().unwrap();
    let base = dev.volatile_image();
    let dev = Arc::new(device.with_image(base.clone()));
    let store = Store::open_with_engine(dev.clone(), device.options()).unwrap();
    let start = dev.writes();
    for op in &work {
        if let Op::Compact = op {
            let report = store.compact().unwrap();
            assert!(report.moved > 0, "seed {seed}: nothing to move: {report:?}");
        } else {
            apply(&store, op).unwrap();
        }
    }
    let total = dev.writes() - start;
    let grown = store.stats().capacity;
    if let Device::Growing = device {
        assert!(
            grown >= 2 * GROWING_DEVICE as u64,
            "seed {seed}: the workload should make the store grow ({grown} bytes)"
        );
    }
    store.close().unwrap();

    let mut points = 0;
    for cut in 1..=total {
        let dev = Arc::new(device.with_image(base.clone()));
        let store = Store::open_with_engine(dev.clone(), device.options()).unwrap();
        dev.crash_after_writes(cut);
        let mut model = BTreeMap::new();
        let mut in_flight = None;
        for op in &work {
            match apply(&store, op) {
                Ok(()) => model = model_after(&model, op),
                Err(_) => {
                    in_flight = Some(op.clone());
                    break;
                }
            }
        }
        let after = in_flight
            .as_ref()
            .map_or(model.clone(), |op| model_after(&model, op));
        drop(store);
        // A compaction's copies all precede its tuple writes, so the cut
        // that can catch a tuple landing without its copy is rare: more
        // random landings there.
        // A batch's values and tuple blocks land in any subset: more
        // random landings there too.
        let randoms = match in_flight {
            Some(Op::Compact) => 8,
            Some(Op::Batch(_)) => 4,
            _ => 1,
        };
        let modes = [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::LastOnly,
        ]
        .into_iter()
        .chain((0..randoms).map(|r| CrashMode::Random(cut * 31 + seed + r * 7919)));
        for mode in modes {
            let what = format!(
                "{device:?} seed {seed} cut at write {cut}/{total} {mode:?} during {in_flight:?}"
            );
            check(device, dev.crash_image(mode), &model, &after, &what);
            points += 1;
        }
    }
    points
}

#[test]
fn every_crash_point_recovers_the_acknowledged_state() {
    // BLOBCASK_LONG=1 runs ten times the seeds with longer workloads.
    let long = std::env::var("BLOBCASK_LONG").is_ok_and(|v| v == "1");
    let (seeds, ops) = if long { (30, 150) } else { (3, 60) };
    let mut points = 0;
    for seed in 0..seeds {
        points += crash_everywhere(Device::Fixed, seed, ops);
    }
    eprintln!("checked {points} crash images");
    assert!(points > 300, "only {points} crash images");
}

/// The same on a format-3 store (two slots per tuple block), which stores
/// made before format 4 keep: its slots are still written in turn, and
/// recovery still reads them as pairs.
#[test]
fn every_crash_point_of_a_format_3_store_recovers_the_acknowledged_state() {
    let long = std::env::var("BLOBCASK_LONG").is_ok_and(|v| v == "1");
    let (seeds, ops) = if long { (10, 150) } else { (2, 60) };
    let dev = Arc::new(Device::FixedFormat3.blank());
    Store::open_with_engine(dev.clone(), Device::FixedFormat3.options())
        .unwrap()
        .close()
        .unwrap();
    let sb = common::superblock(&dev.volatile_image());
    assert_eq!((sb.format_version, sb.journal), (3, None));
    let mut points = 0;
    for seed in 0..seeds {
        points += crash_everywhere(Device::FixedFormat3, seed, ops);
    }
    eprintln!("checked {points} crash images");
    assert!(points > 200, "only {points} crash images");
}

/// Invariant 1 through the journal protocol (`meta/journal.rs`): a tuple
/// block's home slot is rewritten only once the journal is half held (or
/// when idle, at `sync()`, at close), with its newest image, not with the
/// group after each one that changes it. Groups rotating over three
/// blocks each write their value and one journal image; cut anywhere in a
/// workload whose homes lag many groups behind their images (and whose
/// journal fills, so that groups place them), every acknowledged
/// operation is there.
#[test]
fn home_slots_lag_their_journal_images_and_a_cut_anywhere_recovers() {
    // 16 MiB: a journal of 64 slots, crowded at 32 held.
    let dev = Arc::new(MemDevice::new(16 << 20));
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    // Tuples of about 560 bytes (inline values): 7 to a block, so keys
    // 10 apart are in different blocks.
    let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    for (i, k) in keys.iter().enumerate() {
        store.put(k, pattern(i as u64, 500)).unwrap();
    }
    // Every block has state (and its image is in its home slot).
    store.sync().unwrap();
    let (writes, syncs) = (dev.writes(), dev.syncs());
    let t = std::time::Instant::now();
    const GROUPS: u64 = 60;
    for i in 0..GROUPS {
        let k = &keys[(i % 3) as usize * 10];
        store.put(k, pattern(100 + i, 500)).unwrap();
    }
    let (elapsed, written) = (t.elapsed(), dev.writes() - writes);
    assert_eq!(dev.syncs() - syncs, GROUPS, "one sync per group");
    // One journal image per group (the values are inline). The store's
    // maintenance thread rewrites the homes (3 of them) when it finds the
    // store idle, at most every 100 ms (60 groups take milliseconds);
    // rewritten with each next group, there would be 2 writes per group.
    let idle_placements = elapsed.as_millis() as u64 / 100 + 2;
    let extra = written.saturating_sub(GROUPS);
    assert!(
        extra <= 3 * idle_placements && extra < GROUPS / 2,
        "{written} writes for {GROUPS} groups in {elapsed:?}"
    );
    // The three homes are rewritten by `sync()` (unless the maintenance
    // thread did meanwhile), then the journal holds nothing they need.
    let before = dev.writes();
    store.sync().unwrap();
    assert!(dev.writes() - before <= 3);
    store.close().unwrap();

    // The same shape cut everywhere, on a store whose journal (8 slots)
    // fills, so that groups rewrite homes: 70 keys in 10 blocks, then
    // overwrites of random keys (heap and inline), then a load that
    // changes all 10 blocks: it moves the journal to a larger extent while
    // homes lag, then more overwrites.
    let keys: Vec<String> = (0..70).map(|i| format!("k{i:02}")).collect();
    let mut rng = StdRng::seed_from_u64(7);
    let mut overwrites = |n: u64, from: u64| -> Vec<Op> {
        (0..n)
            .map(|i| {
                let k = keys[rng.random_range(0..keys.len())].clone();
                let size = if i % 3 == 0 { 9000 } else { 500 };
                Op::Put(k, pattern(from + i, size))
            })
            .collect()
    };
    let mut work: Vec<Op> = (0..70)
        .map(|i| Op::Put(format!("k{i:02}"), pattern(i, 500)))
        .collect();
    work.extend(overwrites(30, 1000));
    work.push(Op::Load(
        (0..70)
            .map(|i| (format!("k{i:02}"), pattern(2000 + i, 500)))
            .collect(),
    ));
    work.extend(overwrites(10, 3000));
    // The load does move the journal.
    let dev = Arc::new(Device::Fixed.blank());
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    let journal = |dev: &MemDevice| common::superblock(&dev.volatile_image()).journal;
    let first = journal(&dev).expect("a journal");
    work.iter().for_each(|op| apply(&store, op).unwrap());
    let last = journal(&dev).expect("a journal");
    assert!(last.order > first.order, "{first:?} -> {last:?}");
    store.close().unwrap();
    let points = crash_workload(Device::Fixed, 7, work);
    eprintln!("checked {points} crash images");
    assert!(points > 300, "only {points} crash images");
}

/// Invariants 1 and 4 through growth: the same workloads on a store that
/// starts at 1 MiB and must grow (file extension, sync, both superblock
/// copies) while objects are written; a cut at any write, the growth's own
/// ones included, leaves the old or the new size and every acknowledged
/// object.
#[test]
fn every_crash_point_during_growth_recovers_the_acknowledged_state() {
    let long = std::env::var("BLOBCASK_LONG").is_ok_and(|v| v == "1");
    let (seeds, ops) = if long { (30, 150) } else { (3, 60) };
    let mut points = 0;
    for seed in 0..seeds {
        points += crash_everywhere(Device::Growing, seed, ops);
    }
    eprintln!("checked {points} crash images");
    assert!(points > 300, "only {points} crash images");
}

/// Invariants 1 and 2 through compaction: a cut at any write of a
/// compaction (its copies, their sync, the relocated tuples) leaves every
/// object with its bytes, in its old place or its new one, and the
/// allocator accounting for every block (no piece lost or claimed twice).
#[test]
fn every_crash_point_during_compaction_recovers_the_acknowledged_state() {
    let long = std::env::var("BLOBCASK_LONG").is_ok_and(|v| v == "1");
    let seeds = if long { 20 } else { 3 };
    let mut points = 0;
    for seed in 0..seeds {
        points += crash_workload(Device::Fixed, seed, compaction_workload(seed));
    }
    eprintln!("checked {points} crash images");
    assert!(points > 300, "only {points} crash images");
}

/// Batches of puts and deletes over keys spread across several tuple
/// blocks (inline values of 300–500 bytes fill a block with about ten),
/// with heap values of one device request and more beside them: every
/// group writes several blocks, journal images and first home writes, and
/// values whose write recovery checks against their tuples.
fn batch_workload(seed: u64) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops = Vec::new();
    // A first batch that only creates (its blocks' first writes go
    // straight to their home slots).
    let first = (0..24)
        .map(|i| {
            (
                format!("b{i:02}"),
                Some(pattern(rng.random(), rng.random_range(300..500))),
            )
        })
        .collect();
    ops.push(Op::Batch(first));
    for _ in 0..5 {
        let mut keys: Vec<u32> = (0..40).collect();
        keys.shuffle(&mut rng);
        let batch = keys
            .into_iter()
            .take(rng.random_range(6..16))
            .map(|k| {
                let value = match rng.random_range(0..10) {
                    0..=1 => None,
                    2..=6 => Some(pattern(rng.random(), rng.random_range(300..500))),
                    7 | 8 => Some(pattern(rng.random(), rng.random_range(600..60_000))),
                    _ => Some(pattern(rng.random(), rng.random_range(60_000..200_000))),
                };
                (format!("b{k:02}"), value)
            })
            .collect();
        ops.push(Op::Batch(batch));
        ops.push(Op::Put("single".into(), pattern(rng.random(), 700)));
    }
    ops
}

/// An atomic batch cut at any write (every crash mode, random landings
/// included: a group whose tuple blocks landed while one of its values did
/// not) is found whole or absent after reopen, never in part (invariant 1,
/// issue 42), on a journaled store and a format-3 one.
#[test]
fn every_crash_point_of_atomic_batches_finds_each_whole_or_absent() {
    let mut points = 0;
    for seed in 0..2 {
        points += crash_workload(Device::Fixed, seed, batch_workload(seed));
    }
    points += crash_workload(Device::FixedFormat3, 7, batch_workload(7));
    eprintln!("checked {points} crash images of batches");
    assert!(points > 300, "only {points} crash images");
}

/// A bulk load cut at any write leaves a prefix of its items (in order),
/// whole commit groups, each object whole, and the store's earlier content
/// untouched. Batches of 300 objects (groups are whole batches, at least
/// one) make the 2500-item load span several groups.
#[test]
fn bulk_load_cut_anywhere_leaves_a_clean_prefix() {
    let groups = BulkOptions {
        commit_objects: 300,
        ..BulkOptions::default()
    };
    let items: Vec<(String, Vec<u8>)> = (0..2500u64)
        .map(|i| {
            (
                format!("b{i:05}"),
                pattern(i, [40, 900, 5000][i as usize % 3]),
            )
        })
        .collect();
    let dev = Arc::new(MemDevice::new(16 << 20));
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    store.put("before", pattern(7, 3000)).unwrap();
    store.close().unwrap();
    let base = dev.volatile_image();
    // Dry run to count the load's writes.
    let dev = Arc::new(MemDevice::from_image(base.clone()));
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    let start = dev.writes();
    let report = store.bulk_load_with(items.clone(), groups).unwrap();
    assert!(
        report.groups >= 2,
        "2500 objects in {} group(s)",
        report.groups
    );
    let total = dev.writes() - start;
    drop(store);
    let mut images = 0;
    // Every write when there are few, else a spread of them.
    let step = (total / 60).max(1);
    for cut in (1..=total).step_by(step as usize) {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let store = Store::open_with_engine(dev.clone(), options()).unwrap();
        dev.crash_after_writes(cut);
        // Group boundaries depend on timing (a group takes the batches
        // written while the previous one committed), so a run may need fewer
        // writes than the dry run; if it completes, all of it is durable.
        let acknowledged = store.bulk_load_with(items.clone(), groups).is_ok();
        drop(store);
        // Two random landings per cut: a group whose tuple block landed
        // while one of its values did not must roll back whole (its
        // changes were acknowledged one by one), which the second seed
        // reached where the first did not.
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::Random(cut),
            CrashMode::Random(cut * 7 + 3),
        ] {
            let s = Store::open_with_engine(
                Arc::new(MemDevice::from_image(dev.crash_image(mode))),
                options(),
            )
            .unwrap_or_else(|e| panic!("cut {cut} {mode:?}: {e}"));
            let loaded = s.stats().objects - 1;
            if acknowledged {
                assert_eq!(
                    loaded, 2500,
                    "cut {cut} {mode:?}: an acknowledged load lost objects"
                );
            }
            assert!(
                loaded.is_multiple_of(300) || loaded == 2500,
                "cut {cut} {mode:?}: {loaded} objects is not whole groups"
            );
            assert_eq!(s.get("before").unwrap(), pattern(7, 3000));
            for (i, (k, v)) in items.iter().enumerate() {
                if (i as u64) < loaded {
                    assert_eq!(
                        s.get(k).unwrap(),
                        v[..],
                        "cut {cut} {mode:?}: {k} in the prefix"
                    );
                } else {
                    assert!(
                        !s.contains(k),
                        "cut {cut} {mode:?}: {k} after a prefix of {loaded}"
                    );
                }
            }
            images += 1;
        }
    }
    eprintln!("checked {images} crash images of a {total}-write bulk load");
}

/// A bulk load that changes more tuple blocks with state than the journal
/// holds, on a full device (no room for a larger journal): the commit path
/// splits it into groups the journal holds (invariant 1 for each). Cut at
/// any write, the store holds the new values of a prefix of the load and
/// the old values of the rest, every object whole.
#[test]
fn a_load_split_by_a_full_journal_cut_anywhere_leaves_a_clean_prefix() {
    let small = |i: u64, round: u64| pattern(i * 31 + round, 300);
    let keys: Vec<String> = (0..600).map(|i| format!("s{i:04}")).collect();
    let dev = Arc::new(MemDevice::new(8 << 20));
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    for (i, k) in keys.iter().enumerate() {
        store.put(k, small(i as u64, 0)).unwrap();
    }
    let mut big = 0u64;
    while store
        .put(format!("big{big}"), pattern(big, 100_000))
        .is_ok()
    {
        big += 1;
    }
    store.close().unwrap();
    let base = dev.volatile_image();
    let items: Vec<(String, Vec<u8>)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), small(i as u64, 1)))
        .collect();
    // Dry run: the load commits as more than one group.
    let dev = Arc::new(MemDevice::from_image(base.clone()));
    let store = Store::open_with_engine(dev.clone(), options()).unwrap();
    let (start, groups) = (dev.writes(), store.stats().commit_groups);
    store.bulk_load(items.clone()).unwrap();
    let split = store.stats().commit_groups - groups;
    assert!(split >= 2, "the load committed as {split} group(s)");
    let total = dev.writes() - start;
    drop(store);
    let mut images = 0;
    let step = (total / 60).max(1);
    for cut in (1..=total).step_by(step as usize) {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let store = Store::open_with_engine(dev.clone(), options()).unwrap();
        dev.crash_after_writes(cut);
        let result = store.bulk_load(items.clone());
        let acknowledged = result.is_ok();
        // A failed load says how many objects were committed: those of
        // earlier requests and of the groups its last one was split into
        // before the failure (one count). All of them must survive.
        let committed = result.err().map_or(0, |e| {
            let m = e.to_string();
            let number_after = |prefix: &str| -> usize {
                m.split(prefix)
                    .nth(1)
                    .map_or(0, |rest| rest.split(' ').next().unwrap().parse().unwrap())
            };
            number_after("bulk_load committed the first ")
        });
        drop(store);
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::Random(cut),
            CrashMode::Random(cut * 7 + 3),
        ] {
            let s = Store::open_with_engine(
                Arc::new(MemDevice::from_image(dev.crash_image(mode))),
                options(),
            )
            .unwrap_or_else(|e| panic!("cut {cut} {mode:?}: {e}"));
            let got: Vec<Vec<u8>> = keys.iter().map(|k| s.get(k).unwrap().to_vec()).collect();
            let loaded = got
                .iter()
                .zip(&items)
                .take_while(|(g, (_, v))| *g == v)
                .count();
            if acknowledged {
                assert_eq!(loaded, 600, "cut {cut} {mode:?}: acknowledged load lost");
            }
            assert!(
                loaded >= committed,
                "cut {cut} {mode:?}: {committed} reported committed, {loaded} there"
            );
            for (i, g) in got.iter().enumerate().skip(loaded) {
                assert_eq!(
                    *g,
                    small(i as u64, 0),
                    "cut {cut} {mode:?}: {} after a prefix of {loaded}",
                    keys[i]
                );
            }
            for b in 0..big {
                assert_eq!(s.get(format!("big{b}")).unwrap(), pattern(b, 100_000));
            }
            images += 1;
        }
    }
    eprintln!("checked {images} crash images of a {total}-write split load");
}

/// Growth of the metadata area past the superblock's list of 200 extents
/// (format 5: the rest in an extent table, rewritten to a new piece at each
/// growth and published with the superblock), cut at every write: every
/// acknowledged put is there with its bytes, the one in flight whole or
/// absent, and everything loaded before intact. Tiny pieces (8 KiB) make
/// every extent two tuple blocks.
#[test]
fn every_crash_point_while_the_extent_table_grows_recovers_the_acknowledged_state() {
    let opts = || options().max_piece_size(8 << 10);
    let extents = |image: &[u8]| u16::from_le_bytes([image[56], image[57]]);
    let dev = Arc::new(MemDevice::new(1 << 20).growable());
    let store = Store::open_with_engine(dev.clone(), opts()).unwrap();
    let mut loaded = 0u64;
    while extents(&dev.volatile_image()) < 196 {
        store
            .bulk_load((loaded..loaded + 200).map(|i| (format!("b{i:06}"), pattern(i, 100))))
            .unwrap();
        loaded += 200;
    }
    store.close().unwrap();
    let base = dev.volatile_image();
    let value = |i: u64| pattern(i + 1_000_000, 100);
    let puts = 400u64;
    // Dry run: the puts cross 200 extents and grow the table more than once.
    let dev = Arc::new(MemDevice::from_image(base.clone()).growable());
    let store = Store::open_with_engine(dev.clone(), opts()).unwrap();
    let start = dev.writes();
    for i in 0..puts {
        store.put(format!("p{i:04}"), value(i)).unwrap();
    }
    let total = dev.writes() - start;
    store.close().unwrap();
    let after = dev.volatile_image();
    assert!(extents(&after) > 202, "only {} extents", extents(&after));
    // Format 5's extent table, closed with an index image and its change
    // map: version 7.
    assert_eq!(u32::from_le_bytes(after[8..12].try_into().unwrap()), 7);
    let mut images = 0;
    // Every other write: each growth past 200 extents has one cut between
    // its superblock write and the sync that must precede it; this reaches
    // about half of them.
    let step = 2;
    for cut in (1..=total).step_by(step as usize) {
        let dev = Arc::new(MemDevice::from_image(base.clone()).growable());
        let store = Store::open_with_engine(dev.clone(), opts()).unwrap();
        dev.crash_after_writes(cut);
        let mut acked = 0;
        while acked < puts && store.put(format!("p{acked:04}"), value(acked)).is_ok() {
            acked += 1;
        }
        drop(store);
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::Random(cut),
            // A superblock that lands before the extent table it names
            // (published without a sync between) fails here.
            CrashMode::LastOnly,
        ] {
            let s = Store::open_with_engine(
                Arc::new(MemDevice::from_image(dev.crash_image(mode)).growable()),
                opts(),
            )
            .unwrap_or_else(|e| panic!("cut {cut} {mode:?}: {e}"));
            let mut present = 0;
            for i in 0..puts {
                let k = format!("p{i:04}");
                match s.get(&k) {
                    Ok(v) => {
                        present += 1;
                        assert!(i <= acked, "cut {cut} {mode:?}: {k} never acknowledged");
                        assert_eq!(v, value(i), "cut {cut} {mode:?}: {k}");
                    }
                    Err(e) => assert!(
                        i >= acked && e.kind() == blobcask::ErrorKind::NotFound,
                        "cut {cut} {mode:?}: {k} acknowledged, now {e}"
                    ),
                }
            }
            assert_eq!(s.stats().objects, loaded + present, "cut {cut} {mode:?}");
            for i in (0..loaded).step_by(37) {
                assert_eq!(s.get(format!("b{i:06}")).unwrap(), pattern(i, 100));
            }
            images += 1;
        }
    }
    eprintln!("checked {images} crash images of {total} writes growing the extent table");
}

/// Buffered durability: a crash keeps a prefix of the acknowledged
/// operations that includes everything acknowledged before the last
/// completed `sync()`.
#[test]
fn buffered_mode_keeps_a_prefix_including_everything_synced() {
    let opts = || {
        options().durability(blobcask::Durability::Buffered {
            max_delay: std::time::Duration::from_secs(3600),
        })
    };
    let work = workload(11, 80, 12);
    let mut models = vec![BTreeMap::new()];
    for op in &work {
        let last = models.last().unwrap();
        models.push(model_after(last, op));
    }
    let dev = Arc::new(MemDevice::new(DEVICE));
    Store::open_with_engine(dev.clone(), opts())
        .unwrap()
        .close()
        .unwrap();
    let base = dev.volatile_image();
    let run = |dev: &Arc<MemDevice>| -> (usize, usize) {
        let store = Store::open_with_engine(dev.clone(), opts()).unwrap();
        let (mut acked, mut synced) = (0, 0);
        for (i, op) in work.iter().enumerate() {
            if apply(&store, op).is_err() {
                break;
            }
            acked = i + 1;
            if acked % 7 == 0 {
                if store.sync().is_err() {
                    break;
                }
                synced = acked;
            }
        }
        (acked, synced)
    };
    let dry = Arc::new(MemDevice::from_image(base.clone()));
    let start = dry.writes();
    run(&dry);
    let total = dry.writes() - start;
    let mut images = 0;
    for cut in 1..=total {
        let dev = Arc::new(MemDevice::from_image(base.clone()));
        let before = dev.writes();
        dev.crash_after_writes(cut);
        let (acked, synced) = run(&dev);
        assert!(dev.writes() > before);
        // Two random landings per cut: a group whose tuple block landed
        // while one of its values did not must roll back whole (its
        // changes were acknowledged one by one), which the second seed
        // reached where the first did not.
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::Random(cut),
            CrashMode::Random(cut * 7 + 3),
        ] {
            let s = Store::open_with_engine(
                Arc::new(MemDevice::from_image(dev.crash_image(mode))),
                opts(),
            )
            .unwrap_or_else(|e| panic!("cut {cut} {mode:?}: {e}"));
            let matches = |m: &BTreeMap<String, Vec<u8>>| {
                s.stats().objects == m.len() as u64
                    && m.iter()
                        .all(|(k, v)| s.get(k).map(|b| b == v[..]).unwrap_or(false))
            };
            let kept = (synced..=acked.min(work.len())).find(|&k| matches(&models[k]));
            assert!(
                kept.is_some(),
                "cut {cut} {mode:?}: state is no prefix between {synced} (synced) and {acked} (acknowledged)"
            );
            images += 1;
        }
    }
    eprintln!("checked {images} buffered-mode crash images");
    assert!(images > 100);
}

#[test]
fn buffered_mode_writes_within_max_delay_without_sync() {
    let opts = options().durability(blobcask::Durability::Buffered {
        max_delay: std::time::Duration::from_millis(20),
    });
    let dev = Arc::new(MemDevice::new(DEVICE));
    let store = Store::open_with_engine(dev.clone(), opts.clone()).unwrap();
    store.put("k", pattern(3, 9000)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    dev.crash_now();
    let s = Store::open_with_engine(
        Arc::new(MemDevice::from_image(
            dev.crash_image(CrashMode::DropUnsynced),
        )),
        opts,
    )
    .unwrap();
    assert_eq!(s.get("k").unwrap(), pattern(3, 9000));
}

/// Regression: open rewrote rolled-back blocks with a nested `block_on`,
/// which panicked when open itself was driven by `futures::executor`
/// (the blocking API) (found by the crash test once interrupted groups
/// were rolled back).
#[test]
fn blocking_open_that_rolls_back_an_interrupted_group() {
    let opts = options().inline_threshold(2048);
    let dev = Arc::new(MemDevice::new(64 << 20));
    let store = Store::open_with_engine(dev.clone(), opts.clone()).unwrap();
    store.put("kept", pattern(1, 5000)).unwrap();
    // One bulk group of 2000-byte inline values: two tuples per block, so
    // the group writes 4 tuple blocks; cut the power at the third.
    let items: Vec<(String, Vec<u8>)> = (0..8u64)
        .map(|i| (format!("b{i}"), pattern(i, 2000)))
        .collect();
    dev.crash_after_writes(3);
    assert!(store.bulk_load(items).is_err());
    drop(store);
    let reopened = Arc::new(MemDevice::from_image(
        dev.crash_image(CrashMode::KeepUnsynced),
    ));
    let s = Store::open_with_engine(reopened.clone(), opts).unwrap();
    assert!(reopened.writes() > 0, "open rewrote the rolled-back blocks");
    assert_eq!(s.get("kept").unwrap(), pattern(1, 5000));
    assert_eq!(
        s.stats().objects,
        1,
        "the interrupted group is rolled back whole"
    );
    s.close().unwrap();
}
