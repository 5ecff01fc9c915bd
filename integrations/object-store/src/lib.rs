//! `object_store::ObjectStore` over a [`blobcask::Store`], so the Rust
//! data tools that read storage through `object_store` (DataFusion, Polars,
//! delta-rs, lance, slatedb) read and write blobcask, and code written
//! against the trait moves to an S3-compatible cluster by changing the line
//! that builds the store.
//!
//! ```no_run
//! # #[cfg(feature = "object_store_013")] use blobcask_object_store::v013::object_store;
//! # #[cfg(not(feature = "object_store_013"))] use blobcask_object_store::v014::object_store;
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use blobcask::{IndexKind, Options, Store};
//! use blobcask_object_store::BlobcaskObjectStore;
//! use object_store::{path::Path, ObjectStoreExt};
//!
//! let store = Store::open("data.bcask", Options::default().index(IndexKind::BTree)).await?;
//! let objects = BlobcaskObjectStore::new(store);
//! objects.put(&Path::from("tables/t1/part-0.parquet"), vec![1u8; 100].into()).await?;
//! let footer = objects.get_range(&Path::from("tables/t1/part-0.parquet"), 92..100).await?;
//! # Ok(()) }
//! ```
//!
//! How the trait maps onto the store:
//! * a path is the key (its UTF-8 bytes); listings are in byte order with
//!   every index (on the hash index, the default, each listing starts with
//!   a pass over the tuple blocks: see `blobcask::Store::list`; `BTree` or
//!   `Fst` list from memory), and skip keys that are not valid
//!   `object_store` paths (written through another API, e.g. non-UTF-8 or
//!   with empty segments);
//! * the e-tag is the object's version (quoted on object_store 0.14, see
//!   below), `last_modified` its commit time;
//!   `PutMode::Create` and `PutMode::Update` are blobcask's conditional
//!   puts, decided in commit order;
//! * a ranged get is one store read; `get_ranges` merges ranges at most
//!   4 KiB apart into one store read and makes the reads concurrently (a
//!   wider gap costs more to read than a second concurrent read saves);
//! * a multipart upload keeps its parts in memory until `complete`, which
//!   writes them concurrently into one blobcask upload and commits it
//!   atomically (a blobcask upload needs its size up front);
//! * attributes (content type, …) are not stored: a put that carries any is
//!   refused with `NotImplemented`; tags are ignored, as the local file
//!   system store does.
//!
//! `CachedObjectStore` (module `cached` of each version) turns a blobcask
//! store into a persistent, verified local tier in front of any other
//! `ObjectStore`.
//!
//! # object_store versions
//!
//! One cargo feature per object_store release, either or both:
//!
//! | feature | object_store | used by | module |
//! |---|---|---|---|
//! | `object_store_013` (default) | 0.13 | DataFusion 55 | `v013` |
//! | `object_store_014` | 0.14 | lance, SlateDB | `v014` |
//!
//! ```toml
//! # object_store 0.14 only:
//! blobcask-object-store = { version = "…", default-features = false, features = ["object_store_014"] }
//! ```
//!
//! [`BlobcaskObjectStore`] is one type that implements the `ObjectStore`
//! trait of every enabled version, so code that names it keeps compiling
//! when another crate in the build enables the other version (cargo
//! unifies features). The cache tier holds a remote of one version, so it
//! has one type per version: `v013::CachedObjectStore`,
//! `v014::CachedObjectStore` (the top-level `CachedObjectStore` and
//! `cached` are `v013`'s, with `object_store_013`: code on 0.14 should name
//! `v014::…`, which stays valid whatever else is enabled). Each module
//! re-exports its object_store crate (`v014::object_store`).
//!
//! Where the releases differ, so does the front-end: on 0.14 the e-tag is a
//! quoted string (`"42"`), as 0.14's own local stores give since it quotes
//! ETags per RFC 9110, on 0.13 the bare version (`42`); a conditional update
//! takes the e-tag in the form its version gives. The `opendal` feature
//! (and the `s3` test feature) are on object_store 0.13 only: they enable
//! `object_store_013`.

#[cfg(not(any(feature = "object_store_013", feature = "object_store_014")))]
compile_error!(
    "blobcask-object-store implements object_store's trait for the versions its features \
     name: enable `object_store_013` (the default) or `object_store_014`, or both"
);

use std::fmt;

use blobcask::Store;

mod segments;
mod tier;

/// The implementation for object_store 0.13 (feature `object_store_013`).
#[cfg(feature = "object_store_013")]
pub mod v013;
/// The implementation for object_store 0.14 (feature `object_store_014`).
#[cfg(feature = "object_store_014")]
pub mod v014;

pub use crate::tier::{Freshness, TierStats};
#[cfg(feature = "object_store_013")]
pub use crate::v013::{cached, CachedObjectStore, CachedObjectStoreBuilder};

#[cfg(feature = "opendal")]
mod opendal;
#[cfg(feature = "opendal")]
pub use crate::opendal::opendal_operator;

/// A blobcask [`Store`] as an `object_store::ObjectStore`: implements the
/// trait of each object_store version enabled by the crate's features.
#[derive(Debug, Clone)]
pub struct BlobcaskObjectStore {
    store: Store,
}

impl BlobcaskObjectStore {
    /// Serves `store` (a clone shares the engine; open it with an ordered
    /// index if you list).
    pub fn new(store: Store) -> Self {
        BlobcaskObjectStore { store }
    }

    /// The store behind this front-end.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl fmt::Display for BlobcaskObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobcaskObjectStore")
    }
}
