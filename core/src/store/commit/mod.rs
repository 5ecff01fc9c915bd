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
//!
//! A failed metadata write poisons the store (`Committer::poison`): nothing
//! more is written until it is reopened, and every later change the commit
//! path refuses says why, with the first failure's kind (a `Corrupt` block
//! stays `Corrupt`, not a bare `Io`).
//!
//! One job per file, in the order a change meets them:
//!
//! * `leader.rs`: the queue and the lead (leader/follower, `CommitPath`);
//! * `apply.rs`: applying a group's requests to the index and the cached
//!   block images (steps 0 and 2);
//! * `batch.rs`: an atomic batch's part of step 2 (all of it or nothing);
//! * `blocks.rs`: encoding and writing a group's tuple blocks, and its sync
//!   (steps 1 and 3);
//! * `journal.rs`: the metadata journal's slots (which slot an image goes
//!   to, home slots, a larger journal);
//! * `growth.rs`: adding metadata extents when the tuple blocks are full;
//! * `maintenance.rs`: the maintenance thread, expiry and the close;
//! * `image.rs`: the index image the close writes;
//! * this file: the committer's state, shared by all of them.
//!
//! The requests themselves are `store::request` (below the front, above
//! this folder); they are re-exported here under their old paths.

mod apply;
mod batch;
mod blocks;
mod checkpoint;
mod evict;
mod growth;
mod image;
mod journal;
mod leader;
mod maintenance;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::meta::journal::Journal;
use crate::meta::table::TupleBlockTable;
use crate::store::{Entry, Shared};
use journal::Unplaced;

// What the rest of `store/` reaches as `commit::X` (the requests' old
// paths, kept so those files need not change).
use crate::store::request::{DataWrite, Request};
pub(crate) use leader::CommitPath;
pub(crate) use maintenance::Maintenance;

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
    /// The index image and change map the superblock names, when open
    /// loaded them (`checkpoint`): the map marks every block written
    /// since; a close that follows no change keeps them, any other close
    /// replaces them.
    checkpoint: Option<checkpoint::Checkpoint>,
    /// Tuple-block writes since the last checkpoint (or the open): one is
    /// written in the background past `Options::checkpoint_after`.
    written_since_checkpoint: u64,
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
    /// Room kept in blocks until the group is written: (block, bytes) a
    /// put that recovery may roll back alone (UNSYNCED) freed by replacing
    /// a larger tuple in place. Recovery's per-object rollback gives the
    /// block that larger tuple back, beside every other change the group
    /// made there; keeping the room means it always fits (invariant 6).
    kept_room: Vec<(u32, usize)>,
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
            checkpoint: None,
            written_since_checkpoint: 0,
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
    pub(super) fn untrack(&mut self, gone: &Entry) {
        if let Some(at) = gone.expires_micros() {
            self.shared.expiring.lock().remove(&(at, gone.version));
        }
    }

    pub fn bump(&mut self) -> u64 {
        let v = self.next_version;
        self.next_version += 1;
        v
    }

    /// Stops the store accepting changes after a failed metadata write:
    /// what the device holds is not known any more (a group may be half
    /// written), so nothing more is written until a reopen, whose recovery
    /// finds out (invariants 1 and 6). The first `cause` is kept: later
    /// refusals say why (`check_failed`).
    pub(super) fn poison(&mut self, cause: &Error) {
        self.shared.failed.poison(cause);
    }

    /// Refuses a change on a read-only store or a poisoned one, with the
    /// kind and message of the failure that stopped it
    /// (`Shared::check_failed`).
    pub(super) fn check_failed(&self) -> crate::error::Result<()> {
        self.shared.check_failed()
    }

    /// Notes that the open group changes `block`.
    pub(super) fn touch(&mut self, block: u32) {
        if self.pending.dirty.insert(block)
            && self
                .table
                .block(block)
                .is_some_and(|s| s.journaled && s.has_state)
        {
            self.pending.journaled += 1;
        }
    }
}

/// A block the table marks journaled in a store whose superblock names no
/// journal: in-memory state gone wrong, reported rather than written.
fn no_journal() -> Error {
    Error::new(
        ErrorKind::Corrupt,
        "a journaled tuple block in a store without a metadata journal",
    )
}

/// A tuple block number the committer's block table does not hold: block
/// numbers come from that table, so this is in-memory state gone wrong,
/// reported rather than written.
fn unknown_block(block: u32) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("tuple block {block} is not in the metadata table; nothing was written"),
    )
}
