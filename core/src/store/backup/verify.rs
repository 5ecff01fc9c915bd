//! Step 3, the verification: the copy reopened and checked against the
//! snapshot (objects, bytes, every block's recorded checksum).

use std::path::Path;
use std::sync::Arc;

use futures::stream::{self, StreamExt, TryStreamExt};

use super::{Pinned, READS_IN_FLIGHT};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::meta::tuple::{self, Checksums};
use crate::options::Options;
use crate::store::{data, ObjectData, Store};

/// Reopens the copy and checks it against the snapshot: as many objects
/// and bytes, each object with its size, and the checksums the copy stores
/// for each object's blocks (inline values: their bytes) equal to those of
/// the bytes read from the source.
pub(super) async fn verify(
    source: &Store,
    temp: &Path,
    snapshot: &[Pinned],
    sums: &[Arc<[u32]>],
) -> Result<()> {
    let s = source.shared();
    let options = s
        .options
        .clone()
        .read_only(true)
        .salvage(false)
        .create(false)
        .create_new(false)
        .cache_bytes(0);
    // Counted with what expired since the snapshot; opened at the size it
    // has, whatever capacity the source's options ask for.
    let options = Options {
        keep_expired: true,
        capacity: None,
        ..options
    };
    let copy = Store::open(temp, options).await?;
    let checked = check_copy(&copy, snapshot, sums).await;
    let closed = copy.close().await;
    checked?;
    closed
}

pub(super) async fn check_copy(
    copy: &Store,
    snapshot: &[Pinned],
    sums: &[Arc<[u32]>],
) -> Result<()> {
    let stats = copy.stats();
    let bytes: u64 = snapshot.iter().map(|p| p.size).sum();
    if stats.objects != snapshot.len() as u64 || stats.logical_bytes != bytes {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy holds {} objects of {} bytes, the snapshot {} of {bytes}",
                stats.objects,
                stats.logical_bytes,
                snapshot.len()
            ),
        ));
    }
    if sums.len() != snapshot.len() {
        return Err(Error::new(
            ErrorKind::Io,
            "backup: checksums missing for part of the snapshot",
        ));
    }
    // By index (owned), so the future stays `Send` (a closure over
    // borrowed items is not general enough for it).
    stream::iter(0..snapshot.len())
        .map(|i| check_one(copy, snapshot.get(i), sums.get(i)))
        .buffer_unordered(READS_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Checks one object of the snapshot against the copy.
async fn check_one(copy: &Store, p: Option<&Pinned>, want: Option<&Arc<[u32]>>) -> Result<()> {
    let (Some(p), Some(want)) = (p, want) else {
        return Err(Error::new(
            ErrorKind::Io,
            "backup: snapshot index out of range",
        ));
    };
    match stored_sums(copy, p.key()).await? {
        Some((_, _, expires)) if expires != p.expires => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} expires at {expires:?} µs, the source at {:?}",
                show_key(p.key()),
                p.expires
            ),
        )),
        Some((size, got, _)) if size == p.size && *got == **want => Ok(()),
        Some((size, _, _)) if size != p.size => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} has {size} bytes, not {}",
                show_key(p.key()),
                p.size
            ),
        )),
        Some(_) => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the copy of {} does not hold the source's bytes (its block checksums differ)",
                show_key(p.key())
            ),
        )),
        None => Err(Error::new(
            ErrorKind::Corrupt,
            format!("the copy lacks {}", show_key(p.key())),
        )),
    }
}

/// The size of `key`'s object in `copy` and the CRC32C of its 4 KiB blocks
/// as the copy records them: computed from an inline value (checked with
/// its tuple block at open), from the tuple, or from the trailer table
/// (read and checked against the tuple's CRC of it); and its expiry (an
/// object that expired since the snapshot is still checked).
async fn stored_sums(copy: &Store, key: &[u8]) -> Result<Option<(u64, Arc<[u32]>, Option<u64>)>> {
    let found = {
        let st = copy.shared().state.read();
        st.lookup_any(key).map(|e| {
            let at_hand = e.data.at_hand();
            (e.size(), e.version, e.expires_micros(), at_hand, e.block)
        })
    };
    let Some((size, version, expires, data, block)) = found else {
        return Ok(None);
    };
    let data = match data {
        Some(d) => d,
        // Inline, in its tuple block: read it (checked with the block).
        None => ObjectData::Inline(copy.inline_value(key, version, block, size).await?),
    };
    let sums: Arc<[u32]> = match data {
        ObjectData::Inline(b) => tuple::block_sums(&b).into(),
        ObjectData::Heap { extent, sums, .. } => match sums {
            Checksums::Blocks(b) => b,
            Checksums::Table(crc) => {
                let obj = data::ObjectRef {
                    pieces: &extent.pieces,
                    size,
                    sums: &Checksums::Table(crc),
                    version,
                };
                data::load_table(copy.shared().engine.as_ref(), None, &obj, crc).await?
            }
            // A new store writes neither.
            Checksums::None | Checksums::Whole(_) => Arc::from(Vec::new()),
        },
    };
    Ok(Some((size, sums, expires)))
}
