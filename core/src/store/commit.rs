//! The commit path: the only writer of metadata, run by the callers
//! themselves (leader/follower group commit, no commit thread).
//!
//! A change is queued with its reply channel; then its caller either waits
//! for the reply or, if nobody leads, takes the lead: it drains the queue
//! as one group, commits it, and (after one more group if changes were
//! queued meanwhile: `LEAD_ONE_MORE`) lets go. Changes queued later wait
//! for the next leader, one of their own callers, who takes them all as
//! the next group; the followers of a group are woken together by their
//! replies. The group in progress lives in the leadership slot, not in the
//! leader's future, so a leader that is dropped half way leaves the group
//! for the next holder to finish (invariant 1 in `INVARIANTS.md`).
//!
//! A group:
//!
//! 0. if the previous group moved a tuple to another block, first rewrites
//!    the blocks still holding the superseded copy and syncs (see below);
//! 1. syncs once if any request carries heap data, so object bytes are
//!    durable before any tuple that points at them can be;
//! 2. applies the requests in order, assigning strictly increasing versions;
//! 3. writes every changed tuple block (to its spare slot in a format-3
//!    store; in a format-4 store to a free journal slot, or straight to the
//!    home slot of a block never written), together with the values the
//!    group writes itself (small puts whose data recovery checks against
//!    their tuples), syncs once, and only then acknowledges the requests
//!    and lets freed pieces go. The journaled blocks' home slots are
//!    rewritten later, with the writes of a group that finds the journal
//!    half held, or when idle, at `sync()` or at close (`meta::journal`).
//!
//! Moving tuples: an overwrite whose new tuple no longer fits its block is
//! placed in another block while the old tuple stays (as a stale copy) in
//! the old one. Removing both in one group could persist only the removal
//! and lose the key; so the stale copy is removed in step 0 of the next
//! group, and further changes to that key wait for that step. After a crash
//! in between, open sees both copies and keeps the larger version.
//!
//! Background work (buffered durability's delayed write, index
//! maintenance, a group left behind by a cancelled caller) is done by a
//! small maintenance thread that takes the lead only when nobody holds it.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::future::Future;
use std::pin::Pin;

use futures::channel::oneshot::{self, Sender};
use parking_lot::{Condvar, Mutex};

use super::{now_micros, Entry, ObjectData, ObjectInfo, Shared, Stored};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{MetaExtent, Superblock, BLOCK_SIZE, MAX_META_EXTENTS, MAX_TOTAL_META_EXTENTS};
use crate::io::AlignedBuf;
use crate::meta::block::{
    decode_slot, encode_journaled_slot, encode_slot, GroupStamp, SlotContent, SlotIdentity,
    GROUP_ATOMIC, SLOT_FIRST,
};
use crate::meta::journal::Journal;
use crate::meta::superblock::{publish_superblock, write_extent_table};
use crate::meta::table::TupleBlockTable;
use crate::meta::tuple::{self, Tuple};
use crate::options::{Durability, PutMode, PutOptions};
use std::time::Duration;

/// How often the maintenance thread looks for work when idle.
const IDLE_TICK: Duration = Duration::from_millis(100);
/// Most requests folded into one group.
const MAX_GROUP: usize = 1024;
/// Groups a caller leads after the one holding its own change, while
/// changes are queued, before it passes the lead on. The next group then
/// starts as soon as the last one is durable, rather than when the
/// summoned caller is next scheduled (measured, 16 writers of 16 KiB
/// durable puts: 1.17–1.19 × the puts per second of passing the lead on
/// at once; 3 more groups gained less). The caller's own reply waits for
/// that one group longer.
const LEAD_ONE_MORE: usize = 1;
/// Home slots a group that finds the journal crowded rewrites at least
/// (the oldest images first); at least twice as many as it takes journal
/// slots, so crowded groups free slots faster than they take them, while
/// no one group writes every home at once.
const PLACE_AT_LEAST: usize = 8;
/// Largest zero-fill write when a metadata extent is added.
const ZERO_CHUNK: usize = 1 << 20;

/// When a new version expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// This many µs after its commit (a put's ttl).
    After(u64),
    /// At this time, µs since the epoch (a copy keeps its source's expiry).
    At(u64),
}

impl Expiry {
    fn at(self, created_micros: u64) -> u64 {
        match self {
            Expiry::After(d) => created_micros.saturating_add(d),
            Expiry::At(t) => t,
        }
    }
}

/// How a put's new version is committed: its condition and its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PutSpec {
    /// Checked against the key's current (visible) version when applied.
    pub mode: PutMode,
    pub expiry: Option<Expiry>,
}

impl PutSpec {
    /// A caller's put options, checked (`InvalidArgument` for a bad ttl).
    pub fn of(options: &PutOptions) -> Result<PutSpec> {
        Ok(PutSpec {
            mode: options.mode,
            expiry: options.ttl_micros()?.map(Expiry::After),
        })
    }
}

/// Most expired objects removed per group (the rest go in the next ones).
const REAP_BATCH: usize = 4096;

/// A change for the commit path.
pub(crate) enum Request {
    Put {
        key: Box<[u8]>,
        size: u64,
        data: ObjectData,
        /// The value's write when it is left to the group: issued together
        /// with the group's tuple blocks, one sync for both.
        data_write: Option<DataWrite>,
        spec: PutSpec,
        reply: Sender<Result<ObjectInfo>>,
    },
    /// Compaction: the object version `version` (entry `id`) now lies in
    /// `data` (a copy of its bytes in new pieces, synced before the
    /// tuple). Applied only if that entry still holds that version (versions
    /// are never reused) and its tuple stays in its block (the version is
    /// kept: only the pieces change); replies whether it was.
    Relocate {
        id: crate::index::EntryId,
        version: u64,
        data: ObjectData,
        reply: Sender<Result<bool>>,
    },
    Delete {
        key: Box<[u8]>,
        reply: Sender<Result<()>>,
    },
    /// Replies after the group's sync.
    Barrier { reply: Sender<Result<()>> },
    /// Many puts in one group (bulk load), applied in order; stops at the
    /// first that fails. Replies how many were applied, and the failure.
    PutMany {
        items: Vec<Staged>,
        reply: Sender<(usize, Option<Error>)>,
    },
}

/// A value's device write, prepared by its put (bytes in place, checksums
/// taken: `Store::prepare_write`) and issued by the commit group beside its
/// tuple blocks, with the extent it writes into: the group keeps the extent
/// until the write is done, so its space cannot go to another object while
/// the device still writes there (invariant 2).
pub(crate) struct DataWrite {
    pub buf: AlignedBuf,
    pub at: u64,
    pub extent: Arc<super::Extent>,
}

/// A staged object: its key, size, where its value is, and when it expires
/// (µs since the epoch).
pub(crate) type Staged = (Box<[u8]>, u64, ObjectData, Option<u64>);

impl Request {
    fn needs_data_sync(&self) -> bool {
        let unchecked = |d: &ObjectData| {
            matches!(
                d,
                ObjectData::Heap {
                    unsynced: false,
                    ..
                }
            )
        };
        match self {
            Request::Put { data, .. } | Request::Relocate { data, .. } => unchecked(data),
            Request::PutMany { items, .. } => items.iter().any(|(_, _, d, _)| unchecked(d)),
            _ => false,
        }
    }

    fn touches(&self, keys: &HashSet<Box<[u8]>>) -> bool {
        match self {
            Request::Put { key, .. } | Request::Delete { key, .. } => keys.contains(key),
            // In place in the version's own block: a stale copy of an
            // older version elsewhere does not matter.
            Request::Relocate { .. } => false,
            Request::PutMany { items, .. } => items.iter().any(|(k, _, _, _)| keys.contains(k)),
            Request::Barrier { .. } => false,
        }
    }
}

enum Ack {
    Info(Sender<Result<ObjectInfo>>, ObjectInfo),
    Done(Sender<Result<()>>),
    /// A relocation applied (`Ok(true)` once durable).
    Moved(Sender<Result<bool>>),
    /// Applied count, value bytes applied, the error that stopped it, and
    /// how many of the applied were in groups written before the last (a
    /// load split to fit the journal): committed even if the last fails.
    Many(
        Sender<(usize, Option<Error>)>,
        usize,
        u64,
        Option<Error>,
        usize,
    ),
}

impl Ack {
    fn send(self, err: Option<&Error>) {
        let fail = |e: &Error| Error::new(e.kind(), e.message().to_string());
        match (self, err) {
            (Ack::Info(tx, info), None) => drop(tx.send(Ok(info))),
            (Ack::Info(tx, _), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Done(tx), None) => drop(tx.send(Ok(()))),
            (Ack::Done(tx), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Moved(tx), None) => drop(tx.send(Ok(true))),
            (Ack::Moved(tx), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Many(tx, n, _, stop, _), None) => drop(tx.send((n, stop))),
            (Ack::Many(tx, _, _, _, durable), Some(e)) => drop(tx.send((durable, Some(fail(e))))),
        }
    }
}

fn fail_request(req: Request, e: &Error) {
    let err = || Error::new(e.kind(), e.message().to_string());
    match req {
        Request::Put { reply, .. } => drop(reply.send(Err(err()))),
        Request::Delete { reply, .. } | Request::Barrier { reply } => drop(reply.send(Err(err()))),
        Request::PutMany { reply, .. } => drop(reply.send((0, Some(err())))),
        Request::Relocate { reply, .. } => drop(reply.send(Err(err()))),
    }
}

/// State of the commit path, owned by whoever leads.
pub(crate) struct Committer {
    shared: Arc<Shared>,
    table: TupleBlockTable,
    next_version: u64,
    /// Superseded tuples left in their old block when a key moved: (block,
    /// key, version), removed in step 0 of the next group.
    stale: Vec<(u32, Box<[u8]>, u64)>,
    /// The blocks of `stale`: what step 0 of the next group rewrites.
    stale_blocks: BTreeSet<u32>,
    /// Keys whose stale copy is not yet removed: their changes wait.
    stale_keys: HashSet<Box<[u8]>>,
    deferred: VecDeque<Request>,
    /// Changes applied (and visible) whose tuple blocks are not yet written.
    /// Sync mode writes them before acknowledging; buffered mode
    /// acknowledges at once and writes them within `max_delay`.
    pending: Pending,
    /// Entries holding their inline value in RAM until their tuple block
    /// is written (`Stored::is_pending`): (entry id, version).
    inline_pending: Vec<(crate::index::EntryId, u64)>,
    /// A journaled store's metadata journal.
    journal: Option<Journal>,
    /// A larger journal, zeroed and synced but not yet in the superblock,
    /// made ready when the open group outgrew the journal
    /// (`room_for_one`); the next group that journals blocks moves to it.
    spare: Option<Journal>,
    /// Per journaled block whose home slot is not yet rewritten with its
    /// newest image: that image (synced in the journal). The homes go out
    /// with a group's writes once the journal is half held (before its
    /// sync), or when the store is idle, at `sync()` and at close
    /// (`place_homes`); a block changed again meanwhile skips the older
    /// home write. Readers read the journal images meanwhile.
    unplaced: BTreeMap<u32, Unplaced>,
}

/// A journaled block's image, synced in the journal, not yet in its home
/// slot.
struct Unplaced {
    home: u64,
    image: AlignedBuf,
    /// Sequence of the group that wrote it: the oldest go home first.
    seq: u64,
}

/// An open group: everything applied since the last tuple-block write.
#[derive(Default)]
struct Pending {
    /// First version assigned in the group.
    first: Option<u64>,
    dirty: BTreeSet<u32>,
    /// How many of `dirty` go through the journal (journaled blocks that
    /// already have state): the journal slots the group will take.
    journaled: usize,
    /// Superseded entries: their pieces may go once the group is durable.
    release: Vec<Entry>,
    /// A heap value synced before its tuple is in the group: sync data first.
    needs_data_sync: bool,
    /// A bulk load is in the group: recovery keeps it all or nothing.
    atomic: bool,
    /// Values the group writes itself (UNSYNCED puts, whose tuples
    /// recovery checks against their data in the newest group): issued
    /// with the tuple blocks, one sync for all.
    data_writes: Vec<DataWrite>,
    /// When the first unwritten change was applied (buffered mode).
    since: Option<std::time::Instant>,
}

impl Committer {
    pub fn new(shared: Arc<Shared>, table: TupleBlockTable, next_version: u64) -> Self {
        Committer {
            shared,
            next_version,
            stale: Vec::new(),
            stale_blocks: BTreeSet::new(),
            stale_keys: HashSet::new(),
            deferred: VecDeque::new(),
            pending: Pending::default(),
            inline_pending: Vec::new(),
            journal: match table.layout {
                crate::format::Layout::Journaled(e) => Some(Journal::new(e)),
                crate::format::Layout::Paired => None,
            },
            spare: None,
            table,
            unplaced: BTreeMap::new(),
        }
    }

    /// Keeps the journal slots at these byte offsets (images recovery's
    /// in-memory edits came from) until the next group is synced.
    pub fn pin_journal(&mut self, offsets: &[u64]) {
        if let Some(j) = self.journal.as_mut() {
            offsets.iter().for_each(|&at| j.pin(at));
        }
    }

    /// Notes that entry `id` holds the inline value of `version` in RAM
    /// until its tuple block is written (open: a block recovery changed).
    pub fn hold_inline(&mut self, id: crate::index::EntryId, version: u64) {
        self.inline_pending.push((id, version));
    }

    /// Notes that `key`'s version `version` expires at `at` (open, for the
    /// versions it loads; `apply_put` for new ones).
    pub fn track_expiry(&mut self, key: Box<[u8]>, at: u64, version: u64, size: u64) {
        self.shared
            .expiring
            .lock()
            .insert((at, version), (key, size));
    }

    /// Forgets the expiry of a version that is replaced or removed.
    fn untrack(&mut self, gone: &Entry) {
        if let Some(at) = gone.expires_micros() {
            self.shared.expiring.lock().remove(&(at, gone.version));
        }
    }

    /// Whether an expired version waits for the reaper.
    fn reap_due(&self) -> bool {
        !self.shared.options.keep_expired
            && self
                .shared
                .expiring
                .lock()
                .first_key_value()
                .is_some_and(|(&(at, _), _)| at <= now_micros())
    }

    /// Removes expired versions (at most `REAP_BATCH`) in the open group,
    /// each only if its key still holds it. A key with a moved tuple's
    /// stale copy waits for the next group (as any change to it would).
    async fn reap(&mut self) -> Result<()> {
        let now = now_micros();
        let mut waiting = Vec::new();
        for _ in 0..REAP_BATCH {
            let due = {
                let mut expiring = self.shared.expiring.lock();
                match expiring.first_key_value() {
                    Some((&(at, _), _)) if at <= now => expiring.pop_first(),
                    _ => None,
                }
            };
            let Some(((at, version), (key, size))) = due else {
                break;
            };
            if self.stale_keys.contains(&key) {
                waiting.push(((at, version), (key, size)));
                continue;
            }
            let applied = match self.room_for_one().await {
                Ok(_) => {
                    self.pending.first.get_or_insert(self.next_version);
                    self.apply_delete(&key, Some(version)).await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = applied {
                let mut expiring = self.shared.expiring.lock();
                expiring.insert((at, version), (key, size));
                expiring.extend(waiting);
                return Err(e);
            }
        }
        self.shared.expiring.lock().extend(waiting);
        Ok(())
    }

    pub fn bump(&mut self) -> u64 {
        let v = self.next_version;
        self.next_version += 1;
        v
    }

    /// Writes what is still open, removes stale copies and records the
    /// clean close in the superblock: the last thing done before close.
    async fn finish(&mut self) {
        // A read-only store writes nothing, not even the clean-close mark
        // (invariant 7).
        if self.shared.options.is_read_only() {
            return;
        }
        if !self.shared.failed.load(Ordering::Acquire) {
            if let Err(e) = self.flush().await {
                self.poison(&e);
            }
        }
        if !self.stale.is_empty() && !self.shared.failed.load(Ordering::Acquire) {
            if let Err(e) = self.remove_stale().await {
                self.poison(&e);
            }
        }
        // Home slots current before the clean mark (whose publish syncs).
        if !self.shared.failed.load(Ordering::Acquire) {
            if let Err(e) = self.place_homes().await {
                self.poison(&e);
            }
        }
        // Every group is synced: record that in the superblock, so the next
        // open need not read back the newest group's objects to verify them.
        if !self.shared.failed.load(Ordering::Acquire) {
            let mut sb = self.shared.superblock.lock();
            let mut next = sb.clone();
            next.clean_seq = self.next_version - 1;
            if let Ok(next) = publish_superblock(self.shared.engine.as_ref(), &next) {
                *sb = next;
            }
            self.shared.sealed.store(true, Ordering::Release);
        }
    }

    /// Background work: a buffered group whose delay is up, index
    /// maintenance.
    async fn tick(&mut self) {
        if self.flush_due() {
            if let Err(e) = self.flush().await {
                self.poison(&e);
            }
        }
        // Idle: the home slots not yet rewritten need not wait any longer,
        // and a larger journal made ready but not used gives its space back.
        if self.pending.first.is_none() && self.shared.check_failed().is_ok() {
            if let Err(e) = self.place_homes().await {
                self.poison(&e);
            }
            // (Kept while step 0's stale copies need its slots.)
            let plain = self
                .journal
                .as_ref()
                .map_or(0, |j| j.slots() as usize - j.pinned());
            if self.stale_blocks.len() <= plain {
                if let Some(spare) = self.spare.take() {
                    self.free_journal(spare);
                }
            }
        }
        // Expired versions, when nobody else commits: a group of their own
        // (`commit_group` reaps first).
        if self.reap_due() && self.shared.check_failed().is_ok() {
            self.commit_group(Vec::new()).await;
        }
        self.maintain_index();
    }

    /// Lets the index fold in finished background work (an FST merge).
    fn maintain_index(&self) {
        if self.shared.state.read().index.needs_maintenance() {
            self.shared.state.write().index.maintain();
        }
    }

    fn poison(&self, _cause: &Error) {
        self.shared.failed.store(true, Ordering::Release);
    }

    /// How long the loop may wait for requests before work is due.
    fn wait_for(&self) -> Duration {
        match (self.shared.options.durability, self.pending.since) {
            (Durability::Buffered { max_delay }, Some(since)) => {
                max_delay.saturating_sub(since.elapsed()).min(IDLE_TICK)
            }
            _ => IDLE_TICK,
        }
    }

    fn flush_due(&self) -> bool {
        match (self.shared.options.durability, self.pending.since) {
            (Durability::Buffered { max_delay }, Some(since)) => since.elapsed() >= max_delay,
            _ => false,
        }
    }

    /// Writes the open group: data sync when needed, then every changed
    /// tuple block to its spare slot and one sync. Then superseded pieces
    /// may go, and readers waiting for the group's values go on (also
    /// after a failure: the store is then poisoned, and they find what the
    /// device holds, checked).
    async fn flush(&mut self) -> Result<()> {
        let r = self.write_group().await;
        self.shared.landing.release();
        r
    }

    async fn write_group(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let Some(first) = pending.first else {
            return Ok(());
        };
        if pending.needs_data_sync {
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing object data", e))?;
        }
        let seq = self.next_version - 1;
        // All or nothing: a bulk load; and any group in buffered mode,
        // whose changes were acknowledged one by one before it was written,
        // so that rolling back one object whose bytes did not land (and
        // keeping later ones) would leave no prefix of what was
        // acknowledged.
        let buffered = matches!(self.shared.options.durability, Durability::Buffered { .. });
        let flags = if pending.atomic || buffered {
            GROUP_ATOMIC
        } else {
            0
        };
        if !pending.data_writes.is_empty() {
            self.write_blocks_beside(pending.data_writes, &pending.dirty, seq, first, flags)
                .await?;
        } else if !pending.dirty.is_empty() {
            self.write_blocks(&pending.dirty, seq, first, flags).await?;
        }
        self.shared.commit_groups.fetch_add(1, Ordering::Relaxed);
        // Superseded versions are unlinked on disk now: their pieces may go
        // as soon as the last reader lets go of them, and their cached
        // bytes now (no new read can find them: invariant 8).
        for e in pending.release {
            self.shared.cache.forget(e.version);
        }
        Ok(())
    }

    async fn commit_group(&mut self, batch: Vec<Request>) {
        if let Err(e) = self.shared.check_failed() {
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
            if !matches!(req, Request::PutMany { .. } | Request::Barrier { .. }) {
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
        let mut result = self.shared.check_failed();
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
        for ack in acks {
            let committed = match &ack {
                Ack::Info(_, info) => info.size,
                Ack::Many(_, _, bytes, _, _) => *bytes,
                Ack::Done(_) | Ack::Moved(_) => 0,
            };
            if result.is_ok() {
                self.shared
                    .user_bytes_written
                    .fetch_add(committed, Ordering::Relaxed);
            }
            ack.send(result.as_ref().err());
        }
    }

    async fn apply_put(
        &mut self,
        key: Box<[u8]>,
        size: u64,
        data: ObjectData,
        spec: PutSpec,
    ) -> Result<ObjectInfo> {
        let value = data.tuple_value();
        let len = tuple::encoded_len(key.len(), &value, spec.expiry.is_some());
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
        let (id, replaced) = self.shared.state.write().link(&tuple.key, entry);
        if inline {
            self.hold_inline(id, tuple.version);
        }
        if let Some(gone) = &replaced {
            self.untrack(gone);
        }
        if let Some(at) = expires_micros {
            self.track_expiry(tuple.key.clone(), at, tuple.version, size);
        }
        let image = self.table.images.get_mut(&block).expect("image loaded");
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
        self.pending.release.extend(replaced);
        self.touch(block);
        Ok(info)
    }

    /// Removes `key`'s tuple (only if it holds `expect`, when given).
    /// Whether a visible version was removed: an expired one is removed
    /// too, but the key had no object as far as callers can tell.
    async fn apply_delete(&mut self, key: &[u8], expect: Option<u64>) -> Result<bool> {
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
        let image = self.table.images.get_mut(&block).expect("image loaded");
        if let Some(i) = image
            .iter()
            .position(|t| &*t.key == key && t.version == entry.version)
        {
            self.shared.retired.keep(image.swap_remove(i));
        }
        self.table.shrink_used(block, entry.tuple_len());
        self.touch(block);
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
                    e.size,
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
    async fn load_image(&mut self, block: u32) -> Result<()> {
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
                Request::Relocate { id, version, .. } => out.extend(
                    st.entry(*id)
                        .filter(|e| e.version == *version)
                        .map(|e| e.block),
                ),
                Request::Barrier { .. } => {}
            }
        }
        out
    }

    /// Step 0: drops stale copies from their blocks and makes that durable.
    async fn remove_stale(&mut self) -> Result<()> {
        let stale = std::mem::take(&mut self.stale);
        let blocks = std::mem::take(&mut self.stale_blocks);
        self.prefetch(blocks).await;
        let mut blocks = BTreeSet::new();
        for (block, key, version) in stale {
            self.load_image(block).await?;
            let image = self.table.images.get_mut(&block).expect("image loaded");
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

    /// Encodes each block's cached content: (block, slot image). `seq` is
    /// the group's last version, `group_first` its first.
    fn encode_blocks(
        &self,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<Vec<(u32, AlignedBuf)>> {
        let store_id = self.shared.geometry.store_id;
        let mut payload = Vec::with_capacity(BLOCK_SIZE);
        let mut out = Vec::with_capacity(blocks.len());
        for &b in blocks {
            let state = self.table.block(b).ok_or_else(|| unknown_block(b))?;
            // Every block of a group is loaded before it is changed.
            let tuples = self.table.images.get(&b).ok_or_else(|| unknown_block(b))?;
            payload.clear();
            for t in tuples {
                t.encode_into(&mut payload);
            }
            let mut buf = AlignedBuf::zeroed(BLOCK_SIZE);
            let id = SlotIdentity {
                store_id,
                block_no: b,
            };
            let stamp = GroupStamp {
                seq,
                first: group_first,
                blocks: blocks.len() as u32,
                flags,
            };
            if state.journaled {
                // Straight to the home slot: say it had no state before.
                let stamp = GroupStamp {
                    flags: if state.has_state {
                        flags
                    } else {
                        flags | SLOT_FIRST
                    },
                    ..stamp
                };
                encode_journaled_slot(id, stamp, tuples.len(), &payload, buf.as_mut_slice());
            } else {
                encode_slot(id, stamp, tuples.len(), &payload, buf.as_mut_slice());
            }
            out.push((b, buf));
        }
        Ok(out)
    }

    /// After the writes and the sync: the slots just written hold the
    /// blocks' state (a two-slot block's next write goes to its other
    /// slot). Readers now find the blocks' state in those slots: inline
    /// values of the blocks held in RAM until now are let go.
    fn blocks_written(
        &mut self,
        blocks: &BTreeSet<u32>,
        placed: &[(u32, u64)],
        journaled: &[(u32, u64)],
    ) {
        let mut st = self.shared.state.write();
        // `encode_blocks` found every one of them.
        for &b in blocks {
            if let Some(state) = self.table.block_mut(b) {
                st.set_slot(b, state.write_offset());
                if !state.journaled {
                    state.next_slot ^= 1;
                }
                state.has_state = true;
            }
        }
        // Home slots rewritten with this group; blocks of this group whose
        // state is in the journal until the next.
        for &(b, at) in placed.iter().chain(journaled) {
            st.set_slot(b, at);
        }
        // Written with its block: the value is read from the slot now.
        // Gone (replaced, deleted) or in a block still unwritten: as is.
        self.inline_pending.retain(|&(id, version)| {
            let Some(e) = st.entry_mut(id, version) else {
                return false;
            };
            if blocks.contains(&e.block) {
                e.data = Stored::INLINE;
                false
            } else {
                true
            }
        });
        drop(st);
        self.table.trim_images(blocks);
    }

    /// Writes each block (all at once) and syncs once: see
    /// [`write_blocks_beside`](Self::write_blocks_beside).
    pub async fn write_blocks(
        &mut self,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<()> {
        self.write_blocks_beside(Vec::new(), blocks, seq, group_first, flags)
            .await
    }

    /// Writes a group's tuple blocks, and the values it writes itself:
    /// values and block images go to the device together (one submission
    /// on io_uring), and the one sync follows once all of them are done. A
    /// failed write fails the group before its sync (the store is then
    /// poisoned, so this group stays the newest, and recovery rolls back a
    /// tuple whose UNSYNCED data did not land: invariant 1).
    ///
    /// Where an image goes: a two-slot block's spare slot; a journaled
    /// block never written, its home slot; any other journaled block, a
    /// free journal slot, where readers find it until its home slot is
    /// rewritten (`meta::journal`).
    async fn write_blocks_beside(
        &mut self,
        data_writes: Vec<DataWrite>,
        blocks: &BTreeSet<u32>,
        seq: u64,
        group_first: u64,
        flags: u32,
    ) -> Result<()> {
        let images = self.encode_blocks(blocks, seq, group_first, flags)?;
        let mut extents = Vec::with_capacity(data_writes.len());
        let mut writes: Vec<(AlignedBuf, u64)> = data_writes
            .into_iter()
            .map(|d| {
                extents.push(d.extent);
                (d.buf, d.at)
            })
            .collect();
        // (block, home slot, image) of the blocks that go through the journal.
        let mut homes = Vec::new();
        for (b, buf) in images {
            let state = self.table.block(b).ok_or_else(|| unknown_block(b))?;
            if state.journaled && state.has_state {
                homes.push((b, state.offset, buf));
            } else {
                writes.push((buf, state.write_offset()));
            }
        }
        let (slots, moved) = self.journal_slots(homes.len()).await?;
        let journal_at: Vec<(u32, u64)> = match (&moved, &self.journal) {
            (Some(j), _) | (None, Some(j)) => homes
                .iter()
                .zip(&slots)
                .map(|((b, _, _), &s)| (*b, j.offset(s)))
                .collect(),
            (None, None) => Vec::new(),
        };
        for ((_, _, buf), &(_, at)) in homes.iter().zip(&journal_at) {
            writes.push((AlignedBuf::copy_from(buf.as_slice()), at));
        }
        // Once the journal is half held, homes not yet rewritten go out
        // with this group's writes (the oldest images first) and its sync
        // makes them durable; when this group moves the journal, all of
        // them. Never those of blocks this group writes again: its newer
        // images supersede them.
        let place = if moved.is_some() {
            usize::MAX
        } else if self
            .journal
            .as_ref()
            .is_some_and(|j| j.crowded(slots.len()))
        {
            (2 * slots.len()).max(PLACE_AT_LEAST)
        } else {
            0
        };
        let mut placed_at: Vec<(u32, u64)> = Vec::new();
        if place > 0 {
            let mut oldest: Vec<(u64, u32)> = self
                .unplaced
                .iter()
                .filter(|(b, _)| !blocks.contains(b))
                .map(|(&b, u)| (u.seq, b))
                .collect();
            oldest.sort_unstable();
            for (_, block) in oldest.into_iter().take(place) {
                if let Some(u) = self.unplaced.remove(&block) {
                    placed_at.push((block, u.home));
                    writes.push((u.image, u.home));
                }
            }
        }
        let r = self.shared.engine.clone().write_and_sync(writes).await;
        // Every write is done: the extents may go (with the group's failure).
        drop(extents);
        r.map_err(|e| Error::io("writing object data and tuple blocks", e))?;
        let old_journal = match moved {
            Some(new) => self.move_journal(new)?,
            None => None,
        };
        let images: Vec<(u32, u32)> = homes.iter().map(|(b, _, _)| *b).zip(slots).collect();
        if let Some(j) = self.journal.as_mut() {
            // This group's sync made every home write before it durable
            // (its own and `place_homes`'s); its images are held until they
            // are superseded or placed in turn.
            j.placed(placed_at.iter().map(|&(b, _)| b));
            j.synced();
            j.hold(&images);
        }
        self.shared.device_bytes_written.fetch_add(
            // Each block once (spare, home or journal slot), and the homes
            // placed with this group.
            ((blocks.len() + placed_at.len()) * BLOCK_SIZE) as u64,
            Ordering::Relaxed,
        );
        // Readers read the journaled blocks from the journal until their
        // home slots are rewritten.
        for (block, home, image) in homes {
            self.unplaced.insert(block, Unplaced { home, image, seq });
        }
        self.blocks_written(blocks, &placed_at, &journal_at);
        // No reader is sent to the old journal any more: its space may go.
        if let Some(old) = old_journal {
            self.release_extent(old);
        }
        Ok(())
    }

    /// Rewrites every journaled block's home slot not yet rewritten with
    /// its newest image now (not synced: the journal keeps their images
    /// until a later sync).
    async fn place_homes(&mut self) -> Result<()> {
        let unplaced = std::mem::take(&mut self.unplaced);
        if unplaced.is_empty() {
            return Ok(());
        }
        let engine = &self.shared.engine;
        let placed: Vec<(u32, u64)> = unplaced.iter().map(|(&b, u)| (b, u.home)).collect();
        let futs: Vec<_> = unplaced
            .into_values()
            .map(|u| engine.write_at(u.image, u.home))
            .collect();
        for (r, _) in futures::future::join_all(futs).await {
            r.map_err(|e| Error::io("writing tuple blocks to their home slots", e))?;
        }
        self.shared
            .device_bytes_written
            .fetch_add((placed.len() * BLOCK_SIZE) as u64, Ordering::Relaxed);
        if let Some(j) = self.journal.as_mut() {
            j.placed(placed.iter().map(|&(b, _)| b));
        }
        let mut st = self.shared.state.write();
        for (block, home) in placed {
            st.set_slot(block, home);
        }
        Ok(())
    }

    /// `n` free journal slots for a group, and the journal they are in when
    /// it is a new one (`move_journal` once the group is synced): every
    /// home placed and a sync first when too many are held, a larger
    /// journal when the journal has fewer.
    async fn journal_slots(&mut self, n: usize) -> Result<(Vec<u32>, Option<Journal>)> {
        if n == 0 {
            return Ok((Vec::new(), None));
        }
        // A larger journal made ready for this group (or an earlier one).
        if let Some(mut spare) = self.spare.take() {
            match spare.pick(n) {
                Some(slots) => return Ok((slots, Some(spare))),
                None => self.free_journal(spare),
            }
        }
        let journal = self.journal.as_mut().ok_or_else(no_journal)?;
        if let Some(slots) = journal.pick(n) {
            return Ok((slots, None));
        }
        if n <= self.journal.as_ref().map_or(0, |j| j.slots() as usize) {
            // The held slots are free once their homes are written and
            // synced.
            self.place_homes().await?;
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing tuple blocks", e))?;
            let journal = self.journal.as_mut().ok_or_else(no_journal)?;
            journal.synced();
            if let Some(slots) = journal.pick(n) {
                return Ok((slots, None));
            }
        }
        let mut new = self.new_journal(n).await?;
        let slots = new.pick(n).ok_or_else(no_journal)?;
        Ok((slots, Some(new)))
    }

    /// Frees a metadata extent the published superblock no longer names
    /// (an old journal or extent table) and stops counting it.
    fn release_extent(&self, old: MetaExtent) {
        self.shared.alloc.lock().free(crate::meta::tuple::Piece {
            start: old.start,
            order: old.order,
        });
        self.shared
            .metadata_bytes
            .fetch_sub(old.len_bytes(), Ordering::Relaxed);
    }

    /// Frees a journal extent that was never published (a spare not
    /// used): it is plain heap space on the device.
    fn free_journal(&self, j: Journal) {
        self.shared.alloc.lock().free(crate::meta::tuple::Piece {
            start: j.extent.start,
            order: j.extent.order,
        });
    }

    /// Notes that the open group changes `block`.
    fn touch(&mut self, block: u32) {
        if self.pending.dirty.insert(block)
            && self
                .table
                .block(block)
                .is_some_and(|s| s.journaled && s.has_state)
        {
            self.pending.journaled += 1;
        }
    }

    /// Journal slots a group can have without a larger journal (`None`: a
    /// two-slot store, no journal).
    fn journal_room(&self) -> Option<usize> {
        let j = self.journal.as_ref()?;
        let spare = self.spare.as_ref().map_or(0, |s| s.slots() as usize);
        Some(spare.max(j.slots() as usize - j.pinned()))
    }

    /// Keeps the open group within what the metadata journal takes, before
    /// one more change is applied. A change adds at most one journaled
    /// block to the group, and at most one stale copy for step 0 of the
    /// next group to remove (a group of its own). When either would need
    /// more slots than the journal has, a larger journal is made ready
    /// (`spare`); when the heap has no room for one, the open group is
    /// written now (and its stale copies removed), and the change opens a
    /// new group of the same kind. So no group ever needs a journal it
    /// cannot have, and a full device is never a reason to fail a change
    /// that fits the metadata area: invariant 1 holds for each group, and
    /// a bulk load split this way still keeps a prefix after a cut (its
    /// groups are written in order, each all or nothing). Whether the open
    /// group was written.
    async fn room_for_one(&mut self) -> Result<bool> {
        // A failed write leaves the store poisoned: nothing more is written
        // (above all no stale copy removed whose replacement did not land).
        self.shared.check_failed()?;
        let Some(room) = self.journal_room() else {
            return Ok(false);
        };
        let need = self.pending.journaled.max(self.stale_blocks.len()) + 1;
        if need <= room {
            return Ok(false);
        }
        match self.new_journal(need).await {
            Ok(j) => {
                if let Some(old) = self.spare.replace(j) {
                    self.free_journal(old);
                }
                return Ok(false);
            }
            Err(e) if matches!(e.kind(), ErrorKind::NoSpace | ErrorKind::TooLarge) => {}
            Err(e) => return Err(e),
        }
        let (open, atomic, needs_data_sync) = (
            self.pending.first.is_some(),
            self.pending.atomic,
            self.pending.needs_data_sync,
        );
        self.flush().await?;
        if self.stale_blocks.len() >= room {
            self.remove_stale().await?;
        }
        if open {
            self.pending.first = Some(self.next_version);
            self.pending.atomic = atomic;
            self.pending.needs_data_sync = needs_data_sync;
        }
        Ok(true)
    }

    /// A zeroed, synced journal extent of at least `2n` slots and at least
    /// the current size (a journal of `n` when `2n` exceeds the largest
    /// piece), not yet in the superblock.
    async fn new_journal(&mut self, n: usize) -> Result<Journal> {
        let (current, max) = {
            let sb = self.shared.superblock.lock();
            (sb.journal.map_or(1, |j| j.order), sb.max_order)
        };
        let need = |k: usize| (usize::BITS - (k.max(2) - 1).leading_zeros()) as u8;
        let order = current.max(need(2 * n)).min(max);
        if (1usize << order) < n {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("a commit group of {n} tuple blocks exceeds the largest metadata journal"),
            ));
        }
        let full = || Error::new(ErrorKind::NoSpace, "no room for the metadata journal");
        let piece = super::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << order, |a| {
            a.alloc(order).ok_or_else(full)
        })?;
        let extent = MetaExtent {
            start: piece.start,
            order: piece.order,
        };
        let zeroed = async {
            self.zero(extent).await?;
            self.shared
                .engine
                .sync()
                .await
                .map_err(|e| Error::io("syncing a new metadata journal", e))
        };
        if let Err(e) = zeroed.await {
            self.shared.alloc.lock().free(piece);
            return Err(e);
        }
        Ok(Journal::new(extent))
    }

    /// Makes `new` (whose group's images are synced) the store's journal,
    /// published in the superblock; returns the old extent, which the
    /// caller frees once no reader is sent there. Before the publish the
    /// old journal and the home slots hold every state, so a cut on either
    /// side leaves a whole store.
    fn move_journal(&mut self, new: Journal) -> Result<Option<MetaExtent>> {
        let mut sb = self.shared.superblock.lock();
        let mut next = sb.clone();
        let old = next.journal.replace(new.extent);
        let published = publish_superblock(self.shared.engine.as_ref(), &next);
        match published {
            Ok(p) => *sb = p,
            Err(e) => {
                drop(sb);
                self.poison(&e);
                return Err(e);
            }
        }
        drop(sb);
        self.shared
            .metadata_bytes
            .fetch_add(new.extent.len_bytes(), Ordering::Relaxed);
        self.journal = Some(new);
        Ok(old)
    }

    /// Writes zeros over `extent`.
    async fn zero(&self, extent: MetaExtent) -> Result<()> {
        let engine = &self.shared.engine;
        let total = extent.len_bytes() as usize;
        let mut done = 0;
        while done < total {
            let len = ZERO_CHUNK.min(total - done);
            let (r, _) = engine
                .write_at(AlignedBuf::zeroed(len), extent.offset() + done as u64)
                .await;
            r.map_err(|e| Error::io("zeroing a new metadata extent", e))?;
            done += len;
        }
        self.shared
            .device_bytes_written
            .fetch_add(total as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Adds a metadata extent: allocate from the heap, zero it, sync, then
    /// publish it in the superblock's spare slot and sync again. Until the
    /// superblock write is durable the extent is just free heap space.
    async fn grow(&mut self) -> Result<()> {
        let full = || Error::new(ErrorKind::NoSpace, "metadata area is full and cannot grow");
        let (count, want, max, journaled) = {
            let sb = self.shared.superblock.lock();
            (
                sb.meta_extents.len(),
                sb.next_extent_order(),
                sb.max_order,
                sb.journal.is_some(),
            )
        };
        // Two-slot (format 3) stores are not converted: their superblock's
        // list is all they have.
        let limit = if journaled {
            MAX_TOTAL_META_EXTENTS
        } else {
            MAX_META_EXTENTS
        };
        if count >= limit {
            return Err(full());
        }
        // A full heap grows the store file first (`grow`).
        let piece = super::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << want, |a| {
            (1..=want).rev().find_map(|k| a.alloc(k)).ok_or_else(full)
        })?;
        let extent = MetaExtent {
            start: piece.start,
            order: piece.order,
        };
        // Past the superblock's list, a new extent table (format 5) lists
        // the rest: a piece of its own, written before the superblock that
        // names it (the old table stays whole until that is published).
        let table = if count + 1 > MAX_META_EXTENTS {
            let order = Superblock::extent_table_order(count + 1 - MAX_META_EXTENTS);
            let table = if order <= max {
                super::grow::with_room(&self.shared, (BLOCK_SIZE as u64) << order, |a| {
                    a.alloc(order).ok_or_else(full)
                })
            } else {
                Err(full())
            };
            match table {
                Ok(t) => Some(t),
                Err(e) => {
                    self.shared.alloc.lock().free(piece);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let result = self.publish_extent(extent, table).await;
        if let Err(e) = &result {
            self.poison(e);
            return result;
        }
        self.table.add_extent(extent);
        self.shared
            .metadata_bytes
            .fetch_add(piece.len_bytes(), Ordering::Relaxed);
        Ok(())
    }

    /// Zeroes `extent` (and writes the new extent table into `table`, when
    /// the superblock's list is full), syncs, then publishes the superblock
    /// naming them, and frees the table it replaced.
    async fn publish_extent(
        &mut self,
        extent: MetaExtent,
        table: Option<crate::meta::tuple::Piece>,
    ) -> Result<()> {
        self.zero(extent).await?;
        let engine = &self.shared.engine;
        let table_at = table.map(|t| MetaExtent {
            start: t.start,
            order: t.order,
        });
        if let Some(to) = table_at {
            // Only this path adds extents: the list read now is the one
            // published below (other fields may change meanwhile).
            let mut with_new = self.shared.superblock.lock().clone();
            with_new.meta_extents.push(extent);
            let written = write_extent_table(engine.as_ref(), &with_new, to).await?;
            self.shared
                .device_bytes_written
                .fetch_add(written, Ordering::Relaxed);
        }
        engine
            .sync()
            .await
            .map_err(|e| Error::io("syncing a new metadata extent", e))?;
        let mut sb = self.shared.superblock.lock();
        let old_table = sb.extent_table;
        let mut next = sb.clone();
        next.meta_extents.push(extent);
        if table_at.is_some() {
            next.extent_table = table_at;
            next.format_version = next.current_version();
        }
        *sb = publish_superblock(engine.as_ref(), &next)?;
        drop(sb);
        // The zeros are counted by `zero`; this is the superblock.
        self.shared
            .device_bytes_written
            .fetch_add(BLOCK_SIZE as u64, Ordering::Relaxed);
        if let Some(new) = table {
            self.shared
                .metadata_bytes
                .fetch_add(new.len_bytes(), Ordering::Relaxed);
            if let Some(old) = old_table {
                self.release_extent(old);
            }
        }
        Ok(())
    }
}

/// The group in progress, driven by whoever holds the lead.
type GroupFuture = Pin<Box<dyn Future<Output = Box<Committer>> + Send>>;

/// What the lead holds.
enum Lead {
    /// Nobody is committing: the next leader starts a group.
    Idle(Box<Committer>),
    /// A group is being committed; whoever holds the lead drives it on (its
    /// first leader may have been dropped half way).
    Busy(GroupFuture),
    /// Closed: the committer finished.
    Closed,
}

impl Lead {
    /// Drives a group in progress to its end. Cancel-safe: dropped half
    /// way, the group stays here for the next holder.
    async fn settle(&mut self) {
        if let Lead::Busy(group) = self {
            let committer = group.as_mut().await;
            *self = Lead::Idle(committer);
        }
    }
}

/// A tuple block number the committer's block table does not hold: block
/// numbers come from that table, so this is in-memory state gone wrong,
/// reported rather than written.
fn no_journal() -> Error {
    Error::new(
        ErrorKind::Corrupt,
        "a journaled tuple block in a store without a metadata journal",
    )
}

fn unknown_block(block: u32) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("tuple block {block} is not in the metadata table; nothing was written"),
    )
}

/// A queued change and the way to tell its caller to lead.
struct Queued {
    req: Request,
    /// Taken when the caller is told to lead (or when it was).
    lead: Option<oneshot::Sender<()>>,
}

struct Queue {
    requests: VecDeque<Queued>,
    /// Somebody holds the lead (or has been told to take it).
    leading: bool,
    closed: bool,
}

/// The commit path: the request queue and the lead (leader/follower group
/// commit, see the module doc).
///
/// The lead passes explicitly: a leader that is done hands it to the
/// caller of the oldest change still queued, so the next group starts at
/// once, without waking callers whose changes were in the group just
/// committed.
pub(crate) struct CommitPath {
    queue: Mutex<Queue>,
    /// The committer, out of here while a leader holds it (`Leading`).
    lead: Mutex<Option<Lead>>,
    maintenance: Arc<Maintenance>,
}

/// Wake-ups for the maintenance thread, and its stop.
pub(crate) struct Maintenance {
    poked: Mutex<bool>,
    wake: Condvar,
    stopped: std::sync::atomic::AtomicBool,
}

impl Maintenance {
    pub(crate) fn new() -> Arc<Maintenance> {
        Arc::new(Maintenance {
            poked: Mutex::new(false),
            wake: Condvar::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Tells the maintenance thread to close the commit path and end.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.poke();
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    pub(crate) fn poke(&self) {
        *self.poked.lock() = true;
        self.wake.notify_one();
    }

    /// Sleeps for `d` or until poked.
    fn sleep(&self, d: Duration) {
        let mut poked = self.poked.lock();
        if !*poked {
            self.wake.wait_for(&mut poked, d);
        }
        *poked = false;
    }
}

/// Whether a caller leads now or waits to be told.
pub(crate) enum Role {
    Leader,
    Follower(oneshot::Receiver<()>),
}

/// The lead, out of the path while its holder uses it. Dropped (done, or
/// with its holder's future cancelled half way), it puts the lead back,
/// group in progress included, and passes it on (`CommitPath::release`).
struct Leading<'a> {
    path: &'a CommitPath,
    lead: Option<Lead>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        *self.path.lead.lock() = self.lead.take();
        self.path.release();
    }
}

/// A follower's summons to lead. Dropped before it is acted on (the
/// caller's future cancelled), a summons already sent is passed on.
struct Summons<'a> {
    path: &'a CommitPath,
    rx: oneshot::Receiver<()>,
}

impl Drop for Summons<'_> {
    fn drop(&mut self) {
        // No summons can arrive after this; one that did is passed on.
        self.rx.close();
        if let Ok(Some(())) = self.rx.try_recv() {
            self.path.release();
        }
    }
}

impl CommitPath {
    pub(crate) fn new(committer: Committer, maintenance: Arc<Maintenance>) -> CommitPath {
        CommitPath {
            queue: Mutex::new(Queue {
                requests: VecDeque::new(),
                leading: false,
                closed: false,
            }),
            lead: Mutex::new(Some(Lead::Idle(Box::new(committer)))),
            maintenance,
        }
    }

    /// Queues a change: its caller leads now if nobody does, or waits to be
    /// told. Gives the change back once the path is closed.
    #[expect(
        clippy::result_large_err,
        reason = "the refused request goes back by value, once, after close"
    )]
    pub(crate) fn push(&self, req: Request) -> std::result::Result<Role, Request> {
        let mut q = self.queue.lock();
        if q.closed {
            return Err(req);
        }
        if !q.leading {
            q.leading = true;
            q.requests.push_back(Queued { req, lead: None });
            return Ok(Role::Leader);
        }
        let (tx, rx) = oneshot::channel();
        q.requests.push_back(Queued {
            req,
            lead: Some(tx),
        });
        Ok(Role::Follower(rx))
    }

    /// Passes the lead on: to the caller of the oldest queued change that
    /// still waits, else nobody (the maintenance thread is poked when a
    /// group was left in progress).
    fn release(&self) {
        let mut q = self.queue.lock();
        for queued in q.requests.iter_mut() {
            if let Some(tx) = queued.lead.take() {
                if tx.send(()).is_ok() {
                    return;
                }
            }
        }
        q.leading = false;
        drop(q);
        let left = matches!(*self.lead.lock(), Some(Lead::Busy(_)));
        let queued = !self.queue.lock().requests.is_empty();
        if left || queued {
            // A group left half way, or changes whose callers are gone.
            self.maintenance.poke();
        }
    }

    /// Takes the lead out of the path (the caller was told it leads).
    fn take_lead(&self) -> Leading<'_> {
        Leading {
            path: self,
            lead: self.lead.lock().take(),
        }
    }

    /// Waits for the reply to a queued change, leading groups when told
    /// to. `None` when the store closed without answering.
    pub(crate) async fn wait<T>(&self, role: Role, mut reply: oneshot::Receiver<T>) -> Option<T> {
        let summons = match role {
            Role::Leader => None,
            Role::Follower(rx) => Some(Summons { path: self, rx }),
        };
        if let Some(mut summons) = summons {
            let told = futures::future::select(&mut reply, &mut summons.rx).await;
            match told {
                futures::future::Either::Left((r, _)) => return r.ok(),
                futures::future::Either::Right((Ok(()), _)) => {
                    // Acted on: nothing to pass on when it drops.
                    summons.rx.close();
                    drop(summons);
                }
                futures::future::Either::Right((Err(_), _)) => {
                    // The path dropped the summons (closed): the reply
                    // says how the change ended.
                    drop(summons);
                    return reply.await.ok();
                }
            }
        }
        {
            let mut leading = self.take_lead();
            if let Some(lead) = leading.lead.as_mut() {
                self.lead_groups(lead, LEAD_ONE_MORE).await;
            }
        }
        reply.await.ok()
    }

    /// With the lead held: finishes the group in progress, then commits
    /// what is queued as one group, and again while changes deferred by
    /// it remain (so a deferred change never waits for another caller),
    /// and up to `more` times again while changes are queued.
    async fn lead_groups(&self, lead: &mut Lead, mut more: usize) {
        while self.lead_one(lead).await {
            let deferred = matches!(lead, Lead::Idle(c) if !c.deferred.is_empty());
            if deferred {
                continue;
            }
            if more > 0 && !self.queue.lock().requests.is_empty() {
                more -= 1;
                continue;
            }
            break;
        }
    }

    /// One group: finishes the group in progress, then commits what is
    /// queued (deferred changes first). Whether a group ran.
    async fn lead_one(&self, lead: &mut Lead) -> bool {
        lead.settle().await;
        let Lead::Idle(committer) = std::mem::replace(lead, Lead::Closed) else {
            return false;
        };
        let mut committer = committer;
        let mut batch: Vec<Request> = committer.deferred.drain(..).collect();
        {
            let mut q = self.queue.lock();
            let take = q.requests.len().min(MAX_GROUP.saturating_sub(batch.len()));
            batch.extend(q.requests.drain(..take).map(|queued| queued.req));
        }
        if batch.is_empty() {
            *lead = Lead::Idle(committer);
            return false;
        }
        *lead = Lead::Busy(Box::pin(async move {
            committer.commit_group(batch).await;
            committer
        }));
        lead.settle().await;
        true
    }

    /// Takes the lead if nobody holds it.
    fn try_lead(&self) -> Option<Leading<'_>> {
        let mut q = self.queue.lock();
        if q.leading {
            return None;
        }
        q.leading = true;
        drop(q);
        Some(self.take_lead())
    }

    /// Background work, when nobody leads: a group left behind, queued
    /// changes whose callers are gone, a buffered group that is due, index
    /// maintenance. How long to sleep before the next look.
    pub(crate) fn tick(&self) -> Duration {
        let Some(mut leading) = self.try_lead() else {
            return IDLE_TICK;
        };
        crate::io::block_on(async {
            let Some(lead) = leading.lead.as_mut() else {
                return IDLE_TICK;
            };
            // One round at most: changes queued meanwhile have callers
            // to lead them (this is not a commit thread).
            self.lead_groups(lead, 0).await;
            match lead {
                Lead::Idle(c) => {
                    c.tick().await;
                    c.wait_for()
                }
                _ => IDLE_TICK,
            }
        })
    }

    /// Refuses new changes, commits everything queued, writes what is
    /// open and marks the clean close. Idempotent.
    pub(crate) fn close(&self) {
        self.queue.lock().closed = true;
        // Wait for the lead (a caller may hold it for a last group).
        let mut leading = loop {
            if let Some(l) = self.try_lead() {
                break l;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        crate::io::block_on(async {
            if let Some(lead) = leading.lead.as_mut() {
                while self.lead_one(lead).await {}
                if let Lead::Idle(c) = lead {
                    c.finish().await;
                }
                *lead = Lead::Closed;
            }
        });
        drop(leading);
        // Whatever is still queued fails (nothing can be, once closed and
        // drained; kept for safety).
        let left: Vec<Queued> = self.queue.lock().requests.drain(..).collect();
        let e = Error::new(ErrorKind::Closed, "the store is closed");
        left.into_iter().for_each(|q| fail_request(q.req, &e));
    }

    /// The maintenance thread: background work until told to stop, then
    /// the close.
    pub(crate) fn maintain(&self) {
        while !self.maintenance.stopped() {
            let next = self.tick();
            if self.maintenance.stopped() {
                break;
            }
            self.maintenance.sleep(next);
        }
        self.close();
    }
}
