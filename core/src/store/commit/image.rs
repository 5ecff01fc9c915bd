//! The index image written at a clean close (`meta::image`): the state as
//! the close leaves it, in key order (or, for the hash index, which holds
//! no keys, in the order of the keys' fingerprints), so the next open loads
//! it instead of reading every tuple block.

use super::checkpoint::Checkpoint;
use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ImageRef, BLOCK_SIZE};
use crate::index::{EntryId, Fingerprint};
use crate::meta::image::changes::{self, ChangeMap};
use crate::meta::image::{record_len, ImageObject, ImageWriter, MAX_IMAGE_PIECES};
use crate::meta::tuple::Piece;
use crate::store::grow;
use crate::store::{Entry, Shared};

/// Records encoded per hold of the state's read lock.
const BATCH: usize = 8192;

/// The image's record of `key`'s entry (`fp`: of a fingerprint image,
/// where `key` is empty unless the entry expires).
fn object<'a>(key: &'a [u8], fp: Option<Fingerprint>, e: &'a Entry) -> ImageObject<'a> {
    ImageObject {
        key,
        key_len: e.key_len(),
        fp,
        block: e.block,
        version: e.version,
        created_micros: e.created_micros,
        size: e.size(),
        expires_micros: e.expires_micros(),
        heap: e
            .data
            .heap()
            .map(|h| (h.extent.pieces.as_slice(), &h.sums, h.unsynced)),
    }
}

/// Gives an image's pieces back to the allocator (once no superblock
/// names them).
pub(super) fn free(shared: &Shared, pieces: Vec<Piece>) {
    let mut alloc = shared.alloc.lock();
    for p in pieces {
        alloc.free(p);
    }
}

/// The image's records in order: keys (an index that holds them), or
/// fingerprints with the keys of the entries that expire (from the
/// reaper's queue), each with its entry.
enum Order {
    Keys(Vec<(Box<[u8]>, EntryId)>),
    Fingerprints(
        Vec<(Fingerprint, EntryId)>,
        std::collections::HashMap<EntryId, Box<[u8]>>,
    ),
}

impl Order {
    fn len(&self) -> usize {
        match self {
            Order::Keys(k) => k.len(),
            Order::Fingerprints(f, _) => f.len(),
        }
    }

    /// Record `i` (below `len`): its key (empty for a fingerprint of an
    /// entry that does not expire), fingerprint and entry.
    fn record(&self, i: usize) -> (&[u8], Option<Fingerprint>, EntryId) {
        match self {
            Order::Keys(k) => k
                .get(i)
                .map_or((&[][..], None, EntryId::MAX), |(k, id)| (k, None, *id)),
            Order::Fingerprints(f, keys) => {
                f.get(i).map_or((&[][..], None, EntryId::MAX), |&(fp, id)| {
                    (keys.get(&id).map_or(&[][..], |k| k), Some(fp), id)
                })
            }
        }
    }
}

fn vanished(id: EntryId) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("entry {id} vanished while the index image was written"),
    )
}

impl Committer {
    /// Writes an image of the state as it is now, stamped with the clean
    /// sequence the close is about to record; the caller syncs, then names
    /// it in the superblock. `Ok(None)` when there is none to write: a store
    /// with two slots per tuple block or that never committed, anything not yet in its block (an
    /// open group, stale copies, home slots not rewritten, inline values
    /// held in RAM), no room in the heap (a store that can grow grows for
    /// it, as for an object), free space in more pieces than the header
    /// lists. On an error the image's pieces are freed again.
    /// Its change map (every block clear) is written beside it, in a piece
    /// of its own.
    pub(super) async fn write_image(&mut self) -> Result<Option<(ImageRef, Checkpoint)>> {
        // (A clean sequence of 0 reads as "never closed cleanly".)
        if self.journal.is_none()
            || self.next_version <= 1
            || self.pending.first.is_some()
            || !self.stale.is_empty()
            || !self.unplaced.is_empty()
            || !self.inline_pending.is_empty()
        {
            return Ok(None);
        }
        let shared = self.shared.clone();
        let blocks: Vec<(bool, u16)> = self
            .table
            .blocks
            .iter()
            .map(|b| (b.has_state, b.used))
            .collect();
        let mut secret = None;
        let (order, records) = {
            let st = shared.state.read();
            let order = match st.index.fingerprints() {
                Some(f) => {
                    secret = Some(f.secret);
                    let expiring = shared.expiring.lock();
                    let mut keys = std::collections::HashMap::new();
                    for &(_, id) in &f.ids {
                        let e = st.entry(id).ok_or_else(|| vanished(id))?;
                        if let Some(at) = e.expires_micros() {
                            // Not in the queue (the reaper holds it right
                            // now): no image; the next open scans.
                            let Some((key, _)) = expiring.get(&(at, e.version)) else {
                                return Ok(None);
                            };
                            keys.insert(id, key.clone());
                        }
                    }
                    Order::Fingerprints(f.ids, keys)
                }
                None => {
                    let mut all = Vec::new();
                    st.index.all(&mut all)?;
                    if !shared.settings.index.is_ordered() {
                        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    }
                    Order::Keys(all)
                }
            };
            let mut len = 0u64;
            for i in 0..order.len() {
                let (k, fp, id) = order.record(i);
                let e = st.entry(id).ok_or_else(|| vanished(id))?;
                if e.data.is_pending() {
                    return Ok(None);
                }
                len += record_len(&object(k, fp, e)) as u64;
            }
            (order, len)
        };
        let payload_len = ImageWriter::payload_len(secret.is_some(), blocks.len(), records);
        let len = BLOCK_SIZE as u64 + payload_len;
        // Like an object's: a store that can grow does (within its
        // max_capacity); no room is no image.
        let pieces = match grow::with_room(&shared, len, |a| a.alloc_object(len)) {
            Ok(p) => p,
            Err(e) if e.kind() == ErrorKind::NoSpace => return Ok(None),
            Err(e) => return Err(e),
        };
        if pieces.len() > MAX_IMAGE_PIECES {
            // Free space too fragmented for the header's list.
            free(&shared, pieces);
            return Ok(None);
        }
        let stamp = self.next_version - 1;
        let order_of_map = changes::map_order(blocks.len());
        let Some(map_piece) = shared.alloc.lock().alloc(order_of_map) else {
            free(&shared, pieces);
            return Ok(None);
        };
        let map = ChangeMap::new(map_piece, shared.geometry.store_id, stamp);
        let engine = shared.engine.as_ref();
        let written = async {
            let mut w = ImageWriter::start(engine, pieces.clone(), secret, &blocks, payload_len)?;
            for from in (0..order.len()).step_by(BATCH) {
                {
                    let st = shared.state.read();
                    for i in from..order.len().min(from + BATCH) {
                        let (k, fp, id) = order.record(i);
                        w.push(&object(k, fp, st.entry(id).ok_or_else(|| vanished(id))?));
                    }
                }
                w.write_full().await?;
            }
            let (r, _) = w
                .finish(shared.geometry.store_id, stamp, self.next_version)
                .await?;
            for (buf, at) in map.encode_all() {
                let (res, _) = engine.write_at(buf, at).await;
                res.map_err(|e| Error::io("writing the change map", e))?;
            }
            Ok(r)
        }
        .await;
        match written {
            Ok(r) => Ok(Some((
                r,
                Checkpoint {
                    pieces,
                    map: Some(map),
                },
            ))),
            Err(e) => {
                free(&shared, pieces);
                free(&shared, vec![map_piece]);
                Err(e)
            }
        }
    }
}
