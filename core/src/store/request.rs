//! A change on its way to the commit path, and how its caller is answered.
//!
//! The store's front builds a [`Request`] (a put, a delete, a compaction's
//! relocation, a barrier, a bulk load) and the commit path applies it; a
//! put flows downward, front → write → data → request → commit → meta, so
//! nothing here imports `store::commit`. What this file keeps: every
//! request is answered exactly once, through its own reply channel ([`Ack`]
//! once its group is durable, or [`fail_request`]); a failure copied to
//! many callers keeps its kind and its whole message ([`copy_error`]).
//! A put's value written by its group ([`DataWrite`]) holds its extent
//! until the write is done (invariant 2 in `INVARIANTS.md`).

use std::collections::HashSet;
use std::sync::Arc;

use futures::channel::oneshot::Sender;

use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::options::{PutMode, PutOptions};
use crate::store::evict::Evicted;
use crate::store::{BatchOutcome, Extent, ObjectData, ObjectInfo};

/// When a new version expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// This many µs after its commit (a put's ttl).
    After(u64),
    /// At this time, µs since the epoch (a copy keeps its source's expiry).
    At(u64),
}

impl Expiry {
    /// When a version committed at `created_micros` expires.
    pub(crate) fn at(self, created_micros: u64) -> u64 {
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
    /// A cache store's eviction (`store/evict/`): entry `id` deleted like
    /// any object (the key its tuple names), only while it holds `version`
    /// and no read holds its pieces.
    Evict {
        id: crate::index::EntryId,
        version: u64,
        reply: Sender<Result<Evicted>>,
    },
    /// Replies after the group's sync.
    Barrier { reply: Sender<Result<()>> },
    /// Many puts in one group (bulk load), applied in order; stops at the
    /// first that fails. Replies how many were applied, and the failure.
    PutMany {
        items: Vec<Staged>,
        reply: Sender<(usize, Option<Error>)>,
    },
    /// An atomic batch (`store/batch.rs`): every condition checked first,
    /// then all of it applied in one group, or none of it (`commit/batch.rs`).
    Batch {
        ops: Vec<BatchItem>,
        reply: Sender<Result<Vec<BatchOutcome>>>,
    },
}

/// One operation of an atomic batch, staged: a put's value already in
/// place (inline, or written to pieces nothing else holds), or a delete.
/// Its index in the batch is its position.
pub(crate) enum BatchItem {
    Put {
        key: Box<[u8]>,
        size: u64,
        data: ObjectData,
        spec: PutSpec,
    },
    /// A delete; with `expect`, only of that version (`VersionMismatch`
    /// otherwise, aborting the batch). Without, a missing key is no change.
    Delete { key: Box<[u8]>, expect: Option<u64> },
}

impl BatchItem {
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            BatchItem::Put { key, .. } | BatchItem::Delete { key, .. } => key,
        }
    }

    /// What it does, for error messages.
    pub(crate) fn verb(&self) -> &'static str {
        match self {
            BatchItem::Put { .. } => "put",
            BatchItem::Delete { .. } => "delete",
        }
    }
}

/// A value's device write, prepared by its put (bytes in place, checksums
/// taken: `Store::prepare_write`) and issued by the commit group beside its
/// tuple blocks, with the extent it writes into: the group keeps the extent
/// until the write is done, so its space cannot go to another object while
/// the device still writes there (invariant 2).
pub(crate) struct DataWrite {
    pub buf: AlignedBuf,
    pub at: u64,
    pub extent: Arc<Extent>,
}

/// A staged object: its key, size, where its value is, and when it expires
/// (µs since the epoch).
pub(crate) type Staged = (Box<[u8]>, u64, ObjectData, Option<u64>);

impl Request {
    /// Whether it carries heap data written and synced apart from its
    /// tuple: the group syncs data once before its tuple blocks (step 1).
    pub(crate) fn needs_data_sync(&self) -> bool {
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
            Request::Batch { ops, .. } => ops
                .iter()
                .any(|op| matches!(op, BatchItem::Put { data, .. } if unchecked(data))),
            _ => false,
        }
    }

    /// Whether it changes one of `keys` (keys whose moved tuple still has
    /// a stale copy: such a change waits for the next group).
    pub(crate) fn touches(&self, keys: &HashSet<Box<[u8]>>) -> bool {
        match self {
            Request::Put { key, .. } | Request::Delete { key, .. } => keys.contains(key),
            // In place in the version's own block: a stale copy of an
            // older version elsewhere does not matter.
            Request::Relocate { .. } => false,
            // Its key is known only from its block: while any key has a
            // stale copy, it waits for the next group's step 0.
            Request::Evict { .. } => !keys.is_empty(),
            Request::PutMany { items, .. } => items.iter().any(|(k, _, _, _)| keys.contains(k)),
            Request::Batch { ops, .. } => ops.iter().any(|op| keys.contains(op.key())),
            Request::Barrier { .. } => false,
        }
    }
}

/// A request applied in the open group, answered once the group is
/// durable (or failed).
pub(crate) enum Ack {
    Info(Sender<Result<ObjectInfo>>, ObjectInfo),
    Done(Sender<Result<()>>),
    /// A relocation applied (`Ok(true)` once durable).
    Moved(Sender<Result<bool>>),
    /// An eviction applied: the evicted object's size, once durable.
    Evicted(Sender<Result<Evicted>>, u64),
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
    /// A batch applied whole: each operation's outcome, and the value
    /// bytes it put.
    Batch(Sender<Result<Vec<BatchOutcome>>>, Vec<BatchOutcome>, u64),
}

impl Ack {
    /// Answers the caller: its result, or the group's failure.
    pub(crate) fn send(self, err: Option<&Error>) {
        let fail = copy_error;
        match (self, err) {
            (Ack::Info(tx, info), None) => drop(tx.send(Ok(info))),
            (Ack::Info(tx, _), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Done(tx), None) => drop(tx.send(Ok(()))),
            (Ack::Done(tx), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Moved(tx), None) => drop(tx.send(Ok(true))),
            (Ack::Moved(tx), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Evicted(tx, size), None) => drop(tx.send(Ok(Evicted::Gone(size)))),
            (Ack::Evicted(tx, _), Some(e)) => drop(tx.send(Err(fail(e)))),
            (Ack::Many(tx, n, _, stop, _), None) => drop(tx.send((n, stop))),
            (Ack::Many(tx, _, _, _, durable), Some(e)) => drop(tx.send((durable, Some(fail(e))))),
            (Ack::Batch(tx, outcomes, _), None) => drop(tx.send(Ok(outcomes))),
            (Ack::Batch(tx, _, _), Some(e)) => drop(tx.send(Err(fail(e)))),
        }
    }
}

/// Answers a request that was not applied with the failure `e`.
pub(crate) fn fail_request(req: Request, e: &Error) {
    let err = || copy_error(e);
    match req {
        Request::Put { reply, .. } => drop(reply.send(Err(err()))),
        Request::Delete { reply, .. } | Request::Barrier { reply } => drop(reply.send(Err(err()))),
        Request::PutMany { reply, .. } => drop(reply.send((0, Some(err())))),
        Request::Batch { reply, .. } => drop(reply.send(Err(err()))),
        Request::Relocate { reply, .. } => drop(reply.send(Err(err()))),
        Request::Evict { reply, .. } => drop(reply.send(Err(err()))),
    }
}

/// A copy of `e` for one more caller (an `Error` is not `Clone`: its
/// source is an `std::io::Error`): the same kind, and the message with the
/// source's text, so no caller loses why the operating system refused.
pub(crate) fn copy_error(e: &Error) -> Error {
    match std::error::Error::source(e) {
        Some(source) => Error::new(e.kind(), format!("{}: {source}", e.message())),
        None => Error::new(e.kind(), e.message().to_string()),
    }
}
