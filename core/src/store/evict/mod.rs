//! A cache store (`Options::eviction`): when a put, an upload or a batch
//! finds no room, objects the policy (`policy.rs`, S3-FIFO by entry id)
//! gives up are deleted until it fits, and the put tries again.
//!
//! Invariants kept here:
//! * an eviction is a delete through the commit path (`Request::Evict`,
//!   applied by `commit/evict.rs` as an ordinary delete of the key its
//!   tuple names, only of the version chosen): durable before the space is
//!   reused, and after a crash an evicted object is absent or whole like
//!   any deleted one (invariants 1, 2, 4); no new on-disk state;
//! * an object a read holds (its extent's `Arc` held beyond the index's)
//!   is never chosen, and the commit path checks again before deleting it
//!   (an inline value has no handle: a read racing its eviction finds the
//!   key gone or reads the version it found, invariant 8); an object a put
//!   is still staging is not in the index, so not in the policy either;
//! * a cache store never grows past its bound: `max_capacity`, or without
//!   one the size it has (`Shared::growth_limit`), so a put that finds no
//!   room evicts instead of growing;
//! * its metadata area (tuple blocks, journal, extent table) stops growing
//!   at half the bound (`Shared::metadata_limit`, `Committer::grow`): a
//!   change whose tuple finds no room then gets a `NoSpace` marked for
//!   tuple room (`Error::for_tuple_room`), and its round evicts objects
//!   until blocks have that room (inline objects first: a large object's
//!   tuple frees a few bytes), so the other half is always there for
//!   values and a cache of small objects never gets stuck (issue 43);
//! * only one eviction round runs at a time, and a put that waited for
//!   another's round tries again before evicting more (no eviction storm
//!   when many writers find the store full at once).

mod policy;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) use policy::S3Fifo;

use super::{request, Entry, State, Store};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::index::EntryId;

/// Rounds of eviction one put runs before it gives up with `NoSpace` (each
/// round frees at least what the put needs, when the policy has that much;
/// other writers may take the room before this one tries again).
const MAX_ROUNDS: usize = 64;
/// Other puts' rounds one put waits out before it gives up: each made
/// room, which others took first (a bound against a bug, not a limit a
/// working cache meets).
const MAX_OTHERS: usize = 100_000;
/// A cache store's metadata (tuple blocks, journal, tables) is held to its
/// bound divided by this (`Shared::metadata_limit`).
pub(crate) const METADATA_SHARE: u64 = 2;
/// Most objects one round evicts (one commit group's worth of deletes).
const MAX_VICTIMS: usize = 4096;

/// The bytes an object counts for in the policy's queues: its size (at
/// least 1, so an empty object still takes a place).
pub(crate) fn weight(e: &Entry) -> u64 {
    e.size().max(1)
}

/// Counters of a store's reads and evictions ([`Stats`](crate::Stats)),
/// and the one-round-at-a-time lock.
#[derive(Default)]
pub(crate) struct Evictions {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    evicted_bytes: AtomicU64,
    /// Held by the eviction round in progress.
    running: futures::lock::Mutex<()>,
    /// Rounds finished since open: a put that saw it move while it waited
    /// tries again before evicting.
    rounds: AtomicU64,
}

impl Evictions {
    #[inline]
    pub fn count_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub fn count_miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// (hits, misses, evictions, evicted bytes).
    pub fn figures(&self) -> (u64, u64, u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
            self.evictions.load(Ordering::Relaxed),
            self.evicted_bytes.load(Ordering::Relaxed),
        )
    }
}

/// An object chosen to go: entry `id` while it still holds `version`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Victim {
    pub id: EntryId,
    pub version: u64,
}

/// What the victims chosen so far free.
#[derive(Default)]
struct Freed {
    /// Objects' bytes (sizes).
    bytes: u64,
    heap: u64,
    tuples: usize,
    /// Tuple bytes per block, and the most in one block.
    per_block: std::collections::HashMap<u32, usize>,
    /// Blocks with the target's `tuple` bytes freed in them.
    blocks_with_room: usize,
}

impl Freed {
    fn add(&mut self, target: Target, block: u32, tuple: usize, heap: u64, size: u64) {
        self.bytes += size;
        self.heap += heap;
        self.tuples += tuple;
        let here = self.per_block.entry(block).or_default();
        let before = *here;
        *here += tuple;
        if let Target::Tuples { tuple: want, .. } = target {
            if before < want && *here >= want {
                self.blocks_with_room += 1;
            }
        }
    }

    fn enough(&self, target: Target) -> bool {
        match target {
            Target::Bytes { want, heap: true } => self.heap >= want,
            Target::Bytes { want, heap: false } => self.bytes >= want,
            Target::Tuples {
                tuples,
                count,
                heap,
                ..
            } => {
                (self.blocks_with_room >= count && self.tuples >= tuples)
                    || heap.is_some_and(|h| self.heap >= h)
            }
        }
    }
}

/// The room a put, an upload or a batch looks for: `bytes` as stored,
/// whether they are heap bytes (a value above the inline threshold: then
/// evicting inline objects, which free only tuple room, would not help),
/// and the keys it writes, which are never evicted for it (a conditional
/// put must not lose its own target to the room it makes).
pub(crate) struct Need<'a> {
    pub bytes: u64,
    pub heap: bool,
    /// The largest tuple the change writes, and all its tuples together
    /// (bytes, estimated from the keys and sizes): the tuple room it looks
    /// for when the metadata area cannot grow.
    pub tuple: usize,
    pub tuples: usize,
    /// How many tuples it writes.
    pub count: usize,
    pub keys: &'a [&'a [u8]],
}

/// What an eviction round frees: heap room (a value's pieces, or a new
/// metadata extent), or, when the metadata area cannot grow, tuple room in
/// the tuple blocks.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// `want` bytes: of heap, when `heap` (inline objects free none and
    /// are passed over), else of objects of any kind.
    Bytes { want: u64, heap: bool },
    /// `count` blocks with `tuple` bytes freed in each, and `tuples` freed
    /// in all (what a batch's check, `Committer::apply_batch`, asks for);
    /// or, when the metadata area may still grow, `heap` bytes of heap for
    /// its next extent.
    Tuples {
        tuple: usize,
        tuples: usize,
        count: usize,
        heap: Option<u64>,
    },
}

/// What the commit path did with a victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// Deleted (durable once answered): its size.
    Gone(u64),
    /// Not deleted: a read holds it; it goes back to the policy.
    Held,
    /// The entry no longer holds that version (replaced or deleted since).
    Moved,
}

/// Whether a heap object's pieces are held by anything but its entry: a
/// read in flight, a value write, a compaction's copy.
pub(crate) fn is_held(e: &Entry) -> bool {
    e.data
        .heap()
        .is_some_and(|h| Arc::strong_count(&h.extent) > 1)
}

impl State {
    /// Objects the policy gives up until they free the room `target`
    /// names (at least one, at most `max`), skipping any a read holds and
    /// any of `need`'s keys. For heap room inline objects, which free none,
    /// are passed over; for tuple room alone heap objects are, unless the
    /// inline objects that qualify are not enough (a large value is not
    /// given up for the few bytes its tuple frees while small ones can
    /// go). Those passed over go
    /// back to the main queue. Empty when nothing is tracked or nothing
    /// qualifies.
    fn choose_victims(&self, target: Target, max: usize, need: &Need<'_>) -> Vec<Victim> {
        let Some(p) = &self.policy else {
            return Vec::new();
        };
        let mut q = p.queues.lock();
        let mut out = Vec::new();
        let mut held = Vec::new();
        let mut passed = Vec::new();
        let protected: std::collections::HashSet<EntryId> =
            need.keys.iter().filter_map(|k| self.index.get(k)).collect();
        let weight_of = |id| self.entry(id).map(weight);
        let heap_bytes = |e: &Entry| e.data.heap().map_or(0, |h| h.extent.bytes());
        let passes = |e: &Entry| match target {
            Target::Bytes { heap: true, .. } => heap_bytes(e) == 0,
            Target::Tuples { heap: None, .. } => heap_bytes(e) > 0,
            _ => false,
        };
        let mut freed = Freed::default();
        while out.len() < max && (out.is_empty() || !freed.enough(target)) {
            let Some(c) = q.next_victim(&p.freq, weight_of) else {
                break;
            };
            match self.entry(c.id) {
                Some(e) if !is_held(e) && !protected.contains(&c.id) && !passes(e) => {
                    freed.add(target, e.block, e.tuple_len(), heap_bytes(e), e.size());
                    out.push(Victim {
                        id: c.id,
                        version: e.version,
                    });
                }
                Some(e) if !is_held(e) && !protected.contains(&c.id) => passed.push(c),
                Some(_) => held.push(c),
                None => {}
            }
        }
        // Tuple room the inline objects could not give: heap objects after
        // all, in the policy's order.
        let mut passed = passed.into_iter();
        if matches!(target, Target::Tuples { .. }) {
            while out.len() < max && (out.is_empty() || !freed.enough(target)) {
                let Some(c) = passed.next() else { break };
                if let Some(e) = self.entry(c.id) {
                    freed.add(target, e.block, e.tuple_len(), heap_bytes(e), e.size());
                    out.push(Victim {
                        id: c.id,
                        version: e.version,
                    });
                }
            }
        }
        // Back behind everything else, once the round has chosen.
        for c in held.into_iter().chain(passed) {
            q.keep(c.id, c.weight);
        }
        out
    }

    /// A victim that was not evicted after all goes back to the main
    /// queue, if its entry still holds that version and it is still out
    /// of the queues (nothing readmitted its id meanwhile).
    pub(crate) fn keep_victim(&self, v: Victim) {
        let (Some(p), Some(e)) = (&self.policy, self.entry(v.id)) else {
            return;
        };
        if e.version != v.version {
            return;
        }
        let mut q = p.queues.lock();
        if q.is_candidate(v.id) {
            q.keep(v.id, weight(e));
        }
    }

    /// Remembers an evicted key in the policy's ghost queue.
    pub(crate) fn remember_evicted(&self, key: &[u8]) {
        if let Some(p) = &self.policy {
            let h = p.hash(key);
            p.queues.lock().remember(h);
        }
    }
}

impl Store {
    /// Whether this store evicts to make room (`Options::eviction`).
    pub(crate) fn evicts(&self) -> bool {
        let o = &self.shared().options;
        o.eviction != crate::options::Eviction::None && !o.is_read_only()
    }

    /// `TooLarge` for heap room a cache could not give even empty: more than
    /// its bound less its metadata (which never shrinks) and superblocks.
    /// Checked before any eviction, so such a put evicts nothing.
    fn could_ever_fit(&self, need: &Need<'_>) -> Result<()> {
        let s = self.shared();
        let Some(limit) = s.growth_limit() else {
            return Ok(());
        };
        let metadata = s.metadata_bytes.load(Ordering::Relaxed);
        let room = limit.saturating_sub(metadata + 2 * BLOCK_SIZE as u64);
        if need.heap && need.bytes > room {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "needs {} bytes; this cache of {limit} bytes, {metadata} of them metadata, holds \
                     at most {room} bytes of values even empty (nothing was evicted)",
                    need.bytes
                ),
            ));
        }
        Ok(())
    }

    /// The heap a cache's metadata area lacks to grow by its next extent,
    /// when it may still grow by one within its limit (counting the
    /// checkpoint in: never more than `Committer::grow` allows) and the
    /// heap is what stops it; `None` otherwise (only freed tuples make
    /// room then).
    fn heap_for_next_extent(&self, free: u64) -> Option<u64> {
        let s = self.shared();
        let (bytes, journal) = {
            let sb = s.superblock.lock();
            ((BLOCK_SIZE as u64) << sb.next_extent_order(), sb.journal)
        };
        let room = s.metadata_room(s.metadata_bytes.load(Ordering::Relaxed), journal)?;
        (bytes <= room && free < bytes).then(|| bytes - free)
    }

    /// The room values of these sizes take, written under `keys`.
    pub(crate) fn need<'a>(
        &self,
        sizes: impl Iterator<Item = u64>,
        keys: &'a [&'a [u8]],
    ) -> Need<'a> {
        use crate::meta::tuple::{inline_len, stored_len, TUPLE_HEADER_LEN};
        let inline = self.shared().settings.inline_threshold as u64;
        let key = keys.iter().map(|k| k.len()).max().unwrap_or(0);
        let (mut bytes, mut heap, mut any) = (0u64, true, false);
        let (mut tuple, mut tuples, mut count) = (0usize, 0usize, 0usize);
        for size in sizes {
            bytes += stored_len(size);
            heap &= size > inline;
            any = true;
            let len = if size <= inline {
                // Without an expiry (a put with one may need a round more).
                inline_len(key, size, false)
            } else {
                // A piece per set bit of its block count (more when the
                // heap is cut up), a checksum per block up to 16.
                let blocks = size.div_ceil(BLOCK_SIZE as u64);
                TUPLE_HEADER_LEN + key + 2 + 8 * (blocks.count_ones() as usize + 4) + 65
            };
            tuple = tuple.max(len);
            tuples += len;
            count += 1;
        }
        Need {
            bytes,
            heap: heap && any,
            tuple,
            tuples,
            count,
            keys,
        }
    }

    /// Runs `attempt`; in a cache store, a `NoSpace` from it evicts objects
    /// worth the room `need` looks for (what the attempt allocates) and tries again,
    /// until it fits or nothing is left to evict (then the last `NoSpace`,
    /// saying so). Anything else, `TooLarge` included, is returned as is.
    pub(crate) async fn making_room<T, F>(
        &self,
        need: Need<'_>,
        mut attempt: impl FnMut() -> F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        if !self.evicts() {
            return attempt().await;
        }
        self.could_ever_fit(&need)?;
        let mut rounds = Rounds::default();
        loop {
            let seen = self.shared().evict.rounds.load(Ordering::Acquire);
            match attempt().await {
                Err(e) if e.kind() == ErrorKind::NoSpace && rounds.more() => {
                    let r = self.evict(&need, e.wants_tuple_room(), seen).await?;
                    if !rounds.count(r) {
                        return Err(nothing_to_evict(e));
                    }
                }
                r => return r,
            }
        }
    }

    /// [`making_room`](Self::making_room) for blocking callers.
    pub(crate) fn making_room_blocking<T>(
        &self,
        need: Need<'_>,
        mut attempt: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        if !self.evicts() {
            return attempt();
        }
        self.could_ever_fit(&need)?;
        let mut rounds = Rounds::default();
        loop {
            let seen = self.shared().evict.rounds.load(Ordering::Acquire);
            match attempt() {
                Err(e) if e.kind() == ErrorKind::NoSpace && rounds.more() => {
                    let r = crate::io::block_on(self.evict(&need, e.wants_tuple_room(), seen))?;
                    if !rounds.count(r) {
                        return Err(nothing_to_evict(e));
                    }
                }
                r => return r,
            }
        }
    }

    /// For a caller that runs its own attempts (a bulk load's commit,
    /// whose prefix commits and whose rest tries again): the eviction
    /// rounds finished so far, read before an attempt.
    pub(crate) fn eviction_rounds(&self) -> u64 {
        self.shared().evict.rounds.load(Ordering::Acquire)
    }

    /// For such a caller: after attempt `e` (a `NoSpace`, begun when
    /// [`eviction_rounds`](Self::eviction_rounds) was `seen`), one round
    /// evicting for `need`; `Ok` to try again, else the error to give up
    /// with (`e`, saying nothing is left to evict, or the round's own).
    pub(crate) async fn evict_after(
        &self,
        need: &Need<'_>,
        e: Error,
        seen: u64,
        rounds: &mut Rounds,
    ) -> Result<()> {
        if !self.evicts() || e.kind() != ErrorKind::NoSpace || !rounds.more() {
            return Err(e);
        }
        let r = self.evict(need, e.wants_tuple_room(), seen).await?;
        if rounds.count(r) {
            Ok(())
        } else {
            Err(nothing_to_evict(e))
        }
    }

    /// One eviction round: objects worth the room `need` looks for beyond
    /// what is free now (at least one object) deleted through the commit
    /// path, all in one group: heap room, or, when the attempt found the
    /// metadata area unable to grow (`tuple_room`), tuple room. When
    /// another round finished since the caller saw `seen`, none: the
    /// caller tries again first.
    async fn evict(&self, need: &Need<'_>, tuple_room: bool, seen: u64) -> Result<Round> {
        let s = self.shared();
        let _round = s.evict.running.lock().await;
        if s.evict.rounds.load(Ordering::Acquire) != seen {
            return Ok(Round::Others);
        }
        let free = s.alloc.lock().free_blocks() * BLOCK_SIZE as u64;
        let target = if tuple_room {
            Target::Tuples {
                tuple: need.tuple,
                tuples: need.tuples,
                count: need.count,
                heap: self.heap_for_next_extent(free),
            }
        } else {
            Target::Bytes {
                want: need.bytes.saturating_sub(free).max(1),
                heap: need.heap,
            }
        };
        let victims = s.state.read().choose_victims(target, MAX_VICTIMS, need);
        let asks = victims.iter().map(|&v| async move {
            let r = self
                .submit(|reply| request::Request::Evict {
                    id: v.id,
                    version: v.version,
                    reply,
                })
                .await;
            (v, r)
        });
        let answers = futures::future::join_all(asks).await;
        let mut gone = 0;
        let mut failure = None;
        for (v, r) in answers {
            match r {
                Ok(Evicted::Gone(size)) => {
                    gone += 1;
                    s.evict.evictions.fetch_add(1, Ordering::Relaxed);
                    s.evict.evicted_bytes.fetch_add(size, Ordering::Relaxed);
                }
                Ok(Evicted::Moved) => {}
                Ok(Evicted::Held) => s.state.read().keep_victim(v),
                Err(e) => {
                    s.state.read().keep_victim(v);
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            return Err(e.context("evicting to make room"));
        }
        // Freed space is reused only once its delete is written: in the
        // buffered mode that is at the next sync.
        if gone > 0 && matches!(s.options.durability, crate::Durability::Buffered { .. }) {
            self.sync().await?;
        }
        s.evict.rounds.fetch_add(1, Ordering::AcqRel);
        // Victims that a read took hold of, or a put replaced, since they
        // were chosen free nothing now, but the next round finds others:
        // only a round that found no victim at all ends the put's tries.
        Ok(match victims.len() {
            0 => Round::Evicted(0),
            _ => Round::Evicted(gone.max(1)),
        })
    }
}

/// What an eviction round did for the put that ran it.
enum Round {
    /// It evicted this many objects (1 when every victim it chose was
    /// taken by a read or a put meanwhile; 0: it found none).
    Evicted(usize),
    /// Another put's round ran meanwhile: nothing evicted, try again.
    Others,
}

/// The rounds one put has run or waited out.
#[derive(Default)]
pub(crate) struct Rounds {
    own: usize,
    others: usize,
}

impl Rounds {
    fn more(&self) -> bool {
        self.own < MAX_ROUNDS && self.others < MAX_OTHERS
    }

    /// Counts a round; false when it freed nothing (nothing left to evict).
    fn count(&mut self, r: Round) -> bool {
        match r {
            Round::Evicted(0) => false,
            Round::Evicted(_) => {
                self.own += 1;
                true
            }
            Round::Others => {
                self.others += 1;
                true
            }
        }
    }
}

fn nothing_to_evict(e: Error) -> Error {
    Error::new(
        ErrorKind::NoSpace,
        format!(
            "{}; the cache has nothing left it may evict for this (it keeps objects being read \
             or written and the keys this change writes, and evicts no inline object for heap \
             room)",
            e.message()
        ),
    )
}
