//! Writes go to the remote first; what the cache held of the object is
//! forgotten after (whether or not the remote reported success: a write
//! that failed late may still have landed).

use std::sync::Arc;

use super::object_store;
use async_trait::async_trait;
use object_store::path::Path;
use object_store::{MultipartUpload, PutResult, Result, UploadPart};

use super::Inner;

/// A remote multipart upload whose completion forgets the cached object.
#[derive(Debug)]
pub(crate) struct CachedUpload {
    pub upload: Box<dyn MultipartUpload>,
    pub tier: Arc<Inner>,
    pub location: Path,
}

#[async_trait]
impl MultipartUpload for CachedUpload {
    fn put_part(&mut self, data: object_store::PutPayload) -> UploadPart {
        self.upload.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let done = self.upload.complete().await;
        self.tier.forget(&self.location).await;
        done
    }

    async fn abort(&mut self) -> Result<()> {
        self.upload.abort().await
    }
}
