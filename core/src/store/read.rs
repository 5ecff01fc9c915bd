//! The read path: a key resolved against the index to its bytes (inline
//! and not yet written, or in the read cache), to its tuple block's slot
//! (an inline value), or to its heap extent, pinned; then read, verified
//! and kept in the read cache. `get`, `read`, `stat`, the blocking read,
//! `LocalStore`'s reads and backup's reads of inline values all go
//! through here.
//!
//! Invariants kept here:
//! * a read holds its extent's handle (`HeapRead`) until it is done, so
//!   the pieces are not reused under it (invariant 2);
//! * every byte handed out was checked: heap ranges against their
//!   checksums (`data/`), inline values with their slot's magic,
//!   checksum and identity; a slot that does not hold the version the
//!   index names is `Corrupt`, never a guess (invariants 5 and 6);
//! * a read returns the version the index held when it began: a value
//!   its commit group is still writing is waited for (`landing.rs`), and
//!   an inline value is read again when its block's write count moved
//!   during the read (invariant 8);
//! * bytes the caller is to own are a copy nothing else holds
//!   (invariant 9).

use std::sync::Arc;

use bytes::Bytes;

use super::state::{Entry, Extent, ObjectData};
use super::{check_key, data, ObjectInfo, Store};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::tuple::{self, Checksums, TupleValue};
use crate::options::ReadOptions;

/// A read resolved against the index.
pub(crate) enum Located {
    /// The bytes are at hand (inline values not yet written, cached ones).
    Ready(Bytes),
    /// Read `len` bytes at `offset` of this object version.
    Heap(HeapRead),
    /// An inline value: read it from the slot holding its tuple block.
    Slot(SlotRead),
}

/// An inline value to read from its tuple block's written slot.
pub(crate) struct SlotRead {
    block: u32,
    /// Device offset of the slot.
    at: u64,
    /// The block's write count when it was located (`State::slots`).
    writes: u64,
    version: u64,
    size: u64,
    offset: u64,
    len: u64,
}

/// A heap object pinned for a read (the `Arc` keeps its pieces allocated).
pub(crate) struct HeapRead {
    pub extent: Arc<Extent>,
    pub sums: Checksums,
    pub size: u64,
    pub version: u64,
    pub offset: u64,
    pub len: u64,
}

impl HeapRead {
    pub fn object(&self) -> data::ObjectRef<'_> {
        data::ObjectRef {
            pieces: &self.extent.pieces,
            size: self.size,
            sums: &self.sums,
            version: self.version,
        }
    }
}

/// `key`'s inline value of `version` among a tuple block's `tuples`, as a
/// copy of its own (a slice would keep the whole decoded block alive, and
/// the caller may own it: invariant 9).
pub(crate) fn inline_in(tuples: &[tuple::Tuple], key: &[u8], version: u64) -> Option<Bytes> {
    tuples
        .iter()
        .find(|t| t.version == version && *t.key == *key)
        .and_then(|t| match &t.value {
            TupleValue::Inline(v) => Some(Bytes::copy_from_slice(v)),
            TupleValue::Heap { .. } => None,
        })
}

/// `key`'s inline value of `version` among a kept block's `tuples`, as
/// the slice of the block's decoded payload it is (see [`lend_inline`]).
fn inline_kept(tuples: &[tuple::Tuple], key: &[u8], version: u64) -> Option<Bytes> {
    tuples
        .iter()
        .find(|t| t.version == version && *t.key == *key)
        .and_then(|t| match &t.value {
            TupleValue::Inline(v) => Some(v.clone()),
            TupleValue::Heap { .. } => None,
        })
}

/// Inline bytes served from a kept tuple block, as handed out: a copy of
/// their own for an owned read (invariant 9) and below `LEND_INLINE`
/// bytes (a slice would keep the 4 KiB payload alive for a few bytes);
/// from there on the slice itself, which keeps at most four times its
/// length alive and saves a copy that costs more than the lookup (an
/// allocation above the allocator's small-size caches: warm gets of
/// 1.5 KiB inline values ran at 0.4 × the heap's; `benches/log/2026-11-24-warm-inline-gets.md`).
fn lend_inline(bytes: Bytes, options: ReadOptions) -> Bytes {
    if options.owned || bytes.len() < LEND_INLINE {
        Bytes::copy_from_slice(&bytes)
    } else {
        bytes
    }
}

/// Smallest inline value a cache hit hands out as a slice of its block.
const LEND_INLINE: usize = 1024;

/// `bytes` as the caller asked for them: as they are (shared with the store,
/// read-only), or copied into memory nothing else holds.
fn owned(bytes: Bytes, options: ReadOptions) -> Bytes {
    if options.owned {
        Bytes::copy_from_slice(&bytes)
    } else {
        bytes
    }
}

impl Store {
    /// `len` bytes at `offset` of `key`'s visible version, with that
    /// version's [`ObjectInfo`] (one lookup): located, then read and
    /// verified, and located again when a commit rewrote an inline value's
    /// slot during the read. `get`, `read`, `read_with` and
    /// `read_with_info` all end here.
    pub(crate) async fn read_located(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<(ObjectInfo, Bytes)> {
        let ctx = |e: Error| e.context(format!("read {} at {offset}", show_key(key)));
        let s = self.shared();
        loop {
            let (info, located) = self.locate(key, offset, len, options)?;
            let bytes = match located {
                Located::Ready(b) => b,
                Located::Heap(h) => {
                    s.landing.wait(h.version).await;
                    let bytes = data::read_range(
                        s.engine.as_ref(),
                        Some(&s.tables),
                        &h.object(),
                        h.offset,
                        h.len,
                    )
                    .await
                    .map_err(ctx)?;
                    self.admit(key, &h, &bytes, options);
                    bytes
                }
                Located::Slot(r) => {
                    match self
                        .read_slot(s.engine.as_ref(), key, &r)
                        .await
                        .map_err(ctx)?
                    {
                        Some(b) => b,
                        // The block was rewritten during the read.
                        None => continue,
                    }
                }
            };
            return Ok((info, bytes));
        }
    }

    /// [`read`](Self::read) for blocking callers: a range inside one device
    /// request is read with a plain `pread` on the calling thread, with no
    /// hop to an engine thread.
    pub(crate) fn read_blocking(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<Bytes> {
        let ctx = |e: Error| e.context(format!("read {} at {offset}", show_key(key)));
        let s = self.shared();
        loop {
            match self.locate(key, offset, len, options)?.1 {
                Located::Ready(b) => return Ok(b),
                Located::Heap(h) => {
                    s.landing.wait_blocking(h.version);
                    let bytes = data::read_range_blocking(
                        s.engine.as_ref(),
                        Some(&s.tables),
                        &h.object(),
                        h.offset,
                        h.len,
                    )
                    .map_err(ctx)?;
                    self.admit(key, &h, &bytes, options);
                    return Ok(bytes);
                }
                Located::Slot(r) => {
                    let (io, buf) = s
                        .engine
                        .read_at_blocking(AlignedBuf::zeroed(BLOCK_SIZE), r.at);
                    if let Some(b) = self
                        .inline_from_slot(key, &r, io, buf.as_slice())
                        .map_err(ctx)?
                    {
                        return Ok(b);
                    }
                }
            }
        }
    }

    /// `key`'s inline value of `version`, held in tuple block `block`,
    /// expired or not (backup's checks of its copy).
    pub(crate) async fn inline_value(
        &self,
        key: &[u8],
        version: u64,
        block: u32,
        size: u64,
    ) -> Result<Bytes> {
        let s = self.shared();
        loop {
            let slot = s.state.read().slot_of(block);
            let (at, writes) = slot.ok_or_else(|| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!("tuple block {block} of an inline value was never written"),
                )
            })?;
            let r = SlotRead {
                block,
                at,
                writes,
                version,
                size,
                offset: 0,
                len: size,
            };
            let found = self.read_slot(s.engine.as_ref(), key, &r).await?;
            if let Some(b) = found {
                return Ok(b);
            }
        }
    }

    /// The tuples of `block` as its current slot holds them, read now (none
    /// for a block never written), read again while commits rewrite it;
    /// `Err(why)` when the slot does not decode and was not rewritten
    /// during its read (damage). For scans (scrub, a backup's snapshot).
    pub(crate) async fn current_block(
        &self,
        block: u32,
    ) -> Result<std::result::Result<Vec<tuple::Tuple>, String>> {
        let s = self.shared();
        let id = SlotIdentity {
            store_id: s.geometry.store_id,
            block_no: block,
        };
        loop {
            let Some((at, writes)) = s.state.read().slot_of(block) else {
                return Ok(Ok(Vec::new()));
            };
            let (r, buf) = s.engine.read_at(AlignedBuf::zeroed(BLOCK_SIZE), at).await;
            r.map_err(|e| Error::io("reading a tuple block", e))?;
            let why = match decode_slot(id, buf.as_slice()) {
                SlotContent::Valid { tuples, .. } => return Ok(Ok(tuples)),
                SlotContent::Invalid { why, .. } => why,
                SlotContent::Empty => "it is empty".to_owned(),
            };
            if s.state.read().slot_of(block) == Some((at, writes)) {
                return Ok(Err(why));
            }
        }
    }

    /// The key and (inline) value of each of `versions` in tuple block
    /// `block`, in order: as the block holds them now or, for a tuple
    /// removed since the caller took its hold on `Retired`, as kept aside
    /// there. The caller makes sure every version it asks for was written
    /// (a `sync` after taking the versions: an entry is linked before its
    /// group writes its block). A version found in neither is `Corrupt`.
    /// This is how what needs keys finds them when the index holds only
    /// fingerprints.
    pub(crate) async fn tuples_in_block(
        &self,
        block: u32,
        versions: &[u64],
    ) -> Result<Vec<(Box<[u8]>, Option<Bytes>)>> {
        self.check_not_closing()?;
        let tuples = self.current_block(block).await?.map_err(|why| {
            Error::new(
                ErrorKind::Corrupt,
                format!("tuple block {block} cannot be read: {why}"),
            )
        })?;
        versions
            .iter()
            .map(|&v| {
                tuples
                    .iter()
                    .find(|t| t.version == v)
                    .map(|t| {
                        let value = match &t.value {
                            TupleValue::Inline(b) => Some(Bytes::copy_from_slice(b)),
                            TupleValue::Heap { .. } => None,
                        };
                        (t.key.clone(), value)
                    })
                    .or_else(|| self.shared().retired.get(v))
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::Corrupt,
                            format!("tuple block {block} does not hold the value of version {v}"),
                        )
                    })
            })
            .collect()
    }

    /// Reads the slot `r` names through `reader` and takes `key`'s inline
    /// value from it (see [`inline_from_slot`](Self::inline_from_slot)).
    pub(crate) async fn read_slot<R: data::BlockReader + ?Sized>(
        &self,
        reader: &R,
        key: &[u8],
        r: &SlotRead,
    ) -> Result<Option<Bytes>> {
        let (io, buf) = reader
            .read_blocks(AlignedBuf::zeroed(BLOCK_SIZE), r.at)
            .await;
        self.inline_from_slot(key, r, io, buf.as_slice())
    }

    /// `key`'s inline value (the range `r` asks for) from `slot`, the bytes
    /// read from its tuple block's slot: checked with the slot (magic,
    /// checksum, identity: invariant 5), and kept in the read cache like a
    /// heap object's. `Ok(None)` when the slot did not hold it because a
    /// commit rewrote the block during the read (its write count moved):
    /// locate again. Otherwise a slot that does not hold the version the
    /// index names is `Corrupt`, never a guess.
    fn inline_from_slot(
        &self,
        key: &[u8],
        r: &SlotRead,
        io: std::io::Result<()>,
        slot: &[u8],
    ) -> Result<Option<Bytes>> {
        let s = self.shared();
        let id = SlotIdentity {
            store_id: s.geometry.store_id,
            block_no: r.block,
        };
        let found = match io.as_ref().map(|()| decode_slot(id, slot)) {
            Ok(SlotContent::Valid { tuples, .. }) => {
                let tuples: Arc<[tuple::Tuple]> = tuples.into();
                let found = inline_in(&tuples, key, r.version);
                if s.cache.wants_block(r.block) {
                    s.cache.admit_block(r.block, tuples);
                }
                found.ok_or_else(|| format!("does not hold version {}", r.version))
            }
            Ok(SlotContent::Invalid { why, .. }) => Err(why),
            Ok(SlotContent::Empty) => Err("is empty".to_owned()),
            Err(_) => Err(String::new()),
        };
        let value = match found {
            Ok(v) if v.len() as u64 == r.size => v,
            other => {
                if s.state.read().slot_of(r.block).map(|(_, w)| w) != Some(r.writes) {
                    return Ok(None);
                }
                if let Err(e) = io {
                    return Err(Error::io("reading a tuple block", e));
                }
                let why = match other {
                    Err(why) => why,
                    Ok(_) => format!("holds version {} with another size", r.version),
                };
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!("tuple block {} (slot at byte {}) {why}", r.block, r.at),
                ));
            }
        };
        Ok(Some(
            value.slice(r.offset as usize..(r.offset + r.len) as usize),
        ))
    }

    /// Keeps the checked bytes of a whole-object read in the read cache
    /// (`cache`), unless `key` has moved on to another version meanwhile.
    /// Bytes the caller owns (`options.owned`) are kept as a copy.
    pub(crate) fn admit(&self, key: &[u8], h: &HeapRead, bytes: &Bytes, options: ReadOptions) {
        let s = self.shared();
        if s.cache.wants(h.version, h.size, h.offset, h.len) {
            s.cache.admit(h.version, bytes, options.owned, || {
                s.state
                    .read()
                    .lookup(key)
                    .is_some_and(|e| e.version == h.version)
            });
        }
    }

    /// Checks the call and resolves `key` to its bytes (inline and not yet
    /// written, or cached; copied when the caller is to own them), to its
    /// tuple block's slot (inline), or to its extent, pinned (the `Arc`) so
    /// its pieces outlive the read.
    pub(crate) fn locate(
        &self,
        key: &[u8],
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<(ObjectInfo, Located)> {
        let ctx = || format!("read {} at {offset}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        let (info, data, block, slot) = {
            let st = self.shared().state.read();
            let Some(e) = st.lookup_read(key) else {
                self.shared().evict.count_miss();
                return Err(Error::new(ErrorKind::NotFound, "no such key").context(ctx()));
            };
            self.shared().evict.count_hit();
            (e.info(), e.data.at_hand(), e.block, st.slot_of(e.block))
        };
        let (size, version) = (info.size, info.version);
        if offset > size {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("offset {offset} is past the end of the {size}-byte object"),
            )
            .context(ctx()));
        }
        let len = len.min(size - offset);
        let cache = &self.shared().cache;
        if matches!(data, Some(ObjectData::Heap { .. })) {
            if let Some(b) = cache.get(version, offset, len) {
                return Ok((info, Located::Ready(owned(b, options))));
            }
        }
        let located = match data {
            Some(ObjectData::Inline(b)) => Located::Ready(owned(
                b.slice(offset as usize..(offset + len) as usize),
                options,
            )),
            Some(ObjectData::Heap { extent, sums, .. }) => Located::Heap(HeapRead {
                extent,
                sums,
                size,
                version,
                offset,
                len,
            }),
            None => {
                if len == 0 {
                    // No bytes to read or check.
                    return Ok((info, Located::Ready(Bytes::new())));
                }
                let (at, writes) = slot.ok_or_else(|| {
                    Error::new(
                        ErrorKind::Corrupt,
                        format!("tuple block {block} of an inline value was never written"),
                    )
                    .context(ctx())
                })?;
                // A kept copy of the block holds the value if it holds this
                // version (a tuple's value never changes; versions are
                // never reused), whenever the copy was read.
                let kept = cache
                    .block(block)
                    .and_then(|tuples| inline_kept(&tuples, key, version))
                    .filter(|v| v.len() as u64 == size);
                match kept {
                    Some(v) => Located::Ready(lend_inline(
                        v.slice(offset as usize..(offset + len) as usize),
                        options,
                    )),
                    None => Located::Slot(SlotRead {
                        block,
                        at,
                        writes,
                        version,
                        size,
                        offset,
                        len,
                    }),
                }
            }
        };
        Ok((info, located))
    }

    /// The size of `key`'s object, from memory (`None` when absent).
    pub(crate) fn size_of(&self, key: &[u8]) -> Option<u64> {
        self.shared().state.read().lookup(key).map(|e| e.size())
    }

    /// [`stat`](Store::stat) with its key in hand: the visible entry's
    /// [`ObjectInfo`], from memory.
    pub(crate) fn object_info(&self, key: &[u8]) -> Result<ObjectInfo> {
        let ctx = || format!("stat {}", show_key(key));
        self.check_open().map_err(|e| e.context(ctx()))?;
        check_key(key).map_err(|e| e.context(ctx()))?;
        let st = self.shared().state.read();
        st.lookup(key)
            .map(Entry::info)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "no such key").context(ctx()))
    }
}
