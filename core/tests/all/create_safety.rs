//! Create safety: opening never formats a file that holds anything, a failed
//! create leaves nothing behind, and a read-only open never creates, grows
//! or writes.
//!
//! Every test here guards invariant 7 (core/INVARIANTS.md): "A user's file
//! is never formatted by accident. Opening creates a store only where
//! nothing is, or where the caller asked for a new store explicitly;
//! read-only operations never write."

use crate::common;

use std::path::Path;
use std::sync::Arc;

use blobcask::io::fault::MemDevice;
use blobcask::{ErrorKind, IndexKind, IoEngineKind, Options, Store};
use common::*;

const CAP: u64 = 8 << 20;

fn opts(engine: IoEngineKind) -> Options {
    Options::new().capacity(CAP).io_engine(engine)
}

fn engines() -> [IoEngineKind; 2] {
    [IoEngineKind::IoUring, IoEngineKind::Portable]
}

/// A user's file of about 4.2 MB whose first 8 KiB happen to be zero.
fn user_file(path: &Path) -> Vec<u8> {
    let mut bytes = pattern(7, 4_200_000).to_vec();
    bytes[..8192].fill(0);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// A store with a few objects, closed cleanly.
async fn small_store(path: &Path, engine: IoEngineKind) {
    let s = Store::open(path, opts(engine).index(IndexKind::BTree))
        .await
        .unwrap();
    s.put("a", pattern(1, 100)).await.unwrap();
    s.put("b", pattern(2, 50_000)).await.unwrap();
    s.close().await.unwrap();
}

fn running_as_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe {
        libc::geteuid() == 0
    }
}

// Guards invariant 7 (core/INVARIANTS.md): a non-empty file without a
// superblock is refused by every kind of open, and not one byte changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_file_with_a_zero_head_is_never_formatted() {
    for engine in engines() {
        let t = temp_path();
        let before = user_file(&t.path);
        for (o, could_create) in [
            (opts(engine), true),
            (opts(engine).create(false), false),
            (opts(engine).read_only(true), false),
        ] {
            let err = Store::open(&t.path, o.clone()).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{o:?}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(&t.path.display().to_string()), "{msg}");
            assert!(
                msg.contains("not a blobcask store (no superblock)"),
                "{msg}"
            );
            assert_eq!(msg.contains("refusing to format it"), could_create, "{msg}");
            assert!(
                std::fs::read(&t.path).unwrap() == before,
                "{o:?} changed the file"
            );
        }
        let err = Store::open(&t.path, opts(engine).create_new(true))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("already exists"), "{err}");
        assert!(std::fs::read(&t.path).unwrap() == before);
    }
}

// Guards invariant 7 (core/INVARIANTS.md): an all-zero file, a file smaller
// than a superblock and a text file are files that hold something.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeroed_and_small_files_are_refused_unchanged() {
    let t = temp_path();
    for contents in [
        vec![0u8; 4 << 20],
        vec![0u8; 8192],
        vec![0u8; 1],
        b"hello, not a store\n".to_vec(),
        pattern(3, 5000).to_vec(),
    ] {
        std::fs::write(&t.path, &contents).unwrap();
        let err = Store::open(&t.path, opts(IoEngineKind::Portable))
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::Corrupt,
            "{} bytes: {err}",
            contents.len()
        );
        assert!(err.to_string().contains("refusing to format it"), "{err}");
        assert_eq!(std::fs::read(&t.path).unwrap(), contents);
        let err = Store::open(&t.path, opts(IoEngineKind::Portable).read_only(true))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert_eq!(std::fs::read(&t.path).unwrap(), contents);
    }
}

// Guards invariant 7 (core/INVARIANTS.md): "where nothing is" means a
// missing path or an empty file; a create is refused where one is not
// asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_are_created_only_at_a_missing_path_or_an_empty_file() {
    for engine in engines() {
        // An empty file: refused without create, and left at 0 bytes.
        let t = temp_path();
        std::fs::write(&t.path, b"").unwrap();
        for o in [opts(engine).create(false), opts(engine).read_only(true)] {
            let err = Store::open(&t.path, o.clone()).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{o:?}: {err}");
            assert_eq!(std::fs::metadata(&t.path).unwrap().len(), 0, "{o:?}");
        }
        // With create (the default) it becomes a store.
        let s = Store::open(&t.path, opts(engine)).await.unwrap();
        s.put("k", pattern(4, 9000)).await.unwrap();
        s.close().await.unwrap();
        assert_eq!(std::fs::metadata(&t.path).unwrap().len(), CAP);

        // A missing path: NotFound without create, and still missing.
        let missing = t.dir.path().join("missing.blobcask");
        for o in [opts(engine).create(false), opts(engine).read_only(true)] {
            let err = Store::open(&missing, o.clone()).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{o:?}: {err}");
            assert!(!missing.exists(), "{o:?} created the file");
        }

        // create_new: a missing path and an empty file get a store; a
        // second create_new is refused and changes nothing.
        let empty = t.dir.path().join("empty.blobcask");
        std::fs::write(&empty, b"").unwrap();
        for p in [&missing, &empty] {
            let s = Store::open(p, opts(engine).create_new(true)).await.unwrap();
            s.put("x", pattern(5, 3000)).await.unwrap();
            s.close().await.unwrap();
            let before = std::fs::read(p).unwrap();
            let err = Store::open(p, opts(engine).create_new(true))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(err.to_string().contains("already exists"), "{err}");
            assert!(
                std::fs::read(p).unwrap() == before,
                "create_new changed a store"
            );
            let s = Store::open(p, opts(engine)).await.unwrap();
            assert_eq!(s.get("x").await.unwrap(), pattern(5, 3000));
            s.close().await.unwrap();
        }
        // An existing store opens with create(false).
        let s = Store::open(&t.path, opts(engine).create(false))
            .await
            .unwrap();
        assert_eq!(s.get("k").await.unwrap(), pattern(4, 9000));
        s.close().await.unwrap();
    }
}

// Guards invariant 7 (core/INVARIANTS.md): contradictory options are bad
// input, refused before anything is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_and_create_new_cannot_be_combined() {
    let t = temp_path();
    let err = Store::open(&t.path, Options::new().read_only(true).create_new(true))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!t.path.exists());
}

// Guards invariant 7 (core/INVARIANTS.md): a failed create removes the
// file it made, or truncates the empty file it started from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_leaves_nothing_behind() {
    let t = temp_path();
    for capacity in [1u64 << 60, u64::MAX] {
        let err = Store::open(&t.path, Options::new().capacity(capacity))
            .await
            .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::NoSpace | ErrorKind::Io),
            "{err}"
        );
        assert!(!t.path.exists(), "a failed create left {err}");
        let err = Store::open(&t.path, Options::new().capacity(capacity).create_new(true))
            .await
            .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::NoSpace | ErrorKind::Io),
            "{err}"
        );
        assert!(!t.path.exists(), "a failed create_new left {err}");
    }
    // Below the minimum capacity: refused, nothing left either.
    let err = Store::open(&t.path, Options::new().capacity(1000))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!t.path.exists());
    // An existing empty file is truncated back to 0 bytes, not removed.
    std::fs::write(&t.path, b"").unwrap();
    let err = Store::open(&t.path, Options::new().capacity(1 << 60))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::NoSpace | ErrorKind::Io),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&t.path).unwrap().len(), 0);
    // And the path is still usable for a create that fits.
    let s = Store::open(&t.path, Options::new().capacity(CAP))
        .await
        .unwrap();
    s.close().await.unwrap();
}

// Guards invariant 7 (core/INVARIANTS.md): a read-only store shares its
// lock with other readers, excludes writers, refuses every change and
// writes nothing, not even at close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_opens_share_exclude_writers_and_never_write() {
    for engine in engines() {
        let t = temp_path();
        small_store(&t.path, engine).await;
        let before = std::fs::read(&t.path).unwrap();
        let ro = opts(engine).read_only(true).index(IndexKind::BTree);
        let r1 = Store::open(&t.path, ro.clone()).await.unwrap();
        let r2 = Store::open(&t.path, ro.clone()).await.unwrap();
        assert_eq!(r1.get("a").await.unwrap(), pattern(1, 100));
        assert_eq!(
            r2.read("b", 10, 20).await.unwrap(),
            pattern(2, 50_000)[10..30]
        );
        assert_eq!(r2.stat("b").await.unwrap().size, 50_000);
        let keys: Vec<_> = r1
            .list("")
            .unwrap()
            .map(|e| e.unwrap().key.to_vec())
            .collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(r1.stats().objects, 2);

        let err = Store::open(&t.path, opts(engine)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Locked, "{err}");

        let refused = |r: blobcask::Result<()>| {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
            assert!(e.to_string().contains("the store is open read-only"), "{e}");
        };
        refused(r1.put("c", pattern(3, 10)).await.map(drop));
        refused(r1.put("big", pattern(3, 200_000)).await.map(drop));
        refused(r1.delete("a").await);
        refused(r1.begin_upload("u", 10_000).await.map(drop));
        refused(r1.bulk_load(vec![("x", pattern(4, 10))]).await.map(drop));
        refused(r1.bulk_load(Vec::<(&str, Vec<u8>)>::new()).await.map(drop));
        let blocking = blobcask::blocking::Store::open(&t.path, ro.clone()).unwrap();
        refused(blocking.put("c", pattern(3, 10)).map(drop));
        refused(blocking.delete("b"));
        assert_eq!(blocking.get("a").unwrap(), pattern(1, 100));
        blocking.sync().unwrap();
        blocking.close().unwrap();
        r1.sync().await.unwrap();
        assert!(r1.contains("a") && !r1.contains("c"));
        r1.close().await.unwrap();
        r2.close().await.unwrap();
        assert!(
            std::fs::read(&t.path).unwrap() == before,
            "{engine:?}: a read-only open changed the store"
        );

        // A writer excludes read-only openers, and they work again after.
        let w = Store::open(&t.path, opts(engine)).await.unwrap();
        let err = Store::open(&t.path, ro.clone()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
        w.put("c", pattern(6, 5000)).await.unwrap();
        w.close().await.unwrap();
        let r = Store::open(&t.path, ro).await.unwrap();
        assert_eq!(r.get("c").await.unwrap(), pattern(6, 5000));
        r.close().await.unwrap();
    }
}

/// Access modes of this process's descriptors on `path` (from
/// /proc/self/fdinfo), for checking that a read-only store holds no
/// writable descriptor.
fn access_modes_on(path: &Path) -> Vec<i32> {
    let want = std::fs::canonicalize(path).unwrap();
    let mut out = vec![];
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if std::fs::read_link(e.path()).ok().as_deref() != Some(want.as_path()) {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            e.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        if let Some(flags) = info.lines().find_map(|l| l.strip_prefix("flags:")) {
            let flags = i32::from_str_radix(flags.trim(), 8).unwrap();
            out.push(flags & libc::O_ACCMODE);
        }
    }
    out
}

// Guards invariant 7 (core/INVARIANTS.md): a read-only open needs no write
// permission and holds only read-only descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_works_on_a_file_without_write_permission() {
    use std::os::unix::fs::PermissionsExt;
    for engine in engines() {
        let t = temp_path();
        small_store(&t.path, engine).await;
        std::fs::set_permissions(&t.path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let before = std::fs::read(&t.path).unwrap();
        if running_as_root() {
            eprintln!("running as root: file permissions are not enforced, skipping that part");
        } else {
            let err = Store::open(&t.path, opts(engine)).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Io, "{err}");
        }
        let r = Store::open(&t.path, opts(engine).read_only(true))
            .await
            .unwrap();
        let modes = access_modes_on(&t.path);
        assert!(!modes.is_empty(), "no descriptor found on the store file");
        assert!(
            modes.iter().all(|&m| m == libc::O_RDONLY),
            "{engine:?}: a read-only store holds a writable descriptor: {modes:?}"
        );
        assert_eq!(r.get("b").await.unwrap(), pattern(2, 50_000));
        r.close().await.unwrap();
        assert!(std::fs::read(&t.path).unwrap() == before);
    }
}

// Guards invariant 7 (core/INVARIANTS.md): open_with_engine (no path) keeps
// creating on an all-zero engine, refuses a foreign head, and a read-only
// open of an engine writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_without_a_path_create_only_when_zeroed() {
    let dev = Arc::new(MemDevice::new(CAP as usize));
    let s = Store::open_with_engine(dev.clone(), Options::new())
        .await
        .unwrap();
    s.put("k", pattern(8, 20_000)).await.unwrap();
    s.close().await.unwrap();
    let image = dev.volatile_image();

    let ro = Arc::new(MemDevice::from_image(image.clone()));
    let writes = ro.writes();
    let s = Store::open_with_engine(ro.clone(), Options::new().read_only(true))
        .await
        .unwrap();
    assert_eq!(s.get("k").await.unwrap(), pattern(8, 20_000));
    let e = s.put("j", pattern(1, 1)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    s.close().await.unwrap();
    assert_eq!(ro.writes(), writes, "a read-only open wrote");
    assert!(ro.volatile_image() == image);

    // create_new never formats over a store.
    let again = Arc::new(MemDevice::from_image(image.clone()));
    let err = Store::open_with_engine(again.clone(), Options::new().create_new(true))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(again.volatile_image() == image);

    // A blank engine without create, or read-only, is NotFound.
    for o in [Options::new().create(false), Options::new().read_only(true)] {
        let blank = Arc::new(MemDevice::new(CAP as usize));
        let err = Store::open_with_engine(blank.clone(), o).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        assert_eq!(blank.writes(), 0);
    }
    // A foreign head is not formatted.
    let mut foreign = vec![0u8; CAP as usize];
    foreign[100] = 1;
    let dev = Arc::new(MemDevice::from_image(foreign.clone()));
    let err = Store::open_with_engine(dev.clone(), Options::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(dev.volatile_image() == foreign);
}

/// Opens `path` with `options` on a thread of its own, blocking: the
/// result, or `None` when the open had not returned after 20 s (a hang).
fn open_or_hang(path: &Path, options: Options) -> Option<blobcask::Result<()>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let r = blobcask::blocking::Store::open(&path, options).map(|s| drop(s.close()));
        let _ = tx.send(r);
    });
    rx.recv_timeout(std::time::Duration::from_secs(20)).ok()
}

// Guards invariant 3 (bad input is refused): a store is a regular file or
// a block device. A FIFO blocked a read-only open forever (nobody writes
// to it) and failed a read-write one with "Illegal seek"; a socket, a
// character device or a directory are refused alike, each by its kind,
// and left as they were.
#[test]
fn a_fifo_socket_device_or_directory_is_refused_by_its_kind_without_blocking() {
    let t = temp_path();
    let fifo = t.dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    #[allow(unsafe_code)]
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let made = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo: {}", std::io::Error::last_os_error());
    let socket = t.dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let dir = t.dir.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let cases = [
        (fifo.as_path(), "FIFO"),
        (socket.as_path(), "socket"),
        (Path::new("/dev/null"), "character device"),
        (dir.as_path(), "directory"),
    ];
    for (path, kind) in cases {
        for engine in engines() {
            for o in [
                opts(engine).read_only(true),
                opts(engine).read_only(true).salvage(true),
                opts(engine),
                opts(engine).create(false),
                opts(engine).create_new(true),
            ] {
                let Some(r) = open_or_hang(path, o.clone()) else {
                    panic!("{kind}, {o:?}: the open hangs");
                };
                let err = r.expect_err(kind);
                assert_eq!(
                    err.kind(),
                    ErrorKind::InvalidArgument,
                    "{kind}, {o:?}: {err}"
                );
                assert!(err.to_string().contains(kind), "{kind}, {o:?}: {err}");
            }
        }
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata(&socket).unwrap().file_type().is_socket());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

// A symbolic link to nothing is NotFound naming its target, for every kind
// of open (it was "the path kept changing while it was opened"), and no
// open creates the target through it.
#[test]
fn a_dangling_symlink_is_not_found_naming_its_target() {
    let t = temp_path();
    let target = t.dir.path().join("nowhere").join("store.blobcask");
    std::os::unix::fs::symlink(&target, &t.path).unwrap();
    for engine in engines() {
        for o in [
            opts(engine).read_only(true),
            opts(engine),
            opts(engine).create(false),
            opts(engine).create_new(true),
        ] {
            let err = open_or_hang(&t.path, o.clone())
                .expect("the open hangs")
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{o:?}: {err}");
            let shown = err.to_string();
            assert!(shown.contains("dangling symbolic link"), "{o:?}: {err}");
            assert!(
                shown.contains(&target.display().to_string()),
                "{o:?}: {err}"
            );
        }
    }
    assert!(!target.exists() && !target.parent().unwrap().exists());
}

// Guards invariant 3: a NUL byte cannot be in a file name; the path is
// bad input (it was an I/O error), and nothing is created.
#[test]
fn a_nul_in_the_path_is_an_invalid_argument() {
    let t = temp_path();
    let bad = t.dir.path().join("store\0.blobcask");
    for o in [Options::new(), Options::new().read_only(true)] {
        let err = open_or_hang(&bad, o.clone()).unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{o:?}: {err}");
        assert!(err.to_string().contains("NUL"), "{o:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(t.dir.path()).unwrap().count(), 0);
}

// A store that never committed anything and was closed cleanly reports a
// clean close at reopen (its clean sequence of 0 is also its newest): it
// said "not closed cleanly".
#[test]
fn a_store_never_written_to_reopens_clean() {
    let t = temp_path();
    for engine in engines() {
        std::fs::remove_file(&t.path).ok();
        blobcask::blocking::Store::open(&t.path, opts(engine))
            .unwrap()
            .close()
            .unwrap();
        for o in [opts(engine).read_only(true), opts(engine)] {
            let s = blobcask::blocking::Store::open(&t.path, o.clone()).unwrap();
            let r = s.stats().recovery;
            assert!(r.clean && r.is_empty(), "{o:?}: {r:?}");
            s.close().unwrap();
        }
    }
}
