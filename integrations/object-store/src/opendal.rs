//! An OpenDAL `Operator` over a store (feature `opendal`), through
//! `object_store_opendal`'s `object_store` service.
//!
//! That service (0.58 to 0.60.5) runs up to 10 `write_part` tasks at once
//! and hands each to `MultipartUpload::put_part` in the order the tasks
//! take its lock, dropping OpenDAL's part number. `put_part`'s order *is*
//! the object's order, so a chunked writer's parts can land permuted: we
//! read back a 3 MiB object with its 1 MiB parts in the order 2, 1, 0 in
//! two of six runs. Until the adapter keeps part numbers, the operator
//! refuses multipart uploads: a write that OpenDAL makes in one call
//! (`Operator::write`, or a writer written once) is one atomic put; a
//! writer written more than once fails at its second write with
//! `Unsupported`, and nothing is stored.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use blobcask::Store;
use bytes::Bytes;
use futures::stream::BoxStream;

use crate::v013::object_store;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::BlobcaskObjectStore;

/// An [OpenDAL](https://opendal.apache.org) `Operator` over `store`, for
/// code written against OpenDAL: reads (ranged, one store read each),
/// writes made in one call (atomic puts), stat, list (every index;
/// OpenDAL lists the directory itself too), delete. Writers written in
/// more than one call are refused (`Unsupported`, see the module's
/// comment: the adapter underneath reorders parts). OpenDAL's
/// `object_store` service has no copy, rename or directories.
pub fn opendal_operator(store: Store) -> opendal::Result<opendal::Operator> {
    let objects: Arc<dyn ObjectStore> = Arc::new(WholeWrites(BlobcaskObjectStore::new(store)));
    opendal::Operator::new(object_store_opendal::ObjectStoreBuilder::new(objects))
}

/// [`BlobcaskObjectStore`] without multipart uploads.
#[derive(Debug)]
struct WholeWrites(BlobcaskObjectStore);

impl fmt::Display for WholeWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobcaskObjectStore (for OpenDAL)")
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for WholeWrites {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.0.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(object_store::Error::NotSupported {
            source: format!(
                "{location}: OpenDAL writers written in more than one call are refused: \
                 object_store_opendal reorders their parts; write the object in one call"
            )
            .into(),
        })
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.0.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.0.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.0.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.0.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.0.rename_opts(from, to, options).await
    }
}
