//! `Store`: the class with every call that reaches the engine, its options
//! and path argument.

use engine::blocking;
use engine::{Bytes, ErrorKind, IndexKind, IoEngineKind, Options};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::blob::Blob;
use crate::bulk_load::{LoadSource, LOAD_QUEUE, PROGRESS_INTERVAL};
use crate::convert::{
    byte_count, bytes_out, durability_of, fraction_of, key_of, put_options, record_out, value_of,
    writable_buffer,
};
use crate::errors::{error_class, path_err, py_err, py_err_in, type_name, StorePath};
use crate::keys::KeyIterator;
use crate::upload::Upload;
/// An open blob store. Thread-safe; every I/O call releases the GIL.
///
/// `blobcask.Store` subclasses it, adding the `MutableMapping` methods
/// that are plain Python over these (views, `pop`, `update`, ...).
#[pyclass(frozen, subclass, module = "blobcask._native", name = "Store")]
pub(crate) struct Store {
    pub(crate) inner: blocking::Store,
    /// The path it was opened at, named by its I/O errors.
    pub(crate) path: StorePath,
}

/// The store options. `capacity`, `index`, `inline_threshold` and
/// `max_capacity` are passed to the engine only when given: left out, an
/// existing store keeps what it has stored (a new one gets the defaults).
fn options(
    capacity: Option<u64>,
    index: Option<&str>,
    inline_threshold: Option<usize>,
    max_capacity: Option<&Bound<'_, PyAny>>,
    io_engine: &str,
    direct_io: bool,
    create: bool,
) -> PyResult<Options> {
    let mut o = Options::new();
    if let Some(c) = capacity {
        o = o.capacity(c);
    }
    if let Some(t) = inline_threshold {
        o = o.inline_threshold(t);
    }
    if let Some(m) = max_capacity {
        o = o.max_capacity(byte_count(m, "max_capacity")?);
    }
    if let Some(i) = index {
        o = o.index(i.parse::<IndexKind>().map_err(py_err)?);
    }
    let engine = io_engine.parse::<IoEngineKind>().map_err(py_err)?;
    Ok(o.io_engine(engine).direct_io(direct_io).create(create))
}

/// A path argument as `open()` takes one: `str`, `bytes` (the file
/// system's own bytes) or an `os.PathLike` giving either; anything else is
/// `os.fspath`'s `TypeError`; a NUL byte in it, as `open()` says too, an
/// `InvalidArgumentError` (a `ValueError`).
fn path_arg(obj: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let path = obj.py().import("os")?.call_method1("fspath", (obj,))?;
    let path: std::path::PathBuf = match path.cast::<PyBytes>() {
        Ok(b) => std::ffi::OsStr::from_bytes(b.as_bytes()).into(),
        Err(_) => path.extract()?,
    };
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(error_class(
            "InvalidArgumentError",
            format!("INVALID_ARGUMENT: embedded null byte in the path {path:?}"),
        ));
    }
    Ok(path)
}

/// `TypeError` unless `progress` is None or callable.
fn check_callable(progress: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match progress.filter(|p| !p.is_callable()) {
        Some(p) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "progress must be callable, not {}",
            type_name(p)
        ))),
        None => Ok(()),
    }
}

impl Store {
    /// Maps an engine error of a call on this store (an I/O error names
    /// the store's file).
    pub(crate) fn fail(&self) -> impl Fn(engine::Error) -> PyErr + '_ {
        py_err_in(Some(&self.path))
    }

    /// `ClosedError` once `close()` has run, for the calls whose engine
    /// counterparts cannot fail (`contains`, `len`, `stats`).
    fn check_open(&self) -> PyResult<()> {
        if self.inner.is_closed() {
            return Err(error_class(
                "ClosedError",
                "CLOSED: the store is closed".into(),
            ));
        }
        Ok(())
    }
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (path, *, capacity=None, index=None, inline_threshold=None, max_capacity=None, io_engine="auto", direct_io=true, create=true, create_new=false, read_only=false, salvage=false, cache_bytes=None, cache_fraction=None, warm_up=true, durability="sync", max_delay=None, eviction="none"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        capacity: Option<u64>,
        index: Option<&str>,
        inline_threshold: Option<usize>,
        max_capacity: Option<&Bound<'_, PyAny>>,
        io_engine: &str,
        direct_io: bool,
        create: bool,
        create_new: bool,
        read_only: bool,
        salvage: bool,
        cache_bytes: Option<&Bound<'_, PyAny>>,
        cache_fraction: Option<&Bound<'_, PyAny>>,
        warm_up: bool,
        durability: &str,
        max_delay: Option<&Bound<'_, PyAny>>,
        eviction: &str,
    ) -> PyResult<Self> {
        let path: StorePath = path_arg(path)?.into();
        let mut opts = options(
            capacity,
            index,
            inline_threshold,
            max_capacity,
            io_engine,
            direct_io,
            create,
        )?
        .create_new(create_new)
        .read_only(read_only)
        .salvage(salvage);
        match (cache_bytes, cache_fraction) {
            (Some(_), Some(_)) => {
                return Err(error_class(
                    "InvalidArgumentError",
                    "INVALID_ARGUMENT: give cache_bytes or cache_fraction, not both".to_owned(),
                ))
            }
            (Some(c), None) => opts = opts.cache_bytes(byte_count(c, "cache_bytes")?),
            (None, Some(f)) => opts = opts.cache_fraction(fraction_of(f, "cache_fraction")?),
            (None, None) => {}
        }
        opts = opts.warm_up(warm_up);
        opts = opts.durability(durability_of(durability, max_delay)?);
        opts = opts.eviction(eviction.parse::<engine::Eviction>().map_err(py_err)?);
        let inner = py
            .detach(|| blocking::Store::open(&path, opts))
            .map_err(|e| path_err(e, &path))?;
        Ok(Store { inner, path })
    }

    /// Stores `value` under `key` (create or replace); durable on return.
    /// `if_absent=True` creates only (`AlreadyExistsError` if present);
    /// `if_version=v` replaces only version `v` (`VersionMismatchError`).
    /// `ttl` (seconds as an int or float, or a `datetime.timedelta`) makes
    /// the object expire that long after its commit; without it the object
    /// never expires (replacing one that would have).
    #[pyo3(signature = (key, value, *, if_absent=false, if_version=None, ttl=None))]
    fn put<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        if_absent: bool,
        if_version: Option<u64>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = put_options(if_absent, if_version, ttl)?;
        let (key, value) = (key_of(key)?, value_of(value)?);
        let s = &self.inner;
        py.detach(|| s.put_with(&key, value, options))
            .map_err(self.fail())
            .and_then(|r| record_out(py, &r))
    }

    /// The whole object as `bytes`, or `default` when `key` has no object
    /// (the `Mapping.get` contract; `store[key]`, `read`, `get_blob` raise
    /// NotFoundError instead). A copy of the engine's buffer, made with the
    /// GIL held; `get_blob` hands over the buffer itself.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = key_of(key)?;
        let s = &self.inner;
        match py.detach(|| s.get(&key)) {
            Ok(b) => Ok(bytes_out(py, &b).into_any()),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Ok(default.unwrap_or_else(|| py.None().into_bound(py)))
            }
            Err(e) => Err(self.fail()(e)),
        }
    }

    /// `length` bytes from `offset` (to the end when `length` is None),
    /// clipped at the end; an offset past the end raises InvalidArgumentError.
    /// Returns a `bytes` copy; `read_blob` hands over the engine's buffer.
    #[pyo3(signature = (key, offset=0, length=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        offset: u64,
        length: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key = key_of(key)?;
        let s = &self.inner;
        let b = py
            .detach(|| s.read(&key, offset, length.unwrap_or(u64::MAX)))
            .map_err(self.fail())?;
        Ok(bytes_out(py, &b))
    }

    /// The whole object as a `Blob`: the engine's buffer itself, read-only,
    /// no copy whatever the size (see `Blob`). Use it where a large object
    /// is passed on (written to a socket or file, hashed, parsed from a
    /// memoryview) rather than kept as `bytes`.
    fn get_blob<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = key_of(key)?;
        let s = &self.inner;
        let b = py.detach(|| s.get(&key)).map_err(self.fail())?;
        Blob::into_py(py, b)
    }

    /// `read` returning a `Blob`: the engine's buffer itself, no copy.
    #[pyo3(signature = (key, offset=0, length=None))]
    fn read_blob<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        offset: u64,
        length: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = key_of(key)?;
        let s = &self.inner;
        let b = py
            .detach(|| s.read(&key, offset, length.unwrap_or(u64::MAX)))
            .map_err(self.fail())?;
        Blob::into_py(py, b)
    }

    /// Reads the object's bytes from `offset` into `buffer`, a writable,
    /// C-contiguous buffer (bytearray, a memoryview of one, array.array,
    /// numpy array, mmap), and returns how many bytes were written: up to
    /// `len(buffer)` bytes (in bytes, whatever the item type), or exactly
    /// `length` when given, fewer only at the object's end, as
    /// `io.RawIOBase.readinto` and `socket.recv_into` do. One copy, from
    /// the engine's buffer into `buffer`, made without the GIL: other
    /// threads must not use `buffer` meanwhile.
    ///
    /// Raises `TypeError` for a read-only buffer (bytes, a Blob), one that
    /// is not C-contiguous, or anything that is not a buffer;
    /// `ValueError` for a `length` larger than the buffer;
    /// `InvalidArgumentError` for an offset past the end, `NotFoundError`
    /// for a missing key. Nothing is written into `buffer` on an error.
    #[pyo3(signature = (key, buffer, offset=None, length=None))]
    fn read_into(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        buffer: &Bound<'_, PyAny>,
        offset: Option<&Bound<'_, PyAny>>,
        length: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let key = key_of(key)?;
        let offset = offset.map_or(Ok(0), |o| byte_count(o, "offset"))?;
        let length = length.map(|l| byte_count(l, "length")).transpose()?;
        let target = writable_buffer(buffer)?;
        let room = target.len_bytes();
        let want = match length {
            None => room as u64,
            Some(l) if l > room as u64 => {
                return Err(PyValueError::new_err(format!(
                    "buffer too small: {room} bytes for length {l}"
                )))
            }
            Some(l) => l,
        };
        let dst = target.buf_ptr() as usize;
        let s = &self.inner;
        let copied = py.detach(|| {
            let bytes = s.read(&key, offset, want)?;
            let n = bytes.len().min(room);
            // SAFETY: `dst` is the start of a writable, C-contiguous buffer
            // of `room` bytes, exported to `target`, which lives until after
            // this copy (an export keeps a bytearray from being resized and
            // its memory alive). `n <= room`, and the engine's buffer cannot
            // overlap memory the caller owns.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, n) };
            Ok(n)
        });
        drop(target);
        copied.map_err(self.fail())
    }

    /// Size, version and commit time of `key`.
    fn stat<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let key = key_of(key)?;
        let s = &self.inner;
        py.detach(|| s.stat(&key))
            .map_err(self.fail())
            .and_then(|r| record_out(py, &r))
    }

    /// A new atomic batch of puts and deletes (see `Batch`).
    fn batch(&self) -> PyResult<crate::batch::Batch> {
        self.check_open()?;
        Ok(crate::batch::Batch::new(self.inner.batch()))
    }

    /// The whole object of each key, in order, as `bytes`; `None` for a key
    /// without one. Not one snapshot: a batch committed meanwhile may show
    /// for some keys only.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        if keys.is_instance_of::<pyo3::types::PyString>() || keys.is_instance_of::<PyBytes>() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "get_many takes an iterable of keys, not one key",
            ));
        }
        let keys = keys
            .try_iter()?
            .map(|k| key_of(&k?))
            .collect::<PyResult<Vec<Bytes>>>()?;
        let s = &self.inner;
        let got = py.detach(|| s.get_many(&keys)).map_err(py_err)?;
        Ok(got
            .iter()
            .map(|b| b.as_ref().map(|b| bytes_out(py, b)))
            .collect())
    }

    /// Deletes `key` (NotFoundError when absent); durable on return.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = key_of(key)?;
        let s = &self.inner;
        py.detach(|| s.delete(&key)).map_err(self.fail())
    }

    /// Whether `key` has an object.
    fn contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = key_of(key)?;
        self.check_open()?;
        Ok(self.inner.contains(key))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(key)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.check_open()?;
        Ok(self.inner.stats().objects as usize)
    }

    /// `store[key]`: the whole object as `bytes`; NotFoundError (a
    /// KeyError) when absent.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key = key_of(key)?;
        let s = &self.inner;
        let b = py.detach(|| s.get(&key)).map_err(self.fail())?;
        Ok(bytes_out(py, &b))
    }

    /// Every key, as `bytes` (a key put as `str` comes back as its UTF-8
    /// bytes: the store keeps bytes only), with any index: in byte order
    /// with "btree" and "fst", in no particular order with "hash" (from a
    /// snapshot of the keys taken by this call, read from the store's
    /// tuple blocks: the GIL is released meanwhile). Keys added or removed
    /// while iterating may or may not appear; one removed before the
    /// iteration reaches it is skipped.
    fn __iter__(&self, py: Python<'_>) -> PyResult<KeyIterator> {
        let s = &self.inner;
        let keys = py.detach(|| s.keys()).map_err(self.fail())?;
        Ok(KeyIterator::new(keys, self.path.clone()))
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false, None, None).map(drop)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key)
    }

    /// Iterator over keys (as bytes) starting with `prefix`, in byte
    /// order, with every index. With "btree" and "fst" it pages through
    /// the index; with "hash" (the default) this call reads the keys from
    /// the store's tuple blocks (one pass; the GIL is released meanwhile)
    /// and keeps the matching ones, sorted.
    #[pyo3(signature = (prefix=None))]
    fn list(&self, py: Python<'_>, prefix: Option<&Bound<'_, PyAny>>) -> PyResult<KeyIterator> {
        let prefix = match prefix {
            Some(p) => key_of(p)?,
            None => Bytes::new(),
        };
        let s = &self.inner;
        let keys = py.detach(|| s.list(&prefix)).map_err(self.fail())?;
        Ok(KeyIterator::new(keys, self.path.clone()))
    }

    /// Starts a multipart upload of exactly `size` bytes.
    fn begin_upload(&self, py: Python<'_>, key: &Bound<'_, PyAny>, size: u64) -> PyResult<Upload> {
        let key = key_of(key)?;
        let s = &self.inner;
        let up = py
            .detach(|| s.begin_upload(&key, size))
            .map_err(self.fail())?;
        Ok(Upload {
            inner: up,
            path: self.path.clone(),
        })
    }

    /// The uploads in progress on this store (begun through this process's
    /// open store and neither committed, aborted nor dropped), oldest
    /// first. Memory only, no I/O. Uploads are not persisted: one not
    /// committed when the process ends is gone at the next open, its space
    /// free. `ClosedError` after `close()`.
    fn list_uploads<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.check_open()?;
        let uploads = self.inner.list_uploads();
        uploads.iter().map(|u| record_out(py, u)).collect()
    }

    /// Aborts the upload `id` (`Upload.id`, `UploadInfo.id`) wherever its
    /// handle is: its space is freed once parts being written finish, and
    /// the handle's later `write_part` and `commit` raise `ClosedError`.
    /// Raises `NotFoundError` when no such upload is in progress (already
    /// committed, aborted or dropped), `ClosedError` after `close()`;
    /// `TypeError` for an `id` that is not an int. A commit already under
    /// way is not stopped.
    fn abort_upload(&self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = byte_count(id, "id")?;
        self.inner.abort_upload(id).map_err(self.fail())
    }

    /// Space and content figures, as a `Stats` (attributes; `stats()[name]`
    /// still gives what the former dict held).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check_open()?;
        record_out(py, &self.inner.stats())
    }

    /// Loads every `(key, value)` pair of `items` (any iterable: a list, a
    /// generator, `dict.items()`), replacing existing keys, at the device's
    /// sequential speed: values are written in large batches and committed
    /// in groups (one sync per group, not per object). Objects become
    /// visible group by group; returns a `LoadReport` once all are
    /// committed and durable.
    ///
    /// `items` is consumed on the calling thread, a chunk at a time with
    /// the GIL, while the load runs on a thread of its own without it (so
    /// the code producing the items, and `progress`, may use any store,
    /// this one included). Keys are `str` or bytes-like, values bytes-like
    /// (`bytes` shared without a copy); anything else is a `TypeError`,
    /// never converted. `progress`, if given, is called as
    /// `progress(objects, bytes)` with the items taken from `items` so far
    /// at most every 0.25 s, and once at the end with the totals.
    ///
    /// On any error (from the store, from `items` itself, a refused item,
    /// or from `progress`) the load stops: what was committed before stays
    /// (always a prefix of `items`, in order; the items taken before a
    /// refused one are loaded) and the error is raised, with a note saying
    /// how many objects were loaded.
    #[pyo3(signature = (items, *, progress=None))]
    fn bulk_load<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'_, PyAny>,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        check_callable(progress.as_ref())?;
        let iter = items.try_iter()?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(Bytes, Bytes)>>(LOAD_QUEUE);
        let store = self.inner.clone();
        let load = std::thread::Builder::new()
            .name("blobcask-py-load".into())
            .spawn(move || store.bulk_load(rx.into_iter().flatten()))
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the load: {e}")))?;
        let mut source = LoadSource {
            iter,
            progress: progress.clone(),
            taken: (0, 0),
            reported: std::time::Instant::now(),
            done: false,
        };
        let mut failure = None;
        while !source.done {
            let (chunk, failed) = source.pull();
            failure = failed;
            // A closed channel: the load stopped on an error of its own,
            // which `join` returns.
            if !chunk.is_empty() && py.detach(|| tx.send(chunk)).is_err() {
                break;
            }
        }
        drop(tx);
        let loaded = py
            .detach(|| load.join())
            .map_err(|_| PyRuntimeError::new_err("blobcask: the bulk load panicked"))?;
        if let Some(err) = failure {
            let note = match &loaded {
                Ok(r) => format!("bulk_load: {} objects before it were loaded", r.objects),
                Err(e) => format!("bulk_load: {e}"),
            };
            let _ = err.value(py).call_method1("add_note", (note,));
            return Err(err);
        }
        let report = loaded.map_err(self.fail())?;
        if let Some(p) = progress {
            p.call1((report.objects, report.bytes))?;
        }
        record_out(py, &report)
    }

    /// Grows the store file to `capacity` bytes (rounded down to 4096) now,
    /// ahead of the growth a put would trigger; the space is reserved on the
    /// file system and the new size durable on return (`stats()["capacity"]`).
    /// The current size is a no-op. Raises `InvalidArgumentError` for a
    /// smaller size (a store never shrinks) or one above `max_capacity`,
    /// `UnsupportedError` on a block device or a read-only store,
    /// `NoSpaceError` when the file system is full (the store keeps its
    /// size), `ClosedError` after `close()`; `TypeError` for a `capacity`
    /// that is not an int.
    fn grow(&self, py: Python<'_>, capacity: &Bound<'_, PyAny>) -> PyResult<()> {
        let capacity = byte_count(capacity, "capacity")?;
        let s = &self.inner;
        py.detach(|| s.grow(capacity)).map_err(self.fail())
    }

    /// Barrier: returns once everything acknowledged before it is durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.sync()).map_err(self.fail())
    }

    /// Writes a consistent copy of the store to `dest` (`str` or
    /// `os.PathLike`), a path that must not exist yet, while other threads
    /// go on reading and writing; open the copy with `Store(dest)`. The
    /// copy holds the objects live at the call (compacted: only live data),
    /// is reopened and checked against the source's bytes before this
    /// returns, and appears under `dest` only once complete. A file copy
    /// (`cp`) of an open store is not a backup.
    ///
    /// Raises `AlreadyExistsError` if `dest` exists (nothing is ever
    /// replaced; errno EEXIST), `PathNotFoundError` (a `NotFoundError` and
    /// a `FileNotFoundError`) if its directory does not exist,
    /// `InvalidArgumentError` if it names no file, `ClosedError` after
    /// `close()`, `CorruptError` if an object fails its checksums (no copy
    /// is made), `NoSpaceError`, `IOError` (`errno`, `strerror` and
    /// `filename` set: `dest`); `TypeError` for a `dest` that is not a path.
    ///
    /// `progress`, if given, is called as `progress(objects, bytes)` with
    /// what has been copied so far at most every 0.25 s, on the calling
    /// thread (the backup runs on a thread of its own meanwhile), and once
    /// with the totals before this returns. A backup cannot be stopped
    /// half way: if `progress` raises (or a signal handler does), it is
    /// not called again, the backup runs to its end, and then the
    /// exception is raised, with a note saying whether the copy was made.
    #[pyo3(signature = (dest, *, progress=None))]
    fn backup<'py>(
        &self,
        py: Python<'py>,
        dest: &Bound<'_, PyAny>,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        check_callable(progress.as_ref())?;
        let dest = path_arg(dest)?;
        let Some(progress) = progress else {
            let s = &self.inner;
            return py
                .detach(|| s.backup(&dest))
                .map_err(|e| path_err(e, &dest))
                .and_then(|r| record_out(py, &r));
        };
        let copied = std::sync::Arc::new(engine::BackupProgress::new());
        let (tx, rx) = std::sync::mpsc::channel();
        // In a mutex: waited on without the GIL, which needs `Sync`.
        let rx = std::sync::Mutex::new(rx);
        let (store, counter, to) = (self.inner.clone(), copied.clone(), dest.clone());
        std::thread::Builder::new()
            .name("blobcask-py-backup".into())
            .spawn(move || {
                let _ = tx.send(store.backup_with_progress(&to, &counter));
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the backup: {e}")))?;
        let mut failure: Option<PyErr> = None;
        let outcome = loop {
            let waited = py.detach(|| match rx.lock() {
                Ok(rx) => rx.recv_timeout(PROGRESS_INTERVAL),
                Err(_) => Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
            });
            match waited {
                Ok(outcome) => break outcome,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if failure.is_none() {
                        failure = py
                            .check_signals()
                            .and_then(|()| progress.call1((copied.objects(), copied.bytes())))
                            .err();
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err("blobcask: the backup panicked"))
                }
            }
        };
        if let Some(err) = failure {
            let note = match &outcome {
                Ok(r) => format!(
                    "backup: the copy was made all the same ({} objects in {})",
                    r.objects,
                    r.path.display()
                ),
                Err(e) => format!("backup: it failed too: {e}"),
            };
            let _ = err.value(py).call_method1("add_note", (note,));
            return Err(err);
        }
        let report = outcome.map_err(|e| path_err(e, &dest))?;
        progress.call1((report.objects, report.bytes))?;
        record_out(py, &report)
    }

    /// Moves objects towards the start of the store so that free space
    /// left in small holes by deletes joins into large pieces, while other
    /// threads go on reading and writing; moved objects keep their
    /// version, creation time and expiry. A put that finds no room although
    /// enough is free does this by itself. Raises `UnsupportedError` on a
    /// read-only store, `ClosedError` after `close()`, `IOError`.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = &self.inner;
        py.detach(|| s.compact())
            .map_err(self.fail())
            .and_then(|r| record_out(py, &r))
    }

    /// Finishes pending commits and releases the store's lock.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.close()).map_err(self.fail())
    }

    /// `ClosedError` on a closed store, as every other call.
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.borrow(py).check_open()?;
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}
