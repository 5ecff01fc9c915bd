//! Applying a group: each request in commit order changes the index and
//! the cached images of its tuple blocks (step 2 of `commit`'s module
//! doc), after step 0 (a moved tuple's stale copies removed) and before
//! the group is written (`blocks.rs`).
//!
//! Invariants kept here: versions strictly increase in commit order and are
//! never reused (invariant 4: the larger version wins at open); a block is
//! loaded before anything changes, so a failed read leaves the in-memory
//! state untouched; a request is acknowledged only after its group is
//! written and synced, in sync mode or for a barrier (invariant 1); a
//! moved tuple's stale copy goes only once the new copy is durable.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::AlignedBuf;
use crate::meta::block::{decode_slot, SlotContent, SlotIdentity};
use crate::meta::tuple::{self, Tuple};
use crate::options::{Durability, PutMode};
use crate::store::evict::Evicted;
use crate::store::request::{fail_request, Ack, Expiry, PutSpec, Request};
use crate::store::{now_micros, Entry, ObjectData, ObjectInfo, Stored};

use super::unknown_block;

impl Committer {
    pub(super) async fn commit_group(&mut self, batch: Vec<Request>) {
        if let Err(e) = self.check_failed() {
            batch.into_iter().for_each(|r| fail_request(r, &e));
            return;
        }
        // Before anything changes, no superblock names an index image
        // without a change map (a barrier alone changes nothing;
        // `write_blocks_beside` marks or drops before any tuple block is
        // written, whatever the path).
        let changes = self.reap_due()
            || !self.stale.is_empty()
            || batch.iter().any(|r| !matches!(r, Request::Barrier { .. }));
        // Compaction packs objects into free space: the checkpoint's pieces
        // are given back first, so it can pack into them too (the close or
        // the next background checkpoint writes a new one).
        let relocating = batch.iter().any(|r| matches!(r, Request::Relocate { .. }));
        if let Err(e) = if relocating {
            self.end_checkpoint()
        } else if changes {
            self.before_change()
        } else {
            Ok(())
        } {
            self.poison(&e);
            batch.into_iter().for_each(|r| fail_request(r, &e));
            return;
        }
        // Step 0: a moved tuple's stale copy goes only once the new copy is
        // durable (the open group is written first).
        let step0 = if self.stale.is_empty() {
            Ok(())
        } else {
            match self.flush().await {
                Ok(()) => self.remove_stale().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = step0 {
            self.poison(&e);
            batch.into_iter().for_each(|r| fail_request(r, &e));
            return;
        }

        if self.reap_due() {
            if let Err(e) = self.reap().await {
                self.poison(&e);
                batch.into_iter().for_each(|r| fail_request(r, &e));
                return;
            }
        }

        let touched = self.blocks_of(&batch);
        self.prefetch(touched).await;
        let mut acks = Vec::new();
        let mut barrier = false;
        let mut failed: Option<Error> = None;
        for req in batch {
            if let Some(e) = &failed {
                fail_request(req, e);
                continue;
            }
            // A change to a key whose moved tuple still has a stale copy
            // waits for step 0 of the next group.
            if req.touches(&self.stale_keys) {
                self.deferred.push_back(req);
                continue;
            }
            // A load or a batch makes its own room (a batch: all of it at
            // once, so it is never split).
            if !matches!(
                req,
                Request::PutMany { .. } | Request::Barrier { .. } | Request::Batch { .. }
            ) {
                if let Err(e) = self.room_for_one().await {
                    self.poison(&e);
                    fail_request(req, &e);
                    failed = Some(e);
                    continue;
                }
            }
            if req.needs_data_sync() {
                self.pending.needs_data_sync = true;
            }
            self.pending.first.get_or_insert(self.next_version);
            match req {
                Request::Barrier { reply } => {
                    barrier = true;
                    acks.push(Ack::Done(reply));
                }
                Request::Put {
                    key,
                    size,
                    data,
                    data_write,
                    spec,
                    reply,
                } => {
                    if data_write.is_some() {
                        // Readers of this version wait for its value
                        // (`apply_put` gives it the next version).
                        self.shared.landing.hold(self.next_version);
                    }
                    match self.apply_put(key, size, data, spec).await {
                        Ok(info) => {
                            self.pending.data_writes.extend(data_write);
                            acks.push(Ack::Info(reply, info));
                        }
                        // Nothing was written: the value's space goes
                        // with its extent.
                        Err(e) => drop(reply.send(Err(e))),
                    }
                }
                Request::PutMany { items, reply } => {
                    self.pending.atomic = true;
                    let (mut applied, mut bytes, mut stop) = (0, 0, None);
                    // Items in groups already written (a split load).
                    let mut durable = 0;
                    for (key, size, data, expires) in items {
                        let spec = PutSpec {
                            mode: PutMode::Overwrite,
                            expiry: expires.map(Expiry::At),
                        };
                        // A load larger than the journal can take commits
                        // as several groups, each all or nothing, in order:
                        // still a prefix of the load after a cut.
                        match self.room_for_one().await {
                            Ok(true) => durable = applied,
                            Ok(false) => {}
                            Err(e) => {
                                self.poison(&e);
                                failed = Some(Error::new(e.kind(), e.message().to_string()));
                                stop = Some(e);
                                break;
                            }
                        }
                        match self.apply_put(key, size, data, spec).await {
                            Ok(_) => {
                                applied += 1;
                                bytes += size;
                            }
                            Err(e) => {
                                stop = Some(e);
                                break;
                            }
                        }
                    }
                    acks.push(Ack::Many(reply, applied, bytes, stop, durable));
                }
                Request::Relocate {
                    id,
                    version,
                    data,
                    reply,
                } => {
                    let moved = self.apply_relocate(id, version, data).await;
                    match moved {
                        Ok(true) => acks.push(Ack::Moved(reply)),
                        other => drop(reply.send(other)),
                    }
                }
                Request::Batch { ops, reply } => match self.apply_batch(ops).await {
                    Ok((outcomes, bytes)) => acks.push(Ack::Batch(reply, outcomes, bytes)),
                    // Refused whole before anything changed, or (having
                    // poisoned the store) failed part way: either way no
                    // part of it is ever written.
                    Err(e) => drop(reply.send(Err(e))),
                },
                Request::Evict { id, version, reply } => {
                    match self.apply_evict(id, version).await {
                        Ok(Evicted::Gone(size)) => acks.push(Ack::Evicted(reply, size)),
                        other => drop(reply.send(other)),
                    }
                }
                Request::Delete { key, reply } => match self.apply_delete(&key, None).await {
                    Ok(true) => acks.push(Ack::Done(reply)),
                    Ok(false) => {
                        drop(reply.send(Err(Error::new(ErrorKind::NotFound, "no such key"))))
                    }
                    Err(e) => drop(reply.send(Err(e))),
                },
            }
        }
        if self.pending.first == Some(self.next_version) && self.pending.dirty.is_empty() {
            // Nothing was applied (barriers, misses): no group to write.
            self.pending.first = None;
        }

        // Sync mode (or a barrier): write and sync before acknowledging.
        // Buffered mode: acknowledge now; the group is written by
        // `max_delay` at the latest.
        let buffered = matches!(self.shared.options.durability, Durability::Buffered { .. });
        let mut result = self.check_failed();
        if result.is_ok() && (!buffered || barrier) {
            result = self.flush().await;
            if result.is_ok() && barrier {
                // `sync()`: home slots current too, then one sync.
                result = self.place_homes().await;
            }
            if result.is_ok() && barrier {
                result = self
                    .shared
                    .engine
                    .sync()
                    .await
                    .map_err(|e| Error::io("sync", e));
                if let (Ok(()), Some(j)) = (&result, self.journal.as_mut()) {
                    j.synced();
                }
            }
        } else if result.is_ok() && self.pending.first.is_some() && self.pending.since.is_none() {
            self.pending.since = Some(std::time::Instant::now());
            // The maintenance thread writes the group by `max_delay`.
            self.shared.wake_maintenance();
        }
        if let Err(e) = &result {
            self.poison(e);
        }
        // In sync mode, and for a barrier, nothing is acknowledged before
        // its group is written and synced: `flush` took the whole open
        // group (invariant 1).
        assert!(
            result.is_err() || (buffered && !barrier) || self.pending.first.is_none(),
            "invariant 1: a group acknowledged before it was written and synced"
        );
        for ack in acks {
            let committed = match &ack {
                Ack::Info(_, info) => info.size,
                Ack::Many(_, _, bytes, _, _) | Ack::Batch(_, _, bytes) => *bytes,
                Ack::Done(_) | Ack::Moved(_) | Ack::Evicted(..) => 0,
            };
            if result.is_ok() {
                self.shared
                    .user_bytes_written
                    .fetch_add(committed, Ordering::Relaxed);
            }
            ack.send(result.as_ref().err());
        }
    }

    pub(super) async fn apply_put(
        &mut self,
        key: Box<[u8]>,
        size: u64,
        data: ObjectData,
        spec: PutSpec,
    ) -> Result<ObjectInfo> {
        let (info, link) = self.put_unlinked(key, size, data, spec).await?;
        self.link_all(vec![link]);
        Ok(info)
    }

    /// [`apply_put`](Self::apply_put) but for linking the new version into
    /// the index, which the caller does with [`link_all`](Self::link_all):
    /// the tuple placed in its block's image, the group's accounting done.
    /// A batch links all of its changes at once, so readers see all of
    /// them or none.
    pub(super) async fn put_unlinked(
        &mut self,
        key: Box<[u8]>,
        size: u64,
        data: ObjectData,
        spec: PutSpec,
    ) -> Result<(ObjectInfo, Link)> {
        let value = data.tuple_value();
        let len = tuple::encoded_len(key.len(), &value, spec.expiry.is_some());
        // Recovery may roll this version back alone (its value is checked
        // at open when its group is the newest).
        let alone = matches!(value, tuple::TupleValue::Heap { unsynced: true, .. });
        // An expired version is replaced like any other, but a condition
        // sees no object.
        let (old, visible) = {
            let st = self.shared.state.read();
            let e = st.lookup_any(&key);
            (
                e.map(|e| (e.block, e.tuple_len(), e.version)),
                e.filter(|e| e.live()).map(|e| e.version),
            )
        };
        // Conditional puts are decided here, in commit order: nothing has
        // changed yet, and a refused put's space goes with its extent.
        spec.mode.check(visible)?;
        let block = match old {
            Some((b, old_len, _))
                if self
                    .table
                    .block(b)
                    .is_some_and(|s| s.free() + old_len >= len) =>
            {
                b
            }
            _ => match self.table.place(len) {
                Some(b) => b,
                None => {
                    self.grow().await?;
                    self.table.place(len).ok_or_else(|| {
                        Error::new(
                            ErrorKind::NoSpace,
                            "metadata area has no room for the tuple",
                        )
                        .for_tuple_room()
                    })?
                }
            },
        };
        // Load the block before anything changes, so a failed read leaves
        // the in-memory state untouched.
        self.load_image(block).await?;
        let created_micros = now_micros();
        let expires_micros = spec.expiry.map(|x| x.at(created_micros));
        let tuple = Tuple {
            key,
            version: self.bump(),
            created_micros,
            size,
            expires_micros,
            value,
        };
        let inline = matches!(data, ObjectData::Inline(_));
        let entry = Entry::new(
            tuple.key.len(),
            tuple.version,
            created_micros,
            size,
            expires_micros,
            Stored::of(data),
            block,
        );
        let info = entry.info();
        let link = Link::Put {
            key: tuple.key.clone(),
            entry,
            inline,
            version: tuple.version,
        };
        if let Some(at) = expires_micros {
            self.track_expiry(tuple.key.clone(), at, tuple.version, size);
        }
        let image = self
            .table
            .images
            .get_mut(&block)
            .ok_or_else(|| image_missing(block))?;
        match old {
            Some((old_block, old_len, old_version)) if old_block == block => {
                let at = image
                    .iter_mut()
                    .find(|t| t.key == tuple.key && t.version == old_version);
                match at {
                    Some(t) => self.shared.retired.keep(std::mem::replace(t, tuple)),
                    None => image.push(tuple),
                }
                self.table.shrink_used(block, old_len);
                self.table.grow_used(block, len, false);
                // The room a smaller new tuple frees stays kept until the
                // group is written: recovery may give the block its old
                // tuple back beside everything else the group put there.
                let keep = old_len.saturating_sub(len);
                if alone && keep > 0 {
                    self.table.grow_used(block, keep, false);
                    self.pending.kept_room.push((block, keep));
                }
            }
            Some((old_block, _, old_version)) => {
                // The old tuple stays where it is until the new one is
                // durable; step 0 of the next group removes it.
                self.stale.push((old_block, tuple.key.clone(), old_version));
                self.stale_blocks.insert(old_block);
                self.stale_keys.insert(tuple.key.clone());
                image.push(tuple);
                self.table.grow_used(block, len, true);
            }
            None => {
                image.push(tuple);
                self.table.grow_used(block, len, true);
            }
        }
        self.touch(block);
        Ok((info, link))
    }

    /// Makes changes visible: links each new version into the index (and
    /// unlinks each removed key) under one lock, so a reader sees all of
    /// them or none; then what the replaced versions held goes with the
    /// group (their pieces once it is durable).
    /// Takes `key`'s tuple of `version` out of `block`'s image (kept for
    /// a snapshot in progress, `Retired`), frees its `tuple_len` bytes and
    /// marks the block for the group's write.
    pub(super) fn remove_tuple(
        &mut self,
        block: u32,
        key: &[u8],
        version: u64,
        tuple_len: usize,
    ) -> Result<()> {
        let image = self
            .table
            .images
            .get_mut(&block)
            .ok_or_else(|| image_missing(block))?;
        if let Some(i) = image
            .iter()
            .position(|t| &*t.key == key && t.version == version)
        {
            self.shared.retired.keep(image.swap_remove(i));
        }
        self.table.shrink_used(block, tuple_len);
        self.touch(block);
        Ok(())
    }

    pub(super) fn link_all(&mut self, links: Vec<Link>) {
        let mut linked = Vec::with_capacity(links.len());
        {
            let mut st = self.shared.state.write();
            for link in links {
                match link {
                    Link::Put {
                        key,
                        entry,
                        inline,
                        version,
                    } => {
                        let (id, replaced) = st.link(&key, entry);
                        linked.push((inline.then_some((id, version)), replaced));
                    }
                    Link::Remove { key } => {
                        linked.push((None, st.unlink(&key).map(|(_, e)| e)));
                    }
                }
            }
        }
        for (held, gone) in linked {
            if let Some((id, version)) = held {
                self.hold_inline(id, version);
            }
            if let Some(gone) = &gone {
                self.untrack(gone);
            }
            self.pending.release.extend(gone);
        }
    }

    /// Removes `key`'s tuple (only if it holds `expect`, when given).
    /// Whether a visible version was removed: an expired one is removed
    /// too, but the key had no object as far as callers can tell.
    pub(super) async fn apply_delete(&mut self, key: &[u8], expect: Option<u64>) -> Result<bool> {
        let (block, live) = {
            let st = self.shared.state.read();
            match st.lookup_any(key) {
                Some(e) if expect.is_none_or(|v| v == e.version) => (e.block, e.live()),
                _ => return Ok(false),
            }
        };
        self.load_image(block).await?;
        let Some((_, entry)) = self.shared.state.write().unlink(key) else {
            return Ok(false);
        };
        self.untrack(&entry);
        self.bump();
        self.remove_tuple(block, key, entry.version, entry.tuple_len())?;
        self.pending.release.push(entry);
        Ok(live)
    }

    /// Compaction's change: entry `id`'s version `version` (still held,
    /// its tuple fitting its block) now points at `data`, a synced copy of
    /// its bytes. The version, creation time and expiry stay; the tuple is
    /// rewritten in place (no stale copy elsewhere, so recovery finds
    /// either the old slot, whose pieces are freed only once this is
    /// durable, or the new one). Whether it moved.
    async fn apply_relocate(
        &mut self,
        id: crate::index::EntryId,
        version: u64,
        data: ObjectData,
    ) -> Result<bool> {
        let value = data.tuple_value();
        let old = {
            let st = self.shared.state.read();
            st.entry(id).filter(|e| e.version == version).map(|e| {
                (
                    e.block,
                    e.tuple_len(),
                    e.key_len(),
                    e.created_micros,
                    e.size(),
                    e.expires_micros(),
                )
            })
        };
        let Some((block, old_len, key_len, created_micros, size, expires_micros)) = old else {
            return Ok(false);
        };
        let len = tuple::encoded_len(key_len, &value, expires_micros.is_some());
        let fits = |s: &crate::meta::table::BlockState| s.free() + old_len >= len;
        if !self.table.block(block).is_some_and(fits) {
            return Ok(false);
        }
        self.load_image(block).await?;
        let Some(image) = self.table.images.get_mut(&block) else {
            return Err(unknown_block(block));
        };
        // Versions are unique in the store: this is the entry's tuple.
        let Some(at) = image.iter_mut().find(|t| t.version == version) else {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("tuple block {block} lacks the tuple its index entry names"),
            ));
        };
        at.value = value;
        // The group's sequence must be new (a slot's sequence orders its
        // writes), though the object keeps its version.
        self.pending.first.get_or_insert(self.next_version);
        self.bump();
        let entry = Entry::new(
            key_len,
            version,
            created_micros,
            size,
            expires_micros,
            Stored::of(data),
            block,
        );
        let replaced = self.shared.state.write().replace(id, entry);
        self.table.shrink_used(block, old_len);
        self.table.grow_used(block, len, false);
        self.pending.release.extend(replaced);
        self.touch(block);
        Ok(true)
    }

    /// Makes sure `block`'s content is in the image cache, reading its
    /// current slot when it is not.
    pub(super) async fn load_image(&mut self, block: u32) -> Result<()> {
        if self.table.images.contains_key(&block) {
            self.table.touch_image(block);
            return Ok(());
        }
        match self.read_image(block).await {
            Ok(tuples) => {
                self.table.images.insert(block, tuples);
                self.table.touch_image(block);
                Ok(())
            }
            Err(e) => {
                if e.kind() == ErrorKind::Corrupt {
                    self.poison(&e);
                }
                Err(e)
            }
        }
    }

    /// `block`'s tuples as its current slot holds them (`Corrupt` when
    /// that slot no longer reads back).
    async fn read_image(&self, block: u32) -> Result<Vec<Tuple>> {
        let state = self
            .table
            .block(block)
            .ok_or_else(|| unknown_block(block))?;
        if !state.has_state {
            return Ok(Vec::new());
        }
        // Where readers find it: a journaled block's home slot, or its
        // journal image until the home is rewritten.
        let at = self
            .shared
            .state
            .read()
            .slot_of(block)
            .map_or(state.current_offset(), |(at, _)| at);
        let (r, buf) = self
            .shared
            .engine
            .read_at(AlignedBuf::zeroed(BLOCK_SIZE), at)
            .await;
        r.map_err(|e| Error::io("reading a tuple block to change it", e))?;
        let id = SlotIdentity {
            store_id: self.shared.geometry.store_id,
            block_no: block,
        };
        match decode_slot(id, buf.as_slice()) {
            SlotContent::Valid { tuples, .. } => Ok(tuples),
            SlotContent::Empty => Ok(Vec::new()),
            SlotContent::Invalid { why, .. } => Err(Error::new(
                ErrorKind::Corrupt,
                format!("tuple block {block} no longer reads back: {why}"),
            )),
        }
    }

    /// Reads the uncached images of `blocks` (as many as the image cache
    /// holds) all at once, so applying a batch of changes to blocks spread
    /// over the store does not wait for one read after another. A block that fails to read is left out:
    /// `load_image` reads it again and reports the failure where it
    /// matters.
    async fn prefetch(&mut self, blocks: BTreeSet<u32>) {
        let missing: Vec<u32> = blocks
            .into_iter()
            .filter(|b| !self.table.images.contains_key(b))
            .take(crate::meta::table::IMAGE_CACHE)
            .collect();
        if missing.len() < 2 {
            return;
        }
        let this = &*self;
        let reads = missing
            .iter()
            .map(|&b| async move { (b, this.read_image(b).await) });
        let read = futures::future::join_all(reads).await;
        for (b, r) in read {
            if let Ok(tuples) = r {
                self.table.images.insert(b, tuples);
                self.table.touch_image(b);
            }
        }
    }

    /// The tuple blocks holding the current versions of what `batch`
    /// changes (blocks new tuples go to are found when placed).
    fn blocks_of(&self, batch: &[Request]) -> BTreeSet<u32> {
        let st = self.shared.state.read();
        let of_key = |k: &[u8]| st.lookup_any(k).map(|e| e.block);
        let mut out = BTreeSet::new();
        for req in batch {
            match req {
                Request::Put { key, .. } | Request::Delete { key, .. } => out.extend(of_key(key)),
                Request::PutMany { items, .. } => {
                    out.extend(items.iter().filter_map(|(k, _, _, _)| of_key(k)))
                }
                Request::Relocate { id, version, .. } | Request::Evict { id, version, .. } => out
                    .extend(
                        st.entry(*id)
                            .filter(|e| e.version == *version)
                            .map(|e| e.block),
                    ),
                Request::Batch { ops, .. } => {
                    out.extend(ops.iter().filter_map(|op| of_key(op.key())))
                }
                Request::Barrier { .. } => {}
            }
        }
        out
    }

    /// Step 0: drops stale copies from their blocks and makes that durable.
    pub(super) async fn remove_stale(&mut self) -> Result<()> {
        let stale = std::mem::take(&mut self.stale);
        let blocks = std::mem::take(&mut self.stale_blocks);
        self.prefetch(blocks).await;
        let mut blocks = BTreeSet::new();
        for (block, key, version) in stale {
            self.load_image(block).await?;
            let image = self
                .table
                .images
                .get_mut(&block)
                .ok_or_else(|| image_missing(block))?;
            if let Some(i) = image
                .iter()
                .position(|t| t.key == key && t.version == version)
            {
                let gone = image.swap_remove(i);
                self.table.shrink_used(block, gone.encoded_len());
                self.shared.retired.keep(gone);
                blocks.insert(block);
            }
        }
        if !blocks.is_empty() {
            let seq = self.bump();
            self.write_blocks(&blocks, seq, seq, 0).await?;
        }
        self.stale_keys.clear();
        Ok(())
    }
}

/// A change placed in its block's image, not yet visible to readers
/// (`Committer::link_all` makes it so).
pub(super) enum Link {
    /// A new version of `key`; `inline`: its value is held in RAM until
    /// its block is written (`hold_inline`).
    Put {
        key: Box<[u8]>,
        entry: Entry,
        inline: bool,
        version: u64,
    },
    /// `key`'s tuple removed.
    Remove { key: Box<[u8]> },
}

/// A block's image missing from the committer's table right after
/// `load_image` loaded it: in-memory state gone wrong, refused (the store is
/// poisoned by the caller's failure) rather than a panic.
pub(super) fn image_missing(block: u32) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("tuple block {block}'s image is not loaded; nothing was written"),
    )
}
