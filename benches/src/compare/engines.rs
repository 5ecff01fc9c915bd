//! The engines the comparison drives, each behind one small trait: the raw
//! device (the physical limit), blobcask, a file per object, and — behind
//! cargo features — SQLite BLOBs, fjall, RocksDB with blob files, LMDB (heed)
//! and redb.
//!
//! Every engine gets the same random (incompressible) values; engines with
//! compression have it switched off so none wins by squeezing test data.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
#[cfg(feature = "sqlite")]
use std::sync::Mutex;

use blobcask::{Bytes, IoEngineKind, Options};

use crate::raw::{aligned, as_bytes, as_bytes_mut, open_direct};

/// One engine under test. Methods panic on engine errors: a benchmark that
/// hits one must stop rather than report numbers for work not done.
pub trait Engine: Sync {
    fn name(&self) -> String;
    /// Create or replace `key` durably (acknowledged = survives power loss).
    fn put(&self, key: &str, value: &Bytes);
    /// Whole object; returns its length.
    fn get(&self, key: &str) -> usize;
    /// `len` bytes at `offset`; returns the bytes read.
    fn read(&self, key: &str, offset: u64, len: usize) -> usize;
    fn stat(&self, key: &str) -> u64;
    fn delete(&self, key: &str);
    /// Bytes the engine occupies on disk now (for space amplification).
    fn bytes_on_disk(&self) -> u64;
    /// Moves what the engine buffers in memory (LSM memtables) to its files,
    /// so read phases measure reads from storage. Not timed.
    fn settle(&self) {}
    /// Whether `read` of a range costs a read of that range only.
    fn range_reads(&self) -> bool {
        true
    }
}

/// Names accepted by `--engines`, in report order.
pub const ALL: &[&str] = &[
    "raw",
    "blobcask-uring",
    "blobcask-portable",
    "files",
    "sqlite",
    "fjall",
    "rocksdb",
    "lmdb",
    "redb",
];

/// Whether this build can run engine `name` (some need a cargo feature).
pub fn available(name: &str) -> bool {
    matches!(
        name,
        "raw" | "blobcask-uring" | "blobcask-portable" | "files"
    ) || (name == "sqlite" && cfg!(feature = "sqlite"))
        || (name == "fjall" && cfg!(feature = "fjall"))
        || (name == "rocksdb" && cfg!(feature = "rocksdb"))
        || (name == "lmdb" && cfg!(feature = "lmdb"))
        || (name == "redb" && cfg!(feature = "redb"))
}

/// Opens engine `name` under `dir` sized for `n` objects of `size` bytes:
/// a new, empty instance when `fresh`, else the one already there (so read
/// phases start without anything the engine cached in memory).
pub fn open(name: &str, dir: &Path, size: usize, n: usize, fresh: bool) -> Box<dyn Engine> {
    if fresh {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
    }
    match name {
        "raw" => Box::new(Raw::open(&dir.join("raw.img"), size, n, fresh)),
        "blobcask-uring" | "blobcask-portable" => {
            let (label, kind) = if name == "blobcask-uring" {
                ("io_uring", IoEngineKind::IoUring)
            } else {
                ("portable", IoEngineKind::Portable)
            };
            // Room for two versions of every object (overwrite) plus slack.
            let capacity = ((size + 4096) * n * 3) as u64 + (256 << 20);
            let store = blobcask::blocking::Store::open(
                dir.join("store.blobcask"),
                Options::new().capacity(capacity).io_engine(kind),
            )
            .unwrap();
            Box::new(Blobcask(store, label))
        }
        "files" => Box::new(Files(dir.to_path_buf())),
        #[cfg(feature = "sqlite")]
        "sqlite" => Box::new(Sqlite::open(&dir.join("sqlite.db"))),
        #[cfg(feature = "fjall")]
        "fjall" => Box::new(Fjall::open(dir)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(Rocks::open(dir)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Box::new(Lmdb::open(dir, size, n)),
        #[cfg(feature = "redb")]
        "redb" => Box::new(Redb::open(&dir.join("redb.db"), fresh)),
        other => panic!("engine {other} is not built in (see --help)"),
    }
}

/// The device's own limit on the same file system: object `i` lives at a
/// fixed slot of a preallocated file, read and written with O_DIRECT and
/// made durable with fdatasync. No index, no allocation, no metadata — a
/// store cannot do better than this.
pub struct Raw {
    file: File,
    slot: u64,
    size: usize,
}

impl Raw {
    fn open(path: &Path, size: usize, n: usize, fresh: bool) -> Raw {
        let slot = size.div_ceil(4096) as u64 * 4096;
        if fresh {
            let f = File::create(path).unwrap();
            f.set_len(slot * n as u64).unwrap();
        }
        Raw {
            file: open_direct(path),
            slot,
            size,
        }
    }
    fn slot_of(&self, key: &str) -> u64 {
        let i: u64 = key.rsplit('/').next().unwrap().parse().unwrap();
        i * self.slot
    }
}

impl Engine for Raw {
    fn name(&self) -> String {
        "raw device (O_DIRECT)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        let base = self.slot_of(key);
        let chunk = value.len().min(1 << 20).div_ceil(4096) * 4096;
        let mut buf = aligned(chunk);
        let mut off = 0;
        while off < value.len() {
            let n = (value.len() - off).min(chunk);
            let b = &mut as_bytes_mut(&mut buf)[..chunk];
            b[..n].copy_from_slice(&value[off..off + n]);
            let write_len = n.div_ceil(4096) * 4096;
            self.file
                .write_all_at(&as_bytes(&buf)[..write_len], base + off as u64)
                .unwrap();
            off += n;
        }
        self.file.sync_data().unwrap();
    }
    fn get(&self, key: &str) -> usize {
        let base = self.slot_of(key);
        let len = self.size.div_ceil(4096) * 4096;
        let mut buf = aligned(len.min(1 << 20));
        let mut out = Vec::with_capacity(self.size);
        let mut off = 0;
        while off < len {
            let n = (len - off).min(buf.len() * 4096);
            let b = &mut as_bytes_mut(&mut buf)[..n];
            self.file.read_exact_at(b, base + off as u64).unwrap();
            let keep = n.min(self.size - off);
            out.extend_from_slice(&b[..keep]);
            off += n;
        }
        out.len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        // Direct I/O reads whole blocks: the aligned block(s) under the range.
        let start = offset / 4096 * 4096;
        let end = (offset + len as u64).min(self.size as u64).div_ceil(4096) * 4096;
        let mut buf = aligned((end - start) as usize);
        let b = &mut as_bytes_mut(&mut buf)[..(end - start) as usize];
        self.file
            .read_exact_at(b, self.slot_of(key) + start)
            .unwrap();
        let from = (offset - start) as usize;
        let n = len.min(self.size - offset as usize);
        let out = b[from..from + n].to_vec();
        out.len()
    }
    fn stat(&self, _key: &str) -> u64 {
        self.size as u64
    }
    fn delete(&self, _key: &str) {}
    fn bytes_on_disk(&self) -> u64 {
        self.file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
    }
}

struct Blobcask(blobcask::blocking::Store, &'static str);

impl Engine for Blobcask {
    fn name(&self) -> String {
        format!("blobcask ({})", self.1)
    }
    fn put(&self, key: &str, value: &Bytes) {
        self.0.put(key, value.clone()).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        self.0.get(key).unwrap().len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        self.0.read(key, offset, len as u64).unwrap().len()
    }
    fn stat(&self, key: &str) -> u64 {
        self.0.stat(key).unwrap().size
    }
    fn delete(&self, key: &str) {
        self.0.delete(key).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        let s = self.0.stats();
        s.capacity - s.free_bytes
    }
}

impl Drop for Blobcask {
    fn drop(&mut self) {
        let _ = self.0.close();
    }
}

/// A file per object under a 256-way directory tree, written to a temporary
/// name, fdatasync'd and renamed (what most applications do today).
struct Files(PathBuf);

impl Files {
    fn path(&self, key: &str) -> PathBuf {
        let h = key
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
        self.0
            .join(format!("{:02x}", h % 256))
            .join(key.replace('/', "_"))
    }
}

impl Engine for Files {
    fn name(&self) -> String {
        "file per object".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        let p = self.path(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let tmp = p.with_extension("tmp");
        let f = File::create(&tmp).unwrap();
        f.write_all_at(value, 0).unwrap();
        f.sync_data().unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        std::fs::read(self.path(key)).unwrap().len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        let f = File::open(self.path(key)).unwrap();
        let mut buf = vec![0u8; len];
        let mut n = 0;
        while n < len {
            match f.read_at(&mut buf[n..], offset + n as u64).unwrap() {
                0 => break,
                k => n += k,
            }
        }
        n
    }
    fn stat(&self, key: &str) -> u64 {
        std::fs::metadata(self.path(key)).unwrap().len()
    }
    fn delete(&self, key: &str) {
        std::fs::remove_file(self.path(key)).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        dir_bytes(&self.0)
    }
}

/// Allocated bytes of every file under `p`.
fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()) + m.blocks() * 512,
                    Ok(m) => m.blocks() * 512,
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// SQLite BLOBs: WAL + synchronous=FULL (durable commits), partial reads
/// through incremental BLOB I/O. One connection behind a mutex.
#[cfg(feature = "sqlite")]
struct Sqlite(Mutex<rusqlite::Connection>, PathBuf);

#[cfg(feature = "sqlite")]
impl Sqlite {
    fn open(path: &Path) -> Sqlite {
        let db = rusqlite::Connection::open(path).unwrap();
        db.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; \
             CREATE TABLE IF NOT EXISTS blobs (k TEXT PRIMARY KEY, v BLOB NOT NULL);",
        )
        .unwrap();
        Sqlite(Mutex::new(db), path.to_path_buf())
    }
}

#[cfg(feature = "sqlite")]
impl Engine for Sqlite {
    fn name(&self) -> String {
        "SQLite BLOBs (WAL, synchronous=FULL)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        let db = self.0.lock().unwrap();
        db.execute(
            "INSERT OR REPLACE INTO blobs (k, v) VALUES (?1, ?2)",
            rusqlite::params![key, value.as_ref()],
        )
        .unwrap();
    }
    fn get(&self, key: &str) -> usize {
        let db = self.0.lock().unwrap();
        db.query_row("SELECT v FROM blobs WHERE k = ?1", [key], |r| {
            r.get::<_, Vec<u8>>(0)
        })
        .unwrap()
        .len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        let db = self.0.lock().unwrap();
        let rowid: i64 = db
            .query_row("SELECT rowid FROM blobs WHERE k = ?1", [key], |r| r.get(0))
            .unwrap();
        let blob = db
            .blob_open(rusqlite::MAIN_DB, "blobs", "v", rowid, true)
            .unwrap();
        let mut buf = vec![0u8; len];
        blob.read_at(&mut buf, offset as usize).unwrap()
    }
    fn stat(&self, key: &str) -> u64 {
        let db = self.0.lock().unwrap();
        db.query_row("SELECT length(v) FROM blobs WHERE k = ?1", [key], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as u64
    }
    fn delete(&self, key: &str) {
        let db = self.0.lock().unwrap();
        db.execute("DELETE FROM blobs WHERE k = ?1", [key]).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", self.1.display())).ok())
            .map(|m| m.blocks() * 512)
            .sum()
    }
}

/// fjall with key–value separation (values ≥ 1 KiB in blob files), each
/// write followed by a journal fdatasync. fjall has no range reads: a range
/// is served by reading the whole value.
#[cfg(feature = "fjall")]
struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
    dir: PathBuf,
}

#[cfg(feature = "fjall")]
impl Fjall {
    fn open(dir: &Path) -> Fjall {
        let db = fjall::Database::builder(dir).open().unwrap();
        let ks = db
            .keyspace("blobs", || {
                fjall::KeyspaceCreateOptions::default().with_kv_separation(Some(
                    fjall::KvSeparationOptions::default()
                        .compression(fjall::CompressionType::None)
                        .separation_threshold(1024),
                ))
            })
            .unwrap();
        Fjall {
            db,
            ks,
            dir: dir.to_path_buf(),
        }
    }
}

#[cfg(feature = "fjall")]
impl Engine for Fjall {
    fn name(&self) -> String {
        "fjall (kv separation, SyncData)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        self.ks.insert(key, value.as_ref()).unwrap();
        self.db.persist(fjall::PersistMode::SyncData).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        self.ks.get(key).unwrap().unwrap().len()
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        let v = self.ks.get(key).unwrap().unwrap();
        len.min(v.len().saturating_sub(offset as usize))
    }
    fn stat(&self, key: &str) -> u64 {
        self.ks.size_of(key).unwrap().unwrap() as u64
    }
    fn delete(&self, key: &str) {
        self.ks.remove(key).unwrap();
        self.db.persist(fjall::PersistMode::SyncData).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        dir_bytes(&self.dir)
    }
    fn settle(&self) {
        // Public but doc(hidden) in fjall 3.1: flushes the active memtable
        // (where kv separation happens) and waits for it.
        self.ks.rotate_memtable_and_wait().unwrap();
    }
    fn range_reads(&self) -> bool {
        false
    }
}

/// RocksDB with blob files (values ≥ 1 KiB), synchronous writes (WAL
/// fsync), no compression. RocksDB has no range reads of a value: a range
/// is served by a pinned read of the whole value, and stat reads it too.
#[cfg(feature = "rocksdb")]
struct Rocks {
    db: rocksdb::DB,
    dir: PathBuf,
}

#[cfg(feature = "rocksdb")]
impl Rocks {
    fn open(dir: &Path) -> Rocks {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        o.set_enable_blob_files(true);
        o.set_min_blob_size(1024);
        o.set_enable_blob_gc(true);
        o.set_blob_compression_type(rocksdb::DBCompressionType::None);
        o.set_compression_type(rocksdb::DBCompressionType::None);
        o.increase_parallelism(2);
        Rocks {
            db: rocksdb::DB::open(&o, dir).unwrap(),
            dir: dir.to_path_buf(),
        }
    }
    fn sync() -> rocksdb::WriteOptions {
        let mut w = rocksdb::WriteOptions::default();
        w.set_sync(true);
        w
    }
    fn value_len(&self, key: &str) -> usize {
        self.db.get_pinned(key).unwrap().unwrap().len()
    }
}

#[cfg(feature = "rocksdb")]
impl Engine for Rocks {
    fn name(&self) -> String {
        "RocksDB (blob files, sync)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        self.db.put_opt(key, value, &Self::sync()).unwrap();
    }
    fn get(&self, key: &str) -> usize {
        self.value_len(key)
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        len.min(self.value_len(key).saturating_sub(offset as usize))
    }
    fn stat(&self, key: &str) -> u64 {
        self.value_len(key) as u64
    }
    fn delete(&self, key: &str) {
        self.db.delete_opt(key, &Self::sync()).unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        dir_bytes(&self.dir)
    }
    fn settle(&self) {
        self.db.flush().unwrap();
    }
    fn range_reads(&self) -> bool {
        false
    }
}

/// LMDB through heed: one environment in the engine's directory, one
/// unnamed database, default flags, so every commit is durable (LMDB writes
/// the dirty pages and fdatasyncs, then writes and syncs the meta page). One
/// write transaction per put or delete, committed before it returns.
///
/// Reads run in a read transaction and get a slice of LMDB's memory map: no
/// copy. A slice of a map is not a read, though: nothing comes from disk
/// until the bytes are touched, so `get` and `read` load one byte of every
/// 4 KiB page under what they return (the least that makes the bytes
/// resident, as a copy would). A range touches only its own pages, so LMDB
/// does read ranges.
#[cfg(feature = "lmdb")]
struct Lmdb {
    env: heed::Env,
    db: heed::Database<'static, heed::types::Str, heed::types::Bytes>,
    dir: PathBuf,
}

#[cfg(feature = "lmdb")]
impl Lmdb {
    fn open(dir: &Path, size: usize, n: usize) -> Lmdb {
        // Room for the data (a page of overhead per value) three times over:
        // an overwrite allocates new pages while readers may still see the
        // old ones. Plus slack. The map is address space, not memory.
        let map_size = ((3 * (size + 4096) * n + (256 << 20)) as u64).div_ceil(4096) * 4096;
        #[allow(unsafe_code)]
        // SAFETY: heed's open is unsafe because the map must not be changed
        // by anything but LMDB: this directory is the engine's own, opened
        // once at a time by this process only.
        let env = unsafe {
            heed::EnvOpenOptions::new()
                .map_size(map_size as usize)
                .open(dir)
                .unwrap()
        };
        let wtxn = env.write_txn().unwrap();
        let db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener
                    .create_database(wtxn, None)
                    .map(heed::CommitOrAbort::<_, ()>::Commit)
            })
            .unwrap()
            .unwrap_commit();
        Lmdb {
            env,
            db,
            dir: dir.to_path_buf(),
        }
    }

    /// Runs `f` on the value of `key` as LMDB's map holds it.
    fn with_value<T>(&self, key: &str, f: impl FnOnce(&[u8]) -> T) -> T {
        let rtxn = self.env.read_txn().unwrap();
        f(self.db.get(&rtxn, key).unwrap().unwrap())
    }
}

/// Loads one byte of every 4 KiB page `b` spans, so a mapped value is in
/// memory (read from disk if it was not), without copying it.
#[cfg(feature = "lmdb")]
fn touch_pages(b: &[u8]) -> usize {
    if let Some(&last) = b.last() {
        let sum = b
            .iter()
            .step_by(4096)
            .fold(last as usize, |a, &x| a.wrapping_add(x as usize));
        std::hint::black_box(sum);
    }
    b.len()
}

#[cfg(feature = "lmdb")]
impl Engine for Lmdb {
    fn name(&self) -> String {
        "LMDB (heed, durable commits)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        let mut wtxn = self.env.write_txn().unwrap();
        self.db.put(&mut wtxn, key, value).unwrap();
        wtxn.commit().unwrap();
    }
    fn get(&self, key: &str) -> usize {
        self.with_value(key, touch_pages)
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        self.with_value(key, |v| {
            let from = (offset as usize).min(v.len());
            touch_pages(&v[from..(from + len).min(v.len())])
        })
    }
    fn stat(&self, key: &str) -> u64 {
        self.with_value(key, |v| v.len() as u64)
    }
    fn delete(&self, key: &str) {
        let mut wtxn = self.env.write_txn().unwrap();
        self.db.delete(&mut wtxn, key).unwrap();
        wtxn.commit().unwrap();
    }
    fn bytes_on_disk(&self) -> u64 {
        dir_bytes(&self.dir)
    }
}

/// redb's one table of the comparison.
#[cfg(feature = "redb")]
const REDB_TABLE: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("blobs");

/// redb with its defaults: durability `Immediate` (a commit returns once
/// fsynced), its own page cache (1 GiB), one write transaction per put or
/// delete. Reads run in a read transaction and borrow the value from redb's
/// cache, which reads a whole value on a miss: no range reads, and stat
/// reads the value too.
#[cfg(feature = "redb")]
struct Redb {
    db: redb::Database,
    path: PathBuf,
}

#[cfg(feature = "redb")]
impl Redb {
    fn open(path: &Path, fresh: bool) -> Redb {
        let db = redb::Database::create(path).unwrap();
        if fresh {
            // Read transactions cannot open a table no commit has created.
            let wtxn = db.begin_write().unwrap();
            wtxn.open_table(REDB_TABLE).unwrap();
            wtxn.commit().unwrap();
        }
        Redb {
            db,
            path: path.to_path_buf(),
        }
    }

    /// Length of `key`'s value (read whole into redb's cache on a miss).
    fn value_len(&self, key: &str) -> usize {
        use redb::ReadableDatabase;
        let rtxn = self.db.begin_read().unwrap();
        let table = rtxn.open_table(REDB_TABLE).unwrap();
        let value = table.get(key).unwrap().unwrap();
        value.value().len()
    }

    fn write(&self, f: impl FnOnce(&mut redb::Table<&str, &[u8]>)) {
        let wtxn = self.db.begin_write().unwrap();
        f(&mut wtxn.open_table(REDB_TABLE).unwrap());
        wtxn.commit().unwrap();
    }
}

#[cfg(feature = "redb")]
impl Engine for Redb {
    fn name(&self) -> String {
        "redb (durability Immediate)".into()
    }
    fn put(&self, key: &str, value: &Bytes) {
        self.write(|t| {
            t.insert(key, value.as_ref()).unwrap();
        });
    }
    fn get(&self, key: &str) -> usize {
        self.value_len(key)
    }
    fn read(&self, key: &str, offset: u64, len: usize) -> usize {
        len.min(self.value_len(key).saturating_sub(offset as usize))
    }
    fn stat(&self, key: &str) -> u64 {
        self.value_len(key) as u64
    }
    fn delete(&self, key: &str) {
        self.write(|t| {
            t.remove(key).unwrap();
        });
    }
    fn bytes_on_disk(&self) -> u64 {
        std::fs::metadata(&self.path)
            .map(|m| m.blocks() * 512)
            .unwrap_or(0)
    }
    fn range_reads(&self) -> bool {
        false
    }
}
