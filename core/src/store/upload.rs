//! Multipart uploads: space reserved up front, parts written in any order
//! and concurrently, one atomic commit.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::{data, Extent, ObjectData, ObjectInfo, Store};
use crate::error::{show_key, Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::options::PutOptions;

/// Parts start at multiples of this many bytes, and every part but the one
/// that ends the object is a multiple of it long.
pub const PART_ALIGN: u64 = BLOCK_SIZE as u64;

enum Target {
    /// Small objects are assembled in memory and committed inline.
    Inline(Mutex<Vec<u8>>),
    /// Heap pieces reserved at `begin_upload` (freed if never committed),
    /// and the CRC32C of each 4 KiB block, recorded as its part is written.
    Heap(Arc<Extent>, Mutex<Vec<u32>>),
}

/// An upload in progress; see [`Store::begin_upload`].
pub struct Upload {
    store: Store,
    key: Box<[u8]>,
    size: u64,
    target: Target,
    /// One bit per `PART_ALIGN` unit of the object: set once written.
    written: Mutex<Vec<u64>>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("key", &show_key(&self.key))
            .field("size", &self.size)
            .finish()
    }
}

impl Upload {
    pub(crate) fn begin(store: Store, key: &[u8], size: u64) -> Result<Upload> {
        let target = if store.is_inline(size) {
            Target::Inline(Mutex::new(vec![0; size as usize]))
        } else {
            let blocks = crate::meta::tuple::data_blocks(size) as usize;
            Target::Heap(
                data::allocate(store.shared(), key, size)?,
                Mutex::new(vec![0; blocks]),
            )
        };
        let units = size.div_ceil(PART_ALIGN);
        Ok(Upload {
            store,
            key: key.into(),
            size,
            target,
            written: Mutex::new(vec![0; units.div_ceil(64) as usize]),
        })
    }

    /// The object size given at `begin_upload`.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Writes `bytes` at `offset`. `offset` must be a multiple of
    /// [`PART_ALIGN`] and the part must end at a multiple of it or at the
    /// object's end. Parts may come in any order, from many tasks at once;
    /// writing a range twice keeps the later bytes.
    pub async fn write_part(&self, offset: u64, bytes: impl Into<Bytes>) -> Result<()> {
        self.write_part_inner(offset, bytes.into(), None).await
    }

    /// [`write_part`](Self::write_part) with the CRC32C (Castagnoli) of
    /// `bytes` as the client computed it: the bytes are checked against it
    /// before anything is written, so integrity holds end to end from the
    /// client (as S3's checksum headers do). A mismatch is
    /// `InvalidArgument` and writes nothing.
    pub async fn write_part_checked(
        &self,
        offset: u64,
        bytes: impl Into<Bytes>,
        crc32c: u32,
    ) -> Result<()> {
        self.write_part_inner(offset, bytes.into(), Some(crc32c))
            .await
    }

    async fn write_part_inner(&self, offset: u64, bytes: Bytes, expect: Option<u32>) -> Result<()> {
        let ctx = || format!("write_part {} at {offset}", show_key(&self.key));
        self.store.check_open().map_err(|e| e.context(ctx()))?;
        let len = bytes.len() as u64;
        let invalid = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m).context(ctx()));
        if len == 0 {
            return invalid("empty part".into());
        }
        if !offset.is_multiple_of(PART_ALIGN) {
            return invalid(format!("part offset must be a multiple of {PART_ALIGN}"));
        }
        let end = match offset.checked_add(len) {
            Some(end) if end <= self.size => end,
            _ => {
                return invalid(format!(
                    "part of {len} bytes at {offset} runs past the object size {}",
                    self.size
                ))
            }
        };
        if end % PART_ALIGN != 0 && end != self.size {
            return invalid(format!(
                "a part that does not end the object must be a multiple of {PART_ALIGN} bytes long"
            ));
        }
        // A client's CRC32C is checked before anything is written (one pass
        // over the part, only when the client sent one).
        if let Some(want) = expect {
            let got = crc32c::crc32c(&bytes);
            if got != want {
                return invalid(format!(
                    "the part's bytes do not match the CRC32C sent with them \
                     (sent {want:#010x}, computed {got:#010x}); nothing was written"
                ));
            }
        }
        match &self.target {
            Target::Inline(buf) => {
                // The buffer holds `size` bytes and `end <= size` (above).
                let mut buf = buf.lock();
                let Some(dst) = buf.get_mut(offset as usize..end as usize) else {
                    return invalid(format!("part at {offset} runs past the object"));
                };
                dst.copy_from_slice(&bytes);
            }
            Target::Heap(extent, table) => {
                let sums = data::write_range(self.store.shared(), extent, offset, &bytes)
                    .await
                    .map_err(|e| e.context(ctx()))?;
                // One checksum per block of the part, at the part's blocks.
                let first = (offset / BLOCK_SIZE as u64) as usize;
                for (slot, sum) in table.lock().iter_mut().skip(first).zip(sums) {
                    *slot = sum;
                }
            }
        }
        let mut bits = self.written.lock();
        for unit in offset / PART_ALIGN..end.div_ceil(PART_ALIGN) {
            if let Some(word) = bits.get_mut((unit / 64) as usize) {
                *word |= 1 << (unit % 64);
            }
        }
        Ok(())
    }

    /// First byte not yet written, if any.
    fn first_gap(&self) -> Option<u64> {
        let bits = self.written.lock();
        let units = self.size.div_ceil(PART_ALIGN);
        (0..units)
            .find(|u| {
                bits.get((u / 64) as usize)
                    .is_none_or(|word| word & (1 << (u % 64)) == 0)
            })
            .map(|u| u * PART_ALIGN)
    }

    /// Makes the object visible atomically, replacing any previous one.
    /// Every byte must have been written (`InvalidArgument` otherwise, and
    /// the upload is aborted).
    pub async fn commit(self) -> Result<ObjectInfo> {
        self.commit_with(PutOptions::default()).await
    }

    /// [`commit`](Self::commit) under a condition
    /// ([`PutMode::Create`](crate::PutMode::Create),
    /// [`PutMode::Update`](crate::PutMode::Update)), decided in commit order
    /// as for [`Store::put_with`](crate::Store::put_with): a refused commit
    /// (`AlreadyExists`, `VersionMismatch`) changes nothing and frees the
    /// upload's space.
    pub async fn commit_with(self, options: PutOptions) -> Result<ObjectInfo> {
        let ctx = format!("commit upload {}", show_key(&self.key));
        self.store.check_open().map_err(|e| e.context(&ctx))?;
        self.store
            .shared()
            .check_failed()
            .map_err(|e| e.context(&ctx))?;
        if let Some(gap) = self.first_gap() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("bytes from {gap} were never written"),
            )
            .context(ctx));
        }
        let data = match self.target {
            Target::Inline(buf) => ObjectData::Inline(Bytes::from(buf.into_inner())),
            Target::Heap(extent, table) => {
                let (sums, trailer) = data::seal(table.into_inner());
                if let Some(t) = &trailer {
                    data::write_table(self.store.shared(), &extent, self.size, t)
                        .await
                        .map_err(|e| e.context(&ctx))?;
                }
                // Synced before the tuple by the commit (not read back at
                // open: uploads may be large).
                ObjectData::Heap {
                    extent,
                    sums,
                    unsynced: false,
                }
            }
        };
        self.store
            .commit_object(&self.key, self.size, data, None, options.mode)
            .await
            .map_err(|e| e.context(ctx))
    }

    /// Abandons the upload and frees its space. Dropping it does the same.
    pub async fn abort(self) -> Result<()> {
        drop(self);
        Ok(())
    }
}
