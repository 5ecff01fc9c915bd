//! Storing files in bounded memory: `put` of one file and `import` of a
//! tree.
//!
//! A file larger than [`CHUNK`] goes through a multipart upload, one chunk
//! read and written at a time, so `put` and `import` hold one chunk of it,
//! never the whole file. `import` gathers smaller files into batches of at
//! most [`BATCH_BYTES`] bytes or [`BATCH_FILES`] files, each stored by one
//! bulk load.
//!
//! Bytes from a pipe (`put KEY -` fed by a command) have no size until
//! their end, and an upload needs it before its first byte. Up to
//! [`CHUNK`] of them are kept in memory (one put); a longer stream goes on
//! into a spool, an unnamed temporary file in `TMPDIR` (gone when closed,
//! also on a crash), which is then uploaded like any file. That costs the
//! object's size in temporary space and one more write of it, and keeps
//! memory bounded. Growing an upload instead is not possible: its size is
//! fixed when it begins and its parts cannot be read back to move them.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use blobcask::blocking::Store;
use blobcask::{Bytes, ObjectInfo, PutOptions, MAX_KEY_LEN, PART_ALIGN};

use crate::open::{file_id, is_the_store};
use crate::progress::Progress;

/// Bytes of a file read and written at a time by an upload; files up to
/// this size are read whole (a `put`, or a batch of `import`).
pub const CHUNK: u64 = 8 << 20;
/// Most value bytes of one `import` batch.
pub const BATCH_BYTES: u64 = 32 << 20;
/// Most files of one `import` batch.
pub const BATCH_FILES: usize = 4096;

// Every part of an upload but the last must be a whole number of units.
const _: () = assert!(CHUNK.is_multiple_of(PART_ALIGN));

/// Why storing a file failed: the file (a skip for `import`) or the store
/// (the end of the command).
#[derive(Debug)]
pub enum Failure {
    Source(String),
    Store(String),
}

impl From<Failure> for String {
    fn from(f: Failure) -> String {
        match f {
            Failure::Source(m) | Failure::Store(m) => m,
        }
    }
}

fn store_err(e: blobcask::Error) -> Failure {
    Failure::Store(e.to_string())
}

/// Bytes to store: an open regular file of known size (streamed: a file
/// named, stdin redirected from one, or the spool of a long pipe), or
/// bytes already read (a short pipe).
pub enum Source {
    File { file: File, size: u64, name: String },
    Bytes(Vec<u8>),
}

impl Source {
    /// Opens `name`, or stdin for `-`. A regular file (stdin redirected
    /// from one included) is streamed from where it stands; anything else
    /// (a pipe) is read now: up to [`CHUNK`] bytes into memory, a longer
    /// stream into a spool (see the module's documentation). The store
    /// file itself (at `store`) is refused: storing it would grow it while
    /// it is read.
    pub fn open(name: &str, store: &Path) -> Result<Source, String> {
        let (mut file, name) = if name == "-" {
            let fd = std::os::fd::AsFd::as_fd(&std::io::stdin())
                .try_clone_to_owned()
                .map_err(|e| format!("reading stdin: {e}"))?;
            (File::from(fd), "stdin".to_string())
        } else {
            let f = File::open(name).map_err(|e| format!("reading {name}: {e}"))?;
            (f, name.to_string())
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("reading {name}: {e}"))?;
        if is_the_store(&meta, store) {
            return Err(the_store_itself(&name, store));
        }
        if meta.is_file() {
            let at = file
                .stream_position()
                .map_err(|e| format!("reading {name}: {e}"))?;
            let size = meta.len().saturating_sub(at);
            return Ok(Source::File { file, size, name });
        }
        let mut head = Vec::new();
        (&mut file)
            .take(CHUNK + 1)
            .read_to_end(&mut head)
            .map_err(|e| format!("reading {name}: {e}"))?;
        if head.len() as u64 <= CHUNK {
            return Ok(Source::Bytes(head));
        }
        spool(file, head, name)
    }
}

/// The stream `from`, whose first bytes (`head`) were already read, as a
/// spool: an unnamed temporary file holding all of it, to be streamed.
fn spool(mut from: File, head: Vec<u8>, name: String) -> Result<Source, String> {
    let fail = |e: std::io::Error| {
        format!(
            "reading {name} into a temporary file in {}: {e}",
            std::env::temp_dir().display()
        )
    };
    let mut file = tempfile::tempfile().map_err(fail)?;
    file.write_all(&head).map_err(fail)?;
    let rest = std::io::copy(&mut from, &mut file).map_err(fail)?;
    file.rewind().map_err(fail)?;
    let size = head.len() as u64 + rest;
    Ok(Source::File { file, size, name })
}

/// Stores `source` under `key`: by one put up to [`CHUNK`] bytes (or from
/// memory), by an upload in chunks above. `sent` hears of every chunk
/// written (bytes so far).
pub fn put(
    s: &Store,
    key: &[u8],
    source: Source,
    options: PutOptions,
    sent: &mut dyn FnMut(u64),
) -> Result<ObjectInfo, Failure> {
    match source {
        Source::Bytes(bytes) => s.put_with(key, bytes, options).map_err(store_err),
        Source::File { file, size, name } if size <= CHUNK => {
            let bytes = read_small(file, &name)?;
            s.put_with(key, bytes, options).map_err(store_err)
        }
        Source::File {
            mut file,
            size,
            name,
        } => {
            // Dropped on any failure, which aborts it: nothing lands.
            let upload = s.begin_upload(key, size).map_err(store_err)?;
            let mut at = 0u64;
            // One buffer for every chunk: a fresh 8 MiB allocation per
            // chunk lets the allocator's heap grow with the file.
            let mut buf = Vec::new();
            while at < size {
                let n = (size - at).min(CHUNK) as usize;
                buf.resize(n, 0);
                file.read_exact(&mut buf)
                    .map_err(|e| changed_or(&name, e))?;
                let part = Bytes::from(std::mem::take(&mut buf));
                // The engine copies the part out before returning, so the
                // buffer comes back unshared (else `Vec::from` copies it).
                upload.write_part(at, part.clone()).map_err(store_err)?;
                buf = Vec::from(part);
                at += n as u64;
                sent(at);
            }
            at_end(&mut file, &name)?;
            upload.commit_with(options).map_err(store_err)
        }
    }
}

/// Why the store file is not stored in itself.
fn the_store_itself(name: &str, store: &Path) -> String {
    format!(
        "{name} is the store {} itself: storing it would grow the store while it is read; nothing stored",
        store.display()
    )
}

/// A read error, or the file shrinking under the reader.
fn changed_or(name: &str, e: std::io::Error) -> Failure {
    Failure::Source(if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!("{name} shrank while being read; nothing stored")
    } else {
        format!("reading {name}: {e}")
    })
}

/// Fails if `file` has bytes past the size it had when opened.
fn at_end(file: &mut File, name: &str) -> Result<(), Failure> {
    match file.read(&mut [0u8; 1]) {
        Ok(0) => Ok(()),
        Ok(_) => Err(Failure::Source(format!(
            "{name} grew while being read; nothing stored"
        ))),
        Err(e) => Err(Failure::Source(format!("reading {name}: {e}"))),
    }
}

/// All of a small `file`, whatever size it claimed (files in /proc claim
/// 0), up to [`CHUNK`] bytes: more is an error.
fn read_small(file: File, name: &str) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    file.take(CHUNK + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::Source(format!("reading {name}: {e}")))?;
    if bytes.len() as u64 > CHUNK {
        return Err(Failure::Source(format!(
            "{name} grew while being read; nothing stored"
        )));
    }
    Ok(bytes)
}

/// A file `import` stores, and its key.
struct Found {
    path: PathBuf,
    key: Vec<u8>,
    size: u64,
}

/// What `import` did.
#[derive(Debug, Default)]
pub struct ImportReport {
    pub objects: u64,
    pub bytes: u64,
    /// Files (or directories) left out, each reported as it was found.
    pub skipped: u64,
}

/// Stores every regular file under `dir`, keyed by its path relative to
/// `dir` (its bytes as they are: `/` separated, not necessarily UTF-8).
/// Symbolic links are not followed; they, special files (fifos, sockets,
/// devices), unreadable files or directories, paths too long for a key
/// and the store file itself (at `store`, or a hard link to it: storing it
/// would grow it while it is read) are skipped, each reported through
/// `progress` as it is found, before anything is stored. A store error
/// ends the import (what was stored before it stays).
pub fn import(
    s: &Store,
    store: &Path,
    dir: &Path,
    progress: &mut Progress,
) -> Result<ImportReport, String> {
    let started = Instant::now();
    let meta = std::fs::metadata(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let mut report = ImportReport::default();
    let mut files = Vec::new();
    let mut skipped = 0u64;
    let skip = |path: &Path, why: String, progress: &mut Progress, skipped: &mut u64| {
        *skipped += 1;
        progress.note(&format!("blobcask: skipped {}: {why}", path.display()));
    };
    let store_id = std::fs::metadata(store).ok().map(|m| file_id(&m));
    walk(dir, dir, store_id, &mut files, &mut |p, why| {
        skip(p, why, progress, &mut skipped)
    })?;
    let total_files = files.len();
    let total_bytes: u64 = files.iter().map(|f| f.size).sum();
    let (mut done_files, mut done_bytes) = (0usize, 0u64);
    let show = |progress: &mut Progress, files: usize, bytes: u64| {
        progress.update(|| {
            format!(
                "{files}/{total_files} files, {} of {}",
                crate::text::human(bytes),
                crate::text::human(total_bytes)
            )
        })
    };
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut batch_bytes = 0u64;
    let flush = |batch: &mut Vec<(Vec<u8>, Vec<u8>)>, batch_bytes: &mut u64| {
        *batch_bytes = 0;
        s.bulk_load(std::mem::take(batch))
            .map(|r| (r.objects, r.bytes))
            .map_err(|e| e.to_string())
    };
    let stored =
        |report: &ImportReport| format!("; {} objects were stored before it", report.objects);
    for f in files {
        let name = f.path.display().to_string();
        let source = File::open(&f.path)
            .and_then(|file| Ok((file.metadata()?, file)))
            .map_err(|e| format!("cannot read it: {e}"));
        let (meta, file) = match source {
            Ok(found) => found,
            Err(why) => {
                skip(&f.path, why, progress, &mut skipped);
                continue;
            }
        };
        if !meta.is_file() {
            skip(
                &f.path,
                "no longer a regular file".into(),
                progress,
                &mut skipped,
            );
            continue;
        }
        let size = meta.len();
        if size <= CHUNK {
            match read_small(file, &name) {
                Ok(bytes) => {
                    batch_bytes += bytes.len() as u64;
                    batch.push((f.key, bytes));
                }
                Err(e) => skip(&f.path, String::from(e), progress, &mut skipped),
            }
            if batch_bytes >= BATCH_BYTES || batch.len() >= BATCH_FILES {
                let (n, b) =
                    flush(&mut batch, &mut batch_bytes).map_err(|e| e + &stored(&report))?;
                report.objects += n;
                report.bytes += b;
            }
        } else {
            let source = Source::File { file, size, name };
            let base = done_bytes;
            let mut sent = |at: u64| show(progress, done_files, base + at);
            match put(s, &f.key, source, PutOptions::default(), &mut sent) {
                Ok(info) => {
                    report.objects += 1;
                    report.bytes += info.size;
                }
                Err(Failure::Source(why)) => skip(&f.path, why, progress, &mut skipped),
                Err(Failure::Store(e)) => return Err(e + &stored(&report)),
            }
        }
        done_files += 1;
        done_bytes += f.size;
        show(progress, done_files, done_bytes);
    }
    if !batch.is_empty() {
        let (n, b) = flush(&mut batch, &mut batch_bytes).map_err(|e| e + &stored(&report))?;
        report.objects += n;
        report.bytes += b;
    }
    report.skipped = skipped;
    progress.clear();
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "imported {} objects, {} in {:.2?} ({:.0} objects/s, {:.1} MiB/s)",
        report.objects,
        crate::text::human(report.bytes),
        started.elapsed(),
        report.objects as f64 / secs,
        report.bytes as f64 / secs / (1 << 20) as f64
    );
    Ok(report)
}

/// Collects the regular files under `dir` (sorted, depth first) with
/// their keys relative to `root`, but the one whose device and inode are
/// `store`'s; tells `skip` of everything else.
fn walk(
    root: &Path,
    dir: &Path,
    store: Option<(u64, u64)>,
    out: &mut Vec<Found>,
    skip: &mut dyn FnMut(&Path, String),
) -> Result<(), String> {
    let listed = std::fs::read_dir(dir).and_then(|entries| entries.collect::<Result<Vec<_>, _>>());
    let mut entries = match listed {
        Ok(entries) => entries,
        // The directory named on the command line must be readable.
        Err(e) if dir == root => return Err(format!("reading {}: {e}", dir.display())),
        Err(e) => {
            skip(dir, format!("cannot read the directory: {e}"));
            return Ok(());
        }
    };
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let ty = match entry.file_type() {
            Ok(ty) => ty,
            Err(e) => {
                skip(&path, format!("cannot read its type: {e}"));
                continue;
            }
        };
        if ty.is_dir() {
            walk(root, &path, store, out, skip)?;
        } else if ty.is_symlink() {
            skip(&path, "a symbolic link (not followed)".into());
        } else if !ty.is_file() {
            let what = if ty.is_fifo() {
                "a fifo"
            } else if ty.is_socket() {
                "a socket"
            } else if ty.is_block_device() || ty.is_char_device() {
                "a device"
            } else {
                "not a regular file"
            };
            skip(&path, what.into());
        } else {
            let key = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .as_os_str()
                .as_bytes()
                .to_vec();
            if key.len() > MAX_KEY_LEN {
                skip(
                    &path,
                    format!(
                        "its key of {} bytes exceeds the maximum of {MAX_KEY_LEN}",
                        key.len()
                    ),
                );
                continue;
            }
            let meta = entry.metadata();
            if store.is_some() && meta.as_ref().ok().map(file_id) == store {
                skip(
                    &path,
                    "the store itself (storing it would grow it while it is read)".into(),
                );
                continue;
            }
            let size = meta.map(|m| m.len()).unwrap_or(0);
            out.push(Found { path, key, size });
        }
    }
    Ok(())
}
