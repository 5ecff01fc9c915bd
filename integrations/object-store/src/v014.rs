//! `object_store::ObjectStore` for object_store 0.14 (feature
//! `object_store_014`): [`BlobcaskObjectStore`] implements 0.14's trait,
//! and [`cached`](crate::v014::cached) is the cache tier over a 0.14 remote.
//!
//! The code is shared with the other versions' modules (`src/front/`,
//! `src/cached/`, compiled once per version); only `compat` below is
//! 0.14's own.

/// The object_store release this module implements (re-exported: the same
/// crate as a dependency on `object_store = "0.14"`).
pub use ::object_store_014 as object_store;

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

/// Where object_store 0.14 differs from the other supported releases.
mod compat {
    use std::ops::Range;

    use super::object_store::path::Path;
    use super::object_store::{
        Attributes, GetResult, GetResultPayload, ListResult, ObjectMeta, PutResult,
    };

    pub(crate) fn put_result(e_tag: Option<String>, version: Option<String>) -> PutResult {
        PutResult {
            e_tag,
            version,
            extensions: Default::default(),
        }
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
            extensions: Default::default(),
        }
    }

    pub(crate) fn list_result(common_prefixes: Vec<Path>, objects: Vec<ObjectMeta>) -> ListResult {
        ListResult {
            common_prefixes,
            objects,
            extensions: Default::default(),
        }
    }

    /// The e-tag of a blobcask version: the number as a quoted string
    /// (`"42"`), the form RFC 9110 gives ETags and 0.14's local stores
    /// (`InMemory`, `LocalFileSystem`) use, as the cloud stores always did.
    pub(crate) fn e_tag(version: u64) -> String {
        format!("\"{version}\"")
    }

    /// The version an e-tag of [`e_tag`]'s form names (quoted: a bare
    /// number is not an e-tag this version hands out).
    pub(crate) fn version_of_e_tag(tag: &str) -> Option<u64> {
        tag.strip_prefix('"')?.strip_suffix('"')?.parse().ok()
    }
}
