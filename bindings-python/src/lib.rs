//! Python bindings: a thin layer over `blobcask::blocking`.
//!
//! Every call that may touch the device releases the GIL (`py.detach`), so
//! Python threads run in parallel. Values come in as any bytes-like object
//! (`bytes` and `Blob` without a copy, others copied once). Reads come out
//! two ways: `Store.get`/`read` return `bytes` (one copy out of the
//! engine's buffer, made with the GIL held: what Python code expects), and
//! `Store.get_blob`/`read_blob` and every asyncio read return a `Blob`,
//! which owns the engine's buffer and lends it through the buffer protocol
//! (read-only, no copy); `Store.read_into` copies into a caller's buffer
//! without the GIL. Errors become the exception classes of
//! `blobcask.errors`, one per `ErrorKind`.
//!
//! The `Store` class here has every call that reaches the engine;
//! `blobcask.Store` (python/blobcask/_store.py) subclasses it into a full
//! `collections.abc.MutableMapping` with the methods that are plain Python
//! over these.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use engine::blocking;
use engine::report::{unix_seconds, Figure, Record, Report};
use engine::{
    Bytes, Durability, Error, ErrorKind, IndexKind, IoEngineKind, Options, PutMode, PutOptions,
    ReadOptions,
};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDelta, PyDeltaAccess, PyDict, PyMemoryView, PySlice, PyString,
};

/// Maps an engine error to the `blobcask.errors` class of its kind.
fn py_err(e: Error) -> PyErr {
    let name = match e.kind() {
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::TooLarge => "TooLargeError",
        ErrorKind::NoSpace => "NoSpaceError",
        ErrorKind::Corrupt => "CorruptError",
        ErrorKind::Io => "IOError",
        ErrorKind::Locked => "LockedError",
        ErrorKind::Unsupported => "UnsupportedError",
        ErrorKind::Closed => "ClosedError",
        ErrorKind::AlreadyExists => "AlreadyExistsError",
        ErrorKind::VersionMismatch => "VersionMismatchError",
        _ => "Error",
    };
    error_class(name, e.to_string())
}

/// An instance of `blobcask.errors.<name>` carrying `message`.
fn error_class(name: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("blobcask.errors")
            .and_then(|m| m.getattr(name))
            .and_then(|cls| cls.call1((message,)));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(import_failed) => import_failed,
        }
    })
}

/// The name of `obj`'s type, for error messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A size (or upload id) argument: an `int` from 0 to 2**64 - 1 (not a
/// `bool`, which Python would otherwise take for 0 or 1).
fn byte_count(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    if obj.is_instance_of::<pyo3::types::PyBool>() || !obj.is_instance_of::<pyo3::types::PyInt>() {
        let type_name = type_name(obj);
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be an int, not {type_name}"
        )));
    }
    obj.extract::<u64>().map_err(|_| {
        PyValueError::new_err(format!("{name} must be from 0 to 2**64 - 1, not {obj}"))
    })
}

/// The options of a put (or upload commit) from its keyword arguments.
fn put_options(
    if_absent: bool,
    if_version: Option<u64>,
    ttl: Option<&Bound<'_, PyAny>>,
) -> PyResult<PutOptions> {
    let mode = PutMode::from_conditions(if_absent, if_version).map_err(py_err)?;
    let options = match ttl {
        None => PutOptions::from(mode),
        Some(t) => PutOptions::from(mode).ttl(ttl_of(t)?),
    };
    // Checked here, so a refused ttl never costs an upload its bytes.
    options.check().map_err(py_err)?;
    Ok(options)
}

/// A time to live: seconds as an `int` or `float`, or a
/// `datetime.timedelta` (see `duration_of`). Only what no `Duration` can
/// hold is refused here; the range a put accepts (at least 1 µs, at most
/// `MAX_TTL`) is the core's to check. Both raise `InvalidArgumentError`.
fn ttl_of(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    duration_of(obj, "ttl")
}

/// A duration argument named `name`: seconds as an `int` or `float`, or a
/// `datetime.timedelta`. A `bool` (which Python would take for 0 or 1
/// second) or any other type is a `TypeError`; what no `Duration` can hold
/// (negative, NaN, infinite, beyond 2**64 seconds) an
/// `InvalidArgumentError`.
fn duration_of(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Duration> {
    let out_of_range = || {
        error_class(
            "InvalidArgumentError",
            format!("INVALID_ARGUMENT: {name} out of range: {obj}"),
        )
    };
    let wrong_type = || {
        let type_name = type_name(obj);
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be seconds (a real number: int, float, numpy's) or a datetime.timedelta, not {type_name}"
        ))
    };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(wrong_type());
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        return obj
            .extract::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| out_of_range());
    }
    if obj.is_instance_of::<pyo3::types::PyFloat>() {
        let secs: f64 = obj.extract()?;
        return Duration::try_from_secs_f64(secs).map_err(|_| out_of_range());
    }
    // Other real numbers (numpy's, `fractions.Fraction`): integers by
    // their exact value, the rest as a float. numpy's bool is no number
    // here, as `bool` is not.
    let py = obj.py();
    let numbers = py.import("numbers")?;
    if obj.is_instance(&numbers.getattr("Integral")?)? {
        // `operator.index` refuses "integers" without an exact value
        // (numpy's timedelta64 registers as one) with a TypeError.
        let exact = py
            .import("operator")?
            .getattr("index")?
            .call1((obj,))
            .map_err(|_| wrong_type())?;
        if exact.is_instance_of::<pyo3::types::PyBool>() {
            return Err(wrong_type());
        }
        return exact
            .extract::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| out_of_range());
    }
    if obj.is_instance(&numbers.getattr("Real")?)? {
        let secs: f64 = match obj.call_method0("__float__") {
            Ok(f) => f.extract().map_err(|_| wrong_type())?,
            // A Fraction too large for a float: out of range, like 2**64.
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
                return Err(out_of_range())
            }
            Err(_) => return Err(wrong_type()),
        };
        return Duration::try_from_secs_f64(secs).map_err(|_| out_of_range());
    }
    if let Ok(delta) = obj.cast::<PyDelta>() {
        // Normalised by Python: only `days` carries the sign.
        let (Ok(days), Ok(secs), Ok(micros)) = (
            u64::try_from(delta.get_days()),
            u64::try_from(delta.get_seconds()),
            u64::try_from(delta.get_microseconds()),
        ) else {
            return Err(out_of_range());
        };
        return Ok(Duration::from_secs(days * 86_400 + secs) + Duration::from_micros(micros));
    }
    Err(wrong_type())
}

/// The durability mode from `durability=` and `max_delay=` (seconds or a
/// `timedelta`), as `Durability::named` takes them.
fn durability_of(durability: &str, max_delay: Option<&Bound<'_, PyAny>>) -> PyResult<Durability> {
    let max_delay = max_delay.map(|d| duration_of(d, "max_delay")).transpose()?;
    Durability::named(durability, max_delay).map_err(py_err)
}

/// Drops large buffers away from the thread that let them go: giving back
/// 48 MiB to the kernel takes ~4 ms here, which would otherwise stall the
/// event loop (or whichever thread drops the last reference).
fn drop_elsewhere(bytes: Bytes) {
    static DROPPER: OnceLock<Option<Mutex<std::sync::mpsc::Sender<Bytes>>>> = OnceLock::new();
    let dropper = DROPPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Bytes>();
        std::thread::Builder::new()
            .name("blobcask-py-free".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| Mutex::new(tx))
    });
    // Without the thread (it could not start), drop here.
    if let Some(tx) = dropper.as_ref().and_then(|m| m.lock().ok()) {
        let _ = tx.send(bytes);
    }
}

/// A key: `str` (UTF-8) or any bytes-like object.
fn key_of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if obj.is_instance_of::<PyString>() {
        return Ok(Bytes::from(obj.extract::<String>()?.into_bytes()));
    }
    value_of(obj)
}

/// A value: `bytes` and `Blob` are shared without a copy, `bytearray` and
/// other buffer objects (memoryview, numpy arrays) are copied once.
fn value_of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.extract::<Bytes>() {
        return Ok(b);
    }
    if let Ok(blob) = obj.cast::<Blob>() {
        return Ok(blob.get().bytes.clone());
    }
    if obj.is_instance_of::<PyString>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "values must be bytes-like, not str (encode it first)",
        ));
    }
    // Only objects with the buffer protocol: `bytes(5)` would make five zero
    // bytes and `bytes([1, 2])` accept a list; memoryview refuses both.
    let view = PyMemoryView::from(obj).map_err(|_| {
        let type_name = type_name(obj);
        pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a bytes-like object (bytes, bytearray, memoryview, ...), not {type_name}"
        ))
    })?;
    Ok(view.call_method0("tobytes")?.extract::<Bytes>()?)
}

/// `obj`'s buffer, for writing into: refused with a `TypeError` (as
/// `readinto` does) when it is not a buffer, is read-only or is not
/// C-contiguous.
fn writable_buffer(obj: &Bound<'_, PyAny>) -> PyResult<pyo3::buffer::PyUntypedBuffer> {
    let type_name = type_name(obj);
    let refuse = |m: String| pyo3::exceptions::PyTypeError::new_err(m);
    let buf = pyo3::buffer::PyUntypedBuffer::get(obj).map_err(|_| {
        refuse(format!(
            "expected a writable bytes-like object (bytearray, memoryview, array, ...), not {type_name}"
        ))
    })?;
    if buf.readonly() {
        return Err(refuse(format!(
            "expected a writable bytes-like object, but this {type_name} is read-only"
        )));
    }
    if !buf.is_c_contiguous() {
        return Err(refuse(format!(
            "expected a C-contiguous buffer, but this {type_name} is not"
        )));
    }
    Ok(buf)
}

fn bytes_out<'py>(py: Python<'py>, b: &Bytes) -> Bound<'py, PyBytes> {
    PyBytes::new(py, b)
}

/// Bytes read from a store, handed to Python without a copy.
///
/// A `Blob` owns the engine's buffer (`bytes::Bytes`) and lends it through
/// the buffer protocol, read-only: `memoryview(blob)`, `bytes(blob)` (a
/// copy), `hashlib`, `file.write(blob)`, `numpy.frombuffer(blob, ...)` and
/// anything else that takes a bytes-like object read it in place. It
/// compares equal to any bytes-like object with the same bytes and hashes
/// as `bytes` does. Its bytes stay valid for as long as the Blob (or a
/// memoryview of it) lives, whatever happens to the store afterwards: the
/// key may be overwritten or deleted and the store closed.
#[pyclass(frozen, module = "blobcask", name = "Blob")]
struct Blob {
    bytes: Bytes,
    /// `hash(bytes(self))`, computed on first use.
    hash: OnceLock<isize>,
}

impl Blob {
    fn new(bytes: Bytes) -> Self {
        Blob {
            bytes,
            hash: OnceLock::new(),
        }
    }

    fn into_py(py: Python<'_>, bytes: Bytes) -> PyResult<Bound<'_, PyAny>> {
        Ok(Bound::new(py, Blob::new(bytes))?.into_any())
    }
}

/// Blobs at least this large free their buffer on another thread
/// (`drop_elsewhere`).
const FREE_ELSEWHERE: usize = 1 << 20;

impl Drop for Blob {
    fn drop(&mut self) {
        if self.bytes.len() >= FREE_ELSEWHERE {
            drop_elsewhere(std::mem::take(&mut self.bytes));
        }
    }
}

/// Longest prefix `Blob.__repr__` shows.
const REPR_BYTES: usize = 32;

#[pymethods]
impl Blob {
    /// The buffer protocol: a read-only, one-dimensional, contiguous view of
    /// unsigned bytes (format "B") over the engine's buffer. A request for a
    /// writable buffer raises BufferError. Nothing needs releasing: the
    /// view holds a reference to the Blob, which owns the bytes and never
    /// changes them, so there is no `__releasebuffer__`.
    ///
    /// # Safety
    ///
    /// Called by the interpreter with a valid `view` (the slot's contract).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let bytes = &slf.get().bytes;
        // SAFETY: `view` is valid (our caller's contract). The pointer stays
        // valid while the view exists: PyBuffer_FillInfo stores a new
        // reference to `slf` in `view.obj`, and `slf` owns `bytes`, which
        // is immutable. `readonly = 1` makes it refuse PyBUF_WRITABLE, so
        // the `*mut` the C signature wants is never written through.
        let filled = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut c_void,
                bytes.len() as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if filled == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// A `bytes` copy (explicit: `bytes(blob)`).
    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_out(py, &self.bytes)
    }

    /// Equal to any bytes-like object (bytes, bytearray, memoryview of
    /// unsigned bytes, another Blob) holding the same bytes; anything else
    /// is NotImplemented, as for `bytes`.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let equal = if let Ok(b) = other.cast::<Blob>() {
            b.get().bytes == self.bytes
        } else if let Ok(b) = other.cast::<PyBytes>() {
            b.as_bytes() == &self.bytes[..]
        } else {
            let Ok(buf) = PyBuffer::<u8>::get(other) else {
                return Ok(py.NotImplemented());
            };
            if buf.len_bytes() != self.bytes.len() {
                false
            } else if buf.is_c_contiguous() {
                // SAFETY: a C-contiguous buffer of `len_bytes` bytes at
                // `buf_ptr`, kept alive by `buf`; we hold the GIL and run no
                // Python code while the slice lives.
                let theirs = unsafe {
                    std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes())
                };
                theirs == &self.bytes[..]
            } else {
                buf.to_vec(py)? == self.bytes[..]
            }
        };
        Ok(equal.into_pyobject(py)?.to_owned().into_any().unbind())
    }

    /// The hash `bytes` with the same content has (so a Blob and its bytes
    /// are interchangeable as dict keys), computed without a copy: a
    /// read-only memoryview of unsigned bytes hashes exactly as `bytes`.
    /// The view is made over the memory, not over the Blob: a view of an
    /// exporter hashes the exporter first, which would recurse into here.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        if let Some(h) = self.hash.get() {
            return Ok(*h);
        }
        // SAFETY: `self.bytes` outlives the view, which is dropped before
        // this returns; PyBUF_READ makes it read-only.
        let view = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyMemoryView_FromMemory(
                    self.bytes.as_ptr() as *mut _,
                    self.bytes.len() as ffi::Py_ssize_t,
                    ffi::PyBUF_READ,
                ),
            )?
        };
        let h = view.hash()?;
        drop(view);
        Ok(*self.hash.get_or_init(|| h))
    }

    /// `blob[i]` is an int, as for `bytes`; `blob[a:b]` is a Blob sharing
    /// the same buffer (no copy); a slice with a step is a `bytes` copy.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let len = self.bytes.len() as isize;
        if let Ok(slice) = index.cast::<PySlice>() {
            let ind = slice.indices(len)?;
            if ind.step == 1 {
                let (start, stop) = (ind.start as usize, ind.stop.max(ind.start) as usize);
                return Blob::into_py(py, self.bytes.slice(start..stop));
            }
            let picked: Vec<u8> = (0..ind.slicelength)
                .map(|k| self.bytes[(ind.start + k as isize * ind.step) as usize])
                .collect();
            return Ok(PyBytes::new(py, &picked).into_any());
        }
        let i: isize = index.extract()?;
        let at = if i < 0 { i + len } else { i };
        if !(0..len).contains(&at) {
            return Err(PyIndexError::new_err("index out of range"));
        }
        Ok(self.bytes[at as usize].into_pyobject(py)?.into_any())
    }

    /// The bytes decoded as `bytes.decode` does (UTF-8 by default).
    #[pyo3(signature = (encoding="utf-8", errors="strict"))]
    fn decode<'py>(
        slf: &Bound<'py, Self>,
        encoding: &str,
        errors: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let view = PyMemoryView::from(slf.as_any())?;
        py.import("codecs")?
            .getattr("decode")?
            .call1((view, encoding, errors))
    }

    /// Pickles as `bytes` (a copy): a Blob sent to another process arrives
    /// as the `bytes` it holds.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes_type = py.import("builtins")?.getattr("bytes")?;
        (bytes_type, (bytes_out(py, &self.bytes),))
            .into_pyobject(py)
            .map(Bound::into_any)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let shown = &self.bytes[..self.bytes.len().min(REPR_BYTES)];
        let prefix = PyBytes::new(py, shown).repr()?;
        Ok(if self.bytes.len() > REPR_BYTES {
            format!("Blob({prefix}..., len={})", self.bytes.len())
        } else {
            format!("Blob({prefix})")
        })
    }
}

/// Pairs taken from the iterable given to `Store.bulk_load` at once.
const PULL_OBJECTS: usize = 256;
/// Value bytes taken from the iterable at most at once (a chunk ends after
/// the item that crosses it).
const PULL_BYTES: usize = 8 << 20;
/// Chunks taken and not yet loaded, at most (what a load holds of the
/// caller's values beyond what the core itself holds).
const LOAD_QUEUE: usize = 2;
/// Least time between two calls of a bulk load's `progress`.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// The caller's side of a `Store.bulk_load`: takes the items from the
/// Python iterable, a chunk at a time with the GIL, on the caller's thread,
/// while the load runs on a thread of its own. The Python code that runs
/// here (a generator, `progress`) may use any store, this one included:
/// it runs outside the load, whose commits go on meanwhile.
struct LoadSource<'py> {
    iter: Bound<'py, pyo3::types::PyIterator>,
    progress: Option<Bound<'py, PyAny>>,
    /// Objects and value bytes taken so far.
    taken: (u64, u64),
    reported: std::time::Instant,
    done: bool,
}

impl<'py> LoadSource<'py> {
    /// The next chunk; on an error (the iterable raised, an item was
    /// refused, `progress` raised, a signal) also the error, the chunk then
    /// holding the items taken before it, and the source is done.
    fn pull(&mut self) -> (Vec<(Bytes, Bytes)>, Option<PyErr>) {
        let mut chunk = Vec::new();
        let mut bytes = 0;
        let failure = loop {
            if chunk.len() >= PULL_OBJECTS || bytes >= PULL_BYTES {
                break None;
            }
            let Some(item) = self.iter.next() else {
                self.done = true;
                break None;
            };
            match item.and_then(|item| load_item(&item)) {
                Ok((key, value)) => {
                    bytes += value.len();
                    self.taken = (self.taken.0 + 1, self.taken.1 + value.len() as u64);
                    chunk.push((key, value));
                }
                Err(e) => break Some(e),
            }
        };
        // A list's iterator runs no Python code that would notice Ctrl-C.
        let failure = failure
            .or_else(|| self.iter.py().check_signals().err())
            .or_else(|| self.report().err());
        if failure.is_some() {
            self.done = true;
        }
        (chunk, failure)
    }

    /// Calls `progress` if the last call is long enough ago.
    fn report(&mut self) -> PyResult<()> {
        if let Some(p) = &self.progress {
            if self.reported.elapsed() >= PROGRESS_INTERVAL {
                self.reported = std::time::Instant::now();
                p.call1(self.taken)?;
            }
        }
        Ok(())
    }
}

/// One `(key, value)` pair of a bulk load: a tuple or list of two, the key
/// a `str` or bytes-like, the value bytes-like (a `str` is refused too).
fn load_item(item: &Bound<'_, PyAny>) -> PyResult<(Bytes, Bytes)> {
    let pair = if let Ok(t) = item.cast::<pyo3::types::PyTuple>() {
        (t.len() == 2).then(|| (t.get_item(0), t.get_item(1)))
    } else if let Ok(l) = item.cast::<pyo3::types::PyList>() {
        (l.len() == 2).then(|| (l.get_item(0), l.get_item(1)))
    } else {
        None
    };
    let Some((Ok(key), Ok(value))) = pair else {
        let type_name = type_name(item);
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "bulk_load items must be (key, value) pairs, not {type_name}"
        )));
    };
    Ok((key_of(&key)?, value_of(&value)?))
}

/// A report of the core as the dataclass of the same name in
/// `blobcask._records`, built from the core's one description of it
/// (`engine::report`): times as Unix seconds, durations as seconds.
fn record_out<'py>(py: Python<'py>, report: &impl Report) -> PyResult<Bound<'py, PyAny>> {
    fn build(py: Python<'_>, r: Record) -> PyResult<Bound<'_, PyAny>> {
        let kind = r.kind;
        let kwargs = PyDict::new(py);
        for (name, figure) in r.figures {
            let value = match figure {
                Figure::Count(n) => n.into_pyobject(py)?.into_any(),
                Figure::Real(x) => x.into_pyobject(py)?.into_any(),
                Figure::Flag(b) => PyBool::new(py, b).to_owned().into_any(),
                Figure::Text(t) => PyString::new(py, &t).into_any(),
                Figure::Key(k) => PyBytes::new(py, &k).into_any(),
                Figure::Path(p) => p.as_os_str().into_pyobject(py)?.into_any(),
                Figure::Lines(l) => pyo3::types::PyTuple::new(py, l)?.into_any(),
                Figure::Time(t) => unix_seconds(t).into_pyobject(py)?.into_any(),
                Figure::Span(d) => d.as_secs_f64().into_pyobject(py)?.into_any(),
                Figure::Record(inner) => build(py, inner)?,
                Figure::Absent => py.None().into_bound(py),
                _ => {
                    return Err(PyRuntimeError::new_err(format!(
                        "INTERNAL: {kind}.{name} is a figure this binding does not know"
                    )))
                }
            };
            kwargs.set_item(name, value)?;
        }
        py.import("blobcask._records")?
            .getattr(kind)?
            .call((), Some(&kwargs))
    }
    build(py, report.record())
}

/// An open blob store. Thread-safe; every I/O call releases the GIL.
///
/// `blobcask.Store` subclasses it, adding the `MutableMapping` methods
/// that are plain Python over these (views, `pop`, `update`, ...).
#[pyclass(frozen, subclass, module = "blobcask._native", name = "Store")]
struct Store {
    inner: blocking::Store,
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

impl Store {
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
    #[pyo3(signature = (path, *, capacity=None, index=None, inline_threshold=None, max_capacity=None, io_engine="auto", direct_io=true, create=true, create_new=false, read_only=false, salvage=false, cache_bytes=None, durability="sync", max_delay=None))]
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
        durability: &str,
        max_delay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let path = path_arg(path)?;
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
        if let Some(c) = cache_bytes {
            opts = opts.cache_bytes(byte_count(c, "cache_bytes")?);
        }
        opts = opts.durability(durability_of(durability, max_delay)?);
        let inner = py
            .detach(|| blocking::Store::open(path, opts))
            .map_err(py_err)?;
        Ok(Store { inner })
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
            .map_err(py_err)
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
            Err(e) => Err(py_err(e)),
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
            .map_err(py_err)?;
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
        let b = py.detach(|| s.get(&key)).map_err(py_err)?;
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
            .map_err(py_err)?;
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
        copied.map_err(py_err)
    }

    /// Size, version and commit time of `key`.
    fn stat<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let key = key_of(key)?;
        let s = &self.inner;
        py.detach(|| s.stat(&key))
            .map_err(py_err)
            .and_then(|r| record_out(py, &r))
    }

    /// Deletes `key` (NotFoundError when absent); durable on return.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = key_of(key)?;
        let s = &self.inner;
        py.detach(|| s.delete(&key)).map_err(py_err)
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
        let b = py.detach(|| s.get(&key)).map_err(py_err)?;
        Ok(bytes_out(py, &b))
    }

    /// Every key, as `bytes` (a key put as `str` comes back as its UTF-8
    /// bytes: the store keeps bytes only), with any index: in byte order
    /// with "btree" and "fst", in no particular order with "hash" (from a
    /// snapshot of the keys taken by this call). Keys added or removed
    /// while iterating may or may not appear; one removed before the
    /// iteration reaches it is skipped.
    fn __iter__(&self) -> PyResult<KeyIterator> {
        let keys = self.inner.keys().map_err(py_err)?;
        Ok(KeyIterator::new(keys))
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

    /// Iterator over keys (as bytes) starting with `prefix`, in order.
    /// Needs index="btree" or "fst" (UnsupportedError on "hash").
    #[pyo3(signature = (prefix=None))]
    fn list(&self, prefix: Option<&Bound<'_, PyAny>>) -> PyResult<KeyIterator> {
        let prefix = match prefix {
            Some(p) => key_of(p)?,
            None => Bytes::new(),
        };
        let keys = self.inner.list(&prefix).map_err(py_err)?;
        Ok(KeyIterator::new(keys))
    }

    /// Starts a multipart upload of exactly `size` bytes.
    fn begin_upload(&self, py: Python<'_>, key: &Bound<'_, PyAny>, size: u64) -> PyResult<Upload> {
        let key = key_of(key)?;
        let s = &self.inner;
        let up = py.detach(|| s.begin_upload(&key, size)).map_err(py_err)?;
        Ok(Upload { inner: up })
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
        self.inner.abort_upload(id).map_err(py_err)
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
        if let Some(p) = progress.as_ref().filter(|p| !p.is_callable()) {
            let type_name = type_name(p);
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "progress must be callable, not {type_name}"
            )));
        }
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
        let report = loaded.map_err(py_err)?;
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
        py.detach(|| s.grow(capacity)).map_err(py_err)
    }

    /// Barrier: returns once everything acknowledged before it is durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.sync()).map_err(py_err)
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
    /// replaced), `NotFoundError` if its directory does not exist,
    /// `InvalidArgumentError` if it names no file, `ClosedError` after
    /// `close()`, `CorruptError` if an object fails its checksums (no copy
    /// is made), `NoSpaceError`, `IOError`; `TypeError` for a `dest` that
    /// is not a path.
    fn backup<'py>(&self, py: Python<'py>, dest: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let dest = path_arg(dest)?;
        let s = &self.inner;
        py.detach(|| s.backup(dest))
            .map_err(py_err)
            .and_then(|r| record_out(py, &r))
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
            .map_err(py_err)
            .and_then(|r| record_out(py, &r))
    }

    /// Finishes pending commits and releases the store's lock.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s = &self.inner;
        py.detach(|| s.close()).map_err(py_err)
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

/// Runs a store's asyncio calls on the event loop's own thread.
///
/// `blobcask.aio` makes one per store and event loop, watches every
/// descriptor of `fds()` with `loop.add_reader(fd, run)`, and starts calls
/// with `read`/`put`/`stat`/`delete`, each given the asyncio future to
/// resolve. The engine submits the I/O right there, the kernel completes
/// it, the descriptor turns readable, and `run` (called by the loop, with
/// the GIL) reaps the completion and resolves the future: no thread in
/// between (see `blobcask::event_loop`). Results cross as `Blob`s, so
/// nothing is copied while the GIL is held.
#[pyclass(frozen, module = "blobcask", name = "EventLoop")]
struct EventLoop {
    inner: engine::event_loop::EventLoop,
}

/// Resolves the asyncio future `fut` with `outcome` (unless it was
/// cancelled meanwhile). Runs inside `EventLoop.run` or a start call, on the
/// loop's thread.
fn resolve<T>(
    fut: Py<PyAny>,
    outcome: std::thread::Result<engine::Result<T>>,
    convert: impl for<'py> FnOnce(Python<'py>, T) -> PyResult<Bound<'py, PyAny>>,
) {
    Python::attach(|py| {
        let fut = fut.bind(py);
        // A cancelled call, or one whose loop was closed under it: nobody
        // waits for the outcome.
        let gone = |f: &Bound<'_, PyAny>| -> PyResult<bool> {
            if f.call_method0("cancelled")?.is_truthy()? {
                return Ok(true);
            }
            f.call_method0("get_loop")?
                .call_method0("is_closed")?
                .is_truthy()
        };
        if gone(fut).unwrap_or(true) {
            return;
        }
        let value = match outcome {
            Ok(r) => r.map_err(py_err).and_then(|v| convert(py, v)),
            Err(_) => Err(PyRuntimeError::new_err("blobcask: the operation panicked")),
        };
        let set = match value {
            Ok(v) => fut.call_method1("set_result", (v,)),
            Err(e) => fut.call_method1("set_exception", (e.into_value(py),)),
        };
        if let Err(e) = set {
            e.write_unraisable(py, None);
        }
    });
}

fn info_out(py: Python<'_>, i: engine::ObjectInfo) -> PyResult<Bound<'_, PyAny>> {
    record_out(py, &i)
}

#[pymethods]
impl EventLoop {
    #[new]
    fn new(store: &Store) -> PyResult<Self> {
        let inner = engine::event_loop::EventLoop::new(store.inner.as_async()).map_err(py_err)?;
        Ok(EventLoop { inner })
    }

    /// The descriptors to watch for readability (`run` when readable).
    fn fds(&self) -> Vec<i32> {
        self.inner.fds()
    }

    /// Delivers completions and resolves the futures of finished calls.
    fn run(&self) {
        self.inner.run();
    }

    /// Calls not finished yet.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Drops the call `task` (when its future is cancelled). A cancelled
    /// put or delete may still have been committed.
    fn cancel(&self, task: u64) -> bool {
        self.inner.cancel(task)
    }

    /// Drops every pending call (their loop was closed under them).
    fn cancel_all(&self) -> usize {
        self.inner.cancel_all()
    }

    /// Starts a read of `length` bytes at `offset` (None: to the end) that
    /// resolves `fut` with a `Blob`; returns the task id.
    #[pyo3(signature = (key, offset, length, fut))]
    fn read(
        &self,
        key: &Bound<'_, PyAny>,
        offset: u64,
        length: Option<u64>,
        fut: Py<PyAny>,
    ) -> PyResult<u64> {
        let len = length.unwrap_or(u64::MAX);
        Ok(self.inner.read(
            key_of(key)?,
            offset,
            len,
            ReadOptions::default(),
            move |out| resolve(fut, out, Blob::into_py),
        ))
    }

    /// Starts a put that resolves `fut` with its `ObjectInfo` once durable
    /// (`if_absent`, `if_version`, `ttl` as for `Store.put`).
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        if_absent: bool,
        if_version: Option<u64>,
        ttl: Option<&Bound<'_, PyAny>>,
        fut: Py<PyAny>,
    ) -> PyResult<u64> {
        let options = put_options(if_absent, if_version, ttl)?;
        let (key, value) = (key_of(key)?, value_of(value)?);
        Ok(self
            .inner
            .put(key, value, options, move |out| resolve(fut, out, info_out)))
    }

    /// Starts a stat that resolves `fut` with an `ObjectInfo`.
    fn stat(&self, key: &Bound<'_, PyAny>, fut: Py<PyAny>) -> PyResult<u64> {
        Ok(self
            .inner
            .stat(key_of(key)?, move |out| resolve(fut, out, info_out)))
    }

    /// Starts a delete that resolves `fut` with None once durable.
    fn delete(&self, key: &Bound<'_, PyAny>, fut: Py<PyAny>) -> PyResult<u64> {
        Ok(self.inner.delete(key_of(key)?, move |out| {
            resolve(fut, out, |py, ()| Ok(py.None().into_bound(py)))
        }))
    }
}

/// Iterator returned by `Store.list` and `iter(store)`: keys as `bytes`.
#[pyclass(frozen, module = "blobcask", name = "KeyIterator")]
struct KeyIterator {
    keys: Mutex<engine::Keys>,
}

impl KeyIterator {
    fn new(keys: engine::Keys) -> Self {
        KeyIterator {
            keys: Mutex::new(keys),
        }
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, engine::Keys>> {
        self.keys
            .lock()
            .map_err(|_| PyRuntimeError::new_err("key iterator poisoned"))
    }
}

/// Most keys `KeyIterator.next_page` returns at once.
const MAX_PAGE: usize = 1 << 16;

#[pymethods]
impl KeyIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let next = self.lock()?.next();
        match next {
            None => Ok(None),
            Some(Ok(entry)) => Ok(Some(bytes_out(py, &entry.key))),
            Some(Err(e)) => Err(py_err(e)),
        }
    }

    /// Up to `n` next keys (1 to 65536), fewer only at the end (an empty
    /// list: the iteration is over). Runs without the GIL, so another
    /// thread may fetch a page while the caller's goes on: how
    /// `AsyncStore.list` iterates off the event loop.
    fn next_page<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        if !(1..=MAX_PAGE).contains(&n) {
            return Err(PyValueError::new_err(format!(
                "n must be from 1 to {MAX_PAGE}, not {n}"
            )));
        }
        // `Err(None)`: the lock was poisoned.
        let page = py.detach(|| -> Result<Vec<Bytes>, Option<Error>> {
            let mut keys = self.keys.lock().map_err(|_| None)?;
            keys.by_ref()
                .take(n)
                .map(|entry| entry.map(|e| e.key).map_err(Some))
                .collect()
        });
        let page = page.map_err(|e| match e {
            Some(e) => py_err(e),
            None => PyRuntimeError::new_err("key iterator poisoned"),
        })?;
        Ok(page.iter().map(|k| bytes_out(py, k)).collect())
    }
}

/// A multipart upload; see `Store.begin_upload`.
#[pyclass(frozen, module = "blobcask", name = "Upload")]
struct Upload {
    /// The engine's handle, used by reference from any thread: a commit
    /// while a part is being written is refused and leaves the upload as
    /// it was; once it ended, `write_part` and `commit` raise
    /// `ClosedError`. An ended handle holds no store.
    inner: blocking::Upload,
}

#[pymethods]
impl Upload {
    /// This upload's id in `Store.list_uploads` (for `Store.abort_upload`).
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    /// Writes `data` at `offset` (a multiple of 4096; parts end on a
    /// multiple of 4096 or at the object's end), from any thread. With
    /// `crc32c` (the CRC32C of `data`, as `blobcask.crc32c` computes it) the
    /// bytes are checked before anything is written: a mismatch raises
    /// InvalidArgumentError.
    #[pyo3(signature = (offset, data, crc32c=None))]
    fn write_part(
        &self,
        py: Python<'_>,
        offset: u64,
        data: &Bound<'_, PyAny>,
        crc32c: Option<u32>,
    ) -> PyResult<()> {
        let data = value_of(data)?;
        let up = &self.inner;
        py.detach(|| match crc32c {
            Some(c) => up.write_part_checked(offset, data, c),
            None => up.write_part(offset, data),
        })
        .map_err(py_err)
    }

    /// Makes the object visible atomically. `if_absent=True` commits only
    /// if the key has no object (`AlreadyExistsError`); `if_version=v` only
    /// if it holds version `v` (`VersionMismatchError`); `ttl` as for
    /// `Store.put`, counted from the commit. A commit the store refuses
    /// (a condition that fails) changes nothing and frees the upload's
    /// space; a bad argument (wrong type, a ttl out of range) is refused
    /// before and leaves the upload as it was.
    #[pyo3(signature = (*, if_absent=false, if_version=None, ttl=None))]
    fn commit<'py>(
        &self,
        py: Python<'py>,
        if_absent: bool,
        if_version: Option<u64>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = put_options(if_absent, if_version, ttl)?;
        let up = &self.inner;
        py.detach(|| up.commit_with(options))
            .map_err(py_err)
            .and_then(|r| record_out(py, &r))
    }

    /// Abandons the upload and frees its space (no-op when already done).
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let up = &self.inner;
        py.detach(|| up.abort()).map_err(py_err)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.abort(py)?;
        Ok(false)
    }
}

/// CRC32C (Castagnoli) of `data`: the checksum `Upload.write_part` takes.
#[pyfunction]
#[pyo3(name = "crc32c")]
fn crc32c_of(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let data = value_of(data)?;
    Ok(py.detach(|| ::crc32c::crc32c(&data)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32c_of, m)?)?;
    m.add_class::<Store>()?;
    m.add_class::<Blob>()?;
    m.add_class::<EventLoop>()?;
    m.add_class::<Upload>()?;
    m.add_class::<KeyIterator>()?;
    m.add("MAX_KEY_LEN", engine::MAX_KEY_LEN)?;
    m.add("PART_ALIGN", engine::PART_ALIGN)?;
    m.add("MAX_TTL", engine::MAX_TTL.as_secs_f64())?;
    Ok(())
}
