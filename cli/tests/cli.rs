//! The command-line tool end to end.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run(store: &std::path::Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_blobcask"));
    cmd.arg("-s").arg(store).args(args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        // A command that fails before reading its input (a missing store)
        // may exit first: the pipe is then closed, which is not an error
        // of the test.
        if let Err(e) = child.stdin.take().unwrap().write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_command_works_and_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("cli.blobcask");
    ok(&run(&store, &["create", "--capacity", "64M"], None));
    let file = dir.path().join("photo.bin");
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    assert!(ok(&run(
        &store,
        &["put", "photos/a.bin", file.to_str().unwrap()],
        None
    ))
    .contains("20000 bytes"));
    ok(&run(
        &store,
        &["put", "notes/b.txt", "-"],
        Some(b"hello from stdin"),
    ));
    let got = run(&store, &["get", "photos/a.bin"], None);
    assert_eq!(got.stdout, data);
    let part = run(&store, &["get", "photos/a.bin", "--range", "100-199"], None);
    assert_eq!(part.stdout, data[100..200]);
    let out = dir.path().join("out.txt");
    ok(&run(
        &store,
        &["get", "notes/b.txt", "-o", out.to_str().unwrap()],
        None,
    ));
    assert_eq!(std::fs::read(&out).unwrap(), b"hello from stdin");
    assert!(ok(&run(&store, &["stat", "notes/b.txt"], None)).contains("inline"));
    let ls = ok(&run(&store, &["ls"], None));
    assert_eq!(
        ls.lines().collect::<Vec<_>>(),
        ["notes/b.txt", "photos/a.bin"]
    );
    assert_eq!(
        ok(&run(&store, &["ls", "photos/", "-l"], None))
            .lines()
            .count(),
        1
    );

    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    for i in 0..50 {
        std::fs::write(
            tree.join("sub").join(format!("f{i}")),
            vec![i as u8; i * 100],
        )
        .unwrap();
    }
    assert!(
        ok(&run(&store, &["import", tree.to_str().unwrap()], None)).contains("imported 50 objects")
    );
    assert_eq!(run(&store, &["get", "sub/f7"], None).stdout, vec![7u8; 700]);
    ok(&run(&store, &["rm", "notes/b.txt"], None));
    let stats = ok(&run(&store, &["stats"], None));
    assert!(stats.contains("objects              51"), "{stats}");
    assert!(stats.contains("fragmentation"));
    let check = ok(&run(&store, &["check"], None));
    assert!(check.contains("no problems found"), "{check}");

    // Errors: one line on stderr, non-zero exit.
    for args in [
        &["get", "missing"][..],
        &["rm", "missing"],
        &["get", "photos/a.bin", "--range", "9-1"],
    ] {
        let o = run(&store, args, None);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("blobcask: "), "{err}");
    }
    let missing = dir.path().join("nope.blobcask");
    let o = run(&missing, &["stats"], None);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("NOT_FOUND"));
}

fn fails_with(o: &Output, needle: &str) {
    assert!(!o.status.success(), "succeeded: {:?}", o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
}

// Guards invariant 7 (core/INVARIANTS.md): no command but `create` makes a
// store, read-only commands never create, grow or write a file, and
// `create` never overwrites one.
#[test]
fn only_create_makes_a_store_and_never_over_a_file() {
    let dir = tempfile::tempdir().unwrap();
    // A missing path: every command but create says how to make a store,
    // and leaves nothing behind.
    let missing = dir.path().join("missing.blobcask");
    // Every command that needs a store.
    let commands: [&[&str]; 9] = [
        &["grow", "64M"],
        &["compact"],
        &["ls"],
        &["get", "k"],
        &["stat", "k"],
        &["stats"],
        &["check"],
        &["rm", "k"],
        &["put", "k", "-"],
    ];
    for args in commands {
        let o = run(&missing, args, Some(b"x"));
        fails_with(&o, "create one with `blobcask -s");
        assert!(!missing.exists(), "{args:?} created the file");
    }
    // In a directory that does not exist, `create` would fail too: the
    // error says what is missing instead of suggesting it.
    let nowhere = dir.path().join("no-such-dir").join("s.blobcask");
    for args in [&["ls"][..], &["stats"], &["get", "k"]] {
        fails_with(&run(&nowhere, args, None), "no-such-dir does not exist");
    }
    // An empty file stays 0 bytes.
    let empty = dir.path().join("empty.blobcask");
    std::fs::write(&empty, b"").unwrap();
    for args in commands {
        let o = run(&empty, args, Some(b"x"));
        fails_with(&o, "create one with `blobcask -s");
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0, "{args:?}");
    }
    // A user's file (first 8 KiB zero): refused by everything, unchanged.
    let user = dir.path().join("user.bin");
    let mut bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 253) as u8).collect();
    bytes[..8192].fill(0);
    std::fs::write(&user, &bytes).unwrap();
    for args in [
        &["create", "--capacity", "8M"][..],
        &["ls"],
        &["get", "k"],
        &["stats"],
        &["put", "k", "-"],
        &["rm", "k"],
    ] {
        let o = run(&user, args, Some(b"x"));
        assert!(!o.status.success(), "{args:?}");
        assert_eq!(
            std::fs::read(&user).unwrap(),
            bytes,
            "{args:?} changed the file"
        );
    }
    fails_with(
        &run(&user, &["create", "--capacity", "8M"], None),
        "already exists",
    );
    fails_with(&run(&user, &["ls"], None), "not a blobcask store");

    // create on the empty file works; a second create is refused and the
    // store is unchanged.
    ok(&run(&empty, &["create", "--capacity", "8M"], None));
    ok(&run(&empty, &["put", "k", "-"], Some(b"hello")));
    let store = std::fs::read(&empty).unwrap();
    fails_with(
        &run(&empty, &["create", "--capacity", "8M"], None),
        "already exists",
    );
    assert!(std::fs::read(&empty).unwrap() == store);
    // Read-only commands leave the store's bytes as they were.
    assert_eq!(ok(&run(&empty, &["ls"], None)).trim(), "k");
    ok(&run(&empty, &["stat", "k"], None));
    ok(&run(&empty, &["stats"], None));
    ok(&run(&empty, &["check"], None));
    assert_eq!(run(&empty, &["get", "k"], None).stdout, b"hello");
    assert!(
        std::fs::read(&empty).unwrap() == store,
        "a read-only command changed the store"
    );
}

// Guards invariant 7 (core/INVARIANTS.md): read-only commands share the
// store (two at once are fine) and still exclude a writer.
#[test]
fn read_only_commands_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared.blobcask");
    ok(&run(&store, &["create", "--capacity", "8M"], None));
    ok(&run(&store, &["put", "a", "-"], Some(b"1")));
    ok(&run(&store, &["put", "b", "-"], Some(b"2")));
    // Deterministic overlap: a read-only handle held here while the
    // commands run. Readers share it; a writer is refused.
    let held =
        blobcask::blocking::Store::open(&store, blobcask::Options::new().read_only(true)).unwrap();
    assert_eq!(ok(&run(&store, &["ls"], None)).lines().count(), 2);
    assert_eq!(run(&store, &["get", "b"], None).stdout, b"2");
    ok(&run(&store, &["stats"], None));
    fails_with(&run(&store, &["put", "c", "-"], Some(b"3")), "LOCKED");
    held.close().unwrap();
    // And two `ls` started together.
    for _ in 0..3 {
        let spawn = || {
            std::process::Command::new(env!("CARGO_BIN_EXE_blobcask"))
                .arg("-s")
                .arg(&store)
                .arg("ls")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (x, y) = (spawn(), spawn());
        for o in [x.wait_with_output().unwrap(), y.wait_with_output().unwrap()] {
            assert_eq!(ok(&o).lines().collect::<Vec<_>>(), ["a", "b"]);
        }
    }
    ok(&run(&store, &["put", "c", "-"], Some(b"3")));
}

/// The number on the `capacity` line of `stats`.
fn stats_capacity(store: &std::path::Path) -> u64 {
    let stats = ok(&run(store, &["stats"], None));
    let line = stats
        .lines()
        .find(|l| l.starts_with("capacity "))
        .unwrap_or_else(|| panic!("no capacity line in {stats}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn grow_grows_the_store_and_never_shrinks_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("grow.blobcask");
    // No --capacity: the engine's starting size, 16 MiB.
    assert!(ok(&run(&store, &["create"], None)).contains("16.0 MiB"));
    assert_eq!(stats_capacity(&store), 16 << 20);
    ok(&run(&store, &["put", "k", "-"], Some(b"kept")));
    let out = ok(&run(&store, &["grow", "64M"], None));
    assert!(out.contains("grew") && out.contains("64.0 MiB"), "{out}");
    assert_eq!(stats_capacity(&store), 64 << 20);
    assert_eq!(std::fs::metadata(&store).unwrap().len(), 64 << 20);
    assert!(ok(&run(&store, &["stats"], None)).contains("of 64.0 MiB"));
    // Its own size: nothing to do, and said so.
    assert!(ok(&run(&store, &["grow", "64M"], None)).contains("already"));
    // Shrinking: non-zero exit, one line that says why, nothing changed.
    let o = run(&store, &["grow", "32M"], None);
    fails_with(&o, "never shrinks");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already 67108864 (64.0 MiB)"),
        "{o:?}"
    );
    assert_eq!(stats_capacity(&store), 64 << 20);
    assert_eq!(std::fs::metadata(&store).unwrap().len(), 64 << 20);
    fails_with(&run(&store, &["grow", "lots"], None), "bad size");
    assert_eq!(run(&store, &["get", "k"], None).stdout, b"kept");
}

#[test]
fn max_capacity_is_stored_and_limits_growth() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("limited.blobcask");
    let out = ok(&run(
        &store,
        &["create", "--max-capacity", "32M", "--index", "btree"],
        None,
    ));
    assert!(out.contains("index btree"), "{out}");
    // The stored index kind is the one every later open uses.
    assert!(ok(&run(&store, &["stats"], None)).contains("index                btree"));
    // Puts grow the store up to the stored limit, then fail with NO_SPACE.
    let mib = vec![7u8; 1 << 20];
    let mut stored = 0;
    let failed = loop {
        let o = run(&store, &["put", &format!("f/{stored}"), "-"], Some(&mib));
        if !o.status.success() {
            break o;
        }
        stored += 1;
        assert!(stored < 64, "no NO_SPACE after 64 MiB");
    };
    fails_with(&failed, "NO_SPACE");
    assert!(
        stored > 16,
        "only {stored} MiB stored: the store did not grow"
    );
    assert!(stats_capacity(&store) <= 32 << 20);
    // put did not replace the stored index kind.
    assert!(ok(&run(&store, &["stats"], None)).contains("index                btree"));
    // grow beyond the stored limit fails; with a new limit it works, and
    // the new limit is stored.
    fails_with(&run(&store, &["grow", "64M"], None), "max_capacity");
    let out = ok(&run(
        &store,
        &["grow", "48M", "--max-capacity", "64M"],
        None,
    ));
    assert!(
        out.contains("48.0 MiB") && out.contains("max capacity"),
        "{out}"
    );
    assert_eq!(stats_capacity(&store), 48 << 20);
    fails_with(&run(&store, &["grow", "80M"], None), "max_capacity");
    fails_with(
        &run(&store, &["grow", "80M", "--max-capacity", "72M"], None),
        "above --max-capacity",
    );
    fails_with(&run(&store, &["grow", "80M"], None), "max_capacity"); // 64M kept
    ok(&run(
        &store,
        &["grow", "80M", "--max-capacity", "none"],
        None,
    ));
    ok(&run(&store, &["grow", "96M"], None));
    assert_eq!(stats_capacity(&store), 96 << 20);
    fails_with(
        &run(&store, &["grow", "100M", "--max-capacity", "huge"], None),
        "bad size",
    );
    // Bad creation options are refused and create nothing.
    let other = dir.path().join("other.blobcask");
    fails_with(
        &run(&other, &["create", "--index", "tree"], None),
        "unknown index",
    );
    fails_with(
        &run(
            &other,
            &["create", "--capacity", "64M", "--max-capacity", "32M"],
            None,
        ),
        "max_capacity",
    );
    assert!(!other.exists());
}

#[test]
fn check_reports_damage_without_changing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("damaged.blobcask");
    ok(&run(&store, &["create", "--capacity", "8M"], None));
    ok(&run(&store, &["put", "k", "-"], Some(&vec![5u8; 9000])));
    // Damage the object's data: its checksum no longer matches.
    let mut bytes = std::fs::read(&store).unwrap();
    let report = ok(&run(&store, &["check", "--data"], None));
    assert!(report.contains("read back 1 objects"), "{report}");
    let at = bytes
        .windows(64)
        .position(|w| w.iter().all(|&b| b == 5))
        .unwrap();
    bytes[at] ^= 0xff;
    std::fs::write(&store, &bytes).unwrap();
    // Metadata alone is intact; the scrub finds the damaged block.
    ok(&run(&store, &["check"], None));
    let o = run(&store, &["check", "--data"], None);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\"k\": data block at object offset"), "{out}");
    assert!(
        std::fs::read(&store).unwrap() == bytes,
        "check changed the file"
    );
    // A read is refused with CORRUPT, never the wrong bytes.
    let o = run(&store, &["get", "k"], None);
    assert!(!o.status.success());
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("CORRUPT"));
}

#[test]
fn bench_runs_the_comparison_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.blobcask");
    let out = ok(&run(
        &store,
        &[
            "bench",
            "--sizes",
            "16K",
            "--budget",
            "512K",
            "--concurrency",
            "4",
        ],
        None,
    ));
    for engine in ["raw device", "blobcask (io_uring)", "file per object"] {
        assert!(out.contains(engine), "{engine} missing from:\n{out}");
    }
    // 16 KiB + 1/8 is the size the phases ran at; every phase is reported.
    for phase in [
        "| 18432 | put |",
        "| 18432 | read 4K |",
        "| 18432 | mixed read |",
    ] {
        assert!(out.contains(phase), "{phase} missing from:\n{out}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "scratch files left behind: {left:?}");

    let bad = run(&store, &["bench", "--sizes", "0"], None);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `backup` killed (SIGKILL) at points spread over its run: the source
/// keeps every object, and the destination either does not exist or is a
/// complete copy; a later backup completes. (Crash test of the backup.)
#[test]
fn a_backup_killed_anywhere_leaves_the_source_whole_and_no_partial_copy() {
    use blobcask::blocking::Store;
    use blobcask::Options;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.bcask");
    let value =
        |i: usize, n: usize| -> Vec<u8> { (0..n).map(|b| (b * 31 + i * 7) as u8).collect() };
    let objects: Vec<(String, usize)> = (0..3000)
        .map(|i| (format!("small/{i:05}"), 5000 + i % 40_000))
        .chain((0..3).map(|i| (format!("large/{i}"), (18 << 20) + i)))
        .collect();
    {
        let s = Store::open(&store, Options::new().capacity(512 << 20)).unwrap();
        s.bulk_load(
            objects
                .iter()
                .enumerate()
                .map(|(i, (k, n))| (k.clone(), value(i, *n))),
        )
        .unwrap();
        s.close().unwrap();
    }
    let check_copy = |path: &std::path::Path| {
        let c = Store::open(path, Options::new().read_only(true)).unwrap();
        assert_eq!(c.stats().objects, objects.len() as u64);
        for (i, (k, n)) in objects.iter().enumerate() {
            assert_eq!(&c.get(k).unwrap()[..], &value(i, *n)[..], "{k}");
        }
        c.close().unwrap();
    };
    let leftovers = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .contains(".partial-")
            })
            .collect()
    };
    // How long a whole backup takes here.
    let start = std::time::Instant::now();
    let whole = dir.path().join("whole.bcask");
    ok(&run(&store, &["backup", whole.to_str().unwrap()], None));
    let took = start.elapsed();
    check_copy(&whole);
    std::fs::remove_file(&whole).unwrap();

    let mut published = 0;
    for round in 0..8u32 {
        let dest = dir.path().join(format!("copy-{round}.bcask"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_blobcask"))
            .arg("-s")
            .arg(&store)
            .args(["backup", dest.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(took.mul_f64(0.1 + 0.12 * round as f64));
        let _ = child.kill();
        child.wait().unwrap();
        if dest.exists() {
            // Only a finished, verified copy is ever under the name.
            check_copy(&dest);
            published += 1;
            std::fs::remove_file(&dest).unwrap();
        }
        // A cut can leave the temporary copy, which is named as such.
        for p in leftovers() {
            std::fs::remove_file(p).unwrap();
        }
        // The source is untouched: clean, whole.
        let s = Store::open(&store, Options::new().read_only(true)).unwrap();
        assert!(s.stats().recovery.clean, "round {round}");
        assert_eq!(s.stats().objects, objects.len() as u64);
        s.close().unwrap();
    }
    assert!(
        published < 8,
        "every backup finished before its kill: no cut tested"
    );
    let last = dir.path().join("last.bcask");
    ok(&run(&store, &["backup", last.to_str().unwrap()], None));
    check_copy(&last);
    assert!(leftovers().is_empty());
    // Never over a file: refused in one line, the copy untouched.
    let before = std::fs::read(&last).unwrap();
    fails_with(
        &run(&store, &["backup", last.to_str().unwrap()], None),
        "destination exists",
    );
    assert!(std::fs::read(&last).unwrap() == before);
}

/// The `expires` line of `stat`, if any.
fn stat_expires(store: &std::path::Path, key: &str) -> Option<String> {
    ok(&run(store, &["stat", key], None))
        .lines()
        .find(|l| l.starts_with("expires "))
        .map(str::to_string)
}

#[test]
fn put_with_a_ttl_expires_and_stat_shows_when() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ttl.blobcask");
    ok(&run(&store, &["create", "--capacity", "8M"], None));
    // A plain number is seconds; units up to days.
    assert!(ok(&run(
        &store,
        &["put", "hour", "-", "--ttl", "3600"],
        Some(b"h")
    ))
    .contains("expires in 59m5"));
    ok(&run(
        &store,
        &["put", "week", "-", "--ttl", "7d"],
        Some(b"w"),
    ));
    ok(&run(&store, &["put", "plain", "-"], Some(b"p")));
    // A put without a ttl makes an object permanent again.
    ok(&run(
        &store,
        &["put", "kept", "-", "--ttl", "1h"],
        Some(b"k1"),
    ));
    assert!(!ok(&run(&store, &["put", "kept", "-"], Some(b"k2"))).contains("expires"));

    // Short ttls (long enough for the checks below on a loaded machine),
    // inline and heap.
    let put_at = std::time::Instant::now();
    let out = ok(&run(
        &store,
        &["put", "short", "-", "--ttl", "3s"],
        Some(b"temporary"),
    ));
    assert!(
        out.contains("9 bytes") && out.contains("expires in "),
        "{out}"
    );
    let file = dir.path().join("big.bin");
    std::fs::write(&file, vec![3u8; 50_000]).unwrap();
    ok(&run(
        &store,
        &["put", "big", file.to_str().unwrap(), "--ttl", "2500ms"],
        None,
    ));
    // Seconds left, as `time_left` prints them under a minute.
    let secs = |left: &str| -> f64 {
        let n: f64 = left.strip_suffix('s').unwrap().parse().unwrap();
        assert!(n > 0.0 && n <= 3.0, "{left}");
        n
    };
    let line = stat_expires(&store, "short").expect("no expires line");
    secs(
        line.split("(unix), in ")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}")),
    );
    let line = stat_expires(&store, "hour").unwrap();
    assert!(
        line.contains("in 59m5") || line.contains("in 1h00m"),
        "{line}"
    );
    assert!(stat_expires(&store, "week").unwrap().contains("in 6d23h"));
    assert_eq!(stat_expires(&store, "plain"), None);
    assert_eq!(stat_expires(&store, "kept"), None);
    assert_eq!(run(&store, &["get", "short"], None).stdout, b"temporary");
    assert_eq!(run(&store, &["get", "big"], None).stdout, vec![3u8; 50_000]);
    // ls -l: time left, or - for none, before the key.
    let ls = ok(&run(&store, &["ls", "-l"], None));
    let long: Vec<Vec<&str>> = ls.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(long.len(), 6, "{ls}");
    for row in &long {
        let left = row[2];
        match row[3] {
            "plain" | "kept" => assert_eq!(left, "-", "{ls}"),
            "hour" => assert!(left.starts_with("59m") || left == "1h00m", "{ls}"),
            "week" => assert_eq!(left, "6d23h", "{ls}"),
            _ => _ = secs(left),
        }
    }

    let expired = put_at + std::time::Duration::from_millis(3200);
    std::thread::sleep(expired.saturating_duration_since(std::time::Instant::now()));
    for key in ["short", "big"] {
        fails_with(&run(&store, &["get", key], None), "NOT_FOUND");
        fails_with(&run(&store, &["stat", key], None), "NOT_FOUND");
    }
    assert_eq!(
        ok(&run(&store, &["ls"], None)).lines().collect::<Vec<_>>(),
        ["hour", "kept", "plain", "week"]
    );
    assert_eq!(ok(&run(&store, &["ls", "-l"], None)).lines().count(), 4);
    assert_eq!(run(&store, &["get", "kept"], None).stdout, b"k2");
    let check = ok(&run(&store, &["check", "--data"], None));
    assert!(check.contains("no problems found"), "{check}");

    // Bad ttls: one line that says why, nothing stored, nothing replaced.
    for bad in [
        "0",
        "0s",
        "5x",
        "1.5s",
        "-1s",
        "5M",
        "36501d",
        "99999999999999999999d",
        "",
    ] {
        let o = run(&store, &["put", "bad", "-", "--ttl", bad], Some(b"x"));
        fails_with(&o, "bad ttl");
        let o = run(&store, &["put", "kept", "-", "--ttl", bad], Some(b"x"));
        fails_with(&o, "bad ttl");
    }
    fails_with(&run(&store, &["get", "bad"], None), "NOT_FOUND");
    assert_eq!(run(&store, &["get", "kept"], None).stdout, b"k2");
    assert_eq!(stat_expires(&store, "kept"), None);
    // The largest ttl is taken.
    ok(&run(
        &store,
        &["put", "max", "-", "--ttl", "36500d"],
        Some(b"m"),
    ));
    assert!(stat_expires(&store, "max").unwrap().contains("in 3649"));
}

#[test]
fn compact_moves_objects_and_reports_what_it_did() {
    use blobcask::blocking::Store;
    use blobcask::{ErrorKind, Options};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("compact.blobcask");
    ok(&run(
        &store,
        &["create", "--capacity", "8M", "--max-capacity", "8M"],
        None,
    ));
    let value = |i: usize| -> Vec<u8> { (0..4096).map(|b| (b * 7 + i * 31) as u8).collect() };
    // Filled with 4 KiB values, then every other one deleted: the free
    // space is all in one-block holes.
    let mut stored = 0;
    {
        let s = Store::open(&store, Options::new().create(false)).unwrap();
        while stored < 4000 {
            match s.put(format!("v/{stored:05}"), value(stored)) {
                Ok(_) => stored += 1,
                Err(e) if e.kind() == ErrorKind::NoSpace => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(stored > 100, "only {stored} stored");
        for i in (1..stored).step_by(2) {
            s.delete(format!("v/{i:05}")).unwrap();
        }
        s.close().unwrap();
    }
    let out = ok(&run(&store, &["compact"], None));
    let moved: u64 = out
        .strip_prefix("moved ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {out}"));
    assert!(moved > 0 && moved <= stored as u64 / 2 + 1, "{out}");
    assert!(out.contains("largest free piece 4.0 KiB -> "), "{out}");
    assert!(!out.contains("-> 4.0 KiB"), "{out}");
    let stats = ok(&run(&store, &["stats"], None));
    assert!(!stats.contains("largest free piece   4.0 KiB"), "{stats}");
    for i in (0..stored).step_by(97) {
        let key = format!("v/{i:05}");
        let got = run(&store, &["get", &key], None);
        if i % 2 == 0 {
            assert!(got.status.success(), "{got:?}");
            assert_eq!(got.stdout, value(i), "{key}");
        } else {
            fails_with(&got, "NOT_FOUND");
        }
    }
    let check = ok(&run(&store, &["check", "--data"], None));
    assert!(check.contains("no problems found"), "{check}");
    // Nothing left to move: a second run moves nothing.
    assert!(ok(&run(&store, &["compact"], None)).starts_with("moved 0 objects"));
    // A writer's command: refused while a reader holds the store.
    let held = Store::open(&store, Options::new().read_only(true)).unwrap();
    fails_with(&run(&store, &["compact"], None), "LOCKED");
    held.close().unwrap();
}

fn run_args(store: &std::path::Path, args: &[&std::ffi::OsStr], stdin: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blobcask"))
        .arg("-s")
        .arg(store)
        .args(args)
        .stdin(stdin)
        .output()
        .unwrap()
}

/// Runs the tool with `stdin`, returning its output and the largest
/// resident set size seen while it ran (kB; polled from /proc, so a lower
/// bound of the true peak, which a short spike could escape).
fn run_measured(store: &std::path::Path, args: &[&str], stdin: Stdio) -> (Output, u64) {
    run_fed(store, args, stdin, None)
}

/// [`run_measured`], with `input` written to the tool's stdin (a pipe)
/// from another thread while it runs.
fn run_fed(
    store: &std::path::Path,
    args: &[&str],
    stdin: Stdio,
    input: Option<std::sync::Arc<Vec<u8>>>,
) -> (Output, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_blobcask"))
        .arg("-s")
        .arg(store)
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = input.map(|bytes| {
        let mut pipe = child.stdin.take().expect("stdin is a pipe");
        std::thread::spawn(move || pipe.write_all(&bytes))
    });
    let status = format!("/proc/{}/status", child.id());
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                });
                if let Some(kb) = hwm {
                    peak.fetch_max(kb, std::sync::atomic::Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Release);
    poller.join().unwrap();
    if let Some(feeder) = feeder {
        feeder.join().unwrap().unwrap();
    }
    (out, peak.load(std::sync::atomic::Ordering::Relaxed))
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13 ^ seed) as u8)
        .collect()
}

/// `put` of a file larger than its 8 MiB chunk goes through a multipart
/// upload: the bytes read back whole and by range, from a path or from
/// stdin redirected from the file, with a ttl too, and the process never
/// holds the file in memory.
#[test]
fn put_streams_a_large_file_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("big.blobcask");
    ok(&run(
        &store,
        &["create", "--capacity", "48M", "--max-capacity", "48M"],
        None,
    ));
    // 40 MiB and a bit: five chunks and a short last part.
    let size = (40 << 20) + 4097;
    let data = pattern(size, 7);
    let file = dir.path().join("large.bin");
    std::fs::write(&file, &data).unwrap();
    let (o, peak_kb) = run_measured(
        &store,
        &["put", "large", file.to_str().unwrap()],
        Stdio::null(),
    );
    assert!(ok(&o).contains(&format!("large: {size} bytes")), "{o:?}");
    // The whole file would be 40 MiB; one chunk in flight is far less.
    assert!(peak_kb > 0, "no memory figure read");
    assert!(
        peak_kb < 36 << 10,
        "peak RSS {peak_kb} kB for a 40 MiB file"
    );
    let got = run(&store, &["get", "large"], None);
    assert!(got.status.success());
    assert!(got.stdout == data, "bytes differ");
    let tail = run(&store, &["get", "large", "--range", "-5000"], None);
    assert_eq!(tail.stdout, data[size - 5000..]);
    let from = run(&store, &["get", "large", "--range", "41943000-"], None);
    assert_eq!(from.stdout, data[41_943_000..]);
    let mid = run(
        &store,
        &["get", "large", "--range", "8388600-8388700"],
        None,
    );
    assert_eq!(mid.stdout, data[8_388_600..=8_388_700]);

    // Stdin redirected from the file streams as well; a ttl is kept.
    ok(&run(&store, &["rm", "large"], None));
    let (o, peak_kb) = run_measured(
        &store,
        &["put", "again", "-", "--ttl", "1h"],
        Stdio::from(std::fs::File::open(&file).unwrap()),
    );
    assert!(ok(&o).contains("expires in "), "{o:?}");
    assert!(peak_kb < 36 << 10, "peak RSS {peak_kb} kB from stdin");
    assert!(stat_expires(&store, "again").is_some());
    assert!(run(&store, &["get", "again"], None).stdout == data);
    std::fs::remove_file(&file).unwrap();

    // A store without room for it: NO_SPACE, and the upload left nothing.
    let more = dir.path().join("more.bin");
    std::fs::write(&more, pattern(20 << 20, 9)).unwrap();
    fails_with(
        &run(&store, &["put", "more", more.to_str().unwrap()], None),
        "NO_SPACE",
    );
    fails_with(&run(&store, &["stat", "more"], None), "NOT_FOUND");
    ok(&run(&store, &["rm", "again"], None));
    ok(&run(&store, &["put", "more", more.to_str().unwrap()], None));
    assert!(run(&store, &["get", "more"], None).stdout == pattern(20 << 20, 9));
    let check = ok(&run(&store, &["check", "--data"], None));
    assert!(check.contains("no problems found"), "{check}");

    // Bad sources: one line each, nothing stored.
    fails_with(
        &run(&store, &["put", "k", dir.path().to_str().unwrap()], None),
        "reading",
    );
    fails_with(
        &run(&store, &["put", "k", "/nonexistent/file"], None),
        "reading /nonexistent/file",
    );
    fails_with(&run(&store, &["stat", "k"], None), "NOT_FOUND");
}

/// An object larger than any buffer moves through pipes both ways in
/// bounded memory: `put KEY -` fed by a pipe (its size unknown until the
/// end), `get` to a pipe and `get -o`.
#[test]
fn pipes_move_a_large_object_both_ways_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("piped.blobcask");
    ok(&run(&store, &["create", "--capacity", "160M"], None));
    // 96 MiB and a bit: twelve chunks and a short last part.
    let size = (96 << 20) + 4097;
    let data = std::sync::Arc::new(pattern(size, 11));
    // Far less than the object: a few chunks and the program itself.
    let bound_kb = 48 << 10;
    let (o, peak_kb) = run_fed(
        &store,
        &["put", "big", "-"],
        Stdio::piped(),
        Some(data.clone()),
    );
    assert!(ok(&o).contains(&format!("big: {size} bytes")), "{o:?}");
    assert!(peak_kb > 0, "no memory figure read");
    assert!(
        peak_kb < bound_kb,
        "put from a pipe: peak RSS {peak_kb} kB for a 96 MiB object"
    );
    let (o, peak_kb) = run_measured(&store, &["get", "big"], Stdio::null());
    assert!(o.status.success(), "{o:?}");
    assert!(o.stdout == *data, "bytes differ");
    assert!(
        peak_kb < bound_kb,
        "get to a pipe: peak RSS {peak_kb} kB for a 96 MiB object"
    );
    let out = dir.path().join("big.out");
    let (o, peak_kb) = run_measured(
        &store,
        &["get", "big", "-o", out.to_str().unwrap()],
        Stdio::null(),
    );
    ok(&o);
    assert!(std::fs::read(&out).unwrap() == *data, "bytes differ");
    assert!(
        peak_kb < bound_kb,
        "get -o: peak RSS {peak_kb} kB for a 96 MiB object"
    );
    // A range that spans chunks streams too.
    let (o, _) = run_measured(
        &store,
        &["get", "big", "--range", "1000-25166000"],
        Stdio::null(),
    );
    assert!(o.stdout == data[1000..=25_166_000], "range bytes differ");
}

/// `get --range`: A-B, A- (to the end), -N (the last N bytes, or all of a
/// shorter object); bad ranges are one clear line and print nothing.
#[test]
fn get_takes_http_style_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ranges.blobcask");
    ok(&run(&store, &["create", "--capacity", "8M"], None));
    let data = pattern(10_000, 3);
    ok(&run(&store, &["put", "k", "-"], Some(&data)));
    ok(&run(&store, &["put", "empty", "-"], Some(b"")));
    for (range, want) in [
        ("0-0", &data[..1]),
        ("100-199", &data[100..200]),
        ("9990-20000", &data[9990..]),
        ("9999-", &data[9999..]),
        ("0-", &data[..]),
        ("-1", &data[9999..]),
        ("-300", &data[9700..]),
        ("-10000", &data[..]),
        ("-99999", &data[..]),
    ] {
        let o = run(&store, &["get", "k", "--range", range], None);
        assert!(o.status.success(), "{range}: {o:?}");
        assert!(o.stdout == want, "{range}");
        let o = run(&store, &["get", "k", &format!("--range={range}")], None);
        assert!(o.stdout == want, "={range}");
    }
    assert!(ok(&run(&store, &["get", "empty", "--range", "-5"], None)).is_empty());
    for bad in [
        "",
        "-",
        "-0",
        "5",
        "a-b",
        "1-x",
        "9-1",
        "1-2-3",
        "+1-5",
        "-+5",
        " 1-2",
        "1--2",
        "99999999999999999999-",
    ] {
        let o = run(&store, &["get", "k", "--range", bad], None);
        fails_with(&o, "bad range");
        assert!(o.stdout.is_empty(), "{bad:?}");
    }
    for past in ["10000-", "10000-10005", "20000-30000"] {
        let o = run(&store, &["get", "k", "--range", past], None);
        fails_with(&o, "past the end of k (10000 bytes)");
        assert!(o.stdout.is_empty());
    }
    fails_with(
        &run(&store, &["get", "empty", "--range", "0-"], None),
        "past the end",
    );
    fails_with(
        &run(&store, &["get", "missing", "--range", "-5"], None),
        "NOT_FOUND",
    );
}

/// Keys are bytes: --key-hex and --key-escaped name any key in every
/// command that takes one, a raw argument keeps its bytes, and `ls` prints
/// keys escaped (or in hex) so that every printed line reads back.
#[test]
fn keys_are_bytes_in_hex_or_escaped_form() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("keys.blobcask");
    ok(&run(&store, &["create", "--capacity", "8M"], None));
    let keys: [(&[u8], &[u8]); 6] = [
        (b"plain/key", b"v1"),
        (b"tab\there\nnewline", b"v2"),
        (b"bin\x00\xff\x80", b"v3"),
        (b"back\\slash\\x41", b"v4"),
        ("utf8/фото €".as_bytes(), b"v5"),
        (b"\x7f\x1b[31m", b"v6"),
    ];
    for (i, (key, value)) in keys.iter().enumerate() {
        // Alternate forms: hex, raw argv bytes.
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let o = if i % 2 == 0 {
            run(&store, &["put", "--key-hex", &hex, "-"], Some(value))
        } else {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_blobcask"));
            cmd.arg("-s")
                .arg(&store)
                .arg("put")
                .arg(OsStr::from_bytes(key));
            cmd.arg("-").stdin(Stdio::piped()).stdout(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            child.stdin.take().unwrap().write_all(value).unwrap();
            child.wait_with_output().unwrap()
        };
        let out = ok(&o);
        assert_eq!(out.lines().count(), 1, "{out:?}");
        assert!(
            !out.trim_end().contains('\n') && !out.contains('\t'),
            "{out:?}"
        );
    }
    // ls prints each key escaped, in byte order; every line names its key
    // again with -e, in get, stat and ls.
    let printed = [
        "back\\\\slash\\\\x41",
        "bin\\x00\\xff\\x80",
        "plain/key",
        "tab\\x09here\\x0anewline",
        "utf8/фото €",
        "\\x7f\\x1b[31m", // 0x7f sorts last
    ];
    let ls = ok(&run(&store, &["ls"], None));
    assert_eq!(ls.lines().collect::<Vec<_>>(), printed, "{ls}");
    assert!(!ls.chars().any(|c| c.is_control() && c != '\n'), "{ls:?}");
    let value_of = |line: &str| match line {
        "plain/key" => "v1",
        l if l.starts_with("tab") => "v2",
        l if l.starts_with("bin") => "v3",
        l if l.starts_with("back") => "v4",
        l if l.starts_with("utf8") => "v5",
        _ => "v6",
    };
    for line in printed {
        let o = run(&store, &["get", "-e", line], None);
        assert_eq!(&o.stdout[..], value_of(line).as_bytes(), "{line}");
        let stat = ok(&run(&store, &["stat", "--key-escaped", line], None));
        assert!(stat.starts_with(&format!("key      {line}\n")), "{stat}");
        assert_eq!(
            ok(&run(&store, &["ls", "-e", line], None)),
            format!("{line}\n")
        );
    }
    // ls --key-hex prints hex; the same keys come back.
    let hex_ls = ok(&run(&store, &["ls", "--key-hex"], None));
    let mut listed: Vec<Vec<u8>> = hex_ls
        .lines()
        .map(|h| {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    let mut want: Vec<Vec<u8>> = keys.iter().map(|(k, _)| k.to_vec()).collect();
    listed.sort();
    want.sort();
    assert_eq!(listed, want);
    // A prefix in each form.
    assert_eq!(
        ok(&run(&store, &["ls", "-x", "62696e"], None)).trim(),
        "62696e00ff80"
    );
    assert_eq!(
        ok(&run(&store, &["ls", "-e", "bin\\x00"], None)).trim(),
        "bin\\x00\\xff\\x80"
    );
    assert_eq!(
        ok(&run_args(
            &store,
            // A raw prefix that is not UTF-8: the first byte of "ф".
            &["ls".as_ref(), OsStr::from_bytes(b"utf8/\xd1")],
            Stdio::null()
        ))
        .trim(),
        "utf8/фото €"
    );
    // rm by hex; a raw key is not unescaped.
    ok(&run(&store, &["rm", "-x", "62696e00ff80"], None));
    fails_with(
        &run(&store, &["get", "-e", "bin\\x00\\xff\\x80"], None),
        "NOT_FOUND",
    );
    fails_with(&run(&store, &["get", "plain\\x2fkey"], None), "NOT_FOUND");
    assert_eq!(
        run(&store, &["get", "-e", "plain\\x2fkey"], None).stdout,
        b"v1"
    );
    // Bad forms: one line that says what is wrong, nothing stored.
    for (args, needle) in [
        (&["get", "-x", "6"][..], "odd number of hex digits"),
        (&["get", "-x", "zz"], "not a hex digit pair"),
        (&["put", "-x", "", "-"], "INVALID_ARGUMENT"),
        (&["get", "-e", "a\\q"], "unknown escape"),
        (&["get", "-e", "a\\x4"], "two hex digits"),
        (&["stat", "-e", "a\\"], "unknown escape"),
        (&["rm", "-x", "0g"], "not a hex digit pair"),
        (&["ls", "-x", "abc"], "odd number of hex digits"),
        (&["put", "-e", "k\\", "-"], "unknown escape"),
    ] {
        let o = run(&store, args, Some(b"x"));
        fails_with(&o, needle);
    }
    let o = run(&store, &["get", "-x", "-e", "00"], None);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    assert_eq!(
        ok(&run(&store, &["ls"], None)).lines().count(),
        keys.len() - 1
    );
}

/// `import` stores every regular file (large ones streamed, the key being
/// the relative path's bytes), reports each skipped entry (symlinks,
/// special files, unreadable files) on stderr and exits non-zero for them
/// unless --skip-errors; no progress line reaches captured stderr.
#[test]
fn import_streams_large_files_and_reports_skipped_ones() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("import.blobcask");
    ok(&run(&store, &["create", "--capacity", "64M"], None));
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    let big = pattern((12 << 20) + 5, 1);
    std::fs::write(tree.join("a/big.bin"), &big).unwrap();
    for i in 0..40u32 {
        std::fs::write(
            tree.join("a/b").join(format!("s{i:02}")),
            pattern(i as usize * 997, i),
        )
        .unwrap();
    }
    std::fs::write(tree.join(OsStr::from_bytes(b"raw\xff name")), b"raw").unwrap();
    std::fs::write(tree.join("new\nline"), b"nl").unwrap();
    std::fs::write(tree.join("empty"), b"").unwrap();
    std::os::unix::fs::symlink(tree.join("a/big.bin"), tree.join("link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", tree.join("dangling")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(tree.join("sock")).unwrap();
    let fifo = Command::new("mkfifo").arg(tree.join("fifo")).status();
    let fifo = fifo.is_ok_and(|s| s.success());
    // An unreadable file, where permissions apply (not to root).
    let locked = tree.join("locked");
    std::fs::write(&locked, b"secret").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unreadable = std::fs::read(&locked).is_err();
    let skipped = 3 + fifo as usize + unreadable as usize;
    let stored = 44 + !unreadable as usize;

    let o = run(&store, &["import", tree.to_str().unwrap()], None);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("imported {stored} objects")), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains('\r') && !err.contains('\x1b'),
        "progress in {err:?}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), skipped + 1, "{err}");
    assert!(
        err.contains("link: a symbolic link (not followed)"),
        "{err}"
    );
    assert!(err.contains("dangling: a symbolic link"), "{err}");
    assert!(err.contains("sock: a socket"), "{err}");
    if fifo {
        assert!(err.contains("fifo: a fifo"), "{err}");
    }
    if unreadable {
        assert!(err.contains("locked: cannot read it"), "{err}");
    }
    assert!(
        lines
            .last()
            .unwrap()
            .contains(&format!("{skipped} file(s) skipped")),
        "{err}"
    );
    assert!(lines.iter().all(|l| l.starts_with("blobcask: ")), "{err}");

    assert!(run(&store, &["get", "a/big.bin"], None).stdout == big);
    for i in [0u32, 1, 17, 39] {
        let key = format!("a/b/s{i:02}");
        assert!(
            run(&store, &["get", &key], None).stdout == pattern(i as usize * 997, i),
            "{key}"
        );
    }
    assert_eq!(
        run(&store, &["get", "-e", "raw\\xff name"], None).stdout,
        b"raw"
    );
    assert_eq!(
        run(&store, &["get", "-e", "new\\x0aline"], None).stdout,
        b"nl"
    );
    assert!(ok(&run(&store, &["get", "empty"], None)).is_empty());
    let ls = ok(&run(&store, &["ls"], None));
    assert_eq!(ls.lines().count(), stored, "{ls}");
    assert!(
        ls.contains("raw\\xff name\n") && ls.contains("new\\x0aline\n"),
        "{ls}"
    );
    for gone in ["link", "dangling", "sock", "fifo"] {
        fails_with(&run(&store, &["stat", gone], None), "NOT_FOUND");
    }

    // --skip-errors: the same report, exit 0; everything replaced.
    let o = run(
        &store,
        &["import", "--skip-errors", tree.to_str().unwrap()],
        None,
    );
    let out = ok(&o);
    assert!(out.contains(&format!("imported {stored} objects")), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), skipped, "{err}");
    assert!(!err.contains("--skip-errors"), "{err}");
    assert_eq!(ok(&run(&store, &["ls"], None)).lines().count(), stored);
    let check = ok(&run(&store, &["check", "--data"], None));
    assert!(check.contains("no problems found"), "{check}");

    // A clean tree exits 0 with nothing on stderr.
    let clean = dir.path().join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    std::fs::write(clean.join("x"), b"x").unwrap();
    let o = run(&store, &["import", clean.to_str().unwrap()], None);
    assert!(ok(&o).contains("imported 1 objects"));
    assert!(
        o.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Not a directory, or none: one line.
    fails_with(
        &run(&store, &["import", clean.join("x").to_str().unwrap()], None),
        "is not a directory",
    );
    fails_with(
        &run(
            &store,
            &["import", dir.path().join("none").to_str().unwrap()],
            None,
        ),
        "reading",
    );
}

/// Long commands draw a progress line only on a terminal: with stderr
/// captured, `backup`, `compact` and `import` print none.
#[test]
fn progress_never_reaches_captured_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("p.blobcask");
    ok(&run(&store, &["create", "--capacity", "16M"], None));
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    for i in 0..200 {
        std::fs::write(tree.join(format!("f{i}")), pattern(5000, i)).unwrap();
    }
    let copy = dir.path().join("copy.blobcask");
    for args in [
        &["import", tree.to_str().unwrap()][..],
        &["compact"],
        &["backup", copy.to_str().unwrap()],
    ] {
        let o = run(&store, args, None);
        ok(&o);
        assert!(
            o.stderr.is_empty(),
            "{args:?}: {:?}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

// Guards invariant 7 too: `get` never writes its object over the store it
// reads, whether `-o` names the store (or a hard link to it) or stdout is
// redirected into it.
#[test]
fn get_refuses_to_write_over_its_own_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.blobcask");
    ok(&run(&store, &["create"], None));
    let value = dir.path().join("v");
    std::fs::write(&value, b"a value").unwrap();
    ok(&run(&store, &["put", "k", value.to_str().unwrap()], None));
    let before = std::fs::read(&store).unwrap();
    let link = dir.path().join("link.blobcask");
    std::fs::hard_link(&store, &link).unwrap();
    for target in [&store, &link] {
        fails_with(
            &run(&store, &["get", "k", "-o", target.to_str().unwrap()], None),
            "would destroy the store",
        );
    }
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&store)
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_blobcask"))
        .arg("-s")
        .arg(&store)
        .args(["get", "k"])
        .stdout(Stdio::from(appended))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    fails_with(&o, "stdout is the store");
    assert!(
        std::fs::read(&store).unwrap() == before,
        "the store changed"
    );
    // Elsewhere, the object is written as before.
    let out = dir.path().join("out");
    ok(&run(
        &store,
        &["get", "k", "-o", out.to_str().unwrap()],
        None,
    ));
    assert_eq!(std::fs::read(&out).unwrap(), b"a value");
}

// Guards invariant 6 through the tool: a store refused for a damaged tuple
// block is still read with `--salvage` (the block skipped and reported),
// which no writing command takes.
#[test]
fn salvage_reads_around_a_damaged_block_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.blobcask");
    ok(&run(&store, &["create"], None));
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    for i in 0..400u32 {
        std::fs::write(
            files.join(format!("f{i:03}")),
            vec![i as u8; 300 + i as usize],
        )
        .unwrap();
    }
    ok(&run(&store, &["import", files.to_str().unwrap()], None));
    // One byte of the second tuple block of the first metadata extent
    // (superblock: the extents' list at offset 72, start block u64).
    let mut image = std::fs::read(&store).unwrap();
    let start = u64::from_le_bytes(image[72..80].try_into().unwrap()) as usize;
    image[(start + 1) * 4096 + 100] ^= 0x04;
    std::fs::write(&store, &image).unwrap();
    let o = run(&store, &["check"], None);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("blobcask --salvage check"));
    let o = run(&store, &["--salvage", "check"], None);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("its objects are skipped"));
    let listed = ok(&run(&store, &["--salvage", "ls"], None));
    let keys: Vec<&str> = listed.lines().collect();
    assert!(!keys.is_empty() && keys.len() < 400, "{} keys", keys.len());
    // Every figure as JSON: the skipped block, the objects served.
    let json = ok(&run(&store, &["--salvage", "stats", "--json"], None));
    let stats: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(stats["objects"], keys.len() as u64, "{json}");
    let skipped = stats["recovery"]["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{json}");
    assert!(skipped[0].as_str().unwrap().contains("tuple block"));
    assert!(stats["cache"]["capacity"].is_u64() && stats["max_capacity"].is_null());
    for k in keys.iter().step_by(37) {
        let i: usize = k[1..].parse().unwrap();
        let o = run(&store, &["--salvage", "get", k], None);
        assert_eq!(o.stdout, vec![i as u8; 300 + i], "{k}");
    }
    for args in [
        &["--salvage", "rm", "f000"][..],
        &["--salvage", "compact"],
        &["--salvage", "grow", "64M"],
    ] {
        fails_with(&run(&store, args, None), "--salvage only reads");
    }
    assert!(
        std::fs::read(&store).unwrap() == image,
        "the damaged store changed"
    );
    let copy = dir.path().join("copy.blobcask");
    ok(&run(
        &store,
        &["--salvage", "backup", copy.to_str().unwrap()],
        None,
    ));
    ok(&run(&copy, &["check", "--data"], None));
}

/// Runs the tool like [`run`] (no stdin), killing it after 20 s: `None`
/// when it had not exited by then (a hang).
fn run_or_hang(store: &std::path::Path, args: &[&str]) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_blobcask"))
        .arg("-s")
        .arg(store)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

// A FIFO given as the store blocked every read-only command forever and
// failed the others with "Illegal seek": each is refused at once, naming
// what the path is; a dangling symbolic link is named as one (it was "the
// path kept changing"), with no advice to `create` through it.
#[test]
fn a_fifo_or_a_dangling_link_as_the_store_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let dangling = dir.path().join("dangling.blobcask");
    std::os::unix::fs::symlink(dir.path().join("gone.blobcask"), &dangling).unwrap();
    let commands: [&[&str]; 7] = [
        &["ls"],
        &["get", "k"],
        &["check"],
        &["stats"],
        &["rm", "k"],
        &["compact"],
        &["create"],
    ];
    // `check` reports what it found on stdout, then fails.
    let said = |o: &Output| {
        assert!(!o.status.success(), "succeeded: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    for args in commands {
        let o = run_or_hang(&fifo, args).unwrap_or_else(|| panic!("{args:?} on a FIFO hangs"));
        assert!(said(&o).contains("is a FIFO"), "{args:?}: {o:?}");
        let o = run_or_hang(&dangling, args).expect("hangs");
        let said = said(&o);
        assert!(said.contains("dangling symbolic link"), "{args:?}: {said}");
        assert!(
            said.contains("gone.blobcask") && !said.contains("create one"),
            "{args:?}: {said}"
        );
    }
    assert!(!dir.path().join("gone.blobcask").exists());
}

// `put` of the store file and `import` of the directory holding it read
// the live store while writing to it: they failed with "grew while being
// read" and left the store grown. The store itself is refused before
// anything is read or written (`import` skips it and stores the rest), as
// `get -o` refuses to write over it.
#[test]
fn the_store_is_never_stored_in_itself() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let store = d.join("s.blobcask");
    ok(&run(&store, &["create"], None));
    std::fs::write(d.join("a"), b"a file").unwrap();
    let link = dir.path().join("hard.blobcask");
    std::fs::hard_link(&store, &link).unwrap();
    let before = std::fs::read(&store).unwrap();
    for name in [&store, &link] {
        fails_with(
            &run(&store, &["put", "k", name.to_str().unwrap()], None),
            "itself",
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_blobcask"))
        .arg("-s")
        .arg(&store)
        .args(["put", "k", "-"])
        .stdin(std::fs::File::open(&store).unwrap())
        .output()
        .unwrap();
    fails_with(&o, "itself");
    assert!(
        std::fs::read(&store).unwrap() == before,
        "the store changed"
    );

    let o = run(&store, &["import", d.to_str().unwrap()], None);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("skipped") && err.contains("the store itself"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&store).unwrap().len(),
        before.len() as u64,
        "the store grew"
    );
    assert_eq!(
        ok(&run(&store, &["ls"], None)).lines().collect::<Vec<_>>(),
        ["a"]
    );
    ok(&run(
        &store,
        &["import", d.to_str().unwrap(), "--skip-errors"],
        None,
    ));
}

// A truncated store is refused by a salvage open too: `check` suggested
// `--salvage check` and `--salvage backup`, which both failed. It suggests
// a salvage only where one works.
#[test]
fn check_suggests_a_salvage_only_where_one_works() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.blobcask");
    ok(&run(&store, &["create"], None));
    ok(&run(&store, &["put", "k", "-"], Some(&vec![5u8; 9000])));
    let len = std::fs::metadata(&store).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let o = run(&store, &["check"], None);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("problem:"), "{out}");
    assert!(!out.contains("`blobcask --salvage"), "{out}");
    assert!(out.contains("Restore it from a backup"), "{out}");
    // What it no longer suggests fails indeed.
    assert!(!run(&store, &["--salvage", "check"], None).status.success());
    let copy = dir.path().join("copy.blobcask");
    let o = run(
        &store,
        &["--salvage", "backup", copy.to_str().unwrap()],
        None,
    );
    assert!(!o.status.success());
}
