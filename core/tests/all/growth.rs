//! Capacity and stored settings (issue 17, part 1): a file store starts
//! small and grows as it fills, up to its stored `max_capacity`; a larger
//! capacity at reopen grows it, a smaller one is refused; `Store::grow`;
//! a full file system is `NoSpace` at growth with nothing lost; the index
//! kind, inline threshold and growth limit are stored and used at reopen.
//! Crash cuts during growth are in `crash.rs`.

use crate::common;

use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::{ErrorKind, IndexKind, IoEngineKind, Options, DEFAULT_CAPACITY};
use common::{pattern, temp_path};

const ENGINES: [IoEngineKind; 2] = [IoEngineKind::IoUring, IoEngineKind::Portable];
const MIB: u64 = 1 << 20;

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

fn reopen(path: &std::path::Path, engine: IoEngineKind) -> Store {
    Store::open(path, Options::new().io_engine(engine).create(false)).unwrap()
}

#[test]
fn a_new_store_starts_small_and_grows_as_it_fills() {
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(&t.path, Options::new().io_engine(engine)).unwrap();
        assert_eq!(s.stats().capacity, DEFAULT_CAPACITY, "{engine:?}");
        assert_eq!(file_len(&t.path), DEFAULT_CAPACITY, "{engine:?}");
        // Larger than the whole new store in one put, then many small heap
        // objects (the metadata area grows too) and some 1 MiB ones.
        let big = pattern(1, 40 * MIB as usize);
        s.put("big", big.clone()).unwrap();
        for i in 0..3000u64 {
            s.put(format!("small/{i}"), pattern(i, 700 + i as usize % 3000))
                .unwrap();
        }
        for i in 0..24u64 {
            s.put(format!("mib/{i}"), pattern(i, MIB as usize)).unwrap();
        }
        let st = s.stats();
        assert!(st.capacity > 64 * MIB, "{engine:?}: {}", st.capacity);
        assert!(file_len(&t.path) >= st.capacity);
        assert_eq!(
            st.free_bytes + st.allocated_bytes + st.metadata_bytes + 8192,
            st.capacity,
            "{engine:?}: the allocator covers exactly the grown store"
        );
        let grown = st.capacity;
        s.close().unwrap();

        let s = reopen(&t.path, engine);
        assert_eq!(s.stats().capacity, grown, "{engine:?}");
        assert_eq!(s.stats().objects, 3025);
        assert_eq!(s.get("big").unwrap(), big);
        for i in (0..3000u64).step_by(97) {
            assert_eq!(
                s.get(format!("small/{i}")).unwrap(),
                pattern(i, 700 + i as usize % 3000)
            );
        }
        assert_eq!(s.get("mib/23").unwrap(), pattern(23, MIB as usize));
        let scrub = s.scrub().unwrap();
        assert_eq!((scrub.objects, scrub.damaged.len()), (3025, 0));
    }
}

#[test]
fn concurrent_writers_grow_the_store_once_per_step_and_lose_nothing() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new().capacity(2 * MIB)).unwrap();
    let threads: Vec<_> = (0..8u64)
        .map(|w| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..60u64 {
                    s.put(
                        format!("w{w}/{i}"),
                        pattern(w * 1000 + i, 9000 + (i as usize * 4096)),
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let cap = s.stats().capacity;
    s.close().unwrap();
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().capacity, cap);
    assert_eq!(s.stats().objects, 480);
    for w in 0..8u64 {
        for i in 0..60u64 {
            assert_eq!(
                s.get(format!("w{w}/{i}")).unwrap(),
                pattern(w * 1000 + i, 9000 + (i as usize * 4096))
            );
        }
    }
}

#[test]
fn max_capacity_bounds_growth_and_is_stored() {
    let t = temp_path();
    let s = Store::open(
        &t.path,
        Options::new().capacity(4 * MIB).max_capacity(24 * MIB),
    )
    .unwrap();
    let mut acked = 0u64;
    let err = loop {
        match s.put(format!("k{acked}"), pattern(acked, MIB as usize)) {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::NoSpace, "{err}");
    assert!(err.to_string().contains("max_capacity"), "{err}");
    assert_eq!(s.stats().capacity, 24 * MIB);
    assert_eq!(s.stats().max_capacity, Some(24 * MIB));
    assert!(acked >= 18, "only {acked} MiB fit in 24 MiB");
    // Larger than the limit can ever hold: TooLarge, not NoSpace.
    let e = s.put("huge", vec![0u8; 30 * MIB as usize]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    s.close().unwrap();

    // Reopened without options, the limit still holds.
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().objects, acked);
    let e = s.put("more", pattern(7, MIB as usize)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    s.close().unwrap();
    // A higher limit set at a read-write open is used and stored.
    Store::open(&t.path, Options::new().max_capacity(64 * MIB))
        .unwrap()
        .close()
        .unwrap();
    let s = reopen(&t.path, IoEngineKind::Auto);
    s.put("more", pattern(7, MIB as usize)).unwrap();
    assert!(s.stats().capacity > 24 * MIB);
    for i in 0..acked {
        assert_eq!(s.get(format!("k{i}")).unwrap(), pattern(i, MIB as usize));
    }
    assert_eq!(s.stats().max_capacity, Some(64 * MIB));
    // max_capacity below the smallest store is refused at open.
    drop(s);
    let e = Store::open(&t.path, Options::new().max_capacity(1000)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn grow_extends_the_file_now_and_refuses_what_it_cannot_do() {
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(
            &t.path,
            Options::new()
                .io_engine(engine)
                .capacity(4 * MIB)
                .max_capacity(64 * MIB),
        )
        .unwrap();
        s.put("a", pattern(1, 100_000)).unwrap();
        s.grow(40 * MIB + 123).unwrap();
        assert_eq!(s.stats().capacity, 40 * MIB, "rounded down to a block");
        assert!(file_len(&t.path) >= 40 * MIB);
        s.grow(40 * MIB).unwrap();
        let e = s.grow(8 * MIB).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("never shrinks"), "{e}");
        let e = s.grow(65 * MIB).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("max_capacity"), "{e}");
        assert_eq!(s.stats().capacity, 40 * MIB);
        // The new space is the allocator's: 30 MiB fits without growing.
        s.put("b", pattern(2, 30 * MIB as usize)).unwrap();
        assert_eq!(s.stats().capacity, 40 * MIB);
        s.close().unwrap();

        let s = reopen(&t.path, engine);
        assert_eq!(s.stats().capacity, 40 * MIB);
        assert_eq!(s.get("b").unwrap(), pattern(2, 30 * MIB as usize));
        s.close().unwrap();
        let ro = Store::open(&t.path, Options::new().io_engine(engine).read_only(true)).unwrap();
        let e = ro.grow(48 * MIB).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        ro.close().unwrap();
        let closed = reopen(&t.path, engine);
        let handle = closed.clone();
        closed.close().unwrap();
        assert_eq!(handle.grow(48 * MIB).unwrap_err().kind(), ErrorKind::Closed);
    }
}

#[test]
fn capacity_at_reopen_grows_the_store_and_a_smaller_one_is_refused() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new().capacity(8 * MIB)).unwrap();
    s.put("x", pattern(3, 50_000)).unwrap();
    s.close().unwrap();

    let s = Store::open(&t.path, Options::new().capacity(32 * MIB)).unwrap();
    assert_eq!(s.stats().capacity, 32 * MIB);
    assert!(file_len(&t.path) >= 32 * MIB);
    s.close().unwrap();

    let image = std::fs::read(&t.path).unwrap();
    // 32 MiB was asked for at the last open: less is a mistake.
    let e = Store::open(&t.path, Options::new().capacity(16 * MIB)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("never shrinks"), "{e}");
    // So is a growth limit below the store's size.
    let e = Store::open(&t.path, Options::new().max_capacity(16 * MIB)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = Store::open(&t.path, Options::new().capacity(64 * MIB).read_only(true)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        std::fs::read(&t.path).unwrap() == image,
        "refused opens wrote nothing"
    );

    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().capacity, 32 * MIB);
    assert_eq!(s.get("x").unwrap(), pattern(3, 50_000));
}

#[test]
fn creation_settings_are_stored_and_used_at_reopen() {
    let t = temp_path();
    let s = Store::open(
        &t.path,
        Options::new().index(IndexKind::BTree).inline_threshold(100),
    )
    .unwrap();
    s.put("b/1", vec![1u8; 50]).unwrap();
    s.close().unwrap();

    // Reopened with no options: the stored ones.
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().index, IndexKind::BTree);
    let keys: Vec<_> = s.list("b/").unwrap().map(|e| e.unwrap().key).collect();
    assert_eq!(keys, vec![&b"b/1"[..]]);
    assert!(s.put("b/2", vec![2u8; 100]).unwrap().inline);
    assert!(!s.put("b/3", vec![3u8; 101]).unwrap().inline);
    s.close().unwrap();

    // An explicit kind at a read-write open is used and stored.
    Store::open(&t.path, Options::new().index(IndexKind::Fst))
        .unwrap()
        .close()
        .unwrap();
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().index, IndexKind::Fst);
    assert!(
        !s.put("b/4", vec![4u8; 101]).unwrap().inline,
        "threshold kept"
    );
    s.close().unwrap();

    // A read-only open may use another kind for itself; nothing is written.
    let image = std::fs::read(&t.path).unwrap();
    let ro = Store::open(
        &t.path,
        Options::new().read_only(true).index(IndexKind::Hash),
    )
    .unwrap();
    assert_eq!(ro.stats().index, IndexKind::Hash);
    ro.close().unwrap();
    assert!(std::fs::read(&t.path).unwrap() == image);
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().index, IndexKind::Fst);
    assert_eq!(s.stats().objects, 4);
}

/// Child half of the full-file-system test: runs with a file-size limit
/// (`RLIMIT_FSIZE`), so extending the store file fails with `EFBIG` as a
/// full file system fails with `ENOSPC`.
#[test]
fn fsize_child() {
    let Ok(path) = std::env::var("BLOBCASK_FSIZE_CHILD") else {
        return;
    };
    let s = Store::open(&path, Options::new().create(false)).unwrap();
    let mut acked = 0u64;
    let err = loop {
        match s.put(format!("k{acked}"), pattern(acked, 300_000)) {
            Ok(_) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 1000, "the file-size limit never stopped growth");
    };
    assert_eq!(err.kind(), ErrorKind::NoSpace, "{err}");
    // The store keeps working at its size: deletes and a put into the
    // freed room succeed, and every acknowledged object is intact.
    s.delete("k0").unwrap();
    s.put("k0", pattern(0, 300_000)).unwrap();
    for i in 0..acked {
        assert_eq!(s.get(format!("k{i}")).unwrap(), pattern(i, 300_000));
    }
    std::fs::write(format!("{path}.acked"), acked.to_string()).unwrap();
    s.close().unwrap();
}

#[test]
#[allow(unsafe_code)]
fn a_full_file_system_stops_growth_with_no_space_and_loses_nothing() {
    use std::os::unix::process::CommandExt;
    let t = temp_path();
    Store::open(&t.path, Options::new().capacity(4 * MIB))
        .unwrap()
        .close()
        .unwrap();
    let limit: libc::rlim_t = 20 << 20;
    // This binary again, running only the child half (its name in
    // `tests/all`, where this suite is the module `growth`).
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "growth::fsize_child", "--nocapture"])
        .env("BLOBCASK_FSIZE_CHILD", &t.path);
    // SAFETY: between fork and exec the closure only makes async-signal-safe
    // system calls (setrlimit, signal).
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let acked: u64 = std::fs::read_to_string(format!("{}.acked", t.path.display()))
        .unwrap()
        .parse()
        .unwrap();
    assert!(acked >= 30, "only {acked} objects before the limit");
    assert!(file_len(&t.path) <= 20 << 20);
    let s = reopen(&t.path, IoEngineKind::Auto);
    assert_eq!(s.stats().objects, acked);
    assert!(s.stats().capacity <= 20 << 20);
    for i in 0..acked {
        assert_eq!(s.get(format!("k{i}")).unwrap(), pattern(i, 300_000));
    }
    // Without the limit it grows again.
    s.put("beyond", pattern(9, 8 << 20)).unwrap();
    assert!(s.stats().capacity > 20 << 20);
}

#[test]
fn a_fixed_size_device_does_not_grow() {
    let dev = Arc::new(blobcask::io::fault::MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev, Options::new()).unwrap();
    let e = s.grow(8 * MIB).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let mut n = 0u64;
    let e = loop {
        match s.put(format!("k{n}"), pattern(n, 200_000)) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert_eq!(s.stats().capacity, 4 << 20);
    let e = s.put("too-big", vec![1u8; 5 << 20]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
}

#[test]
fn a_new_store_never_starts_above_its_max_capacity() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new().max_capacity(8 * MIB)).unwrap();
    assert_eq!(s.stats().capacity, 8 * MIB);
    assert_eq!(file_len(&t.path), 8 * MIB);
    assert_eq!(s.stats().max_capacity, Some(8 * MIB));
    drop(s);
    let t = temp_path();
    let s = Store::open(&t.path, Options::new()).unwrap();
    assert_eq!(s.stats().max_capacity, None, "no limit by default");
    // Both given and contradictory: refused, nothing created.
    let t = temp_path();
    let e = Store::open(
        &t.path,
        Options::new().capacity(32 * MIB).max_capacity(8 * MIB),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(!t.path.exists());
}

#[test]
fn the_same_options_open_a_store_that_grew_by_itself() {
    // An application passing one Options at every start: the store grows
    // past the capacity it was created with, and keeps opening.
    let t = temp_path();
    let opts = || Options::new().capacity(4 * MIB);
    for run in 0..4u64 {
        let s = Store::open(&t.path, opts()).unwrap();
        for i in 0..3u64 {
            s.put(
                format!("r{run}/{i}"),
                pattern(run * 10 + i, 2 * MIB as usize),
            )
            .unwrap();
        }
        s.close().unwrap();
    }
    let s = Store::open(&t.path, opts()).unwrap();
    assert!(s.stats().capacity >= 24 * MIB);
    assert_eq!(s.stats().objects, 12);
    assert_eq!(s.get("r0/0").unwrap(), pattern(0, 2 * MIB as usize));
}

#[test]
fn a_max_capacity_off_the_block_size_is_rounded_and_stops_growth_once() {
    let t = temp_path();
    let s = Store::open(
        &t.path,
        Options::new().capacity(2 * MIB).max_capacity(10_000_000),
    )
    .unwrap();
    assert_eq!(s.stats().max_capacity, Some(10_000_000 & !4095));
    let mut n = 0u64;
    let e = loop {
        match s.put(format!("k{n}"), pattern(n, 1 << 20)) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(e.to_string().contains("max_capacity"), "{e}");
    assert_eq!(s.stats().capacity, 10_000_000 & !4095);
    // A refused put writes nothing (no superblock rewritten for nothing).
    // (`sync` first: home slots not yet rewritten are otherwise rewritten
    // in the background when the store is idle.)
    s.sync().unwrap();
    let written = s.stats().device_bytes_written;
    assert!(s.put("more", pattern(1, 1 << 20)).is_err());
    assert_eq!(s.stats().device_bytes_written, written);
}

#[test]
fn absurd_sizes_are_too_large_at_once() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new()).unwrap();
    for size in [u64::MAX, 1 << 60, 1 << 50] {
        let e = s.begin_upload("k", size).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{size}: {e}");
    }
    assert!(s.list_uploads().is_empty());
    assert_eq!(s.stats().capacity, DEFAULT_CAPACITY, "nothing grew");
}

/// A group that changes more tuple blocks with state than the metadata
/// journal holds, on a device whose heap is full (so the journal cannot
/// move to a larger extent): the commit path splits it into groups the
/// journal holds instead of failing (and poisoning the store). Invariant 1:
/// every group is still written through the journal, so a cut keeps whole
/// groups.
#[test]
fn a_group_larger_than_the_journal_commits_when_the_heap_is_full() {
    let dev = Arc::new(blobcask::io::fault::MemDevice::new(8 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    // 600 inline objects: ~50 tuple blocks with state, more than the 32
    // journal slots an 8 MiB store starts with.
    let small = |i: u64, round: u64| pattern(i * 31 + round, 300);
    for i in 0..600 {
        s.put(format!("s{i:04}"), small(i, 0)).unwrap();
    }
    // Fill the heap until nothing fits.
    let mut n = 0u64;
    while s.put(format!("big{n}"), pattern(n, 100_000)).is_ok() {
        n += 1;
    }
    assert!(n > 20, "only {n} large objects fit");
    let free = s.stats().free_bytes;
    assert!(free < 128 << 10, "{free} bytes still free");
    // One bulk load rewrites every small object: one request over ~50
    // blocks with state.
    let items: Vec<(String, Vec<u8>)> = (0..600)
        .map(|i| (format!("s{i:04}"), small(i, 1)))
        .collect();
    let report = s.bulk_load(items).unwrap();
    assert_eq!(report.objects, 600);
    // So do 600 deletes and puts issued at once (one batch of requests).
    let a = s.as_async().clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dels = (0..300).map(|i| a.delete(format!("s{i:04}")));
        let puts = (300..600).map(|i| a.put(format!("s{i:04}"), small(i, 2)));
        let (d, p) = futures::join!(
            futures::future::join_all(dels),
            futures::future::join_all(puts)
        );
        d.into_iter().for_each(|r| r.unwrap());
        p.into_iter().for_each(|r| {
            r.unwrap();
        });
    });
    let expect = |s: &Store| {
        for i in 0..300 {
            assert_eq!(
                s.get(format!("s{i:04}")).unwrap_err().kind(),
                ErrorKind::NotFound
            );
        }
        for i in 300..600 {
            assert_eq!(s.get(format!("s{i:04}")).unwrap(), small(i, 2), "s{i:04}");
        }
        for i in 0..n {
            assert_eq!(s.get(format!("big{i}")).unwrap(), pattern(i, 100_000));
        }
    };
    expect(&s);
    s.close().unwrap();
    let s = Store::open_with_engine(dev, Options::new().create(false)).unwrap();
    expect(&s);
    assert!(s.scrub().unwrap().damaged.is_empty());
}

/// A store whose metadata outgrows the superblock's list of 200 extents
/// (tiny pieces make that cheap here: every extent is 8 KiB) keeps the
/// rest in an extent table and becomes format 5; it reopens whole on both
/// engines. One damaged copy of the table loses nothing; both damaged is
/// `Corrupt` at open, never a store with a piece of its metadata missing.
#[test]
fn metadata_beyond_the_superblock_list_goes_to_an_extent_table() {
    let sb_u32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let sb_u64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    for engine in ENGINES {
        let t = temp_path();
        let opts = || Options::new().io_engine(engine).max_piece_size(8 << 10);
        let s = Store::open(&t.path, opts()).unwrap();
        let n = 20_000u64;
        s.bulk_load((0..n).map(|i| (format!("k{i:06}"), pattern(i, 100))))
            .unwrap();
        // The commit path on top: overwrites and deletes.
        for i in (0..n).step_by(97) {
            s.put(format!("k{i:06}"), pattern(i + 1, 120)).unwrap();
        }
        s.delete("k000001").unwrap();
        let expect = |s: &Store| {
            assert_eq!(s.stats().objects, n - 1);
            for i in 0..n {
                let k = format!("k{i:06}");
                match i {
                    1 => assert!(!s.contains(&k)),
                    i if i % 97 == 0 => assert_eq!(s.get(&k).unwrap(), pattern(i + 1, 120)),
                    i => assert_eq!(s.get(&k).unwrap(), pattern(i, 100), "{k}"),
                }
            }
        };
        expect(&s);
        s.close().unwrap();
        let head = std::fs::read(&t.path).unwrap();
        // Both superblock copies: format 5's extent table, more than 200
        // extents listed (closed with an index image and its change map:
        // version 7).
        for copy in [0, 4096] {
            assert_eq!(sb_u32(&head, copy + 8), 7, "{engine:?}");
            let count = u16::from_le_bytes(head[copy + 56..copy + 58].try_into().unwrap());
            assert!(count > 200, "{engine:?}: {count} extents");
        }
        let s = reopen(&t.path, engine);
        expect(&s);
        s.close().unwrap();
        // The table: two copies in one piece (superblock offset 1905).
        let (start, order) = (sb_u64(&head, 1905), head[1913]);
        let at = (start * 4096) as usize;
        let half = (4096usize << order) / 2;
        let flip = |offsets: &[usize]| {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&t.path)
                .unwrap();
            for &o in offsets {
                use std::io::{Read, Seek, SeekFrom, Write};
                let mut byte = [0u8];
                f.seek(SeekFrom::Start(o as u64)).unwrap();
                f.read_exact(&mut byte).unwrap();
                f.seek(SeekFrom::Start(o as u64)).unwrap();
                f.write_all(&[byte[0] ^ 0x10]).unwrap();
            }
        };
        // Scrub reads every object back, those listed in the table too.
        let s = reopen(&t.path, engine);
        let scrub = s.scrub().unwrap();
        assert_eq!(
            (scrub.objects, scrub.damaged.len()),
            (n - 1, 0),
            "{engine:?}"
        );
        s.close().unwrap();
        // The second copy damaged: found, reported and rewritten too.
        flip(&[at + half + 40]);
        let s = reopen(&t.path, engine);
        let told = s.stats().recovery.repaired.join("; ");
        assert!(told.contains("extent table copy 1"), "{engine:?}: {told}");
        s.close().unwrap();
        let head = std::fs::read(&t.path).unwrap();
        let start = sb_u64(&head, 1905);
        let at = (start * 4096) as usize;
        flip(&[at + 40]);
        let ro = Store::open(
            &t.path,
            Options::new()
                .io_engine(engine)
                .create(false)
                .read_only(true),
        )
        .unwrap();
        expect(&ro);
        let told = ro.stats().recovery.repaired.join("; ");
        assert!(told.contains("extent table copy 0"), "{engine:?}: {told}");
        let scrub = ro.scrub().unwrap().damaged.join("; ");
        assert!(scrub.contains("extent table copy 0"), "{engine:?}: {scrub}");
        ro.close().unwrap();
        // A read-write open rewrites the table to a new piece.
        let s = reopen(&t.path, engine);
        expect(&s);
        let told = s.stats().recovery.repaired.join("; ");
        assert!(told.contains("rewritten"), "{engine:?}: {told}");
        s.close().unwrap();
        let head = std::fs::read(&t.path).unwrap();
        let moved = sb_u64(&head, 1905);
        assert_ne!(moved, start, "{engine:?}: the table was not rewritten");
        let s = reopen(&t.path, engine);
        assert!(s.stats().recovery.repaired.is_empty(), "{engine:?}");
        s.close().unwrap();
        let at = (moved * 4096) as usize;
        flip(&[at + 40, at + half + 40]);
        let e = Store::open(&t.path, Options::new().io_engine(engine).create(false))
            .expect_err("opened over a damaged extent table");
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains("extent table"), "{e}");
    }
}
