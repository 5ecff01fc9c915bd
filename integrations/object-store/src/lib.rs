//! [`object_store::ObjectStore`] over a [`blobcask::Store`], so the Rust
//! data tools that read storage through `object_store` (DataFusion, Polars,
//! delta-rs, lance, slatedb) read and write blobcask, and code written
//! against the trait moves to an S3-compatible cluster by changing the line
//! that builds the store.
//!
//! ```no_run
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
//! * the e-tag is the object's version, `last_modified` its commit time;
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
//! [`CachedObjectStore`] (module [`cached`]) turns a blobcask store into a
//! persistent, verified local tier in front of any other `ObjectStore`.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use blobcask::{ErrorKind, ObjectInfo, PutMode as StorePutMode, Store, PART_ALIGN};
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    Attribute, CopyMode, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result, UploadPart,
};
use parking_lot::Mutex;

/// How a completed multipart upload is cut into blobcask upload parts
/// (a multiple of `PART_ALIGN`), and how many are written at once.
const SEGMENT: usize = 4 << 20;
const WRITES_IN_FLIGHT: usize = 4;

/// `get_ranges` reads ranges at most this far apart as one store read (and
/// returns slices of it). Measured (`benches/log/2026-11-23-get-ranges.md`):
/// adjacent ranges merged take 0.71x the time of separate concurrent
/// reads, 4 KiB gaps 0.96x, 8 KiB gaps 0.99x, 16 KiB gaps 1.34x.
const COALESCE_GAP: u64 = 4 << 10;

/// The name errors carry as their store.
const STORE: &str = "blobcask";

/// An `object_store::ObjectStore` over one blobcask [`Store`].
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

pub mod cached;
pub use crate::cached::{CachedObjectStore, CachedObjectStoreBuilder, Freshness, TierStats};

#[cfg(feature = "opendal")]
mod opendal;
#[cfg(feature = "opendal")]
pub use crate::opendal::opendal_operator;

impl fmt::Display for BlobcaskObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobcaskObjectStore")
    }
}

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

fn e_tag(version: u64) -> String {
    version.to_string()
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

impl BlobcaskObjectStore {
    async fn put_bytes(
        &self,
        location: &Path,
        value: Bytes,
        mode: StorePutMode,
    ) -> Result<PutResult> {
        let info = self
            .store
            .put_with(key(location), value, mode.into())
            .await
            .map_err(|e| error(location, e))?;
        Ok(PutResult {
            e_tag: Some(e_tag(info.version)),
            version: None,
        })
    }
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
                match tag.parse::<u64>() {
                    Ok(version) => StorePutMode::Update(version),
                    Err(_) => {
                        return Err(object_store::Error::Precondition {
                            path: location.to_string(),
                            source: format!("e-tag {tag:?} is not a blobcask version").into(),
                        })
                    }
                }
            }
        };
        self.put_bytes(location, payload.into(), mode).await
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
                if *v != e_tag(info.version) {
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
            return Ok(GetResult {
                payload: GetResultPayload::Stream(payload),
                meta,
                range,
                attributes: Default::default(),
            });
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
        self.list_from(prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.list_from(prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let dir = dir_prefix(prefix);
        let mut result = ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
        };
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
        self.put_bytes(to, value, mode).await.map(drop)
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

impl BlobcaskObjectStore {
    fn list_from(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let dir = dir_prefix(prefix);
        let keys = match offset {
            Some(after) => self.store.list_after(&dir, key(after)),
            None => self.store.list(&dir),
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
        Ok(PutResult {
            e_tag: Some(e_tag(info.version)),
            version: None,
        })
    }

    async fn abort(&mut self) -> Result<()> {
        self.parts.clear();
        Ok(())
    }
}

/// Cuts the object (the chunks in order) into upload parts at multiples of
/// `PART_ALIGN`: a chunk that already is one part is passed on without a
/// copy, others are joined.
fn segments(chunks: Vec<Bytes>) -> Vec<(u64, Bytes)> {
    let align = PART_ALIGN as usize;
    let mut out = Vec::new();
    let mut offset = 0u64;
    let mut pending = BytesMut::new();
    for mut chunk in chunks {
        if pending.is_empty() && chunk.len() >= align {
            // Pass the aligned prefix straight through.
            let whole = chunk.len() - chunk.len() % align;
            let head = chunk.split_to(whole);
            out.push((offset, head));
            offset += whole as u64;
        }
        while !chunk.is_empty() {
            let room = SEGMENT - pending.len();
            let take = room.min(chunk.len());
            pending.extend_from_slice(&chunk.split_to(take));
            if pending.len() == SEGMENT {
                let len = pending.len() as u64;
                out.push((offset, pending.split().freeze()));
                offset += len;
            }
        }
        // Flush what is aligned so a later large chunk can pass uncopied.
        let whole = pending.len() - pending.len() % align;
        if whole > 0 && whole == pending.len() {
            out.push((offset, pending.split().freeze()));
            offset += whole as u64;
        }
    }
    if !pending.is_empty() {
        out.push((offset, pending.freeze()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(parts: &[(u64, Bytes)]) -> Vec<u8> {
        let mut all = Vec::new();
        for (off, b) in parts {
            assert_eq!(*off, all.len() as u64, "parts are contiguous");
            all.extend_from_slice(b);
        }
        all
    }

    #[test]
    fn segments_are_aligned_contiguous_and_keep_every_byte() {
        let align = PART_ALIGN as usize;
        for sizes in [
            vec![5_300_002usize; 5],
            vec![1, 2, 3],
            vec![align, align, 7],
            vec![align + 1, align - 1, 3 * align],
            vec![SEGMENT * 2 + 5, 10, SEGMENT],
        ] {
            let chunks: Vec<Bytes> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| Bytes::from((0..n).map(|j| (i * 31 + j) as u8).collect::<Vec<_>>()))
                .collect();
            let expected: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
            let parts = segments(chunks);
            assert_eq!(join(&parts), expected, "sizes {sizes:?}");
            let last = parts.len() - 1;
            for (i, (off, b)) in parts.iter().enumerate() {
                assert_eq!(off % PART_ALIGN, 0);
                assert!(
                    i == last || b.len() % align == 0,
                    "sizes {sizes:?} part {i}"
                );
            }
        }
    }
}
