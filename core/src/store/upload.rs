//! Multipart uploads: space reserved up front, parts written in any order
//! and concurrently, one atomic commit.
//!
//! Every upload in progress is listed in its store's registry
//! ([`Store::list_uploads`]) until it is committed, aborted or dropped, and
//! can be aborted from there ([`Store::abort_upload`]): its space is freed
//! once the parts being written finish (they hold the pieces, invariant 2),
//! and the handle's later calls fail with `Closed`. Uploads live in memory
//! only: one not committed when the process ends is gone at the next open,
//! its space free (the allocator is rebuilt from committed objects).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{data, Extent, ObjectData, ObjectInfo, Store};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::options::PutOptions;

/// Parts start at multiples of this many bytes, and every part but the one
/// that ends the object is a multiple of it long.
pub const PART_ALIGN: u64 = BLOCK_SIZE as u64;

enum Target {
    /// Small objects are assembled in memory and committed inline.
    Inline(Vec<u8>),
    /// Heap pieces reserved at `begin_upload` (freed if never committed),
    /// and the CRC32C of each 4 KiB block, recorded as its part is written.
    Heap(Arc<Extent>, Vec<u32>),
}

/// What an upload and its store's registry share.
struct Slot {
    id: u64,
    /// The store, until the upload ends (however it ends: through its
    /// handle or [`Store::abort_upload`]): a finished handle that is kept
    /// (by a binding's object until its collector runs) does not keep the
    /// store open. The registry holds slots weakly, so this makes no cycle.
    store: Mutex<Option<Store>>,
    key: Box<[u8]>,
    size: u64,
    started: SystemTime,
    /// `None` once committed or aborted: nothing more can be written.
    target: Mutex<Option<Target>>,
    /// How the upload ended, once `target` is taken: [`OPEN`] (not taken,
    /// or taken by an abort), [`COMMITTING`], [`COMMITTED`] or [`REFUSED`].
    outcome: AtomicU8,
    /// Object ranges of heap parts still being written (disjoint: a part
    /// overlapping one is refused). A part registers its range under
    /// `target`'s lock and leaves it once every device write it issued has
    /// landed, even if its call was dropped first ([`PartWriting`]), so a
    /// commit that finds this empty under `target`'s lock seals no range
    /// the device may still change, and no part can start after it (they
    /// find `target` taken).
    writing: Mutex<Vec<std::ops::Range<u64>>>,
    /// One bit per `PART_ALIGN` unit of the object: set once written. A
    /// heap part clears its units when it starts and sets them only once
    /// all of it landed, so a part that fails or is dropped leaves a gap
    /// (its units' bytes and checksums no longer agree).
    written: Mutex<Vec<u64>>,
}

/// A heap part's claim on its range ([`Slot::writing`]): held by the
/// `write_part` call and by each device write it issued, released when the
/// last of them ends.
struct PartWriting {
    slot: Arc<Slot>,
    start: u64,
}

impl Drop for PartWriting {
    fn drop(&mut self) {
        self.slot.writing.lock().retain(|r| r.start != self.start);
    }
}

impl Slot {
    /// Sets (`on`) or clears the written bits of `start..end`.
    fn mark(&self, start: u64, end: u64, on: bool) {
        let mut bits = self.written.lock();
        for unit in start / PART_ALIGN..end.div_ceil(PART_ALIGN) {
            if let Some(word) = bits.get_mut((unit / 64) as usize) {
                if on {
                    *word |= 1 << (unit % 64);
                } else {
                    *word &= !(1 << (unit % 64));
                }
            }
        }
    }
}

impl Slot {
    fn written_bytes(&self) -> u64 {
        let bits = self.written.lock();
        let units: u64 = bits.iter().map(|w| u64::from(w.count_ones())).sum();
        // Every unit is PART_ALIGN bytes but the last, which may be short.
        let last = self.size.div_ceil(PART_ALIGN).saturating_sub(1);
        let last_set = bits
            .get((last / 64) as usize)
            .is_some_and(|w| w & (1 << (last % 64)) != 0);
        let short = match self.size % PART_ALIGN {
            0 => 0,
            tail => PART_ALIGN - tail,
        };
        units * PART_ALIGN - if last_set { short } else { 0 }
    }
}

/// An upload in progress, as [`Store::list_uploads`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadInfo {
    /// Identifies the upload in this store until it ends
    /// ([`Store::abort_upload`], [`Upload::id`]).
    pub id: u64,
    /// The key it will commit.
    pub key: Bytes,
    /// The object size given at `begin_upload`.
    pub size: u64,
    /// Bytes written so far, by parts that returned (a range being written
    /// again does not count until that part returns).
    pub written: u64,
    /// When `begin_upload` was called.
    pub started: SystemTime,
}

/// The uploads in progress of one open store.
#[derive(Default)]
pub(crate) struct Uploads {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Weak<Slot>>>,
}

impl Uploads {
    fn register(&self, store: Store, key: &[u8], size: u64, target: Target) -> Arc<Slot> {
        let units = size.div_ceil(PART_ALIGN);
        let slot = Arc::new(Slot {
            id: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            store: Mutex::new(Some(store)),
            key: key.into(),
            size,
            started: SystemTime::now(),
            target: Mutex::new(Some(target)),
            outcome: AtomicU8::new(OPEN),
            writing: Mutex::new(Vec::new()),
            written: Mutex::new(vec![0; units.div_ceil(64) as usize]),
        });
        self.live.lock().insert(slot.id, Arc::downgrade(&slot));
        slot
    }

    fn unregister(&self, id: u64) {
        self.live.lock().remove(&id);
    }

    /// Every upload in progress, oldest first.
    pub(crate) fn list(&self) -> Vec<UploadInfo> {
        let slots: Vec<Arc<Slot>> = self
            .live
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let mut out: Vec<UploadInfo> = slots
            .iter()
            .map(|s| UploadInfo {
                id: s.id,
                key: Bytes::copy_from_slice(&s.key),
                size: s.size,
                written: s.written_bytes(),
                started: s.started,
            })
            .collect();
        out.sort_by_key(|u| u.id);
        out
    }

    /// Ends upload `id`: its space is freed once parts being written finish.
    pub(crate) fn abort(&self, id: u64) -> Result<()> {
        let slot = self.live.lock().remove(&id).and_then(|w| w.upgrade());
        let Some(slot) = slot else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("no upload {id} in progress"),
            ));
        };
        // Dropped outside the lock: the last piece handle frees the pieces.
        let Some(target) = slot.target.lock().take() else {
            // A commit took it between the lookup and here.
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("upload {id} is being committed"),
            ));
        };
        drop(target);
        // The handle lets go of the store too (the caller holds it).
        let store = slot.store.lock().take();
        drop(store);
        Ok(())
    }
}

fn aborted() -> Error {
    Error::new(
        ErrorKind::Closed,
        "the upload was aborted (Store::abort_upload)",
    )
}

/// [`Slot::outcome`]: no commit took the target.
const OPEN: u8 = 0;
/// A commit took it and has not finished (or its call was dropped).
const COMMITTING: u8 = 1;
/// A commit made the object visible.
const COMMITTED: u8 = 2;
/// A commit was refused or failed, and ended the upload.
const REFUSED: u8 = 3;

impl Slot {
    /// Why nothing more can be done with the upload.
    fn ended(&self) -> Error {
        match self.outcome.load(Ordering::SeqCst) {
            COMMITTING => Error::new(
                ErrorKind::Closed,
                "a commit of the upload is under way, or was abandoned",
            ),
            COMMITTED => Error::new(ErrorKind::Closed, "the upload was already committed"),
            REFUSED => Error::new(
                ErrorKind::Closed,
                "the upload ended when its commit was refused or failed",
            ),
            _ => aborted(),
        }
    }
}

/// An upload in progress; see [`Store::begin_upload`]. Used by reference
/// from any number of tasks or threads.
pub struct Upload {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("id", &self.slot.id)
            .field("key", &show_key(&self.slot.key))
            .field("size", &self.slot.size)
            .finish()
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        self.release();
    }
}

impl Upload {
    pub(crate) fn begin(store: Store, key: &[u8], size: u64) -> Result<Upload> {
        let target = if store.is_inline(size) {
            Target::Inline(vec![0; size as usize])
        } else {
            let blocks = crate::meta::tuple::data_blocks(size) as usize;
            Target::Heap(data::allocate(store.shared(), key, size)?, vec![0; blocks])
        };
        let shared = store.clone();
        let slot = shared.shared().uploads.register(store, key, size, target);
        Ok(Upload { slot })
    }

    /// The store, while the upload has not ended.
    fn store(&self) -> Result<Store> {
        self.slot
            .store
            .lock()
            .clone()
            .ok_or_else(|| self.slot.ended())
    }

    /// Leaves the store's registry and lets go of the store (outside the
    /// lock: the last handle on a store shuts it down): the upload ended.
    fn release(&self) {
        let store = self.slot.store.lock().take();
        if let Some(store) = &store {
            store.shared().uploads.unregister(self.slot.id);
        }
        drop(store);
    }

    /// This upload's id in [`Store::list_uploads`].
    pub fn id(&self) -> u64 {
        self.slot.id
    }

    /// The object size given at `begin_upload`.
    pub fn size(&self) -> u64 {
        self.slot.size
    }

    /// Writes `bytes` at `offset`. `offset` must be a multiple of
    /// [`PART_ALIGN`] and the part must end at a multiple of it or at the
    /// object's end. Parts may come in any order, from many tasks at once.
    /// A range may be written again once the part that wrote it ended; a
    /// part overlapping one still being written (including one whose call
    /// was dropped and whose device writes have not landed) is refused
    /// with `InvalidArgument` and may be retried shortly. A part counts as
    /// written only once it returned `Ok`: one that fails or is dropped
    /// leaves its range unwritten, even if an earlier part had written it.
    pub async fn write_part(&self, offset: u64, bytes: impl Into<Bytes>) -> Result<()> {
        self.write_part_inner(offset, bytes.into(), None).await
    }

    /// [`write_part`](Self::write_part) with the CRC32C (Castagnoli) of
    /// `bytes` as the client computed it: the bytes are checked against it
    /// before anything is written, so integrity holds end to end from the
    /// client (as S3's checksum headers do). A mismatch is
    /// `InvalidArgument` and writes nothing.
    pub async fn write_part_checked(
        &self,
        offset: u64,
        bytes: impl Into<Bytes>,
        crc32c: u32,
    ) -> Result<()> {
        self.write_part_inner(offset, bytes.into(), Some(crc32c))
            .await
    }

    async fn write_part_inner(&self, offset: u64, bytes: Bytes, expect: Option<u32>) -> Result<()> {
        let size = self.slot.size;
        let ctx = || format!("write_part {} at {offset}", show_key(&self.slot.key));
        let store = self.store().map_err(|e| e.context(ctx()))?;
        store.check_open().map_err(|e| e.context(ctx()))?;
        let len = bytes.len() as u64;
        let invalid = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m).context(ctx()));
        if len == 0 {
            return invalid("empty part".into());
        }
        if !offset.is_multiple_of(PART_ALIGN) {
            return invalid(format!("part offset must be a multiple of {PART_ALIGN}"));
        }
        let end = match offset.checked_add(len) {
            Some(end) if end <= size => end,
            _ => {
                return invalid(format!(
                    "part of {len} bytes at {offset} runs past the object size {size}"
                ))
            }
        };
        if end % PART_ALIGN != 0 && end != size {
            return invalid(format!(
                "a part that does not end the object must be a multiple of {PART_ALIGN} bytes long"
            ));
        }
        // A client's CRC32C is checked before anything is written (one pass
        // over the part, only when the client sent one).
        if let Some(want) = expect {
            let got = crc32c::crc32c(&bytes);
            if got != want {
                return invalid(format!(
                    "the part's bytes do not match the CRC32C sent with them \
                     (sent {want:#010x}, computed {got:#010x}); nothing was written"
                ));
            }
        }
        // Small objects are copied under the lock; heap parts claim their
        // range (see `Slot::writing`) and are written with a handle on the
        // pieces, so an abort meanwhile frees them only after this write.
        let (extent, claim) = {
            let mut target = self.slot.target.lock();
            match target.as_mut() {
                None => return Err(self.slot.ended().context(ctx())),
                Some(Target::Inline(buf)) => {
                    // The buffer holds `size` bytes and `end <= size` (above).
                    let Some(dst) = buf.get_mut(offset as usize..end as usize) else {
                        return invalid(format!("part at {offset} runs past the object"));
                    };
                    dst.copy_from_slice(&bytes);
                    self.slot.mark(offset, end, true);
                    return Ok(());
                }
                Some(Target::Heap(extent, _)) => {
                    let mut writing = self.slot.writing.lock();
                    if let Some(r) = writing.iter().find(|r| r.start < end && offset < r.end) {
                        return invalid(format!(
                            "bytes {}..{} are still being written by another part \
                             (or by one whose call was dropped): write this part once it ended",
                            r.start, r.end
                        ));
                    }
                    writing.push(offset..end);
                    drop(writing);
                    self.slot.mark(offset, end, false);
                    let claim = PartWriting {
                        slot: self.slot.clone(),
                        start: offset,
                    };
                    (extent.clone(), Arc::new(claim))
                }
            }
        };
        let shared = store.shared();
        let sums = data::write_range_holding(shared, &extent, offset, &bytes, claim.clone())
            .await
            .map_err(|e| e.context(ctx()))?;
        // One checksum per block of the part, at the part's blocks; the
        // units count as written only now, with the claim still held.
        let first = (offset / BLOCK_SIZE as u64) as usize;
        let mut target = self.slot.target.lock();
        match target.as_mut() {
            Some(Target::Heap(_, table)) => {
                for (slot, sum) in table.iter_mut().skip(first).zip(sums) {
                    *slot = sum;
                }
                self.slot.mark(offset, end, true);
            }
            _ => return Err(self.slot.ended().context(ctx())),
        }
        drop(target);
        drop(claim);
        Ok(())
    }

    /// First byte not yet written, if any.
    fn first_gap(&self) -> Option<u64> {
        let bits = self.slot.written.lock();
        let units = self.slot.size.div_ceil(PART_ALIGN);
        (0..units)
            .find(|u| {
                bits.get((u / 64) as usize)
                    .is_none_or(|word| word & (1 << (u % 64)) == 0)
            })
            .map(|u| u * PART_ALIGN)
    }

    /// Makes the object visible atomically, replacing any previous one.
    /// Every byte must have been written, by parts that returned `Ok`
    /// (`InvalidArgument` otherwise, and the upload ends). While a part of
    /// this upload may still be written (a [`write_part`](Self::write_part)
    /// under way, or one whose call was dropped and whose device writes
    /// have not landed) the commit is refused with `InvalidArgument` and
    /// the upload stays as it was. Once the upload has ended (committed,
    /// refused, aborted), `write_part` and `commit` are `Closed` and say
    /// how it ended.
    pub async fn commit(&self) -> Result<ObjectInfo> {
        self.commit_with(PutOptions::default()).await
    }

    /// [`commit`](Self::commit) under a condition
    /// ([`PutMode::Create`](crate::PutMode::Create),
    /// [`PutMode::Update`](crate::PutMode::Update)), decided in commit order
    /// as for [`Store::put_with`](crate::Store::put_with): a refused commit
    /// (`AlreadyExists`, `VersionMismatch`) changes nothing and frees the
    /// upload's space. A [`ttl`](PutOptions::ttl) counts from the commit; a
    /// bad one is `InvalidArgument` and leaves the upload as it was.
    pub async fn commit_with(&self, options: PutOptions) -> Result<ObjectInfo> {
        match super::request::PutSpec::of(&options) {
            Ok(spec) => self.commit_spec(spec).await,
            Err(e) => Err(e.context(format!("commit upload {}", show_key(&self.slot.key)))),
        }
    }

    /// Ends the upload with `outcome` unless it already ended: nothing
    /// more can be written, and its space is freed (once no part's device
    /// write holds it).
    fn end(&self, outcome: u8) {
        let mut target = self.slot.target.lock();
        let taken = target.take();
        if taken.is_some() {
            self.slot.outcome.store(outcome, Ordering::SeqCst);
        }
        drop(target);
        // The pieces go back before the store may shut down.
        drop(taken);
        self.release();
    }

    /// [`commit_with`](Self::commit_with) with the options checked.
    pub(crate) async fn commit_spec(&self, spec: super::request::PutSpec) -> Result<ObjectInfo> {
        let (key, size) = (&self.slot.key, self.slot.size);
        let ctx = format!("commit upload {}", show_key(key));
        let store = self.store().map_err(|e| e.context(&ctx))?;
        let usable = store
            .check_open()
            .and_then(|()| store.shared().check_failed());
        if let Err(e) = usable {
            self.end(REFUSED);
            return Err(e.context(ctx));
        }
        // Taken under the lock, and only with no part's range claimed (see
        // `Slot::writing`): the upload leaves the registry's reach (an
        // abort now finds nothing to free; the commit owns the pieces).
        let target = {
            let mut target = self.slot.target.lock();
            if target.is_none() {
                return Err(self.slot.ended().context(ctx));
            }
            if let Some(r) = self.slot.writing.lock().first() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "bytes {}..{} are still being written: commit once every part \
                         has ended (the upload is unchanged)",
                        r.start, r.end
                    ),
                )
                .context(ctx));
            }
            if let Some(gap) = self.first_gap() {
                // Ended under the same lock that found the gap: no part
                // can fill it and no other commit succeed in between.
                let taken = target.take();
                self.slot.outcome.store(REFUSED, Ordering::SeqCst);
                drop(target);
                drop(taken);
                self.release();
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("bytes from {gap} were never written; the upload is ended"),
                )
                .context(ctx));
            }
            self.slot.outcome.store(COMMITTING, Ordering::SeqCst);
            target.take()
        };
        self.release();
        let committed = async {
            let data = match target {
                None => return Err(self.slot.ended()),
                Some(Target::Inline(buf)) => ObjectData::Inline(Bytes::from(buf)),
                Some(Target::Heap(extent, table)) => {
                    let (sums, trailer) = data::seal(table.into());
                    if let Some(t) = &trailer {
                        data::write_table(store.shared(), &extent, size, t).await?;
                    }
                    // Synced before the tuple by the commit (not read back
                    // at open: uploads may be large).
                    ObjectData::Heap {
                        extent,
                        sums,
                        unsynced: false,
                    }
                }
            };
            // A cache store evicts for the tuple when the metadata area
            // has no room for it (the value's pieces are the upload's
            // already: it asks for no heap).
            let keys = [&key[..]];
            let need = super::evict::Need {
                bytes: 0,
                ..store.need(std::iter::once(size), &keys)
            };
            store
                .making_room(need, || {
                    store.commit_object(key, size, data.clone(), None, spec)
                })
                .await
        }
        .await;
        let outcome = if committed.is_ok() {
            COMMITTED
        } else {
            REFUSED
        };
        self.slot.outcome.store(outcome, Ordering::SeqCst);
        committed.map_err(|e| e.context(ctx))
    }

    /// Abandons the upload and frees its space (once no part's device
    /// write holds it). Dropping the handle does the same. A no-op once the
    /// upload ended.
    pub async fn abort(&self) -> Result<()> {
        self.end(OPEN);
        Ok(())
    }
}
