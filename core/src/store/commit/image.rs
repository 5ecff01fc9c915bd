//! The index image written at a clean close (`meta::image`): the state as
//! the close leaves it, in key order (or, for the hash index, which holds
//! no keys, in the order of the keys' fingerprints), so the next open loads
//! it instead of reading every tuple block.

use super::Committer;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ImageRef, BLOCK_SIZE};
use crate::index::{EntryId, Fingerprint};
use crate::meta::image::{record_len, ImageObject, ImageWriter, MAX_IMAGE_PIECES};
use crate::meta::superblock::publish_superblock;
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

fn vanished(id: EntryId) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("entry {id} vanished while the index image was written"),
    )
}

impl Committer {
    /// Drops the index image open loaded from the superblock (synced) and
    /// frees its pieces, before anything changes (invariant 10): once a
    /// tuple block may differ from it, no superblock names it. Called
    /// before a group is applied and before any tuple block is written;
    /// a no-op once done, or when open loaded none.
    pub(super) fn drop_image(&mut self) -> Result<()> {
        let Some(pieces) = self.image.take() else {
            return Ok(());
        };
        {
            let mut sb = self.shared.superblock.lock();
            let mut next = sb.clone();
            next.index_image = None;
            next.format_version = next.current_version();
            match publish_superblock(self.shared.engine.as_ref(), &next) {
                Ok(published) => *sb = published,
                Err(e) => {
                    // Still named: nothing may change.
                    self.image = Some(pieces);
                    return Err(e);
                }
            }
        }
        self.shared.metadata_bytes.fetch_sub(
            crate::meta::image::pieces_len(&pieces),
            std::sync::atomic::Ordering::Relaxed,
        );
        free(&self.shared, pieces);
        Ok(())
    }

    /// Whether the superblock still names the image open loaded: nothing
    /// has changed since (the close keeps it as it is).
    pub(super) fn image_kept(&self) -> bool {
        self.image.is_some()
    }

    /// Writes an image of the state as it is now, stamped with the clean
    /// sequence the close is about to record; the caller syncs, then names
    /// it in the superblock. `Ok(None)` when there is none to write: a store
    /// with two slots per tuple block or that never committed, anything not yet in its block (an
    /// open group, stale copies, home slots not rewritten, inline values
    /// held in RAM), no room in the heap (a store that can grow grows for
    /// it, as for an object), free space in more pieces than the header
    /// lists. On an error the image's pieces are freed again.
    pub(super) async fn write_image(&mut self) -> Result<Option<(ImageRef, Vec<Piece>)>> {
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
        // Each record's key (or, fingerprints, the key only of an entry
        // that expires: the reaper's queue has it) and entry, in order.
        let mut keys: Vec<(Box<[u8]>, Option<Fingerprint>, EntryId)> = Vec::new();
        let mut secret = None;
        let records = {
            let st = shared.state.read();
            match st.index.fingerprints() {
                Some(f) => {
                    secret = Some(f.secret);
                    let expiring = shared.expiring.lock();
                    keys.reserve_exact(f.ids.len());
                    for (fp, id) in f.ids {
                        let e = st.entry(id).ok_or_else(|| vanished(id))?;
                        let key = match e.expires_micros() {
                            None => Box::default(),
                            // Not in the queue (the reaper holds it right
                            // now): no image; the next open scans.
                            Some(at) => match expiring.get(&(at, e.version)) {
                                Some((key, _)) => key.clone(),
                                None => return Ok(None),
                            },
                        };
                        keys.push((key, Some(fp), id));
                    }
                }
                None => {
                    let mut all = Vec::new();
                    st.index.all(&mut all)?;
                    if !shared.settings.index.is_ordered() {
                        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    }
                    keys.extend(all.into_iter().map(|(k, id)| (k, None, id)));
                }
            }
            let mut len = 0u64;
            for (k, fp, id) in &keys {
                let e = st.entry(*id).ok_or_else(|| vanished(*id))?;
                if e.data.is_pending() {
                    return Ok(None);
                }
                len += record_len(&object(k, *fp, e)) as u64;
            }
            len
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
        let engine = shared.engine.as_ref();
        let stamp = self.next_version - 1;
        let written = async {
            let mut w = ImageWriter::start(engine, pieces.clone(), secret, &blocks, payload_len)?;
            for batch in keys.chunks(BATCH) {
                {
                    let st = shared.state.read();
                    for (k, fp, id) in batch {
                        w.push(&object(k, *fp, st.entry(*id).ok_or_else(|| vanished(*id))?));
                    }
                }
                w.write_full().await?;
            }
            w.finish(shared.geometry.store_id, stamp, self.next_version)
                .await
        }
        .await;
        if written.is_err() {
            free(&shared, pieces);
        }
        written.map(Some)
    }
}
