//! blobcask: an embedded blob store.
//!
//! One preallocated file or block device holds millions of objects; an
//! in-memory index maps keys to their metadata; a buddy allocator manages
//! the heap; direct I/O moves the bytes; metadata is a flat set of tuples in
//! checksummed tuple blocks, each rewritten in place only after its new
//! image is synced in a small metadata journal, so a commit costs one
//! block write per changed block before its one sync, and recovery replays
//! no log. See `core/FORMAT.md` for the byte layout.
//!
//! ```no_run
//! # async fn demo() -> blobcask::Result<()> {
//! use blobcask::{Options, Store};
//! let store = Store::open("/tmp/demo.blobcask", Options::new().capacity(1 << 30)).await?;
//! store.put("thumbs/cat.jpg", vec![0u8; 20_000]).await?;
//! let head = store.read("thumbs/cat.jpg", 0, 4096).await?;
//! assert_eq!(head.len(), 4096);
//! store.close().await?;
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![warn(missing_docs)]

// The engine's parts are the crate's own; what users reach is re-exported
// below (and `blocking`, `event_loop`, `io`, `report`, the public modules).
pub(crate) mod alloc;
pub mod blocking;
mod error;
pub mod event_loop;
pub(crate) mod format;
pub(crate) mod index;
pub mod io;
#[cfg(all(test, blobcask_loom))]
mod loom_check;
pub(crate) mod meta;
mod options;
pub mod report;
mod store;
mod sync;

/// The codecs and parts that this repository's fuzz targets, benchmarks
/// and format tests drive directly, below the [`Store`] API. Not part of
/// the API: no stability promise, hidden from the docs.
///
/// * [`Superblock`](internals::Superblock) and the format constants: the
///   superblock codec (fuzz target `superblock_decode`, fixtures);
/// * [`block`](internals::block) and [`tuple`](internals::tuple): the
///   tuple-block slot and tuple codecs (fuzz target `tuple_block_decode`,
///   damage tests that find a key's block);
/// * [`BuddyAllocator`](internals::BuddyAllocator): the heap allocator
///   (fuzz target `buddy_allocator`, micro benches);
/// * [`build_index`](internals::build_index) and
///   [`KeyIndex`](internals::KeyIndex): the index backends (`index-bench`).
#[doc(hidden)]
pub mod internals {
    pub use crate::alloc::BuddyAllocator;
    pub use crate::format::{
        ImageRef, Superblock, BLOCK_SIZE, FORMAT_VERSION, MAX_META_EXTENTS, SUPER_MAGIC,
    };
    pub use crate::index::{build as build_index, KeyIndex};
    pub use crate::meta::{block, tuple};
}

pub use bytes::Bytes;
pub use error::{Error, ErrorKind, Result};
pub use index::IndexKind;
pub use io::IoEngineKind;
pub use meta::recovery::RecoveryReport;
pub use meta::tuple::MAX_KEY_LEN;
pub use options::{
    Durability, Eviction, Options, PutMode, PutOptions, ReadOptions, DEFAULT_CACHE_BYTES,
    DEFAULT_CAPACITY, DEFAULT_INLINE_THRESHOLD, DEFAULT_MAX_PIECE_SIZE, MAX_GROWTH_STEP,
    MAX_INLINE_THRESHOLD, MAX_TTL, MIN_CAPACITY,
};
#[cfg(target_os = "linux")]
pub use store::LocalStore;
pub use store::{
    BackupProgress, BackupReport, Batch, BatchOutcome, BulkOptions, CacheStats, CompactReport,
    Keys, ListEntry, LoadReport, ObjectInfo, ScrubReport, Stats, Store, Upload, UploadInfo,
    MAX_BATCH_OPS, PART_ALIGN,
};
