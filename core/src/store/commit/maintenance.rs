//! The maintenance thread: background work when nobody leads (a buffered
//! group whose delay is up, expired versions, home slots when idle, index
//! maintenance, a group left behind by a cancelled caller), and the close.
//!
//! It takes the lead only when nobody holds it and leads one round at most,
//! so it never becomes a commit thread. Invariants kept: buffered mode
//! writes an acknowledged group by `max_delay` (invariant 1); an expired
//! version is removed only if its key still holds it; the clean-close mark
//! is published only after every group, stale copy and home slot is
//! written, and never on a read-only store (invariant 7).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::leader::{CommitPath, Lead};
use super::Committer;
use crate::error::Result;
use crate::options::Durability;
use crate::store::now_micros;
use crate::store::warm::WarmUp;

/// How often the maintenance thread looks for work when idle.
pub(super) const IDLE_TICK: Duration = Duration::from_millis(100);
/// Most expired objects removed per group (the rest go in the next ones).
const REAP_BATCH: usize = 4096;

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

impl Committer {
    /// Whether an expired version waits for the reaper.
    pub(super) fn reap_due(&self) -> bool {
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
    pub(super) async fn reap(&mut self) -> Result<()> {
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

    /// Writes what is still open, removes stale copies and records the
    /// clean close in the superblock: the last thing done before close.
    pub(super) async fn finish(&mut self) {
        // A read-only store writes nothing, not even the clean-close mark
        // (invariant 7).
        if self.shared.options.is_read_only() {
            return;
        }
        if !self.shared.failed.is_set() {
            if let Err(e) = self.flush().await {
                self.poison(&e);
            }
        }
        if !self.stale.is_empty() && !self.shared.failed.is_set() {
            if let Err(e) = self.remove_stale().await {
                self.poison(&e);
            }
        }
        // Home slots current before the clean mark (whose publish syncs).
        if !self.shared.failed.is_set() {
            if let Err(e) = self.place_homes().await {
                self.poison(&e);
            }
        }
        // Nothing changed since the checkpoint open loaded: the superblock
        // still names it and records the clean close it reflects.
        if self.checkpoint_current() && !self.shared.failed.is_set() {
            self.shared.sealed.store(true, Ordering::Release);
            return;
        }
        // Every group is synced: record that in the superblock, so the next
        // open need not read back the newest group's objects to verify them.
        if !self.shared.failed.is_set() {
            // The index image and its change map (invariant 10): durable
            // before the superblock names them. Not writing one costs the
            // next open time, never the close. The checkpoint named until
            // now goes once the superblock names the new one (or none).
            let image = match self.write_image().await {
                Ok(Some(i)) if self.shared.engine.sync().await.is_ok() => Some(i),
                Ok(Some((_, checkpoint))) => {
                    self.release_new(checkpoint);
                    None
                }
                _ => None,
            };
            // (A failed publish leaves the old checkpoint named: the next
            // open finds the store as a crash would have left it.)
            let _ = self.publish_checkpoint(self.next_version - 1, image);
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
        if self.pending.first.is_none() && self.check_failed().is_ok() {
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
        // A checkpoint, once enough was written since the last (idle only:
        // writers wait while it is written).
        if self.pending.first.is_none() && self.check_failed().is_ok() && self.checkpoint_due() {
            if let Err(e) = self.write_checkpoint().await {
                self.poison(&e);
            }
        }
        // Expired versions, when nobody else commits: a group of their own
        // (`commit_group` reaps first).
        if self.reap_due() && self.check_failed().is_ok() {
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
}

impl CommitPath {
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

    /// The maintenance thread: background work until told to stop, then
    /// the close. A warm-up after open (`warm`) reads a batch per turn
    /// until it is done.
    pub(crate) fn maintain(&self, mut warm: Option<WarmUp>) {
        while !self.maintenance.stopped() {
            let mut next = self.tick();
            if self.maintenance.stopped() {
                break;
            }
            if let Some(w) = warm.as_mut() {
                match crate::io::block_on(w.step()) {
                    Some(wait) => next = next.min(wait),
                    None => warm = None,
                }
            }
            self.maintenance.sleep(next);
        }
        drop(warm);
        self.close();
    }
}
