//! The hash index's table: an *ordered* linear-probing table of
//! (fingerprint, entry id) slots.
//!
//! A fingerprint's home slot is its top 64 bits scaled to the number of
//! home slots (`home`), so homes ascend with fingerprints. Invariants kept
//! by every operation here (and checked by `check` in tests):
//!
//! * **T1 (reachable)**: a fingerprint sits at or after its home, and every
//!   slot from its home to it is occupied;
//! * **T2 (sorted)**: occupied slots ascend strictly by fingerprint across
//!   the whole table (T1 and ascending homes give it within a run of
//!   occupied slots; across runs it follows from homes ascending).
//!
//! So a lookup scans from the home while the slots hold smaller
//! fingerprints and stops at the first larger one or an empty slot
//! (a miss costs about what a hit does), iterating the slots gives every
//! fingerprint in ascending order (the index image's order, no sort), and
//! fingerprints that arrive in ascending order (an index image read at
//! open) are appended one after another — sequential memory, where a
//! table placed by hash bits takes a cache miss per insert.
//!
//! Slots past the last home (`TAIL` of them, more when a run needs them)
//! take the overflow of the last runs instead of wrapping around to the
//! start (which would break T2).
//!
//! A slot holds the whole fingerprint and the id: 20 bytes while every id
//! fits in 32 bits (`Narrow`), 24 from the first that does not (`Wide`).
//! At open the table is sized to be `LOAD_AT_RESERVE` full.

use super::{EntryId, Fingerprint};

/// Slots after the last home, for the last runs' overflow.
const TAIL: usize = 1024;
/// The table grows when an insert would make it fuller than this…
const MAX_LOAD: f64 = 0.9;
/// …to this.
const LOAD_AFTER_GROWTH: f64 = 0.6;
/// How full a table sized for a known count is (open, bulk load).
const LOAD_AT_RESERVE: f64 = 0.85;

/// One slot: a fingerprint (0: empty; no key's fingerprint is 0) and an
/// entry id.
pub(super) trait Slot: Copy + Default {
    /// Whether `id` can be held.
    fn fits(id: EntryId) -> bool;
    fn new(fp: Fingerprint, id: EntryId) -> Self;
    fn fp(&self) -> Fingerprint;
    fn id(&self) -> EntryId;
}

/// A slot of 4-byte words: 20 bytes, ids below 2³².
#[derive(Clone, Copy, Default)]
pub(super) struct Narrow([u32; 5]);

/// A slot of 8-byte words: 24 bytes, any id.
#[derive(Clone, Copy, Default)]
pub(super) struct Wide([u64; 3]);

#[expect(clippy::cast_possible_truncation, reason = "splitting into words")]
impl Slot for Narrow {
    fn fits(id: EntryId) -> bool {
        u32::try_from(id).is_ok()
    }
    fn new(fp: Fingerprint, id: EntryId) -> Self {
        Narrow([
            fp as u32,
            (fp >> 32) as u32,
            (fp >> 64) as u32,
            (fp >> 96) as u32,
            id as u32,
        ])
    }
    fn fp(&self) -> Fingerprint {
        let [a, b, c, d, _] = self.0;
        u128::from(a) | u128::from(b) << 32 | u128::from(c) << 64 | u128::from(d) << 96
    }
    fn id(&self) -> EntryId {
        EntryId::from(self.0[4])
    }
}

#[expect(clippy::cast_possible_truncation, reason = "splitting into words")]
impl Slot for Wide {
    fn fits(_: EntryId) -> bool {
        true
    }
    fn new(fp: Fingerprint, id: EntryId) -> Self {
        Wide([fp as u64, (fp >> 64) as u64, id])
    }
    fn fp(&self) -> Fingerprint {
        u128::from(self.0[0]) | u128::from(self.0[1]) << 64
    }
    fn id(&self) -> EntryId {
        self.0[2]
    }
}

/// The ordered table (see the module's invariants).
pub(super) struct Table<S> {
    /// `homes` home slots, then `TAIL` more.
    slots: Vec<S>,
    homes: usize,
    len: usize,
    /// The slot after the last fingerprint appended by `append`, while
    /// only appends have filled the table (every slot from it on is
    /// empty); `None` once anything else changed it.
    appending: Option<usize>,
}

impl<S: Slot> Default for Table<S> {
    fn default() -> Self {
        Table::with_homes(0)
    }
}

impl<S: Slot> Table<S> {
    fn with_homes(homes: usize) -> Self {
        Table {
            slots: vec![S::default(); homes + TAIL],
            homes,
            len: 0,
            appending: Some(0),
        }
    }

    /// An empty table with room for `n` fingerprints.
    pub fn for_count(n: usize) -> Self {
        Table::with_homes((n as f64 / LOAD_AT_RESERVE).ceil() as usize)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Home slot of `fp`: its top 64 bits scaled to `homes` (ascending
    /// with the fingerprint).
    #[expect(clippy::cast_possible_truncation, reason = "below `homes`")]
    fn home(&self, fp: Fingerprint) -> usize {
        let top = (fp >> 64) as u64;
        ((u128::from(top) * self.homes as u128) >> 64) as usize
    }

    /// Where `fp` is, or where it would go: the first slot from its home
    /// that is empty or holds a fingerprint not below it (T1, T2).
    fn seek(&self, fp: Fingerprint) -> (usize, bool) {
        let mut at = self.home(fp);
        while let Some(s) = self.slots.get(at) {
            let f = s.fp();
            if f == 0 || f > fp {
                return (at, false);
            }
            if f == fp {
                return (at, true);
            }
            at += 1;
        }
        (at, false)
    }

    pub fn get(&self, fp: Fingerprint) -> Option<EntryId> {
        match self.seek(fp) {
            (at, true) => self.slots.get(at).map(Slot::id),
            _ => None,
        }
    }

    /// Every (fingerprint, id) in ascending fingerprint order (T2).
    pub fn iter(&self) -> impl Iterator<Item = (Fingerprint, EntryId)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.fp() != 0)
            .map(|s| (s.fp(), s.id()))
    }

    /// Sets `fp`'s id; returns the id it replaced. `Err(())` when the
    /// table must grow first (`is_full`) or `id` does not fit a slot:
    /// nothing changed.
    pub fn insert(&mut self, fp: Fingerprint, id: EntryId) -> Result<Option<EntryId>, ()> {
        debug_assert_ne!(fp, 0);
        if !S::fits(id) {
            return Err(());
        }
        let (at, found) = self.seek(fp);
        if found {
            let slot = self.slots.get_mut(at).ok_or(())?;
            let old = slot.id();
            *slot = S::new(fp, id);
            return Ok(Some(old));
        }
        if self.is_full() {
            return Err(());
        }
        // Shift the rest of the run one slot right (T1: nothing moves
        // before its home; T2: the order is kept) and put `fp` in its
        // place.
        let end = match self
            .slots
            .get(at..)
            .and_then(|rest| rest.iter().position(|s| s.fp() == 0))
        {
            Some(n) => at + n,
            None => {
                // The last run fills the tail: lengthen it.
                let end = self.slots.len();
                self.slots.resize(end + TAIL, S::default());
                end
            }
        };
        self.slots.copy_within(at..end, at + 1);
        let slot = self.slots.get_mut(at).ok_or(())?;
        *slot = S::new(fp, id);
        self.len += 1;
        self.appending = None;
        Ok(None)
    }

    /// Appends `fp`, larger than every fingerprint in the table, to a
    /// table only appends have filled: no search, no shift. `Err(())`
    /// when that does not hold, the table is full or `id` does not fit
    /// (nothing changed; the caller inserts instead).
    pub fn append(&mut self, fp: Fingerprint, id: EntryId) -> Result<(), ()> {
        let next = self.appending.ok_or(())?;
        let last = next.checked_sub(1).and_then(|i| self.slots.get(i));
        if last.is_some_and(|s| s.fp() >= fp) || !S::fits(id) || self.is_full() {
            return Err(());
        }
        let at = self.home(fp).max(next);
        if at >= self.slots.len() {
            self.slots.resize(at + TAIL, S::default());
        }
        let slot = self.slots.get_mut(at).ok_or(())?;
        *slot = S::new(fp, id);
        self.len += 1;
        self.appending = Some(at + 1);
        Ok(())
    }

    /// Removes `fp`; returns its id.
    pub fn remove(&mut self, fp: Fingerprint) -> Option<EntryId> {
        let (at, true) = self.seek(fp) else {
            return None;
        };
        let id = self.slots.get(at)?.id();
        // Pull the displaced slots after it one back (each stays at or
        // after its home: T1), up to an empty slot or one at its home.
        let mut end = at + 1;
        while let Some(s) = self.slots.get(end) {
            if s.fp() == 0 || self.home(s.fp()) >= end {
                break;
            }
            end += 1;
        }
        self.slots.copy_within(at + 1..end, at);
        if let Some(s) = self.slots.get_mut(end - 1) {
            *s = S::default();
        }
        self.len -= 1;
        self.appending = None;
        Some(id)
    }

    /// The same fingerprints in a table of room for `n` (at least its
    /// count), with slots of kind `T`, refilled in order by appends;
    /// `None` when an id does not fit `T`.
    pub fn rebuilt<T: Slot>(&self, n: usize) -> Option<Table<T>> {
        let mut t = Table::<T>::for_count(n.max(self.len));
        for (fp, id) in self.iter() {
            // Ascending, sized to fit: only an id that does not fit fails.
            t.append(fp, id).ok()?;
        }
        Some(t)
    }

    /// Whether one more fingerprint would make it fuller than it may be.
    pub fn is_full(&self) -> bool {
        (self.len + 1) as f64 > self.homes as f64 * MAX_LOAD
    }

    /// The table with room for more: `LOAD_AFTER_GROWTH` full.
    pub fn grown(&self) -> Table<S> {
        let n = ((self.len + 1) as f64 / LOAD_AFTER_GROWTH * LOAD_AT_RESERVE).ceil() as usize;
        // Its own slot kind holds every id it holds.
        self.rebuilt(n).unwrap_or_default()
    }

    /// Bytes of memory the slots take.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<S>()
    }

    /// Checks T1 and T2 over the whole table.
    #[cfg(test)]
    pub fn check(&self) {
        let mut previous = 0;
        let mut count = 0;
        // First slot of the run of occupied slots `at` is in.
        let mut run = 0;
        for (at, s) in self.slots.iter().enumerate() {
            let fp = s.fp();
            if fp == 0 {
                run = at + 1;
                continue;
            }
            count += 1;
            assert!(fp > previous, "T2: slot {at} out of order");
            previous = fp;
            let home = self.home(fp);
            assert!(home <= at, "T1: slot {at} before its home {home}");
            assert!(home >= run, "T1: a hole between slot {at} and its home");
        }
        assert_eq!(count, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    impl<S: Slot> Table<S> {
        pub fn only_appended(&self) -> bool {
            self.appending.is_some()
        }
    }

    /// Fingerprints crowded onto few homes (their top bits drawn from a
    /// handful of values): runs hundreds of slots long, longer than the
    /// tail, with inserts, removals and growth in between; T1 and T2 hold
    /// and every lookup agrees with a `BTreeMap`.
    #[test]
    fn crowded_homes_keep_the_invariants_and_every_key() {
        for slots in [0, 1] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(3 + slots);
            let mut narrow = Table::<Narrow>::default();
            let mut wide = Table::<Wide>::default();
            let mut model = BTreeMap::<Fingerprint, EntryId>::new();
            for step in 0..30_000u64 {
                let top = u128::from(rng.random_range(0..4u64)) << 126;
                let fp = top | u128::from(rng.random_range(1..3000u64));
                let (got, want) = if rng.random_bool(0.7) {
                    let want = model.insert(fp, step);
                    let got = if slots == 0 {
                        loop {
                            match narrow.insert(fp, step) {
                                Ok(old) => break old,
                                Err(()) => narrow = narrow.grown(),
                            }
                        }
                    } else {
                        loop {
                            match wide.insert(fp, step) {
                                Ok(old) => break old,
                                Err(()) => wide = wide.grown(),
                            }
                        }
                    };
                    (got, want)
                } else if slots == 0 {
                    (narrow.remove(fp), model.remove(&fp))
                } else {
                    (wide.remove(fp), model.remove(&fp))
                };
                assert_eq!(got, want, "step {step}");
                if step % 5000 == 0 {
                    narrow.check();
                    wide.check();
                }
            }
            narrow.check();
            wide.check();
            for (&fp, &id) in &model {
                let got = if slots == 0 {
                    narrow.get(fp)
                } else {
                    wide.get(fp)
                };
                assert_eq!(got, Some(id));
            }
            let listed: Vec<_> = if slots == 0 {
                narrow.iter().collect()
            } else {
                wide.iter().collect()
            };
            assert_eq!(listed, model.into_iter().collect::<Vec<_>>());
        }
    }

    /// A table sized for its count at open takes about 24 bytes per key
    /// (20-byte slots, 85 % full), where the fingerprint vector and
    /// `hashbrown` table it replaced took 21–27.
    #[test]
    fn a_table_sized_for_its_count_takes_about_24_bytes_per_key() {
        let n = 100_000;
        let mut t = Table::<Narrow>::for_count(n);
        for i in 1..=n as u64 {
            t.append(u128::from(u64::MAX / n as u64 * i) << 64, 0)
                .unwrap();
        }
        t.check();
        let per_key = t.bytes() as f64 / n as f64;
        assert!((23.0..25.0).contains(&per_key), "{per_key}");
    }
}
