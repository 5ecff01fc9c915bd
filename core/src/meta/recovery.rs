//! Recovery: reading the metadata area and deciding, block by block, which
//! state is the store's. One implementation, run read-write by open and
//! read-only by `check` (through a read-only open), so the two cannot
//! disagree.
//!
//! Every extent is read with large sequential reads; each logical block's
//! copies are decoded: its two slots (format 3), or its home slot and every
//! image of it in the metadata journal (format 4). Then `plan` decides:
//!
//! * **Which copy holds each block's state.** The valid copy with the
//!   largest sequence, unless another copy is damaged and may have held
//!   newer state. A damaged copy is classified by the sequence it still
//!   claims (`SlotContent::Invalid`): older than the state — a superseded
//!   copy, nothing lost; newer, and written by a group no older than the newest
//!   group the store shows (and after the last clean close) — a write torn
//!   by the crash; anything else — **corruption** (invariant 6): open
//!   refuses with `Corrupt` naming the block, never falls back silently.
//! * **Whether the newest group stays.** Only it can have been cut before
//!   its sync. It rolls back as a whole when fewer of its blocks landed
//!   than it declares (or one of them was torn). Otherwise every object it
//!   wrote without a data sync (`unsynced`) is read back against its
//!   checksums; one that fails rolls back alone to its previous version
//!   (an intact object is not lost because another one's bytes did not
//!   land), except in all-or-nothing groups (bulk loads, buffered mode),
//!   which roll back as a whole.
//!
//! Everything rolled back or repaired is listed in the [`RecoveryReport`].
//! Resolution between blocks (duplicate keys, heap overlap) happens in the
//! store's open path, which owns the allocator and the index.

use std::collections::BTreeSet;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{Layout, MetaExtent, BLOCK_SIZE};
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::{
    decode_slot, journal_block, SlotContent, SlotIdentity, GROUP_ATOMIC, SLOT_FIRST,
};

/// Most bytes read by one I/O while scanning.
const SCAN_CHUNK: usize = 1 << 20;
/// Most object names listed in a report (the counts are exact).
const REPORT_NAMES: usize = 100;

/// Every copy of one logical tuple block found on the device.
pub(crate) struct ScannedBlock {
    /// Byte offset of slot 0 (two-slot stores) or of the home slot.
    pub offset: u64,
    /// Each copy with its byte offset. Two-slot stores: both slots, in
    /// order. Journaled stores: the home slot, then every journal slot
    /// holding an image of this block.
    pub slots: Vec<(u64, SlotContent)>,
}

impl ScannedBlock {
    /// The copy at index `w`.
    pub fn slot(&self, w: usize) -> Option<&SlotContent> {
        self.slots.get(w).map(|(_, s)| s)
    }

    /// The valid copy with the largest sequence: two valid slots of a
    /// two-slot block never share one (`Corrupt`); a journaled block's home
    /// and journal image do once its home is rewritten (the home is taken).
    fn newest(&self, layout: Layout) -> Result<Option<usize>> {
        let mut best: Option<(usize, u64)> = None;
        for (i, (_, s)) in self.slots.iter().enumerate() {
            let Some(seq) = s.seq() else { continue };
            match best {
                Some((_, b)) if b == seq && layout == Layout::Paired => {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        "both slots of a tuple block carry the same sequence",
                    ))
                }
                Some((_, b)) if b >= seq => {}
                _ => best = Some((i, seq)),
            }
        }
        Ok(best.map(|(i, _)| i))
    }

    /// The copy a block falls back to when its state at index `w` (written
    /// by the group of sequence `seq`) is rolled back: the valid copy with
    /// the largest sequence below `seq` (its state before that group);
    /// `None` when the block had no state before.
    fn fallback(&self, w: usize, seq: u64, layout: Layout) -> Result<Option<usize>> {
        let older = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, (_, s))| s.seq().filter(|&x| x < seq).map(|x| (i, x)))
            .max_by_key(|&(_, x)| x)
            .map(|(i, _)| i);
        let damaged = self
            .slots
            .iter()
            .enumerate()
            .find_map(|(i, (_, s))| match s {
                SlotContent::Invalid { why, .. } if i != w => Some(why.clone()),
                _ => None,
            });
        match layout {
            Layout::Paired => match (older, damaged) {
                (Some(i), _) => Ok(Some(i)),
                (None, None) => Ok(None),
                (None, Some(why)) => Err(corrupt(format!(
                    "its newest slot is from an interrupted group and the other is damaged ({why})"
                ))),
            },
            // A home slot holding the group being rolled back: written
            // there straight (FIRST: the block had no state before), or
            // rewritten after the group's sync, which a group that must be
            // rolled back did not reach; then what came before is not
            // known, and nothing is guessed.
            Layout::Journaled(_) if w == 0 => match self.slot(0) {
                Some(SlotContent::Valid { group_flags, .. }) if group_flags & SLOT_FIRST != 0 => {
                    Ok(None)
                }
                _ => Err(corrupt(
                    "its home slot holds a group that must be rolled back but had been synced"
                        .into(),
                )),
            },
            // A journal image rolled back: the state before it is its home
            // slot or an older journal image (the journal keeps a block's
            // image until a newer one is synced or its home write is).
            Layout::Journaled(_) => Ok(older),
        }
    }
}

/// What recovery found when the store was opened: what it rolled back and
/// what damage it repaired. Empty after a clean close of an intact store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The store had been closed cleanly: nothing could be torn.
    pub clean: bool,
    /// Commit groups rolled back whole (cut by a crash before their sync,
    /// or bulk-load groups with an object whose bytes did not land).
    pub rolled_back_groups: u64,
    /// Objects whose newest version was rolled back to the previous one
    /// (or removed, when new).
    pub rolled_back_objects: u64,
    /// Damage found that lost nothing, and what was done about it.
    pub repaired: Vec<String>,
    /// Human-readable lines: what was rolled back and why (at most 100
    /// object names; the counts above are exact).
    pub details: Vec<String>,
    /// Damaged tuple blocks a salvage open skipped
    /// ([`Options::salvage`](crate::Options::salvage)): their objects are
    /// missing. Always empty otherwise (such damage refuses the open).
    pub skipped: Vec<String>,
}

impl RecoveryReport {
    /// Whether recovery had to do anything at all.
    pub fn is_empty(&self) -> bool {
        self.rolled_back_groups == 0
            && self.rolled_back_objects == 0
            && self.repaired.is_empty()
            && self.skipped.is_empty()
    }

    fn object(&mut self, line: String) {
        self.rolled_back_objects += 1;
        if self.details.len() < REPORT_NAMES {
            self.details.push(line);
        }
    }
}

/// Reads and decodes every tuple block of `extents`, and (journaled
/// stores) every image in the journal.
pub(crate) async fn scan(
    engine: &dyn IoEngine,
    store_id: u64,
    extents: &[MetaExtent],
    layout: Layout,
) -> Result<Vec<ScannedBlock>> {
    let mut out: Vec<ScannedBlock> = Vec::new();
    let step = layout.slots_per_block() as usize;
    for extent in extents {
        read_extent(engine, extent, |offset, slots| {
            for (i, group) in slots.chunks_exact(step).enumerate() {
                let id = SlotIdentity {
                    store_id,
                    block_no: out.len() as u32,
                };
                let at = offset + (i * step * BLOCK_SIZE) as u64;
                let slots = group
                    .iter()
                    .enumerate()
                    .map(|(k, b)| (at + (k * BLOCK_SIZE) as u64, decode_slot(id, b)))
                    .collect();
                out.push(ScannedBlock { offset: at, slots });
            }
        })
        .await?;
    }
    if let Layout::Journaled(journal) = layout {
        read_extent(engine, &journal, |offset, slots| {
            for (i, b) in slots.iter().enumerate() {
                if b.iter().all(|&x| x == 0) {
                    continue;
                }
                // Whose image it is (a torn or damaged one too); an image
                // of no block of the store is a stale one of no consequence.
                let Some(block) = journal_block(b) else {
                    continue;
                };
                let Some(home) = out.get_mut(block as usize) else {
                    continue;
                };
                let id = SlotIdentity {
                    store_id,
                    block_no: block,
                };
                let at = offset + (i * BLOCK_SIZE) as u64;
                home.slots.push((at, journal_copy(decode_slot(id, b), b)));
            }
        })
        .await?;
    }
    Ok(out)
}

/// A journal slot as recovery weighs it. A write torn in a journal slot may
/// leave the head of one block's image over the tail of another block's:
/// its older sequence copy then says nothing about this block. When its
/// block numbers disagree as well as its sequence copies (two fields: not
/// one flipped byte), it is a torn write claiming the newer sequence.
fn journal_copy(slot: SlotContent, b: &[u8]) -> SlotContent {
    // A tail still zero: a write torn over a slot never used (its group
    // then lacks this block and rolls back whole), or zeros torn over an
    // image by recovery's erase (an image already restored): either way it
    // claims nothing. One flipped byte cannot zero the sequence copy.
    if crate::format::get_u64(b, BLOCK_SIZE - 8) == Some(0) {
        return SlotContent::Empty;
    }
    let copies = [
        crate::format::get_u32(b, 4),
        crate::format::get_u32(b, BLOCK_SIZE - 16),
        crate::format::get_u32(b, BLOCK_SIZE - 12),
    ];
    let unanimous = copies.iter().all(|c| *c == copies[0]);
    match slot {
        SlotContent::Invalid {
            why,
            seq: None,
            split: Some((x, y)),
        } if !unanimous => SlotContent::Invalid {
            why: format!("{why} (a torn write: block numbers and sequences disagree)"),
            seq: Some(x.max(y)),
            split: None,
        },
        other => other,
    }
}

/// Reads `extent` in large chunks, handing each chunk's blocks (and the
/// byte offset of the first) to `f`.
async fn read_extent(
    engine: &dyn IoEngine,
    extent: &MetaExtent,
    mut f: impl FnMut(u64, &[[u8; BLOCK_SIZE]]),
) -> Result<()> {
    let start = extent.offset();
    let total = extent.len_bytes() as usize;
    let mut done = 0usize;
    while done < total {
        let len = SCAN_CHUNK.min(total - done);
        let (r, buf) = engine
            .read_at(AlignedBuf::zeroed(len), start + done as u64)
            .await;
        r.map_err(|e| Error::io("reading tuple blocks", e))?;
        // A short buffer would shift every later block's number.
        let bytes = buf
            .as_slice()
            .get(..len)
            .ok_or_else(|| Error::new(ErrorKind::Io, "reading tuple blocks: short read"))?;
        f(start + done as u64, bytes.as_chunks::<BLOCK_SIZE>().0);
        done += len;
    }
    Ok(())
}

/// What recovery decided, for open to apply (or `check` to report).
pub(crate) struct Plan {
    /// Per block, the slot holding its state (`None`: empty block).
    pub chosen: Vec<Option<usize>>,
    /// Per block, the slot the next write goes to.
    pub next_slots: Vec<u8>,
    /// Blocks to rewrite before the store is served: rolled back, edited
    /// (per-object rollback) or holding a damaged superseded copy.
    pub dirty: BTreeSet<u32>,
    /// Blocks whose state recovery changed in memory (per-object rollback):
    /// no copy on the device holds it.
    pub edited: BTreeSet<u32>,
    /// Largest sequence seen in any valid slot.
    pub max_seq: u64,
    pub report: RecoveryReport,
}

/// How a damaged slot relates to the block's state.
#[derive(Debug, PartialEq, Eq)]
enum Damage {
    /// It held an older state: nothing lost.
    Superseded,
    /// It was being written by a group no older than the newest one (whose
    /// sequence is given, when known) when the process stopped.
    Torn(u64),
    /// It held newer state that is now lost.
    Lost,
}

/// Classifies a damaged copy of a block whose state has sequence `y` (0
/// when it has none). A torn write claims a sequence of at least
/// `tear_floor`. In a two-slot block the sibling never shares the state's
/// sequence; a journaled block's home and journal image may (`same_ok`).
fn classify(slot: &SlotContent, y: u64, tear_floor: u64, same_ok: bool) -> Damage {
    let SlotContent::Invalid { seq, split, .. } = slot else {
        return Damage::Superseded;
    };
    let older = |c: u64| c < y || (same_ok && c == y);
    match (seq, split) {
        // Both copies agree: one flipped byte cannot forge that.
        (Some(c), _) if older(*c) => Damage::Superseded,
        (Some(c), _) if *c > y && *c >= tear_floor => Damage::Torn(*c),
        (Some(_), _) => Damage::Lost,
        (None, Some((a, b))) => {
            let (lo, hi) = ((*a).min(*b), (*a).max(*b));
            if older(hi) {
                Damage::Superseded
            } else if lo <= y {
                // New head and old tail (or the reverse) of a torn write, or
                // one damaged copy: only the newest group can be torn.
                if hi >= tear_floor {
                    Damage::Torn(hi)
                } else {
                    Damage::Lost
                }
            } else if lo >= tear_floor {
                // Both copies are newer than the state; either may be the
                // true one, and both say "newest group".
                Damage::Torn(hi)
            } else {
                Damage::Lost
            }
        }
        // Nothing readable (format-1 slot, or no sequence at all): only a
        // block that was never written before may have been torn.
        (None, None) if y == 0 => Damage::Torn(u64::MAX),
        (None, None) => Damage::Lost,
    }
}

/// The keys an older copy of a skipped block names (the objects most
/// likely lost with it), for the salvage report: at most ten, and the count.
fn older_names(older: Option<&SlotContent>) -> String {
    let Some(SlotContent::Valid { tuples, .. }) = older else {
        return String::new();
    };
    let names: Vec<String> = tuples
        .iter()
        .take(10)
        .map(|t| crate::error::show_key(&t.key))
        .collect();
    let more = if tuples.len() > names.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "; its older copy names {} object(s) (some may live in other blocks since): {}{more}",
        tuples.len(),
        names.join(", ")
    )
}

fn corrupt(msg: String) -> Error {
    Error::new(ErrorKind::Corrupt, msg)
}

/// Decides the state of every block (see the module docs). `verify` reads
/// one object back against its checksums: `Some(why)` when its bytes are
/// not what its tuple promises.
pub(crate) async fn plan<V, F>(
    scanned: &mut [ScannedBlock],
    clean_seq: u64,
    layout: Layout,
    salvage: bool,
    mut verify: V,
) -> Result<Plan>
where
    V: FnMut(crate::meta::tuple::Tuple) -> F,
    F: std::future::Future<Output = Result<Option<String>>>,
{
    let journaled = matches!(layout, Layout::Journaled(_));
    let max_seq = scanned
        .iter()
        .flat_map(|b| b.slots.iter().filter_map(|(_, s)| s.seq()))
        .max()
        .unwrap_or(0);
    let clean = clean_seq != 0 && clean_seq == max_seq;
    let tear_floor = if clean_seq == 0 {
        max_seq
    } else {
        max_seq.max(clean_seq + 1)
    };
    let mut report = RecoveryReport {
        clean,
        ..RecoveryReport::default()
    };
    let mut dirty = BTreeSet::new();
    let mut edited = BTreeSet::new();
    let mut chosen = Vec::with_capacity(scanned.len());
    // Groups seen only through torn slots.
    let mut torn_groups = BTreeSet::new();
    // Salvage: the newest group a skipped (lost) copy proves was synced.
    // A lost copy held acknowledged state, so its group and every older
    // one had been synced: none of them is rolled back for looking short
    // of a block that was only skipped.
    let mut synced_floor = 0u64;
    for (no, b) in scanned.iter().enumerate() {
        let at = |e: Error| e.context(format!("tuple block {no} at byte {}", b.offset));
        let w = b.newest(layout).map_err(at)?;
        let y = w
            .and_then(|w| b.slot(w))
            .and_then(SlotContent::seq)
            .unwrap_or(0);
        let damaged: Vec<(usize, &SlotContent)> = b
            .slots
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| matches!(s, SlotContent::Invalid { .. }))
            .map(|(i, (_, s))| (i, s))
            .collect();
        // A salvage open skips a block whose state is lost: no tuple of it
        // is served, from that copy or an older one.
        let mut skip = |why: String| {
            report.skipped.push(format!(
                "tuple block {no} (byte {}): {why}; its objects are skipped",
                b.offset
            ));
        };
        if layout == Layout::Paired && w.is_none() && damaged.len() > 1 {
            let whys: Vec<String> = damaged
                .iter()
                .filter_map(|(_, s)| match s {
                    SlotContent::Invalid { why, .. } => Some(why.clone()),
                    _ => None,
                })
                .collect();
            let why = format!(
                "both slots of a tuple block are damaged ({})",
                whys.join("; ")
            );
            if salvage {
                skip(why);
                chosen.push(None);
                continue;
            }
            return Err(at(corrupt(why)));
        }
        let mut lost = false;
        for (i, d) in damaged {
            let SlotContent::Invalid { why, .. } = d else {
                continue;
            };
            match classify(d, y, tear_floor, journaled) {
                // A stale journal image needs nothing: the journal is
                // written over in turn.
                Damage::Superseded if journaled && i > 0 => {}
                Damage::Superseded => {
                    if clean {
                        let what = if journaled {
                            "its home slot was damaged"
                        } else {
                            "its superseded copy was damaged"
                        };
                        let fix = if journaled {
                            "its journal image holds the same state; nothing lost; copied back"
                        } else {
                            "nothing lost; rewritten"
                        };
                        report.repaired.push(format!(
                            "tuple block {no} (byte {}): {what} ({why}); {fix}",
                            b.offset
                        ));
                    }
                    // A journaled home is restored from the journal image
                    // that is its state (open copies it back).
                    if !journaled {
                        dirty.insert(no as u32);
                    }
                }
                Damage::Torn(seq) => {
                    torn_groups.insert(seq);
                }
                Damage::Lost if salvage => {
                    // Of two disagreeing sequence copies one is damaged:
                    // the smaller is a bound either way.
                    if let SlotContent::Invalid { seq, split, .. } = d {
                        let proven = seq.or(split.map(|(a, b)| a.min(b))).unwrap_or(0);
                        // The newest group may be the one a crash cut:
                        // a damaged copy claiming it proves its sync only
                        // if the store was closed cleanly after it.
                        let proven = if clean_seq >= proven {
                            proven
                        } else {
                            proven.min(max_seq.saturating_sub(1))
                        };
                        synced_floor = synced_floor.max(proven);
                    }
                    if !lost {
                        skip(format!(
                            "its newer copy is damaged ({why}){}",
                            older_names(w.and_then(|w| b.slot(w)))
                        ));
                    }
                    lost = true;
                }
                Damage::Lost => {
                    return Err(at(corrupt(format!(
                        "its newer copy is damaged ({why}) and was not being written when the store \
                         was last stopped: the block's latest tuples are lost. Nothing was changed; \
                         restore the store from a backup, or copy out what still reads with \
                         `blobcask --salvage get` (`Options::salvage`)"
                    ))));
                }
            }
        }
        chosen.push(if lost { None } else { w });
    }
    let winner = |b: &ScannedBlock, w: Option<usize>| match w.and_then(|w| b.slot(w)) {
        Some(SlotContent::Valid {
            seq,
            group_blocks,
            group_first,
            group_flags,
            ..
        }) => Some((*seq, *group_blocks, *group_first, *group_flags)),
        _ => None,
    };
    // A group torn entirely (none of its blocks landed) was never
    // acknowledged and left nothing to undo; say so.
    for &seq in &torn_groups {
        if seq > max_seq {
            report.rolled_back_groups += 1;
            // After a clean close nothing newer landed: a process that
            // opened the store since may have been cut in its first group,
            // or one byte of a sequence field is damaged. The two look the
            // same; say both.
            let or_damage = if clean {
                " (or, as the store had been closed cleanly and nothing newer landed, a \
                 damaged sequence field in a tuple block; either way nothing acknowledged \
                 is lost)"
            } else {
                ""
            };
            report.details.push(format!(
                "a commit group interrupted before any of its tuple blocks landed was dropped{or_damage}"
            ));
        }
    }
    let mut rejected: Vec<Option<usize>> = vec![None; scanned.len()];
    // The group the loop below rolled back, if any (at most one).
    let mut rolled_back_seq: Option<u64> = None;
    while let Some(last_seq) = scanned
        .iter()
        .zip(&chosen)
        .filter_map(|(b, w)| winner(b, *w).map(|g| g.0))
        .max()
    {
        if (clean && last_seq == clean_seq) || last_seq <= synced_floor {
            break;
        }
        // The group's blocks, with what their state slot says of it.
        let members: Vec<(usize, (u64, u32, u64, u32))> = scanned
            .iter()
            .zip(&chosen)
            .enumerate()
            .filter_map(|(no, (b, w))| winner(b, *w).map(|g| (no, g)))
            .filter(|(_, g)| g.0 == last_seq)
            .collect();
        let stamp = |f: fn(&(u64, u32, u64, u32)) -> u64| {
            members.iter().map(|(_, g)| f(g)).max().unwrap_or(0)
        };
        let declared = stamp(|g| g.1 as u64);
        let group_first = stamp(|g| g.2);
        let atomic = stamp(|g| (g.3 & GROUP_ATOMIC) as u64) != 0;
        let complete = members.len() as u64 >= declared && !torn_groups.contains(&last_seq);
        let mut failed = Vec::new();
        if complete {
            for &(no, _) in &members {
                let (Some(b), Some(&Some(w))) = (scanned.get(no), chosen.get(no)) else {
                    continue;
                };
                let Some(SlotContent::Valid { tuples, .. }) = b.slot(w) else {
                    continue;
                };
                for t in tuples.iter().filter(|t| t.version >= group_first) {
                    let unsynced = matches!(
                        t.value,
                        crate::meta::tuple::TupleValue::Heap { unsynced: true, .. }
                    );
                    if unsynced {
                        if let Some(why) = verify(t.clone()).await? {
                            failed.push((no, t.key.clone(), why));
                        }
                    }
                }
            }
            if failed.is_empty() {
                break;
            }
            if !atomic {
                // Roll back only the objects whose bytes did not land: each
                // gets its previous version back (from the block's state
                // before the group, or its not yet removed copy in another
                // block).
                for (no, key, why) in failed {
                    let (Some(b), Some(&Some(w))) = (scanned.get_mut(no), chosen.get(no)) else {
                        continue;
                    };
                    let before = match b.fallback(w, last_seq, layout) {
                        Ok(before) => before,
                        // A journaled home rewritten by the group itself:
                        // the group had been synced (homes are rewritten
                        // only after it), so this version was acknowledged
                        // and its bytes were damaged since. It stays, and
                        // reads of it report Corrupt.
                        Err(_) => {
                            report.details.push(format!(
                                "{}: its bytes do not match its checksums ({why}); its commit group had been \
                                 synced, so it stays and reads of it report Corrupt",
                                crate::error::show_key(&key)
                            ));
                            continue;
                        }
                    };
                    let previous = match before.and_then(|p| b.slot(p)) {
                        Some(SlotContent::Valid { tuples, .. }) => tuples
                            .iter()
                            .find(|t| t.key == key && t.version < group_first)
                            .cloned(),
                        _ => None,
                    };
                    if let Some((_, SlotContent::Valid { tuples, .. })) = b.slots.get_mut(w) {
                        tuples.retain(|t| !(t.key == key && t.version >= group_first));
                        tuples.extend(previous);
                    }
                    dirty.insert(no as u32);
                    edited.insert(no as u32);
                    report.object(format!(
                        "{}: rolled back to its previous version; its new bytes did not reach the disk ({why})",
                        crate::error::show_key(&key)
                    ));
                }
                break;
            }
        }
        // Roll the group back as a whole: each of its blocks falls back to
        // its state before the group, which was synced. Only the newest
        // group can have been cut by a crash (a group is written only once
        // the one before it is synced): an older group that looks cut too
        // is damage, and rolling it back would drop acknowledged objects.
        if let Some(newest) = rolled_back_seq {
            return Err(corrupt(format!(
                "commit group {last_seq} looks {} after the newest group, {newest}, was \
                 rolled back; only the newest group can be cut by a crash, so a tuple block \
                 of group {last_seq} is damaged. Nothing was changed; restore the store from \
                 a backup",
                if complete {
                    "to have lost bytes"
                } else {
                    "cut"
                }
            )));
        }
        rolled_back_seq = Some(last_seq);
        report.rolled_back_groups += 1;
        let why = if !complete {
            "interrupted by a crash before its sync (tuple blocks missing or torn)"
        } else {
            "all-or-nothing (a bulk load, or buffered durability) and one of its objects' bytes did not reach the disk"
        };
        for &(no, _) in &members {
            let (Some(b), Some(chosen_no), Some(rejected_no)) =
                (scanned.get(no), chosen.get_mut(no), rejected.get_mut(no))
            else {
                continue;
            };
            let at = |e: Error| e.context(format!("tuple block {no} at byte {}", b.offset));
            let (Some(w), None) = (*chosen_no, *rejected_no) else {
                return Err(at(corrupt(
                    "both slots belong to interrupted groups".into(),
                )));
            };
            if let Some(SlotContent::Valid { tuples, .. }) = b.slot(w) {
                for t in tuples.iter().filter(|t| t.version >= group_first) {
                    report.object(format!(
                        "{}: its newest version was rolled back: the commit group was {why}",
                        crate::error::show_key(&t.key)
                    ));
                }
            }
            *chosen_no = b.fallback(w, last_seq, layout).map_err(at)?;
            *rejected_no = Some(w);
            // A journaled block falling back to a state on the device keeps
            // it (open restores a journal image to the home slot and erases
            // the journal); one left empty has its home rewritten empty.
            if !journaled || chosen_no.is_none() {
                dirty.insert(no as u32);
            }
        }
    }
    let next_slots: Vec<u8> = match layout {
        Layout::Paired => rejected
            .iter()
            .zip(&chosen)
            .map(|(rejected, chosen)| match rejected {
                Some(w) => *w as u8,
                None => chosen.map_or(0, |w| 1 - w as u8),
            })
            .collect(),
        Layout::Journaled(_) => vec![0; chosen.len()],
    };
    if !report.skipped.is_empty() {
        // A block skipped next to a rollback: the rolled-back state may hold
        // an older version of a key whose newer one was in the skipped
        // block (a leftover the interrupted group was removing), and
        // nothing tells it from a current one. Refuse rather than serve it.
        if report.rolled_back_groups > 0 || report.rolled_back_objects > 0 {
            return Err(corrupt(format!(
                "a salvage open cannot be exact here: a commit group interrupted by a crash \
                 would be rolled back next to the skipped tuple block(s) ({}), and the state it \
                 goes back to could hold an older version of an object lost with them. Nothing \
                 was changed; restore the store from a backup",
                report.skipped.join("; ")
            )));
        }
        // Closed cleanly after the group the lost copies prove synced.
        report.clean = clean_seq != 0 && clean_seq == max_seq.max(synced_floor);
    }
    Ok(Plan {
        chosen,
        next_slots,
        dirty,
        edited,
        max_seq,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(seq: Option<u64>, split: Option<(u64, u64)>) -> SlotContent {
        SlotContent::Invalid {
            why: "test".into(),
            seq,
            split,
        }
    }

    use crate::meta::block::{encode_slot, GroupStamp};
    use crate::meta::tuple::{Checksums, Piece, Tuple, TupleValue};

    const STORE: u64 = 77;

    fn tuple(key: &str, version: u64, start: u64) -> Tuple {
        Tuple {
            key: key.as_bytes().into(),
            version,
            created_micros: 0,
            size: 4096,
            expires_micros: None,
            value: TupleValue::Heap {
                pieces: vec![Piece { start, order: 0 }],
                sums: Checksums::Blocks(vec![0].into()),
                unsynced: true,
            },
        }
    }

    /// One slot image of block `no` written by group (`seq`, `first`,
    /// `blocks`, `flags`) holding `tuples`: format 2, or format 4 when
    /// `journaled`.
    fn encoded(journaled: bool, no: u32, stamp: GroupStamp, tuples: &[Tuple]) -> Vec<u8> {
        let mut payload = Vec::new();
        for t in tuples {
            t.encode_into(&mut payload);
        }
        let mut out = vec![0u8; BLOCK_SIZE];
        let id = SlotIdentity {
            store_id: STORE,
            block_no: no,
        };
        let encode = if journaled {
            crate::meta::block::encode_journaled_slot
        } else {
            encode_slot
        };
        encode(id, stamp, tuples.len(), &payload, &mut out);
        out
    }

    fn image(no: u32, seq: u64, first: u64, blocks: u32, tuples: &[Tuple]) -> Vec<u8> {
        let stamp = GroupStamp {
            seq,
            first,
            blocks,
            flags: 0,
        };
        encoded(false, no, stamp, tuples)
    }

    fn scanned(no: u32, a: &[u8], b: &[u8]) -> ScannedBlock {
        let id = SlotIdentity {
            store_id: STORE,
            block_no: no,
        };
        let offset = no as u64 * 2 * BLOCK_SIZE as u64;
        ScannedBlock {
            offset,
            slots: vec![
                (offset, decode_slot(id, a)),
                (offset + BLOCK_SIZE as u64, decode_slot(id, b)),
            ],
        }
    }

    fn run(blocks: &mut [ScannedBlock], clean_seq: u64, bad: &'static str) -> Result<Plan> {
        crate::io::block_on(plan(
            blocks,
            clean_seq,
            Layout::Paired,
            false,
            |t: Tuple| async move {
                Ok((&*t.key == bad.as_bytes()).then(|| "test mismatch".to_string()))
            },
        ))
    }

    /// Block 0 written by groups 1 and 3, block 1 by group 2 and then by
    /// group 4 (which wrote blocks 0 and 1... here only 1, declaring 2).
    fn store(last_group_blocks: u32) -> Vec<ScannedBlock> {
        let b0 = [
            image(0, 1, 1, 1, &[tuple("a", 1, 10)]),
            image(0, 3, 3, 1, &[tuple("a", 3, 11)]),
        ];
        let b1 = [
            image(1, 4, 4, last_group_blocks, &[tuple("b", 4, 13)]),
            image(1, 2, 2, 1, &[tuple("b", 2, 12)]),
        ];
        vec![scanned(0, &b0[0], &b0[1]), scanned(1, &b1[0], &b1[1])]
    }

    #[test]
    fn a_complete_newest_group_stays() {
        let p = run(&mut store(1), 0, "").unwrap();
        assert_eq!(p.chosen, vec![Some(1), Some(0)]);
        assert!(p.report.is_empty() && p.dirty.is_empty());
        assert_eq!(p.max_seq, 4);
    }

    #[test]
    fn a_newest_group_missing_a_block_rolls_back_whole() {
        let p = run(&mut store(2), 0, "").unwrap();
        // Block 1 falls back to group 2; block 0 (group 3) stays.
        assert_eq!(p.chosen, vec![Some(1), Some(1)]);
        assert_eq!(p.report.rolled_back_groups, 1);
        assert_eq!(p.next_slots[1], 0, "the rejected slot is written next");
        assert!(p.dirty.contains(&1));
    }

    #[test]
    fn after_a_clean_close_nothing_is_checked() {
        let p = run(&mut store(2), 4, "b").unwrap();
        assert_eq!(p.chosen, vec![Some(1), Some(0)]);
        assert!(p.report.clean && p.report.is_empty());
    }

    #[test]
    fn an_object_whose_bytes_did_not_land_rolls_back_alone() {
        let mut blocks = store(1);
        let p = run(&mut blocks, 0, "b").unwrap();
        assert_eq!(p.report.rolled_back_objects, 1);
        assert_eq!(p.report.rolled_back_groups, 0);
        let SlotContent::Valid { tuples, .. } = &blocks[1].slots[0].1 else {
            panic!("block 1 lost its state")
        };
        assert_eq!(tuples[0].version, 2, "b is back at its previous version");
    }

    #[test]
    fn a_damaged_newer_slot_of_an_older_group_is_corrupt() {
        // Block 0's newer slot (group 3) damaged in its payload: both
        // sequence copies still say 3, older than the newest group (4).
        let b0_new = {
            let mut s = image(0, 3, 3, 1, &[tuple("a", 3, 11)]);
            s[60] ^= 1;
            s
        };
        let b0_old = image(0, 1, 1, 1, &[tuple("a", 1, 10)]);
        let b1 = [
            image(1, 4, 4, 1, &[tuple("b", 4, 13)]),
            image(1, 2, 2, 1, &[tuple("b", 2, 12)]),
        ];
        let mut blocks = vec![scanned(0, &b0_old, &b0_new), scanned(1, &b1[0], &b1[1])];
        let err = run(&mut blocks, 0, "").err().expect("must refuse");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.to_string().contains("tuple block 0"), "{err}");
    }

    /// A salvage open takes a lost copy as proof that its group was
    /// synced, but not a copy claiming the newest group of a store not
    /// closed after it: that group may be the one a crash cut. Here group 4
    /// (three blocks) landed in blocks 0 and 1 but not in block 2, and
    /// block 0's other slot is a damaged copy also claiming group 4 (a
    /// misdirected image). Taken as proof, it kept group 4, which was never
    /// acknowledged, and served `b` at version 4.
    #[test]
    fn a_salvage_never_takes_a_copy_of_the_newest_group_as_proof_of_its_sync() {
        let b0 = image(0, 4, 4, 3, &[tuple("a", 4, 14)]);
        let mut b0_copy = b0.clone();
        b0_copy[60] ^= 1;
        let b1 = [
            image(1, 4, 4, 3, &[tuple("b", 4, 24)]),
            image(1, 2, 2, 1, &[tuple("b", 2, 22)]),
        ];
        let b2 = [
            image(2, 2, 2, 1, &[tuple("c", 2, 32)]),
            image(2, 1, 1, 1, &[tuple("c", 1, 31)]),
        ];
        let mut blocks = vec![
            scanned(0, &b0, &b0_copy),
            scanned(1, &b1[0], &b1[1]),
            scanned(2, &b2[0], &b2[1]),
        ];
        let salvaged = crate::io::block_on(plan(
            &mut blocks,
            0,
            Layout::Paired,
            true,
            |_: Tuple| async move { Ok(None) },
        ));
        match salvaged {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}"),
            Ok(p) => {
                let b = p.chosen.get(1).copied().flatten().and_then(|slot| {
                    match &blocks[1].slots[slot].1 {
                        SlotContent::Valid { tuples, .. } => Some(tuples[0].version),
                        _ => None,
                    }
                });
                assert_ne!(b, Some(4), "group 4 was never acknowledged: {:?}", p.report);
            }
        }
    }

    #[test]
    fn a_torn_newest_write_rolls_back_and_a_damaged_superseded_copy_is_repaired() {
        // Block 1's group-4 write torn: new head, old tail.
        let mut torn = image(1, 2, 2, 1, &[tuple("b", 2, 12)]);
        let new = image(1, 4, 4, 1, &[tuple("b", 4, 13)]);
        torn[..2048].copy_from_slice(&new[..2048]);
        let b1_old = image(1, 2, 2, 1, &[tuple("b", 2, 12)]);
        // Block 0's superseded copy (group 1) damaged: nothing lost.
        let mut b0_old = image(0, 1, 1, 1, &[tuple("a", 1, 10)]);
        b0_old[60] ^= 0x10;
        let b0_new = image(0, 3, 3, 1, &[tuple("a", 3, 11)]);
        let mut blocks = vec![scanned(0, &b0_old, &b0_new), scanned(1, &torn, &b1_old)];
        let p = run(&mut blocks, 0, "").unwrap();
        assert_eq!(p.chosen, vec![Some(1), Some(1)]);
        assert_eq!(p.report.rolled_back_groups, 1, "{:?}", p.report);
        assert!(p.dirty.contains(&0), "the damaged copy is rewritten");
    }

    #[test]
    fn damaged_copies_are_classified_by_what_they_claim() {
        // Sibling at 10, newest group 20, unclean.
        let f = 20;
        assert_eq!(
            classify(&invalid(Some(5), None), 10, f, false),
            Damage::Superseded
        );
        assert_eq!(
            classify(&invalid(Some(20), None), 10, f, false),
            Damage::Torn(20)
        );
        assert_eq!(
            classify(&invalid(Some(25), None), 10, f, false),
            Damage::Torn(25)
        );
        // A newer copy from an older group: its state is lost.
        assert_eq!(
            classify(&invalid(Some(15), None), 10, f, false),
            Damage::Lost
        );
        assert_eq!(
            classify(&invalid(Some(10), None), 10, f, false),
            Damage::Lost
        );
        // Torn: new head, old tail.
        assert_eq!(
            classify(&invalid(None, Some((21, 4))), 10, f, false),
            Damage::Torn(21)
        );
        // A newer copy (15) with one copy flipped either way: never torn.
        assert_eq!(
            classify(&invalid(None, Some((15, 3))), 10, f, false),
            Damage::Lost
        );
        assert_eq!(
            classify(&invalid(None, Some((15, 1 << 40))), 10, f, false),
            Damage::Lost
        );
        // An older copy with a copy flipped high: falling back is right.
        assert_eq!(
            classify(&invalid(None, Some((4, 1 << 40))), 10, f, false),
            Damage::Torn(1 << 40)
        );
        assert_eq!(
            classify(&invalid(None, Some((4, 6))), 10, f, false),
            Damage::Superseded
        );
        // After a clean close at 20 the floor is 21: group 20 cannot be torn.
        assert_eq!(
            classify(&invalid(Some(20), None), 10, 21, false),
            Damage::Lost
        );
        // A block's first write, torn (old content zero).
        assert_eq!(
            classify(&invalid(None, Some((21, 0))), 0, f, false),
            Damage::Torn(21)
        );
        assert_eq!(classify(&invalid(Some(7), None), 0, f, false), Damage::Lost);
    }

    // Journaled stores (format 4): one home slot per block, images in the
    // journal.

    const JOURNAL: MetaExtent = MetaExtent {
        start: 1000,
        order: 3,
    };

    fn journaled_image(no: u32, seq: u64, blocks: u32, tuples: &[Tuple]) -> Vec<u8> {
        let stamp = GroupStamp {
            seq,
            first: seq,
            blocks,
            flags: 0,
        };
        encoded(true, no, stamp, tuples)
    }

    /// Block `no` with its home slot and the journal slots given (slot
    /// index, bytes); a journal slot is attributed as `scan` does.
    fn journaled(no: u32, home: &[u8], journal: &[(u32, Vec<u8>)]) -> ScannedBlock {
        let id = SlotIdentity {
            store_id: STORE,
            block_no: no,
        };
        let offset = no as u64 * BLOCK_SIZE as u64;
        let mut slots = vec![(offset, decode_slot(id, home))];
        for (j, b) in journal {
            assert_eq!(
                journal_block(b),
                Some(no),
                "journal slot {j} is not block {no}'s"
            );
            let at = JOURNAL.offset() + *j as u64 * BLOCK_SIZE as u64;
            slots.push((at, decode_slot(id, b)));
        }
        ScannedBlock { offset, slots }
    }

    fn run_journaled(blocks: &mut [ScannedBlock], bad: &'static str) -> Result<Plan> {
        crate::io::block_on(plan(
            blocks,
            0,
            Layout::Journaled(JOURNAL),
            false,
            |t: Tuple| async move {
                Ok((&*t.key == bad.as_bytes()).then(|| "test mismatch".to_string()))
            },
        ))
    }

    #[test]
    fn a_journal_image_newer_than_its_home_is_the_state_and_its_home_the_fallback() {
        let home = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
        let newer = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
        let mut blocks = vec![journaled(0, &home, &[(3, newer.clone())])];
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![Some(1)]);
        // The group declared two blocks and only this one landed: rolled
        // back to the home slot.
        let newer = journaled_image(0, 4, 2, &[tuple("a", 4, 11)]);
        let mut blocks = vec![journaled(0, &home, &[(3, newer)])];
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![Some(0)]);
        assert_eq!(p.report.rolled_back_groups, 1);
    }

    #[test]
    fn a_home_rewritten_from_its_journal_image_is_the_state_and_a_torn_one_is_superseded() {
        let image = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
        // Home rewritten: the same sequence in both places, the home wins.
        let mut blocks = vec![journaled(0, &image, &[(5, image.clone())])];
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![Some(0)]);
        assert!(p.dirty.is_empty());
        // Home torn while being rewritten (new head, old tail): the
        // journal image is the state, the home is rewritten.
        let old = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
        let mut torn = old.clone();
        torn[..1000].copy_from_slice(&image[..1000]);
        let mut blocks = vec![journaled(0, &torn, &[(5, image)])];
        let p = run_journaled(&mut blocks, "").unwrap();
        // Open copies the image back to the home slot; no new write.
        assert_eq!(p.chosen, vec![Some(1)]);
        assert!(p.dirty.is_empty());
    }

    #[test]
    fn a_damaged_home_without_a_journal_copy_is_corrupt() {
        let mut home = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
        home[60] ^= 1;
        // Group 4 elsewhere is the newest: group 3 cannot have been torn.
        let other = journaled_image(1, 4, 1, &[tuple("b", 4, 11)]);
        let mut blocks = vec![journaled(0, &home, &[]), journaled(1, &other, &[])];
        let err = run_journaled(&mut blocks, "").err().expect("must refuse");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(err.to_string().contains("tuple block 0"), "{err}");
        // With its journal image still there, nothing is lost.
        let copy = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
        let mut blocks = vec![journaled(0, &home, &[(2, copy)]), journaled(1, &other, &[])];
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![Some(1), Some(0)]);
        assert!(p.dirty.is_empty());
    }

    #[test]
    fn a_damaged_journal_image_whose_home_was_not_yet_rewritten_is_corrupt() {
        // Block 0's group-3 image is only in the journal (its home write
        // was lost with the crash), and damaged; group 4 is the newest.
        let home = journaled_image(0, 1, 1, &[tuple("a", 1, 10)]);
        let mut image = journaled_image(0, 3, 1, &[tuple("a", 3, 11)]);
        image[70] ^= 4;
        let other = journaled_image(1, 4, 1, &[tuple("b", 4, 12)]);
        let mut blocks = vec![
            journaled(0, &home, &[(6, image)]),
            journaled(1, &other, &[]),
        ];
        let err = run_journaled(&mut blocks, "").err().expect("must refuse");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn a_torn_first_write_of_a_block_leaves_it_empty() {
        // Never written before: the home write tore (new head, zero tail).
        let image = journaled_image(0, 4, 1, &[tuple("a", 4, 11)]);
        let mut torn = vec![0u8; BLOCK_SIZE];
        torn[..2000].copy_from_slice(&image[..2000]);
        let mut blocks = vec![journaled(0, &torn, &[])];
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![None]);
    }

    #[test]
    fn a_torn_journal_slot_belongs_to_the_block_its_majority_names() {
        // Block 1's new image written over block 0's old one in a journal
        // slot, torn: the head says block 1, both tail copies block 0.
        let old = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
        let new = journaled_image(1, 5, 1, &[tuple("b", 5, 11)]);
        let mut torn = old.clone();
        torn[..3000].copy_from_slice(&new[..3000]);
        assert_eq!(journal_block(&torn), Some(0));
        let home0 = journaled_image(0, 2, 1, &[tuple("a", 2, 10)]);
        let home1 = journaled_image(1, 3, 1, &[tuple("b", 3, 12)]);
        let mut blocks = vec![
            journaled(0, &home0, &[(1, torn)]),
            journaled(1, &home1, &[]),
        ];
        // The torn slot claims sequences 5 and 2: the newest group's tear.
        let p = run_journaled(&mut blocks, "").unwrap();
        assert_eq!(p.chosen, vec![Some(0), Some(0)]);
    }

    #[test]
    fn a_home_slot_of_a_rolled_back_group_falls_back_to_empty_only_when_it_was_a_first_write() {
        // Group 4 declares two blocks; only block 0's home image landed.
        let image = |flags: u32| {
            let stamp = GroupStamp {
                seq: 4,
                first: 4,
                blocks: 2,
                flags,
            };
            encoded(true, 0, stamp, &[tuple("a", 4, 11)])
        };
        let first = image(crate::meta::block::SLOT_FIRST);
        let p = run_journaled(&mut [journaled(0, &first, &[])], "").unwrap();
        assert_eq!(p.chosen, vec![None]);
        assert_eq!(p.report.rolled_back_groups, 1);
        // Not a first write: its home was rewritten after a sync the group
        // must then have reached; what came before is unknown: refused.
        let rewritten = image(0);
        let err = run_journaled(&mut [journaled(0, &rewritten, &[])], "")
            .err()
            .expect("must refuse");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn a_journal_slot_whose_tail_is_still_zero_claims_nothing() {
        // An image torn over zeros (a never used slot, or recovery's erase
        // torn over an image): its head names block 1, its tail nothing.
        let image = journaled_image(1, 9, 1, &[tuple("b", 9, 11)]);
        let mut torn = vec![0u8; BLOCK_SIZE];
        torn[..2048].copy_from_slice(&image[..2048]);
        let id = SlotIdentity {
            store_id: STORE,
            block_no: 0,
        };
        assert!(matches!(
            journal_copy(decode_slot(id, &torn), &torn),
            SlotContent::Empty
        ));
        // Block numbers and sequences both split (two images): a torn write
        // claiming the newer sequence.
        let other = journaled_image(0, 3, 1, &[tuple("a", 3, 10)]);
        let mut mixed = other.clone();
        mixed[..4082].copy_from_slice(&image[..4082]);
        match journal_copy(decode_slot(id, &mixed), &mixed) {
            SlotContent::Invalid { seq, split, .. } => assert_eq!((seq, split), (Some(9), None)),
            other => panic!("unexpected {other:?}"),
        }
    }
}
