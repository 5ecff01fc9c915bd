//! `object_store::ObjectStore` for object_store 0.13 (feature
//! `object_store_013`): [`BlobcaskObjectStore`] implements 0.13's trait,
//! and [`cached`](crate::v013::cached) is the cache tier over a 0.13 remote.
//!
//! The code is shared with the other versions' modules (`src/front/`,
//! `src/cached/`, compiled once per version); only `compat` below is
//! 0.13's own.

/// The object_store release this module implements (re-exported: the same
/// crate as a dependency on `object_store = "0.13"`).
pub use ::object_store_013 as object_store;

pub use crate::tier::{Freshness, TierStats};
pub use crate::BlobcaskObjectStore;
pub use cached::{CachedObjectStore, CachedObjectStoreBuilder};

// The same files for every version, on purpose: with several versions
// enabled each is compiled once per version (clippy's `duplicate_mod`).
#[allow(clippy::duplicate_mod)]
#[path = "front/mod.rs"]
mod front;

#[allow(clippy::duplicate_mod)]
#[path = "cached/mod.rs"]
pub mod cached;

/// Where object_store 0.13 differs from the other supported releases.
mod compat {
    use std::ops::Range;

    use super::object_store::path::Path;
    use super::object_store::{
        Attributes, GetResult, GetResultPayload, ListResult, ObjectMeta, PutResult,
    };

    pub(crate) fn put_result(e_tag: Option<String>, version: Option<String>) -> PutResult {
        PutResult { e_tag, version }
    }

    pub(crate) fn get_result(
        payload: GetResultPayload,
        meta: ObjectMeta,
        range: Range<u64>,
        attributes: Attributes,
    ) -> GetResult {
        GetResult {
            payload,
            meta,
            range,
            attributes,
        }
    }

    pub(crate) fn list_result(common_prefixes: Vec<Path>, objects: Vec<ObjectMeta>) -> ListResult {
        ListResult {
            common_prefixes,
            objects,
        }
    }

    /// The e-tag of a blobcask version: the bare number, as 0.13's local
    /// stores (`InMemory`, `LocalFileSystem`) give bare tokens.
    pub(crate) fn e_tag(version: u64) -> String {
        version.to_string()
    }

    /// The version an e-tag of [`e_tag`]'s form names.
    pub(crate) fn version_of_e_tag(tag: &str) -> Option<u64> {
        tag.parse().ok()
    }
}
