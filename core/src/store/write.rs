//! Put staging: a put turned into a commit request. Its key and state
//! checked, its value placed (inline in its tuple, or in freshly allocated
//! heap pieces with a checksum per block), the pieces written now or their
//! write left to the commit group, and the request handed to the commit
//! path (`request.rs`, `commit/`), which makes it durable and visible.
//!
//! Invariants kept here:
//! * nothing of a put is visible before its commit: its value goes into
//!   pieces that nothing else holds, and the commit path links it
//!   (invariants 1 and 2);
//! * a heap value carries the checksums of its bytes, computed as it is
//!   staged, so every later read verifies them (invariant 5);
//! * a value whose write is left to its commit group is UNSYNCED, so
//!   recovery checks it against its tuple in the newest group
//!   (invariant 4);
//! * a bad key, a refused condition or a failed store changes nothing
//!   (invariant 3).

use std::sync::Arc;

use bytes::Bytes;
use futures::channel::oneshot;

use super::state::{heap, Extent, ObjectData};
use super::{check_key, data, request, ObjectInfo, Store, Upload};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::meta::tuple::Checksums;
use crate::options::{PutMode, PutOptions};

/// Heap objects up to this size are not synced before their tuple: the
/// group's one sync makes data and tuple durable together, and recovery
/// reads the newest group's such objects back against their checksums. A
/// put is then one sync. Larger objects (uploads, bulk loads always) are
/// synced before their tuple, because verifying them at open would mean
/// reading them.
pub(crate) const UNSYNCED_LIMIT: u64 = 1 << 20;

/// A put after its checks: the value to commit, or pieces to fill first
/// (with the trailer table to write after the data, if any).
pub(super) enum Staged {
    /// What to commit, and the value's write when the commit group issues
    /// it (`Store::prepare_write`).
    Ready(ObjectData, Option<request::DataWrite>),
    /// Pieces to write the value into; whether its data may skip the sync
    /// before its tuple.
    Write(Arc<Extent>, bool),
}

impl Store {
    /// [`put_with`](Store::put_with) with its key and value in hand: the
    /// value checked and placed (compacting the heap once when it has the
    /// room only in holes too small), written or left to its commit group,
    /// then committed.
    pub(crate) async fn put_value(
        &self,
        key: &[u8],
        value: Bytes,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        let keys = [key];
        let need = self.need(std::iter::once(value.len() as u64), &keys);
        self.making_room(need, || self.put_once(key, value.clone(), options))
            .await
    }

    /// One try of [`put_value`](Self::put_value) (a cache store tries
    /// again after evicting when it finds no room).
    async fn put_once(&self, key: &[u8], value: Bytes, options: PutOptions) -> Result<ObjectInfo> {
        let _staging = self.staging();
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        let spec = self.precheck(key, &options).map_err(ctx)?;
        let staged = match self.stage_put(key, &value, true) {
            // A heap with the room but in holes too small: compact it once
            // and try again.
            Err(e) if self.worth_compacting(&e, value.len() as u64) => {
                self.compact().await.map_err(ctx)?;
                self.after_compaction(self.stage_put(key, &value, true))
            }
            r => r,
        };
        let (data, data_write) = match staged.map_err(ctx)? {
            Staged::Ready(data, data_write) => (data, data_write),
            Staged::Write(extent, unsynced) => {
                let sums = data::write_object(self.shared(), &extent, &value)
                    .await
                    .map_err(ctx)?;
                (heap(extent, sums, unsynced), None)
            }
        };
        self.commit_object(key, value.len() as u64, data, data_write, spec)
            .await
            .map_err(ctx)
    }

    /// Checks a put's options, and refuses a conditional put that already
    /// fails against the index before its value is written (the commit
    /// path decides for real).
    pub(crate) fn precheck(&self, key: &[u8], options: &PutOptions) -> Result<request::PutSpec> {
        let spec = request::PutSpec::of(options)?;
        if spec.mode == PutMode::Overwrite {
            return Ok(spec);
        }
        let st = self.shared().state.read();
        let current = st.lookup(key).map(|e| e.version);
        spec.mode.check(current)?;
        Ok(spec)
    }

    /// The value's write left to its commit group, which issues it beside
    /// the tuple blocks (one device round trip instead of two before the
    /// sync): a value of one device request, UNSYNCED (so recovery checks
    /// it against its tuple in the newest group: until the sync any subset
    /// of the group's writes may be on the device, as before), in the
    /// `Sync` durability mode (in `Buffered` the put is acknowledged before
    /// its group is written, so its data must be written first).
    fn prepare_write(
        &self,
        extent: &Arc<Extent>,
        value: &Bytes,
        unsynced: bool,
    ) -> Option<(Checksums, request::DataWrite)> {
        let sync_mode = matches!(self.shared().options.durability, crate::Durability::Sync);
        if !(unsynced && sync_mode) {
            return None;
        }
        data::prepare_write(extent, value)
    }

    /// [`put`](Self::put) for blocking callers: a value that fits one device
    /// request goes with its commit group; a larger one is written with
    /// `pwrite` on the calling thread first.
    pub(crate) fn put_blocking(
        &self,
        key: &[u8],
        value: Bytes,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        let keys = [key];
        let need = self.need(std::iter::once(value.len() as u64), &keys);
        self.making_room_blocking(need, || self.put_blocking_once(key, &value, options))
    }

    fn put_blocking_once(
        &self,
        key: &[u8],
        value: &Bytes,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        let _staging = self.staging();
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        let spec = self.precheck(key, &options).map_err(ctx)?;
        let (data, data_write) = match self.stage_put_here(key, value, true).map_err(ctx)? {
            Staged::Ready(data, data_write) => (data, data_write),
            Staged::Write(extent, unsynced) => {
                let sums =
                    data::write_object_blocking(self.shared(), &extent, value).map_err(ctx)?;
                (heap(extent, sums, unsynced), None)
            }
        };
        crate::io::block_on(self.commit_object(key, value.len() as u64, data, data_write, spec))
            .map_err(ctx)
    }

    /// The part of a put before its commit, on the calling thread: the
    /// value checked, placed and written (not yet visible). For puts whose
    /// copy and write run on a helper thread while the commit stays with
    /// the caller's task (`EventLoop::put_op`): a task dropped meanwhile
    /// commits nothing, so a cancelled put can never land after a later
    /// one of the same caller.
    pub(crate) fn write_blocking(&self, key: &[u8], value: &Bytes) -> Result<ObjectData> {
        let ctx = |e: Error| e.context(format!("put {}", show_key(key)));
        match self.stage_put_here(key, value, false).map_err(ctx)? {
            Staged::Ready(data, _) => Ok(data),
            Staged::Write(extent, unsynced) => {
                let sums =
                    data::write_object_blocking(self.shared(), &extent, value).map_err(ctx)?;
                Ok(heap(extent, sums, unsynced))
            }
        }
    }

    /// [`stage_put`](Self::stage_put) on the calling thread, compacting
    /// once (there) when the heap has the room only in small holes.
    fn stage_put_here(&self, key: &[u8], value: &Bytes, overlap: bool) -> Result<Staged> {
        match self.stage_put(key, value, overlap) {
            Err(e) if self.worth_compacting(&e, value.len() as u64) => {
                crate::io::block_on(self.compact())?;
                self.after_compaction(self.stage_put(key, value, overlap))
            }
            r => r,
        }
    }

    /// Checks a put and decides where its value goes: inline, or into
    /// freshly allocated pieces with a checksum per block.
    /// With `overlap`, a value whose write can go beside its commit group's
    /// tuple blocks is prepared here (`prepare_write`) and comes back `Ready`.
    pub(super) fn stage_put(&self, key: &[u8], value: &Bytes, overlap: bool) -> Result<Staged> {
        self.check_open()?;
        check_key(key)?;
        self.shared().check_failed()?;
        let size = value.len() as u64;
        if self.is_inline(size) {
            return Ok(Staged::Ready(ObjectData::Inline(value.clone()), None));
        }
        let extent = data::allocate(self.shared(), key, size)?;
        let unsynced = size <= UNSYNCED_LIMIT;
        if overlap {
            if let Some((sums, data_write)) = self.prepare_write(&extent, value, unsynced) {
                return Ok(Staged::Ready(
                    heap(extent, sums, unsynced),
                    Some(data_write),
                ));
            }
        }
        Ok(Staged::Write(extent, unsynced))
    }

    pub(crate) fn is_inline(&self, size: u64) -> bool {
        size == 0 || size <= self.shared().settings.inline_threshold as u64
    }

    pub(crate) async fn commit_object(
        &self,
        key: &[u8],
        size: u64,
        data: ObjectData,
        data_write: Option<request::DataWrite>,
        spec: request::PutSpec,
    ) -> Result<ObjectInfo> {
        let key: Box<[u8]> = key.into();
        self.submit(|reply| request::Request::Put {
            key,
            size,
            data,
            data_write,
            spec,
            reply,
        })
        .await
    }

    /// Sends many staged puts as one commit request.
    pub(crate) async fn submit_many(
        &self,
        items: Vec<request::Staged>,
    ) -> Result<(usize, Option<Error>)> {
        let (tx, rx) = oneshot::channel();
        let req = request::Request::PutMany { items, reply: tx };
        let Ok(role) = self.inner.commits.push(req) else {
            return Err(Error::new(ErrorKind::Closed, "the store is closed"));
        };
        self.inner
            .commits
            .wait(role, rx)
            .await
            .ok_or_else(|| Error::new(ErrorKind::Closed, "the store closed during the call"))
    }

    /// [`begin_upload`](Store::begin_upload) with its key in hand: the
    /// checks, then the space reserved (compacting the heap once when it
    /// has the room only in holes too small).
    pub(crate) async fn start_upload(&self, key: &[u8], size: u64) -> Result<Upload> {
        let ctx = || format!("begin_upload {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        self.shared().check_failed().map_err(|e| e.context(ctx()))?;
        let keys = [key];
        let need = self.need(std::iter::once(size), &keys);
        self.making_room(need, || async {
            match Upload::begin(self.clone(), key, size) {
                Err(e) if self.worth_compacting(&e, size) => {
                    self.compact().await?;
                    self.after_compaction(Upload::begin(self.clone(), key, size))
                }
                r => r,
            }
        })
        .await
        .map_err(|e| e.context(ctx()))
    }
}
