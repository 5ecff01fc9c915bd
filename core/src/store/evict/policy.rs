//! S3-FIFO over the engine's entry ids: which object a cache store gives
//! up when a put needs room.
//!
//! Three FIFO queues (Yang et al., SOSP '23): new objects enter the
//! *small* queue (about a tenth of the tracked bytes); one read at least
//! once while there moves on to the *main* queue when it reaches the head,
//! one never read is evicted and its key's 64-bit hash remembered in the
//! *ghost* queue; a put of a key the ghost remembers goes straight to
//! main. Main is a FIFO with a 2-bit frequency per object: at the head, an
//! object read since it was last there goes round again with its count
//! lowered by one, one not read is evicted. A one-pass scan of cold keys
//! so only ever churns the small queue, while a hot set read again and
//! again stays in main.
//!
//! Written here rather than taken from a crate: the maintained ones
//! (quick_cache, foyer-memory, the S3-FIFO crates on crates.io) are caches
//! themselves, holding each key (and value) in their own hash table and
//! dropping entries when they decide to. The engine must choose victims
//! itself (skipping objects a read holds, deleting through the commit
//! path) and cannot afford a second copy of 100 M keys (issue 40). This
//! keeps only what S3-FIFO needs, keyed by the dense entry ids:
//!
//! * per id: one frequency byte, written by readers with relaxed atomics
//!   (a lost increment costs nothing but accuracy; once an object's count
//!   is at its ceiling a read only loads it), and one byte of queue state
//!   (which queue, and a generation that tells a queue slot left by a
//!   removed object from its id's next object): **2 bytes**;
//! * per object in a queue: one 8-byte slot (id and generation);
//! * per remembered ghost: an 8-byte slot in its FIFO and an 8-byte hash
//!   in a set (about 9–18 bytes with the set's slack); the ghost holds at
//!   most as many hashes as there are tracked objects.
//!
//! So **10 bytes per cached object, plus at most ~26 per ghost**: 10–36
//! bytes per object, against a key copy of tens of bytes plus a hash
//! table's entry in any of the crates.
//!
//! State at open is not persisted: every object of the index enters the
//! main queue in id order, with no reads counted (see `State::track_all`).

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::index::EntryId;

/// Largest frequency count (2 bits).
const MAX_FREQ: u8 = 3;
/// The small queue's share of the tracked bytes: 1/10.
const SMALL_SHARE: u64 = 10;
/// Stale queue slots tolerated beyond the tracked objects before the
/// queues are filtered.
const STALE_SLACK: usize = 1024;

/// Queue bits of an id's state byte.
const IN_SMALL: u8 = 1;
const IN_MAIN: u8 = 2;
const QUEUE_BITS: u8 = 3;
/// The generation: the byte's upper six bits, advanced every time the id
/// names a new object.
const GEN_SHIFT: u32 = 2;
const GEN_MASK: u64 = 0x3f;

/// A queue slot: id in the low 58 bits, generation above.
fn slot(id: EntryId, gen: u8) -> u64 {
    (id & ((1 << 58) - 1)) | (u64::from(gen) << 58)
}

fn slot_id(s: u64) -> EntryId {
    s & ((1 << 58) - 1)
}

fn slot_gen(s: u64) -> u8 {
    ((s >> 58) & GEN_MASK) as u8
}

/// Hashes are already uniform: the ghost set uses them as they are.
#[derive(Default)]
pub(crate) struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// What a reader touches: one frequency byte per entry id. Grown only
/// under the state's write lock, so a reader holding the read lock may
/// index it.
#[derive(Default)]
pub(crate) struct Frequencies(Vec<AtomicU8>);

impl Frequencies {
    /// A read of `id`: its count up by one, to at most [`MAX_FREQ`]. A
    /// relaxed load, and a store only below the ceiling.
    #[inline]
    pub fn touch(&self, id: EntryId) {
        if let Some(f) = self.0.get(id as usize) {
            let n = f.load(Ordering::Relaxed);
            if n < MAX_FREQ {
                f.store(n + 1, Ordering::Relaxed);
            }
        }
    }

    fn get(&self, id: EntryId) -> u8 {
        self.0
            .get(id as usize)
            .map_or(0, |f| f.load(Ordering::Relaxed))
    }

    fn set(&self, id: EntryId, n: u8) {
        if let Some(f) = self.0.get(id as usize) {
            f.store(n, Ordering::Relaxed);
        }
    }

    fn ensure(&mut self, id: EntryId) {
        let need = id as usize + 1;
        if self.0.len() < need {
            self.0
                .resize_with(need.max(self.0.len() * 2), AtomicU8::default);
        }
    }
}

/// A candidate the queues gave up: the caller checks it is still that
/// object and not held, then evicts it or hands it back ([`Queues::keep`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub id: EntryId,
    /// The bytes it was tracked with.
    pub weight: u64,
}

/// The queues and the per-id queue state. Changed under the state's write
/// lock (objects in and out) or under its read lock and this struct's own
/// mutex (choosing victims), never by readers.
#[derive(Default)]
pub(crate) struct Queues {
    /// Per id: queue bits and generation.
    marks: Vec<u8>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    small_bytes: u64,
    main_bytes: u64,
    tracked: usize,
    ghost: VecDeque<u64>,
    ghost_set: HashSet<u64, BuildHasherDefault<Identity>>,
}

impl Queues {
    fn mark(&self, id: EntryId) -> u8 {
        self.marks.get(id as usize).copied().unwrap_or(0)
    }

    fn set_mark(&mut self, id: EntryId, m: u8) {
        let i = id as usize;
        if self.marks.len() <= i {
            self.marks.resize((i + 1).max(self.marks.len() * 2), 0);
        }
        if let Some(x) = self.marks.get_mut(i) {
            *x = m;
        }
    }

    fn gen(&self, id: EntryId) -> u8 {
        self.mark(id) >> GEN_SHIFT
    }

    /// A new object under `id` of `weight` bytes: into main when its key's
    /// hash is a ghost (evicted lately and wanted again), else small.
    pub fn admit(&mut self, freq: &mut Frequencies, id: EntryId, weight: u64, hash: u64) {
        freq.ensure(id);
        freq.set(id, 0);
        let gen = (self.gen(id).wrapping_add(1)) & GEN_MASK as u8;
        let to_main = self.ghost_set.remove(&hash);
        self.enqueue(id, gen, weight, to_main);
        self.tracked += 1;
        self.drop_stale_slots();
    }

    /// Slots left by removed objects go only when they reach a queue's
    /// head, which a store that is never full never makes them do: once
    /// they outnumber the tracked objects (plus some slack), both queues
    /// are filtered in one pass (amortised O(1) per admission), so the
    /// queues stay within about twice the objects.
    fn drop_stale_slots(&mut self) {
        let slots = self.small.len() + self.main.len();
        if slots <= 2 * self.tracked + STALE_SLACK {
            return;
        }
        let marks = &self.marks;
        let live = |s: &u64, q: u8| {
            let m = marks.get(slot_id(*s) as usize).copied().unwrap_or(0);
            m >> GEN_SHIFT == slot_gen(*s) && m & QUEUE_BITS == q
        };
        self.small.retain(|s| live(s, IN_SMALL));
        self.main.retain(|s| live(s, IN_MAIN));
        self.small.shrink_to(2 * self.small.len() + STALE_SLACK);
        self.main.shrink_to(2 * self.main.len() + STALE_SLACK);
    }

    fn enqueue(&mut self, id: EntryId, gen: u8, weight: u64, main: bool) {
        let q = if main { IN_MAIN } else { IN_SMALL };
        self.set_mark(id, gen << GEN_SHIFT | q);
        if main {
            self.main.push_back(slot(id, gen));
            self.main_bytes += weight;
        } else {
            self.small.push_back(slot(id, gen));
            self.small_bytes += weight;
        }
    }

    /// `id`'s object of `weight` bytes left the store (deleted, replaced,
    /// expired, or evicted): its queue slot, if any, is skipped from now on.
    pub fn forget(&mut self, id: EntryId, weight: u64) {
        let m = self.mark(id);
        match m & QUEUE_BITS {
            IN_SMALL => self.small_bytes = self.small_bytes.saturating_sub(weight),
            IN_MAIN => self.main_bytes = self.main_bytes.saturating_sub(weight),
            _ => {}
        }
        if m & QUEUE_BITS != 0 {
            self.tracked = self.tracked.saturating_sub(1);
        }
        // Out of the queue, or a candidate being evicted: either way it is
        // not counted any more.
        self.set_mark(id, m & !QUEUE_BITS);
    }

    /// A candidate not evicted after all (held by a read, or its eviction
    /// failed): back at the tail of main, still tracked.
    pub fn keep(&mut self, id: EntryId, weight: u64) {
        let gen = self.gen(id);
        self.enqueue(id, gen, weight, true);
        self.tracked += 1;
    }

    /// Remembers an evicted key's hash, forgetting the oldest beyond as
    /// many as there are tracked objects.
    pub fn remember(&mut self, hash: u64) {
        if self.ghost_set.insert(hash) {
            self.ghost.push_back(hash);
        }
        while self.ghost.len() > self.tracked.max(1) {
            if let Some(old) = self.ghost.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }

    /// The next object S3-FIFO gives up, taken out of its queue (its
    /// bytes no longer counted in either): `weight_of` gives an id's
    /// current bytes. `None` when nothing is tracked.
    pub fn next_victim(
        &mut self,
        freq: &Frequencies,
        weight_of: impl Fn(EntryId) -> Option<u64>,
    ) -> Option<Candidate> {
        // Every live object moves at most once from small to main and has
        // its count lowered at most three times in main per victim: the
        // bound only guards a bug against looping forever.
        let mut steps = 4 * (self.small.len() + self.main.len()) + 8;
        while steps > 0 {
            steps -= 1;
            let total = self.small_bytes + self.main_bytes;
            let from_small = !self.small.is_empty()
                && (self.main.is_empty() || self.small_bytes * SMALL_SHARE >= total);
            let s = if from_small {
                self.small.pop_front()?
            } else {
                self.main.pop_front()?
            };
            let (id, gen) = (slot_id(s), slot_gen(s));
            let m = self.mark(id);
            let want = if from_small { IN_SMALL } else { IN_MAIN };
            // A slot left by a removed object, or by an id since reused.
            if m >> GEN_SHIFT != gen || m & QUEUE_BITS != want {
                continue;
            }
            let Some(weight) = weight_of(id) else {
                continue;
            };
            let f = freq.get(id);
            if from_small {
                self.small_bytes = self.small_bytes.saturating_sub(weight);
                if f > 0 {
                    freq.set(id, 0);
                    self.enqueue(id, gen, weight, true);
                    continue;
                }
            } else {
                self.main_bytes = self.main_bytes.saturating_sub(weight);
                if f > 0 {
                    freq.set(id, f - 1);
                    self.enqueue(id, gen, weight, true);
                    continue;
                }
            }
            // Leaves its queue; still tracked until evicted or kept.
            self.set_mark(id, gen << GEN_SHIFT);
            self.tracked = self.tracked.saturating_sub(1);
            return Some(Candidate { id, weight });
        }
        None
    }

    /// Whether `id` is a candidate taken out of the queues and not yet
    /// evicted or kept.
    pub fn is_candidate(&self, id: EntryId) -> bool {
        self.mark(id) & QUEUE_BITS == 0
    }
}

/// The policy of a cache store: frequencies readers bump, and the queues.
#[derive(Default)]
pub(crate) struct S3Fifo {
    pub freq: Frequencies,
    pub queues: parking_lot::Mutex<Queues>,
    /// Hashes keys for the ghost (a secret per open: not persisted).
    hasher: std::collections::hash_map::RandomState,
}

impl S3Fifo {
    /// A key's 64-bit hash, as the ghost remembers it.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// `id`'s new object: admitted (under the state's write lock).
    pub fn admit(&mut self, id: EntryId, weight: u64, key: &[u8]) {
        let h = self.hash(key);
        self.queues.get_mut().admit(&mut self.freq, id, weight, h);
    }

    /// An object present at open: to the tail of main, no reads counted.
    pub fn admit_existing(&mut self, id: EntryId, weight: u64) {
        self.freq.ensure(id);
        let q = self.queues.get_mut();
        let gen = q.gen(id);
        q.enqueue(id, gen, weight, true);
        q.tracked += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> S3Fifo {
        S3Fifo::default()
    }

    fn victim(p: &S3Fifo) -> Option<EntryId> {
        let mut q = p.queues.lock();
        q.next_victim(&p.freq, |_| Some(1)).map(|c| c.id)
    }

    #[test]
    fn an_object_never_read_leaves_before_one_read_in_the_small_queue() {
        let mut p = policy();
        for id in 0..10 {
            p.admit(id, 1, format!("k{id}").as_bytes());
        }
        p.freq.touch(0);
        // 0 was read: it moves on to main, 1 goes first.
        assert_eq!(victim(&p), Some(1));
        assert_eq!(victim(&p), Some(2));
    }

    #[test]
    fn a_removed_objects_slot_is_skipped_even_when_its_id_is_reused() {
        let mut p = policy();
        for id in 0..3 {
            p.admit(id, 1, format!("k{id}").as_bytes());
        }
        p.queues.get_mut().forget(0, 1);
        // Id 0 names a new object, queued behind 1 and 2.
        p.admit(0, 1, b"new");
        assert_eq!(victim(&p), Some(1));
        assert_eq!(victim(&p), Some(2));
        assert_eq!(victim(&p), Some(0));
        assert_eq!(victim(&p), None);
    }

    #[test]
    fn an_evicted_key_put_again_goes_to_main() {
        let mut p = policy();
        for id in 0..20 {
            p.admit(id, 1, format!("k{id}").as_bytes());
        }
        let v = victim(&p).unwrap();
        let h = p.hash(format!("k{v}").as_bytes());
        p.queues.get_mut().forget(v, 1);
        p.queues.get_mut().remember(h);
        p.admit(v, 1, format!("k{v}").as_bytes());
        assert_eq!(p.queues.get_mut().mark(v) & QUEUE_BITS, IN_MAIN);
    }

    #[test]
    fn a_kept_candidate_is_tracked_again() {
        let mut p = policy();
        p.admit(7, 5, b"a");
        let c = p.queues.lock().next_victim(&p.freq, |_| Some(5)).unwrap();
        assert!(p.queues.lock().is_candidate(7));
        p.queues.get_mut().keep(c.id, c.weight);
        assert!(!p.queues.lock().is_candidate(7));
        assert_eq!(victim(&p), Some(7));
    }

    /// A store that is never full but overwrites keeps its queues within
    /// about twice its objects (stale slots filtered), and the order of
    /// the live ones.
    #[test]
    fn overwrites_without_evictions_do_not_grow_the_queues() {
        let mut p = policy();
        for id in 0..100 {
            p.admit(id, 1, format!("k{id}").as_bytes());
        }
        // One id put and removed again and again (an object overwritten
        // by a put whose new entry reuses the freed id).
        for _ in 0..100_000u64 {
            p.admit(5000, 1, b"x");
            p.queues.get_mut().forget(5000, 1);
        }
        let q = p.queues.get_mut();
        assert!(q.small.len() + q.main.len() <= 2 * 100 + STALE_SLACK + 1);
        assert_eq!(victim(&p), Some(0));
        assert_eq!(victim(&p), Some(1));
    }

    /// The per-id memory the doc comment states.
    #[test]
    fn per_id_state_is_two_bytes_and_a_slot_is_eight() {
        assert_eq!(
            std::mem::size_of::<AtomicU8>() + std::mem::size_of::<u8>(),
            2
        );
        assert_eq!(std::mem::size_of_val(&slot(1, 1)), 8);
    }
}
