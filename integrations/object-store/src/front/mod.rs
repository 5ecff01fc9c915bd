//! `object_store::ObjectStore` for [`BlobcaskObjectStore`], written once
//! for every supported object_store release: this file is compiled once per
//! enabled version (`crate::v013`, `crate::v014`), `object_store` being that
//! version's crate and `compat` its shim for where the releases differ.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use blobcask::{ErrorKind, ObjectInfo, PutMode as StorePutMode, Store};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use parking_lot::Mutex;

use super::compat::{self, e_tag};
use super::object_store;
use crate::segments::segments;
use crate::BlobcaskObjectStore;
use object_store::path::Path;
use object_store::{
    Attribute, CopyMode, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result, UploadPart,
};

/// How many upload parts a completed multipart upload writes at once.
const WRITES_IN_FLIGHT: usize = 4;

/// `get_ranges` reads ranges at most this far apart as one store read (and
/// returns slices of it). Measured (`benches/log/2026-11-23-get-ranges.md`):
/// adjacent ranges merged take 0.71x the time of separate concurrent
/// reads, 4 KiB gaps 0.96x, 8 KiB gaps 0.99x, 16 KiB gaps 1.34x.
const COALESCE_GAP: u64 = 4 << 10;

/// The name errors carry as their store.
const STORE: &str = "blobcask";

/// Maps a blobcask error on its kind; the message keeps the key and cause.
fn error(path: &Path, e: blobcask::Error) -> object_store::Error {
    let path = path.to_string();
    match e.kind() {
        ErrorKind::NotFound => object_store::Error::NotFound {
            path,
            source: Box::new(e),
        },
        ErrorKind::AlreadyExists => object_store::Error::AlreadyExists {
            path,
            source: Box::new(e),
        },
        ErrorKind::VersionMismatch => object_store::Error::Precondition {
            path,
            source: Box::new(e),
        },
        ErrorKind::Unsupported => object_store::Error::NotSupported {
            source: Box::new(e),
        },
        _ => generic(e),
    }
}

fn generic(e: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: Box::new(e),
    }
}

fn key(path: &Path) -> &[u8] {
    path.as_ref().as_bytes()
}

fn meta(location: Path, info: &ObjectInfo) -> ObjectMeta {
    object_meta(location, info.size, info.version, info.created)
}

fn object_meta(
    location: Path,
    size: u64,
    version: u64,
    created: std::time::SystemTime,
) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: DateTime::<Utc>::from(created),
        size,
        e_tag: Some(e_tag(version)),
        // blobcask keeps one version per key: nothing older to ask for.
        version: None,
    }
}

/// The key prefix of everything under `prefix` (a directory, as
/// `object_store` lists: `a/b` covers `a/b/c`, not `a/bc`).
fn dir_prefix(prefix: Option<&Path>) -> String {
    match prefix {
        Some(p) if !p.as_ref().is_empty() => {
            format!("{}{}", p.as_ref(), object_store::path::DELIMITER)
        }
        _ => String::new(),
    }
}

/// A listed key as a path; keys written through other APIs that are not
/// valid paths are left out of listings.
fn listed(entry: blobcask::ListEntry) -> Option<ObjectMeta> {
    let text = std::str::from_utf8(&entry.key).ok()?;
    let location = Path::parse(text).ok()?;
    if location.as_ref() != text {
        return None;
    }
    Some(object_meta(
        location,
        entry.size,
        entry.version,
        entry.created,
    ))
}

/// Attributes are not stored, so a put carrying any is refused, except the
/// `content-size` metadata OpenDAL's object_store service adds to every
/// single-shot write when it equals the value's length: the object's size
/// already says it.
fn no_attributes(attributes: &object_store::Attributes, len: Option<usize>) -> Result<()> {
    let implied = |(attribute, value): (&Attribute, &object_store::AttributeValue)| {
        matches!(attribute, Attribute::Metadata(k) if k == "content-size")
            && len.is_some_and(|n| value.as_ref() == n.to_string())
    };
    if attributes.iter().all(implied) {
        return Ok(());
    }
    Err(object_store::Error::NotImplemented {
        operation: "put with attributes (blobcask stores none)".into(),
        implementer: "BlobcaskObjectStore".into(),
    })
}

async fn put_bytes(
    store: &Store,
    location: &Path,
    value: Bytes,
    mode: StorePutMode,
) -> Result<PutResult> {
    let info = store
        .put_with(key(location), value, mode.into())
        .await
        .map_err(|e| error(location, e))?;
    Ok(compat::put_result(Some(e_tag(info.version)), None))
}

#[async_trait]
impl ObjectStore for BlobcaskObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        no_attributes(&opts.attributes, Some(payload.content_length()))?;
        let mode = match opts.mode {
            PutMode::Overwrite => StorePutMode::Overwrite,
            PutMode::Create => StorePutMode::Create,
            PutMode::Update(v) => {
                let tag = v.e_tag.ok_or_else(|| object_store::Error::Precondition {
                    path: location.to_string(),
                    source: "a conditional update needs the e-tag it replaces".into(),
                })?;
                match compat::version_of_e_tag(&tag) {
                    Some(version) => StorePutMode::Update(version),
                    None => {
                        return Err(object_store::Error::Precondition {
                            path: location.to_string(),
                            source: format!("e-tag {tag:?} is not a blobcask version").into(),
                        })
                    }
                }
            }
        };
        put_bytes(&self.store, location, payload.into(), mode).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        no_attributes(&opts.attributes, None)?;
        Ok(Box::new(BlobcaskUpload {
            store: self.store.clone(),
            location: location.clone(),
            parts: Vec::new(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let k = key(location);
        for _ in 0..ATTEMPTS {
            let info = self.store.stat(k).await.map_err(|e| error(location, e))?;
            let meta = meta(location.clone(), &info);
            options.check_preconditions(&meta)?;
            if let Some(v) = &options.version {
                if *v != info.version.to_string() {
                    return Err(object_store::Error::NotFound {
                        path: location.to_string(),
                        source: format!("version {v} is not kept (blobcask keeps the latest)")
                            .into(),
                    });
                }
            }
            let range = match &options.range {
                Some(r) => r.as_range(info.size).map_err(generic)?,
                None => 0..info.size,
            };
            let data = if options.head {
                Bytes::new()
            } else {
                match read_version(&self.store, k, info.version, range.clone()).await {
                    Ok(bytes) => bytes,
                    // Replaced between the look and the read: decide the
                    // preconditions and range again on the new version.
                    Err(Miss::Moved) => continue,
                    Err(Miss::Failed(e)) => return Err(error(location, e)),
                }
            };
            let payload = stream::once(async move { Ok(data) }).boxed();
            return Ok(compat::get_result(
                GetResultPayload::Stream(payload),
                meta,
                range,
                Default::default(),
            ));
        }
        Err(kept_changing(location))
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let k = key(location);
        // One version for all ranges: each read is of the version looked
        // up, and all are made again if a commit replaced it meanwhile.
        for _ in 0..ATTEMPTS {
            let info = self.store.stat(k).await.map_err(|e| error(location, e))?;
            for r in ranges {
                if r.start > r.end || r.end > info.size {
                    return Err(generic(blobcask_range_error(r, info.size)));
                }
            }
            let got = object_store::coalesce_ranges(
                ranges,
                |r| read_version(&self.store, k, info.version, r),
                COALESCE_GAP,
            )
            .await;
            match got {
                Ok(got) => return Ok(got),
                Err(Miss::Moved) => continue,
                Err(Miss::Failed(e)) => return Err(error(location, e)),
            }
        }
        Err(kept_changing(location))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let store = self.store.clone();
        locations
            .and_then(move |location| {
                let store = store.clone();
                async move {
                    match store.delete(key(&location)).await {
                        // Deleting what is not there succeeds, as on S3.
                        Ok(()) => Ok(location),
                        Err(e) if e.kind() == ErrorKind::NotFound => Ok(location),
                        Err(e) => Err(error(&location, e)),
                    }
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        list_from(&self.store, prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        list_from(&self.store, prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let dir = dir_prefix(prefix);
        let mut result = compat::list_result(Vec::new(), Vec::new());
        let mut keys = self
            .store
            .list(&dir)
            .map_err(|e| error(prefix.unwrap_or(&Path::default()), e))?;
        while let Some(entry) = keys.next() {
            let entry = entry.map_err(|e| error(prefix.unwrap_or(&Path::default()), e))?;
            let Some(meta) = listed(entry) else { continue };
            let rest = &meta.location.as_ref()[dir.len()..];
            if rest.is_empty() {
                continue;
            }
            match rest.find(object_store::path::DELIMITER) {
                None => result.objects.push(meta),
                Some(at) => {
                    let common = &meta.location.as_ref()[..dir.len() + at];
                    // A leading part of a valid path, cut at a delimiter:
                    // valid as it is (no re-encoding).
                    let common_path = Path::parse(common)
                        .map_err(|e| object_store::Error::InvalidPath { source: e })?;
                    result.common_prefixes.push(common_path);
                    // Skip everything under it, within this listing (a new
                    // one would read a hash store's tuple blocks again):
                    // those keys sort before `common` followed by the byte
                    // after '/'.
                    let mut past = common.as_bytes().to_vec();
                    past.push(b'/' + 1);
                    keys.seek(&past);
                }
            }
        }
        Ok(result)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let mode = match options.mode {
            CopyMode::Overwrite => StorePutMode::Overwrite,
            CopyMode::Create => StorePutMode::Create,
        };
        let value = self
            .store
            .get(key(from))
            .await
            .map_err(|e| error(from, e))?;
        put_bytes(&self.store, to, value, mode).await.map(drop)
    }
}

/// How many times a read starts again because the object was replaced
/// while it ran, before giving up.
const ATTEMPTS: usize = 64;

/// Why reading one version failed.
enum Miss {
    /// The key holds another version now (replaced or deleted meanwhile).
    Moved,
    Failed(blobcask::Error),
}

/// `range` of `key`'s version `version`, or `Moved` if the key has moved on
/// (checked before the bytes are used: a shorter new version would come
/// back short).
async fn read_version(
    store: &Store,
    k: &[u8],
    version: u64,
    range: Range<u64>,
) -> std::result::Result<Bytes, Miss> {
    match store
        .read_with_info(k, range.start, range.end - range.start)
        .await
    {
        Ok((info, bytes)) if info.version == version => Ok(bytes),
        Ok(_) => Err(Miss::Moved),
        // A read of a range the new version does not have, or of a deleted
        // key, fails: that is the object moving, not an error of the call.
        Err(e) => match store.stat(k).await {
            Ok(now) if now.version != version => Err(Miss::Moved),
            Err(gone) if gone.kind() == ErrorKind::NotFound => Err(Miss::Moved),
            _ => Err(Miss::Failed(e)),
        },
    }
}

fn kept_changing(location: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: format!(
            "{location} was replaced during each of {ATTEMPTS} attempts to read one version of it"
        )
        .into(),
    }
}

fn blobcask_range_error(r: &Range<u64>, size: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "range {}..{} is outside the {size}-byte object",
            r.start, r.end
        ),
    )
}

fn list_from(
    store: &Store,
    prefix: Option<&Path>,
    offset: Option<&Path>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    let dir = dir_prefix(prefix);
    let keys = match offset {
        Some(after) => store.list_after(&dir, key(after)),
        None => store.list(&dir),
    };
    let at = prefix.cloned().unwrap_or_default();
    match keys {
        Ok(keys) => stream::iter(keys.filter_map(move |entry| match entry {
            Ok(entry) => listed(entry).map(Ok),
            Err(e) => Some(Err(error(&at, e))),
        }))
        .boxed(),
        Err(e) => stream::once(async move { Err(error(&at, e)) }).boxed(),
    }
}

/// A multipart upload: parts held until `complete` (their sizes are free,
/// a blobcask upload's size is fixed when it begins).
#[derive(Debug)]
struct BlobcaskUpload {
    store: Store,
    location: Path,
    /// One slot per `put_part`, in part order, filled when its future runs.
    parts: Vec<Arc<Mutex<Option<Vec<Bytes>>>>>,
}

#[async_trait]
impl MultipartUpload for BlobcaskUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let slot = Arc::new(Mutex::new(None));
        self.parts.push(slot.clone());
        Box::pin(async move {
            *slot.lock() = Some(data.into_iter().collect());
            Ok(())
        })
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let mut chunks = Vec::new();
        for (i, part) in std::mem::take(&mut self.parts).into_iter().enumerate() {
            let filled = part.lock().take().ok_or_else(|| {
                generic(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("part {i} was never awaited"),
                ))
            })?;
            chunks.extend(filled.into_iter().filter(|c| !c.is_empty()));
        }
        let size: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let k = key(&self.location);
        let upload = self
            .store
            .begin_upload(k, size)
            .await
            .map_err(|e| error(&self.location, e))?;
        let writes = segments(chunks).into_iter().map(|(offset, bytes)| {
            let upload = &upload;
            async move { upload.write_part(offset, bytes).await }
        });
        stream::iter(writes)
            .buffer_unordered(WRITES_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await
            .map_err(|e| error(&self.location, e))?;
        let info = upload
            .commit()
            .await
            .map_err(|e| error(&self.location, e))?;
        Ok(compat::put_result(Some(e_tag(info.version)), None))
    }

    async fn abort(&mut self) -> Result<()> {
        self.parts.clear();
        Ok(())
    }
}
