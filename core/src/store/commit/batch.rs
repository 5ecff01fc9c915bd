//! An atomic batch applied in the open group (`store/batch.rs` stages it).
//!
//! All or nothing, in three steps, with the lead held (so nothing else
//! changes the index in between):
//!
//! 1. room: the journal slots the whole batch can need are made ready
//!    first (`room_for`), writing the open group before the batch when it
//!    must, never in the middle of it; a batch no journal the device can
//!    hold would fit is refused whole (`NoSpace`), nothing changed;
//! 2. every condition is decided, at one instant, against the index: the
//!    first that fails refuses the whole batch, naming its operation,
//!    nothing changed;
//! 3. then every operation is applied, unconditionally (the decision of
//!    step 2 stands even when an object's ttl runs out meanwhile), in
//!    order, marking the group ATOMIC: each placed in its block's image
//!    first, then all linked into the index under one lock
//!    (`link_all`), so a reader sees all of the batch or none of it.
//!
//! So the batch lies in one commit group, which is written and synced once
//! and acknowledged whole; and recovery rolls a torn newest group back
//! whole: fewer of its blocks landed than its slots declare, or one torn,
//! and every block (journal image or FIRST home write alike) falls back to
//! its state before the group; in an ATOMIC group one value that did not
//! land rolls back the whole group, not that object alone
//! (`meta/recovery/plan/newest.rs`). Invariant 1: the batch is either
//! fully there or absent after a crash.
//!
//! A failure in step 3 (no room to grow the metadata area, a tuple block
//! that no longer reads) after part of the batch is placed poisons the
//! store: that part is in the cached block images (not in the index) and
//! must never be written (nothing more is written until a reopen, whose
//! recovery finds the state before the group).

use super::apply::Link;
use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::options::PutMode;
use crate::store::request::{BatchItem, PutSpec};
use crate::store::BatchOutcome;

impl Committer {
    /// Applies a whole batch, or refuses it having changed nothing (or,
    /// failing part way, poisons the store). Its outcomes and the value
    /// bytes it put.
    pub(super) async fn apply_batch(
        &mut self,
        ops: Vec<BatchItem>,
    ) -> Result<(Vec<BatchOutcome>, u64)> {
        let n = ops.len();
        // Step 1. Each operation adds at most one journaled block to the
        // group and one stale copy to the next group's step 0.
        if let Err(e) = self.room_for(n).await {
            self.poison(&e);
            return Err(e);
        }
        if !self.fits(n) {
            return Err(Error::new(
                ErrorKind::NoSpace,
                format!(
                    "a batch of {n} operations may change {n} tuple blocks, more than the \
                     metadata journal holds, and the device has no room for a larger one; \
                     nothing was changed (commit it as smaller batches)"
                ),
            ));
        }
        // Step 2.
        {
            let st = self.shared.state.read();
            for (i, op) in ops.iter().enumerate() {
                let visible = st.lookup(op.key()).map(|e| e.version);
                let decided = match op {
                    BatchItem::Put { spec, .. } => spec.mode.check(visible),
                    BatchItem::Delete {
                        expect: Some(want), ..
                    } => PutMode::Update(*want).check(visible),
                    BatchItem::Delete { expect: None, .. } => Ok(()),
                };
                decided.map_err(|e| e.in_batch(i, op.verb(), op.key()))?;
            }
        }
        // Step 2b. A cache store's metadata area stops growing at its
        // share of the bound, routinely: the tuple room is made (or the
        // batch refused, nothing changed, for its eviction to free some)
        // before anything applies, not found missing half way.
        if self.shared.metadata_limit().is_some() {
            self.tuple_room_for(&ops).await?;
        }
        // Step 3.
        self.pending.atomic = true;
        let mut outcomes = Vec::with_capacity(n);
        let mut links = Vec::with_capacity(n);
        let mut bytes = 0;
        for (i, op) in ops.into_iter().enumerate() {
            let verb = op.verb();
            let applied = match op {
                BatchItem::Put {
                    key,
                    size,
                    data,
                    spec,
                } => {
                    let spec = PutSpec {
                        mode: PutMode::Overwrite,
                        ..spec
                    };
                    bytes += size;
                    match self.put_unlinked(key.clone(), size, data, spec).await {
                        Ok((info, link)) => Ok((BatchOutcome::Put(info), Some(link))),
                        Err(e) => Err((e, key)),
                    }
                }
                BatchItem::Delete { key, .. } => match self.delete_unlinked(&key).await {
                    Ok(Some((existed, link))) => {
                        Ok((BatchOutcome::Deleted { existed }, Some(link)))
                    }
                    Ok(None) => Ok((BatchOutcome::Deleted { existed: false }, None)),
                    Err(e) => Err((e, key)),
                },
            };
            match applied {
                Ok((outcome, link)) => {
                    outcomes.push(outcome);
                    links.extend(link);
                }
                Err((e, key)) => {
                    let e = e.in_batch(i, verb, &key);
                    if i > 0 {
                        // Part of the batch is in the block images: it
                        // must never be written (see the module doc).
                        self.poison(&e);
                    }
                    return Err(e);
                }
            }
        }
        // Visible all at once (readers never see part of a batch).
        self.link_all(links);
        Ok((outcomes, bytes))
    }

    /// Grows the metadata area until every put of `ops` is sure to find
    /// its tuple a place, or refuses with the growth's `NoSpace` (marked
    /// for tuple room), nothing changed. Sure: a put either replaces its
    /// key's tuple with one no longer (placed in its block, taking no room
    /// from any other), or takes a block with room for the largest such
    /// tuple, and leaves at most that one block with less: so as many
    /// blocks with that room as such puts always suffice, whatever order
    /// and blocks the placement picks.
    async fn tuple_room_for(&mut self, ops: &[BatchItem]) -> Result<()> {
        let (mut needed, mut largest) = (0usize, 0usize);
        {
            let st = self.shared.state.read();
            for op in ops {
                if let BatchItem::Put {
                    key, data, spec, ..
                } = op
                {
                    let len = crate::meta::tuple::encoded_len(
                        key.len(),
                        &data.tuple_value(),
                        spec.expiry.is_some(),
                    );
                    if st.lookup_any(key).is_none_or(|e| len > e.tuple_len()) {
                        needed += 1;
                        largest = largest.max(len);
                    }
                }
            }
        }
        while self.table.blocks_with_room(largest, needed) < needed {
            self.grow().await?;
        }
        Ok(())
    }

    /// `apply_delete` for a batch: `key`'s tuple removed from its block's
    /// image, the key left in the index for `link_all` to unlink with the
    /// rest of the batch. Whether it had a visible object, and the unlink;
    /// `None` when it had no tuple at all.
    async fn delete_unlinked(&mut self, key: &[u8]) -> Result<Option<(bool, Link)>> {
        let found = {
            let st = self.shared.state.read();
            st.lookup_any(key)
                .map(|e| (e.block, e.live(), e.version, e.tuple_len()))
        };
        let Some((block, live, version, tuple_len)) = found else {
            return Ok(None);
        };
        self.load_image(block).await?;
        self.bump();
        self.remove_tuple(block, key, version, tuple_len)?;
        Ok(Some((live, Link::Remove { key: key.into() })))
    }
}
