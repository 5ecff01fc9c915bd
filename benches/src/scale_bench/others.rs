//! LMDB and SQLite in the scale bench, each behind its feature: loaded,
//! reopened in a fresh process and measured as blobcask is.

use super::*;

/// Drops `path`'s pages from the page cache.
pub(super) fn drop_cached(path: &Path) {
    if let Ok(f) = std::fs::File::open(path) {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on a descriptor this function owns.
        #[allow(unsafe_code)]
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

fn file_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

/// Loads, closes, and measures a reopen in a fresh process.
pub(super) fn run(args: &Args, engine: &str, n: u64) -> Option<Row> {
    let path = args.dir.join(format!("scale-{engine}-{n}"));
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    let loaded: Option<(Duration, PathBuf)> = match engine {
        #[cfg(feature = "lmdb")]
        "lmdb" => Some(lmdb::load(&path, n, args.value)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Some(sqlite::load(&path, n, args.value)),
        _ => None,
    };
    let Some((load, data)) = loaded else {
        eprintln!("engine {engine}: not built (its feature) or unknown; skipped");
        return None;
    };
    drop_cached(&data);
    let m = run_child(args, engine, "open", &path, n);
    let row = Row::of(engine, n, load, &m, file_bytes(&data) as f64);
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    Some(row)
}

/// The measuring child of another engine: the same figures as
/// blobcask's.
pub(super) fn child_open(args: &Args) {
    #[cfg_attr(
        not(any(feature = "lmdb", feature = "sqlite")),
        allow(unused_variables)
    )]
    let path = args.path.as_deref().expect("--path");
    let n = args.n;
    let before = rss_anon();
    let t = Instant::now();
    let get: Option<Box<dyn Fn(u64) -> Vec<u8>>> = match args.engine.as_str() {
        #[cfg(feature = "lmdb")]
        "lmdb" => Some(lmdb::open(path)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Some(sqlite::open(path)),
        _ => None,
    };
    let get = get.unwrap_or_else(|| panic!("engine {} not built", args.engine));
    let opened = t.elapsed();
    assert_eq!(get(n / 2).len(), args.value);
    let open_first = t.elapsed();
    let rss = rss_anon().saturating_sub(before);
    let picks = picks(n);
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for round in [&mut cold, &mut warm] {
        for &i in &picks {
            let t = Instant::now();
            let v = get(i);
            round.push(t.elapsed());
            assert_eq!(v.len(), args.value);
        }
    }
    for &i in picks.iter().take(1000) {
        assert_eq!(get(i), value(i, args.value), "value of object {i}");
    }
    println!("open_s={}", opened.as_secs_f64());
    println!("open_first_get_s={}", open_first.as_secs_f64());
    println!("rss_bytes={rss}");
    println!("cold_p50_us={}", median(&mut cold).as_secs_f64() * 1e6);
    println!("warm_p50_us={}", median(&mut warm).as_secs_f64() * 1e6);
}

#[cfg(feature = "lmdb")]
mod lmdb {
    use super::*;
    use heed::types::Bytes as Raw;

    type Db = heed::Database<'static, Raw, Raw>;

    fn env(dir: &Path, n: u64, vlen: usize) -> heed::Env {
        std::fs::create_dir_all(dir).expect("lmdb dir");
        let map = ((n as usize) * (vlen + 200) * 3 + (256 << 20)).div_ceil(4096) * 4096;
        // SAFETY: the directory is this bench's own, opened by one
        // process at a time.
        #[allow(unsafe_code)]
        unsafe {
            heed::EnvOpenOptions::new()
                .map_size(map)
                .open(dir)
                .expect("lmdb open")
        }
    }

    pub(in super::super) fn load(dir: &Path, n: u64, vlen: usize) -> (Duration, PathBuf) {
        let env = env(dir, n, vlen);
        let t = Instant::now();
        let wtxn = env.write_txn().expect("txn");
        let db: Db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener
                    .create_database(wtxn, None)
                    .map(heed::CommitOrAbort::<_, ()>::Commit)
            })
            .expect("db")
            .unwrap_commit();
        for start in (0..n).step_by(100_000) {
            let mut wtxn = env.write_txn().expect("txn");
            for i in start..(start + 100_000).min(n) {
                db.put(&mut wtxn, &key(i), &value(i, vlen)).expect("put");
            }
            wtxn.commit().expect("commit");
        }
        let took = t.elapsed();
        env.prepare_for_closing().wait();
        (took, dir.join("data.mdb"))
    }

    pub(in super::super) fn open(dir: &Path) -> Box<dyn Fn(u64) -> Vec<u8>> {
        // SAFETY: as in `env`.
        #[allow(unsafe_code)]
        let env = unsafe {
            heed::EnvOpenOptions::new()
                .map_size(1 << 40)
                .open(dir)
                .expect("lmdb open")
        };
        let rtxn = env.read_txn().expect("txn");
        let db: Db = env
            .open_databases_and_commit(rtxn, |opener, rtxn| {
                opener
                    .open_database(rtxn, None)
                    .map(|db| heed::CommitOrAbort::<_, ()>::Commit(db.expect("a database")))
            })
            .expect("db")
            .unwrap_commit();
        Box::new(move |i| {
            let rtxn = env.read_txn().expect("txn");
            db.get(&rtxn, &key(i))
                .expect("get")
                .expect("present")
                .to_vec()
        })
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;

    pub(in super::super) fn load(path: &Path, n: u64, vlen: usize) -> (Duration, PathBuf) {
        let mut db = rusqlite::Connection::open(path).expect("sqlite open");
        db.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; \
             CREATE TABLE blobs (k BLOB PRIMARY KEY, v BLOB NOT NULL);",
        )
        .expect("schema");
        let t = Instant::now();
        for start in (0..n).step_by(100_000) {
            let tx = db.transaction().expect("txn");
            {
                let mut stmt = tx
                    .prepare_cached("INSERT INTO blobs (k, v) VALUES (?1, ?2)")
                    .expect("prepare");
                for i in start..(start + 100_000).min(n) {
                    stmt.execute(rusqlite::params![key(i), value(i, vlen)])
                        .expect("insert");
                }
            }
            tx.commit().expect("commit");
        }
        let took = t.elapsed();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("checkpoint");
        drop(db);
        (took, path.to_path_buf())
    }

    pub(in super::super) fn open(path: &Path) -> Box<dyn Fn(u64) -> Vec<u8>> {
        let db = rusqlite::Connection::open(path).expect("sqlite open");
        Box::new(move |i| {
            let mut stmt = db
                .prepare_cached("SELECT v FROM blobs WHERE k = ?1")
                .expect("prepare");
            stmt.query_row(rusqlite::params![key(i)], |r| r.get::<_, Vec<u8>>(0))
                .expect("get")
        })
    }
}
