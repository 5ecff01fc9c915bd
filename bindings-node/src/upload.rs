//! `Upload`: a multipart upload (parts, commit, abort), and `crc32c`, the
//! checksum its parts take.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use engine::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{offset_of, put_options, PutConditions};
use crate::errors::{invalid, js_err};
use crate::host;
use crate::records::{js, Js};
/// A multipart upload; see `Store.beginUpload`.
#[napi]
pub struct Upload {
    /// The engine's handle, shared with the write and commit tasks: a
    /// commit while a part is being written is refused (INVALID_ARGUMENT)
    /// and leaves the upload as it was; once it ended, `writePart` and
    /// `commit` reject with CLOSED. An ended handle holds no store.
    pub(crate) inner: Arc<engine::Upload>,
    /// Its store's `closing`: set, `writePart` and `commit` reject with
    /// CLOSED.
    pub(crate) store_closing: Arc<AtomicBool>,
}

#[napi]
impl Upload {
    /// This upload's id in `listUploads` (for `abortUpload`); still
    /// readable once committed or aborted.
    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.inner.id() as f64
    }

    /// Writes one part at `offset` (a multiple of 4096; parts end on a
    /// multiple of 4096 or at the object's end), in any order, concurrently.
    /// With `crc32c` (the CRC32C of `data`, as `crc32c()` computes it) the
    /// bytes are checked before anything is written; a mismatch rejects
    /// with 'INVALID_ARGUMENT'.
    /// The part is copied before `writePart` returns: the caller may reuse
    /// its Buffer at once.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_part(
        &self,
        env: &Env,
        offset: f64,
        data: Uint8Array,
        crc32c: Option<f64>,
    ) -> Result<AsyncBlock<()>> {
        if self.store_closing.load(Ordering::Acquire) {
            return Err(host::closed());
        }
        let offset = offset_of(offset, "offset")?;
        let crc = match crc32c {
            None => None,
            Some(c) if c.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&c) => Some(c as u32),
            Some(_) => return Err(invalid("crc32c must be an integer from 0 to 2^32 - 1")),
        };
        let data = Bytes::copy_from_slice(&data);
        let up = self.inner.clone();
        AsyncBlockBuilder::new(async move {
            match crc {
                Some(c) => up.write_part_checked(offset, data, c).await,
                None => up.write_part(offset, data).await,
            }
            .map_err(js_err)
        })
        .build(env)
    }

    /// Makes the object visible atomically; `{ ifAbsent, ifVersion, ttl }`
    /// as for `put`. A bad option rejects and leaves the upload as it was,
    /// as does a commit while a `writePart` of this upload is still under
    /// way (INVALID_ARGUMENT: commit once every part has resolved); a
    /// commit the store refuses (a condition not met, bytes never written)
    /// ends it. Once it ended, `writePart` and `commit` reject with CLOSED.
    #[napi(ts_return_type = "Promise<ObjectInfo>")]
    pub async fn commit(&self, conditions: Option<PutConditions>) -> Result<Js> {
        if self.store_closing.load(Ordering::Acquire) {
            return Err(host::closed());
        }
        let options = put_options(conditions)?;
        let up = self.inner.clone();
        up.commit_with(options)
            .await
            .map(|i| js(&i))
            .map_err(js_err)
    }

    /// Abandons the upload and frees its space (a no-op once it ended).
    #[napi]
    pub async fn abort(&self) -> Result<()> {
        self.inner.clone().abort().await.map_err(js_err)
    }
}

/// CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes.
#[napi(js_name = "crc32c")]
pub fn crc32c_of(data: Uint8Array) -> u32 {
    ::crc32c::crc32c(&data)
}
