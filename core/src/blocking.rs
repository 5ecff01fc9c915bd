//! The same store, with blocking calls, for code without an async runtime.
//! Each call drives the async one to completion on the calling thread;
//! small reads and writes skip the engine thread and use `pread`/`pwrite`
//! on the calling thread.

use std::path::Path;
use std::sync::Arc;

use crate::io::block_on;
use bytes::Bytes;

use crate::io::IoEngine;
use crate::{ObjectInfo, Options, PutOptions, ReadOptions, Result, Stats};

/// Blocking handle over [`crate::Store`]; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: crate::Store,
}

/// Blocking handle over [`crate::Upload`].
#[derive(Debug)]
pub struct Upload {
    inner: crate::Upload,
}

impl From<crate::Store> for Store {
    /// A blocking handle on an open async store (they share the engine).
    fn from(inner: crate::Store) -> Self {
        Store { inner }
    }
}

impl Store {
    /// See [`crate::Store::open`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        block_on(crate::Store::open(path, options)).map(|inner| Store { inner })
    }
    /// See [`crate::Store::open_with_engine`].
    pub fn open_with_engine(engine: Arc<dyn IoEngine>, options: Options) -> Result<Store> {
        block_on(crate::Store::open_with_engine(engine, options)).map(|inner| Store { inner })
    }
    /// The async handle sharing this store.
    pub fn as_async(&self) -> &crate::Store {
        &self.inner
    }
    /// See [`crate::Store::list_uploads`].
    pub fn list_uploads(&self) -> Vec<crate::UploadInfo> {
        self.inner.list_uploads()
    }
    /// See [`crate::Store::abort_upload`].
    pub fn abort_upload(&self, id: u64) -> Result<()> {
        self.inner.abort_upload(id)
    }
    /// See [`crate::Store::grow`].
    pub fn grow(&self, capacity: u64) -> Result<()> {
        block_on(self.inner.grow(capacity))
    }
    /// See [`crate::Store::put`].
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl Into<Bytes>) -> Result<ObjectInfo> {
        self.inner
            .put_blocking(key.as_ref(), value.into(), PutOptions::default())
    }
    /// See [`crate::Store::put_with`].
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl Into<Bytes>,
        options: PutOptions,
    ) -> Result<ObjectInfo> {
        self.inner.put_blocking(key.as_ref(), value.into(), options)
    }
    /// See [`crate::Store::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Bytes> {
        self.read(key, 0, u64::MAX)
    }
    /// See [`crate::Store::read`].
    pub fn read(&self, key: impl AsRef<[u8]>, offset: u64, len: u64) -> Result<Bytes> {
        self.read_with(key, offset, len, ReadOptions::default())
    }
    /// See [`crate::Store::read_with`].
    pub fn read_with(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
        options: ReadOptions,
    ) -> Result<Bytes> {
        self.inner.read_blocking(key.as_ref(), offset, len, options)
    }
    /// See [`crate::Store::stat`].
    pub fn stat(&self, key: impl AsRef<[u8]>) -> Result<ObjectInfo> {
        block_on(self.inner.stat(key))
    }
    /// See [`crate::Store::delete`].
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        block_on(self.inner.delete(key))
    }
    /// See [`crate::Store::contains`].
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.inner.contains(key)
    }
    /// See [`crate::Store::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
    /// See [`crate::Store::begin_upload`].
    pub fn begin_upload(&self, key: impl AsRef<[u8]>, size: u64) -> Result<Upload> {
        block_on(self.inner.begin_upload(key, size)).map(|inner| Upload { inner })
    }
    /// See [`crate::Store::list`] (listing never blocks on I/O).
    pub fn list(&self, prefix: impl AsRef<[u8]>) -> Result<crate::Keys> {
        self.inner.list(prefix)
    }
    /// See [`crate::Store::keys`].
    pub fn keys(&self) -> Result<crate::Keys> {
        self.inner.keys()
    }
    /// See [`crate::Store::range`].
    pub fn range<K: AsRef<[u8]>>(
        &self,
        range: impl std::ops::RangeBounds<K>,
    ) -> Result<crate::Keys> {
        self.inner.range(range)
    }
    /// See [`crate::Store::bulk_load`].
    pub fn bulk_load<I, K, V>(&self, items: I) -> Result<crate::LoadReport>
    where
        I: IntoIterator<Item = (K, V)>,
        I::IntoIter: Send,
        K: AsRef<[u8]>,
        V: Into<Bytes>,
    {
        block_on(self.inner.bulk_load(items))
    }

    /// See [`crate::Store::bulk_load_with`].
    pub fn bulk_load_with<I, K, V>(
        &self,
        items: I,
        opts: crate::BulkOptions,
    ) -> Result<crate::LoadReport>
    where
        I: IntoIterator<Item = (K, V)>,
        I::IntoIter: Send,
        K: AsRef<[u8]>,
        V: Into<Bytes>,
    {
        block_on(self.inner.bulk_load_with(items, opts))
    }
    /// See [`crate::Store::scrub`].
    pub fn scrub(&self) -> Result<crate::ScrubReport> {
        block_on(self.inner.scrub())
    }
    /// See [`crate::Store::compact`].
    pub fn compact(&self) -> Result<crate::CompactReport> {
        block_on(self.inner.compact())
    }
    /// See [`crate::Store::backup`].
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<crate::BackupReport> {
        block_on(self.inner.backup(dest))
    }
    /// See [`crate::Store::backup_with_progress`].
    pub fn backup_with_progress(
        &self,
        dest: impl AsRef<Path>,
        progress: &crate::BackupProgress,
    ) -> Result<crate::BackupReport> {
        block_on(self.inner.backup_with_progress(dest, progress))
    }
    /// See [`crate::Store::stats`].
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }
    /// See [`crate::Store::sync`].
    pub fn sync(&self) -> Result<()> {
        block_on(self.inner.sync())
    }
    /// See [`crate::Store::close`].
    pub fn close(&self) -> Result<()> {
        block_on(self.inner.close())
    }
    /// See [`crate::Store::batch`].
    pub fn batch(&self) -> Batch {
        Batch {
            inner: self.inner.batch(),
        }
    }
    /// See [`crate::Store::get_many`]; here the keys are read one after
    /// another on the calling thread.
    pub fn get_many<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        keys.into_iter()
            .map(|k| match self.get(k) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == crate::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            })
            .collect()
    }
}

/// Blocking handle over [`crate::Batch`]: the same operations, and a
/// [`commit`](Batch::commit) that blocks.
#[derive(Debug)]
pub struct Batch {
    inner: crate::Batch,
}

impl Batch {
    /// See [`crate::Batch::put`].
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl Into<Bytes>) -> &mut Self {
        self.inner.put(key, value);
        self
    }
    /// See [`crate::Batch::put_with`].
    pub fn put_with(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl Into<Bytes>,
        options: PutOptions,
    ) -> &mut Self {
        self.inner.put_with(key, value, options);
        self
    }
    /// See [`crate::Batch::delete`].
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.inner.delete(key);
        self
    }
    /// See [`crate::Batch::delete_if_version`].
    pub fn delete_if_version(&mut self, key: impl AsRef<[u8]>, version: u64) -> &mut Self {
        self.inner.delete_if_version(key, version);
        self
    }
    /// See [`crate::Batch::len`].
    pub fn len(&self) -> usize {
        self.inner.len()
    }
    /// See [`crate::Batch::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
    /// See [`crate::Batch::commit`].
    pub fn commit(&mut self) -> Result<Vec<crate::BatchOutcome>> {
        block_on(self.inner.commit())
    }
}

impl Upload {
    /// See [`crate::Upload::id`].
    pub fn id(&self) -> u64 {
        self.inner.id()
    }
    /// See [`crate::Upload::write_part`].
    pub fn write_part(&self, offset: u64, bytes: impl Into<Bytes>) -> Result<()> {
        block_on(self.inner.write_part(offset, bytes))
    }
    /// See [`crate::Upload::write_part_checked`].
    pub fn write_part_checked(
        &self,
        offset: u64,
        bytes: impl Into<Bytes>,
        crc32c: u32,
    ) -> Result<()> {
        block_on(self.inner.write_part_checked(offset, bytes, crc32c))
    }
    /// See [`crate::Upload::commit`].
    pub fn commit(&self) -> Result<ObjectInfo> {
        block_on(self.inner.commit())
    }
    /// See [`crate::Upload::commit_with`].
    pub fn commit_with(&self, options: PutOptions) -> Result<ObjectInfo> {
        block_on(self.inner.commit_with(options))
    }
    /// See [`crate::Upload::abort`].
    pub fn abort(&self) -> Result<()> {
        block_on(self.inner.abort())
    }
}
