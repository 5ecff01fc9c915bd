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
        child.stdin.take().unwrap().write_all(input).unwrap();
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
