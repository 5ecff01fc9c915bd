//! `KeyIterator`: the keys of `Store.list` and `iter(store)`, one at a time
//! or a page at a time.

use std::sync::Mutex;

use engine::{Bytes, Error};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::bytes_out;
use crate::errors::{py_err_in, StorePath};
/// Iterator returned by `Store.list` and `iter(store)`: keys as `bytes`.
#[pyclass(frozen, module = "blobcask", name = "KeyIterator")]
pub(crate) struct KeyIterator {
    keys: Mutex<engine::Keys>,
    /// Its store's path, named by I/O errors.
    path: StorePath,
}

impl KeyIterator {
    pub(crate) fn new(keys: engine::Keys, path: StorePath) -> Self {
        KeyIterator {
            keys: Mutex::new(keys),
            path,
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
            Some(Err(e)) => Err(py_err_in(Some(&self.path))(e)),
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
            Some(e) => py_err_in(Some(&self.path))(e),
            None => PyRuntimeError::new_err("key iterator poisoned"),
        })?;
        Ok(page.iter().map(|k| bytes_out(py, k)).collect())
    }
}
