//! `Blob`: bytes read from a store, lent to Python through the buffer
//! protocol without a copy; large ones are freed on a thread of their own.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock};

use engine::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyIndexError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PySlice};

use crate::convert::bytes_out;
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
pub(crate) struct Blob {
    pub(crate) bytes: Bytes,
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

    pub(crate) fn into_py(py: Python<'_>, bytes: Bytes) -> PyResult<Bound<'_, PyAny>> {
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
