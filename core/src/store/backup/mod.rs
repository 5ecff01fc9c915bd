//! Online backup: a consistent, compacted, verified copy of a live store.
//!
//! 1. **Snapshot.** Under one read lock of the index, every live object
//!    version is pinned: its key, size, version and value (the `Arc` of
//!    its heap extent, which keeps its pieces from being reused while the
//!    backup reads them: invariant 2; or an inline value's bytes). Inline
//!    values live in their tuple blocks, not in RAM: right after the lock
//!    they are read from the blocks, one read per block, and one removed
//!    from its block meanwhile (its key changed) is taken from the values
//!    the commit path keeps aside while a snapshot is being filled
//!    (`Retired`). Then one sync, so the copy never holds an object the
//!    source could still lose.
//! 2. **Copy.** A new store is created beside the destination, under a
//!    temporary name (`.NAME.partial-PID-NANOS`), with the source's size
//!    (and the capacity it was asked for, so the source's options open the
//!    copy), index kind, inline threshold and engine. Objects are read
//!    from their pinned versions (every byte checked against its checksum,
//!    as on any read) in source heap order, many at once, and written into
//!    the copy by bulk load, in batches: the next batch is read while the
//!    previous one is written. Objects larger than `LARGE` go through an
//!    upload, chunk by chunk. Only live objects are copied: the copy is
//!    compacted.
//! 3. **Verify.** The copy is closed and reopened (recovery checks every
//!    metadata block), must hold exactly as many objects and bytes as the
//!    snapshot, and for every object the CRC32C it records for each 4 KiB
//!    block (in its tuple, or its trailer table, read and checked) must be
//!    that of the bytes read from the source. So the copy describes
//!    exactly the source's bytes, and any read of it checks its data
//!    against them (invariant 5). The data blocks themselves are not read
//!    back: that would make a backup a third pass over the bytes; run
//!    `Store::scrub` (`blobcask check --data`) on the copy for that.
//! 4. **Publish.** The temporary file is linked to the destination (which
//!    fails if something appeared there meanwhile: nothing is ever
//!    replaced) and unlinked; the directory is synced. A backup that fails
//!    or is cut short leaves no file at the destination; a cut (kill,
//!    power loss) can leave the temporary file, never a partial store under
//!    the destination's name.
//!
//! Writers and readers go on throughout; a write after the snapshot is not
//! in the copy. The copy has new versions and creation times (a version is
//! the store's commit sequence), the same keys, bytes and expiry times (an
//! object expired at the snapshot is not copied). Space freed at the
//! source during the backup is reused once the backup has read the object
//! that was there.

mod copy;
mod publish;
mod snapshot;
#[cfg(test)]
mod tests;
mod verify;

use publish::{names_a_directory, partial_path, publish};
pub(crate) use snapshot::Retired;
use verify::verify;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{data, ObjectData, Store};
use crate::error::{show_key, Error, ErrorKind, Result};

/// Objects larger than this are copied through an upload, `CHUNK` at a
/// time, instead of being held whole in a batch.
const LARGE: u64 = 16 << 20;
/// Bytes read and written per step of a large object, and such steps in
/// flight.
const CHUNK: u64 = 4 << 20;
const LARGE_CHUNKS_IN_FLIGHT: usize = 6;
/// Value bytes of one batch (bulk load), and objects per batch at most.
const BATCH_BYTES: u64 = 64 << 20;
const BATCH_OBJECTS: usize = 8192;
/// Reads in flight (runs at the source, objects' checksums in the copy).
const READS_IN_FLIGHT: usize = 32;
/// Longest device span read at once for a run of adjacent small objects,
/// and the widest gap inside a run.
const RUN_BYTES: u64 = data::IO_CHUNK;
const RUN_GAP: u64 = 64 << 10;

/// What [`Store::backup`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BackupReport {
    /// Where the copy is.
    pub path: PathBuf,
    /// Objects in the copy (the live objects at the snapshot).
    pub objects: u64,
    /// Their bytes (keys not counted).
    pub bytes: u64,
    /// From the call to the copy being verified and published.
    pub elapsed: Duration,
}

/// What a running backup has copied so far, for progress reports: shared
/// with [`Store::backup_with_progress`], read from any thread meanwhile.
/// Objects count once whole in the copy (a large one's bytes as its
/// chunks are written); the totals reach the report's before the copy is
/// verified and published.
#[derive(Debug, Default)]
pub struct BackupProgress {
    objects: AtomicU64,
    bytes: AtomicU64,
}

impl BackupProgress {
    /// Nothing copied yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Objects written into the copy so far.
    pub fn objects(&self) -> u64 {
        self.objects.load(Ordering::Relaxed)
    }

    /// Object bytes written into the copy so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(super) fn add(&self, objects: u64, bytes: u64) {
        self.objects.fetch_add(objects, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

impl BackupReport {
    /// Object bytes per second over the whole backup.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An object read for the copy: its index in the snapshot, its bytes, and
/// the block sums its source records.
type ReadObject = (usize, Bytes, Option<Arc<[u32]>>);

/// One object version pinned by the snapshot until it has been read.
struct Pinned {
    /// Its key: set at the snapshot when the index holds keys, else read
    /// from its tuple with the inline values (`fill_inline`).
    key: std::sync::OnceLock<Box<[u8]>>,
    size: u64,
    version: u64,
    /// When it expires (µs since the epoch): the copy's expires then too.
    expires: Option<u64>,
    /// Its value; taken (`release`) once its bytes are read, so the source
    /// can reuse the space of an object deleted meanwhile. `None` until
    /// filled for an inline value in its tuple block (`fill_inline`).
    data: Mutex<Option<ObjectData>>,
    /// The tuple block to read at the snapshot: an inline value's, or the
    /// one whose tuple has the key (an index of fingerprints).
    block: Option<u32>,
}

impl Pinned {
    fn key(&self) -> &[u8] {
        self.key.get().map_or(&[], |k| k)
    }

    fn data(&self) -> Result<ObjectData> {
        self.data.lock().clone().ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!("backup: {} was read twice", show_key(self.key())),
            )
        })
    }

    fn release(&self) {
        self.data.lock().take();
    }

    /// Where its bytes start on the device (inline values first).
    fn heap_offset(&self) -> u64 {
        match &*self.data.lock() {
            Some(ObjectData::Heap { extent, .. }) => extent
                .pieces
                .first()
                .map_or(0, |p| p.offset().saturating_add(1)),
            _ => 0,
        }
    }

    /// The chunks of the object, as (offset, length).
    fn chunks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let n = self.size.div_ceil(CHUNK);
        (0..n).map(move |i| {
            let at = i * CHUNK;
            (at, CHUNK.min(self.size - at))
        })
    }
}

impl Store {
    /// Writes a consistent copy of the committed state to `dest`, a path
    /// that must not exist yet, while reads and writes go on. The copy holds
    /// the objects live at the call (compacted: only live data), is reopened
    /// and checked against the source's bytes (every object's recorded block
    /// checksums) before this returns, and appears under `dest` only when
    /// complete. See the module docs of `store::backup` for the steps; a
    /// file copy (`cp`) of a live store is **not** a backup. `close` waits
    /// for a backup in progress, which then stops with `Closed`.
    ///
    /// Errors: `AlreadyExists` if `dest` exists (nothing is ever replaced);
    /// `NotFound` if its directory does not exist; `InvalidArgument` if it
    /// names no file (`/`, or ending in `/`, `.` or `..`); `Closed`;
    /// `NoSpace` if the destination's file system cannot hold a store of
    /// the source's capacity; `Corrupt` if an object of the source fails its
    /// checksums (no copy is published); `Io` otherwise.
    pub async fn backup(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        self.backup_with_progress(dest, &BackupProgress::new())
            .await
    }

    /// [`backup`](Self::backup), counting what it has copied in `progress`
    /// as it goes (a progress bar reads it from another thread or task).
    pub async fn backup_with_progress(
        &self,
        dest: impl AsRef<Path>,
        progress: &BackupProgress,
    ) -> Result<BackupReport> {
        let started = Instant::now();
        let dest = dest.as_ref();
        let ctx = || format!("backup to {}", dest.display());
        self.check_open().map_err(|e| e.context(ctx()))?;
        let temp = partial_path(dest).map_err(|e| e.context(ctx()))?;
        if names_a_directory(dest) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the destination must name a file (it ends with '/', '.' or '..')",
            )
            .context(ctx()));
        }
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(Error::new(
                ErrorKind::NotFound,
                "the destination's directory does not exist",
            )
            .context(ctx()));
        }
        if dest.symlink_metadata().is_ok() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                "the destination exists; a backup never replaces a file",
            )
            .context(ctx()));
        }
        // Counted with the puts in progress: `close` waits for the backup,
        // which stops at its next read once `close` has begun.
        let _running = self.staging();
        let snapshot = self.snapshot().await.map_err(|e| e.context(ctx()))?;
        self.sync().await.map_err(|e| e.context(ctx()))?;
        let outcome = match self.copy_to(&temp, &snapshot, progress).await {
            Ok(sums) => verify(self, &temp, &snapshot, &sums).await,
            Err(e) => Err(e),
        };
        let published = outcome
            .and_then(|()| self.check_not_closing())
            .and_then(|()| publish(&temp, dest));
        if let Err(e) = published {
            let _ = std::fs::remove_file(&temp);
            return Err(e.context(ctx()));
        }
        Ok(BackupReport {
            path: dest.to_path_buf(),
            objects: snapshot.len() as u64,
            bytes: snapshot.iter().map(|p| p.size).sum(),
            elapsed: started.elapsed(),
        })
    }
}
