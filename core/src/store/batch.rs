//! Atomic batches (many puts and deletes, each with its own condition,
//! committed all or nothing) and `get_many`.
//!
//! The front's half of a batch: its operations checked (keys, no key twice,
//! at most [`MAX_BATCH_OPS`]), conditions prechecked, values placed and
//! written into pieces nothing else holds, then the whole batch handed to
//! the commit path as ONE request, which decides every condition and
//! applies all of it in one commit group, or none of it
//! (`commit/batch.rs`, where the atomicity argument is).
//!
//! Invariants kept here: nothing of a batch is visible or durable before
//! its commit group (its values go into unlinked pieces, freed with their
//! extents when the batch is refused: invariants 1 and 2); a refused
//! batch says which operation failed ([`Error::batch_op`]) and changes
//! nothing (invariant 3).
//!
//! The same key twice in one batch is refused (`InvalidArgument`), not
//! "last wins": each operation's condition is decided against the store as
//! it was before the batch, which two operations on one key would make
//! ambiguous, and the commit path can place each key's new tuple once.

use std::collections::HashMap;

use bytes::Bytes;

use super::state::heap;
use super::write::Staged;
use super::{check_key, data, request, ObjectInfo, Store};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{PutMode, PutOptions};

/// Most operations in one batch. A batch is one commit group, which may
/// change one tuple block per operation, and a group must fit the metadata
/// journal: the largest journal is one heap piece
/// ([`Options::max_piece_size`](crate::Options::max_piece_size), 16 MiB
/// by default: 4096 slots). A store whose largest piece is smaller allows
/// that many slots' worth of operations; more is `TooLarge` before
/// anything is written.
pub const MAX_BATCH_OPS: usize = 4096;

/// Operations a batch stages at once (their values written concurrently).
const STAGE_IN_FLIGHT: usize = 16;

/// Reads `get_many` keeps in flight at once.
const GET_MANY_IN_FLIGHT: usize = 64;

/// What one operation of a committed batch did, in the order they were
/// added.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// A put: the new version.
    Put(ObjectInfo),
    /// A delete: whether the key had an object (a plain delete of a
    /// missing key changes nothing and does not abort the batch).
    Deleted {
        /// The key had a (visible) object, now removed.
        existed: bool,
    },
}

/// One operation as the caller gave it (cloned when a cache store tries
/// the batch again after evicting).
#[derive(Clone)]
enum BatchOp {
    Put {
        key: Box<[u8]>,
        value: Bytes,
        options: PutOptions,
    },
    Delete {
        key: Box<[u8]>,
        expect: Option<u64>,
    },
}

impl BatchOp {
    fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key, .. } => key,
        }
    }

    /// The error of its condition when that fails against the store as it
    /// is now (a cache store asks before evicting for the batch; the
    /// commit decides again). `index` is its place in the batch.
    fn fails_now(&self, index: usize, store: &Store) -> Option<Error> {
        let version = store
            .shared()
            .state
            .read()
            .lookup(self.key())
            .map(|e| e.version);
        let refused = match (self, version) {
            (BatchOp::Put { options, .. }, Some(v)) if options.mode == PutMode::Create => {
                Some((ErrorKind::AlreadyExists, format!("the key has version {v}")))
            }
            (BatchOp::Put { options, .. }, _) => match options.mode {
                PutMode::Update(want) if version != Some(want) => Some((
                    ErrorKind::VersionMismatch,
                    format!("expected version {want}, the key has {version:?}"),
                )),
                _ => None,
            },
            (
                BatchOp::Delete {
                    expect: Some(want), ..
                },
                _,
            ) if version != Some(*want) => Some((
                ErrorKind::VersionMismatch,
                format!("expected version {want}, the key has {version:?}"),
            )),
            (BatchOp::Delete { .. }, _) => None,
        };
        refused.map(|(kind, why)| Error::new(kind, why).in_batch(index, self.verb(), self.key()))
    }

    fn verb(&self) -> &'static str {
        match self {
            BatchOp::Put { .. } => "put",
            BatchOp::Delete { .. } => "delete",
        }
    }
}

/// Puts and deletes committed together, all or nothing
/// ([`Store::batch`]): one commit group, one sync, and after a crash
/// either every operation is there or none is. Each put may carry a
/// condition ([`PutMode::Create`], [`PutMode::Update`]) and a delete may
/// require a version ([`delete_if_version`](Self::delete_if_version)); the
/// conditions are decided together, in commit order, and one that fails
/// refuses the whole batch with its kind (`AlreadyExists`,
/// `VersionMismatch`), naming the operation ([`Error::batch_op`] is its
/// index) and its key.
///
/// A key may appear once per batch (twice is `InvalidArgument`). Nothing
/// is written until [`commit`](Self::commit); dropping the batch discards
/// it.
pub struct Batch {
    store: Store,
    ops: Vec<BatchOp>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("ops", &self.ops.len())
            .finish()
    }
}

impl Batch {
    pub(crate) fn new(store: Store) -> Batch {
        Batch {
            store,
            ops: Vec::new(),
        }
    }

    /// Adds a put of `value` under `key` (create or replace).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl Into<Bytes>) -> &mut Self {
        self.put_with(key, value, PutOptions::default())
    }

    /// Adds a put with options: its condition and ttl, as
    /// [`Store::put_with`].
    pub fn put_with(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl Into<Bytes>,
        options: PutOptions,
    ) -> &mut Self {
        self.ops.push(BatchOp::Put {
            key: key.as_ref().into(),
            value: value.into(),
            options,
        });
        self
    }

    /// Adds a delete of `key`. A key without an object is no change (its
    /// outcome says so), not a failure: use
    /// [`delete_if_version`](Self::delete_if_version) to require one.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops.push(BatchOp::Delete {
            key: key.as_ref().into(),
            expect: None,
        });
        self
    }

    /// Adds a delete of `key` only if it holds `version`
    /// ([`ObjectInfo::version`]): otherwise the batch is refused with
    /// `VersionMismatch`.
    pub fn delete_if_version(&mut self, key: impl AsRef<[u8]>, version: u64) -> &mut Self {
        self.ops.push(BatchOp::Delete {
            key: key.as_ref().into(),
            expect: Some(version),
        });
        self
    }

    /// How many operations it holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Commits every operation, or none: returns once the batch is durable,
    /// with each operation's outcome in order. An empty batch commits
    /// nothing (no sync) and returns an empty list. The batch is empty
    /// afterwards, whatever the result.
    /// In a cache store, a batch that finds no room for its values
    /// evicts (never one of the objects it names while a read holds it)
    /// and is tried again whole.
    pub async fn commit(&mut self) -> Result<Vec<BatchOutcome>> {
        let ops = std::mem::take(&mut self.ops);
        let store = &self.store;
        if store.evicts() {
            // A condition that fails against the store as it is: the
            // batch is refused, its operation named, without evicting
            // anything for it (the commit would decide the same, but only
            // once there is room for the values).
            if let Some(e) = ops
                .iter()
                .enumerate()
                .find_map(|(i, op)| op.fails_now(i, store))
            {
                return Err(e);
            }
        }
        let keys: Vec<&[u8]> = ops.iter().map(BatchOp::key).collect();
        let need = store.need(
            ops.iter().filter_map(|op| match op {
                BatchOp::Put { value, .. } => Some(value.len() as u64),
                BatchOp::Delete { .. } => None,
            }),
            &keys,
        );
        store
            .making_room(need, || store.commit_atomic_batch(ops.clone()))
            .await
    }
}

impl Store {
    /// A new, empty [`Batch`] of puts and deletes to commit atomically.
    pub fn batch(&self) -> Batch {
        Batch::new(self.clone())
    }

    /// The whole object of each key, in order: `None` for a key without
    /// one. Each key is read as [`get`](Self::get) reads it (several at
    /// once); the reads are not one snapshot, so a batch committed
    /// meanwhile may show for some keys and not yet for others. Any error
    /// other than `NotFound` fails the call.
    pub async fn get_many<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<Box<[u8]>> = keys.into_iter().map(|k| k.as_ref().into()).collect();
        let mut out = Vec::with_capacity(keys.len());
        for some in keys.chunks(GET_MANY_IN_FLIGHT) {
            let reads = futures::future::join_all(some.iter().map(|k| self.get(k))).await;
            for r in reads {
                out.push(found(r)?);
            }
        }
        Ok(out)
    }

    /// The most operations a batch of this store may hold: a group must
    /// fit the largest journal (one heap piece of slots).
    /// A cache store's journal grows only to its largest
    /// (`Shared::cache_journal_order`), or the one it has if larger.
    fn max_batch_ops(&self) -> usize {
        let (mut max_order, journal) = {
            let sb = self.shared().superblock.lock();
            (sb.max_order, sb.journal.map_or(0, |j| j.order))
        };
        if let Some(largest) = self.shared().cache_journal_order() {
            max_order = max_order.min(largest.max(journal));
        }
        let slots = 1usize
            .checked_shl(u32::from(max_order))
            .unwrap_or(usize::MAX);
        MAX_BATCH_OPS.min(slots)
    }

    /// A batch's front half (see the module doc), then its commit.
    async fn commit_atomic_batch(&self, ops: Vec<BatchOp>) -> Result<Vec<BatchOutcome>> {
        let n = ops.len();
        let ctx = |e: Error| e.context(format!("batch of {}", ops_len(n)));
        let _staging = self.staging();
        self.check_open().map_err(ctx)?;
        self.shared().check_failed().map_err(ctx)?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let limit = self.max_batch_ops();
        if ops.len() > limit {
            // A cache's journal is held within its metadata share, which
            // grows with its bound.
            let why = if self.evicts() {
                "within the metadata journal this cache's bound leaves room for; split the \
                 batch, or open the cache with a larger max_capacity"
            } else {
                "within the largest metadata journal; split the batch"
            };
            return Err(ctx(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "a batch holds at most {limit} operations on this store (one commit group \
                     {why}); nothing was written"
                ),
            )));
        }
        let mut first_of: HashMap<&[u8], usize> = HashMap::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            check_key(op.key()).map_err(|e| e.in_batch(i, op.verb(), op.key()))?;
            if let Some(j) = first_of.insert(op.key(), i) {
                let e = Error::new(
                    ErrorKind::InvalidArgument,
                    format!("operation {j} has the same key: a batch changes a key at most once"),
                );
                return Err(e.in_batch(i, op.verb(), op.key()));
            }
        }
        drop(first_of);
        // Staged STAGE_IN_FLIGHT at a time (their heap values written
        // concurrently); the first failure in the batch's order is reported,
        // and every value staged is freed with its extent.
        let mut items = Vec::with_capacity(ops.len());
        let mut rest: Vec<(usize, BatchOp)> = ops.into_iter().enumerate().collect();
        while !rest.is_empty() {
            let some: Vec<(usize, BatchOp)> =
                rest.drain(..rest.len().min(STAGE_IN_FLIGHT)).collect();
            let staged = futures::future::join_all(some.into_iter().map(|(i, op)| async move {
                let verb = op.verb();
                let item = match op {
                    BatchOp::Put {
                        key,
                        value,
                        options,
                    } => self.stage_batch_put(key, value, options).await,
                    BatchOp::Delete { key, expect } => self.stage_batch_delete(key, expect),
                };
                item.map_err(|(e, key)| e.in_batch(i, verb, &key))
            }))
            .await;
            for item in staged {
                items.push(item?);
            }
        }
        self.submit(|reply| request::Request::Batch { ops: items, reply })
            .await
    }

    /// A batch's put checked (its condition against the index as it is
    /// now: the commit path decides for real) and its value placed and
    /// written, not yet visible. On failure, the error and the key.
    async fn stage_batch_put(
        &self,
        key: Box<[u8]>,
        value: Bytes,
        options: PutOptions,
    ) -> std::result::Result<request::BatchItem, (Error, Box<[u8]>)> {
        let spec = match self.precheck(&key, &options) {
            Ok(spec) => spec,
            Err(e) => return Err((e, key)),
        };
        let staged = match self.stage_put(&key, &value, false) {
            // A heap with the room but in holes too small: compact it once
            // and try again (as a put does).
            Err(e) if self.worth_compacting(&e, value.len() as u64) => {
                if let Err(e) = self.compact().await {
                    return Err((e, key));
                }
                self.after_compaction(self.stage_put(&key, &value, false))
            }
            r => r,
        };
        let data = match staged {
            Ok(Staged::Ready(data, _)) => data,
            Ok(Staged::Write(extent, unsynced)) => {
                match data::write_object(self.shared(), &extent, &value).await {
                    Ok(sums) => heap(extent, sums, unsynced),
                    Err(e) => return Err((e, key)),
                }
            }
            Err(e) => return Err((e, key)),
        };
        Ok(request::BatchItem::Put {
            key,
            size: value.len() as u64,
            data,
            spec,
        })
    }

    /// A batch's delete, its required version prechecked.
    fn stage_batch_delete(
        &self,
        key: Box<[u8]>,
        expect: Option<u64>,
    ) -> std::result::Result<request::BatchItem, (Error, Box<[u8]>)> {
        if let Some(want) = expect {
            let current = self.shared().state.read().lookup(&key).map(|e| e.version);
            if let Err(e) = PutMode::Update(want).check(current) {
                return Err((e, key));
            }
        }
        Ok(request::BatchItem::Delete { key, expect })
    }
}

/// `n operations`, for messages.
fn ops_len(n: usize) -> String {
    match n {
        1 => "1 operation".to_string(),
        n => format!("{n} operations"),
    }
}

/// A read's result as `get_many` reports it: a miss is `None`.
fn found(r: Result<Bytes>) -> Result<Option<Bytes>> {
    match r {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
