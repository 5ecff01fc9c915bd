//! `Batch`: puts and deletes committed all or nothing (`Store.batch()`),
//! a context manager that commits on a clean exit and discards on an
//! exception; and the error of a refused batch, which carries the index
//! of the operation that failed (`batch_op`).

use engine::{blocking, BatchOutcome};
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{key_of, put_options, record_out, value_of};
use crate::errors::py_err;

/// An atomic batch; see `Store.batch`.
#[pyclass(frozen, module = "blobcask", name = "Batch")]
pub(crate) struct Batch {
    /// The engine's batch; `None` once committed or discarded (then every
    /// call but `discard` raises `ClosedError`).
    inner: Mutex<Option<blocking::Batch>>,
}

impl Batch {
    pub(crate) fn new(inner: blocking::Batch) -> Batch {
        Batch {
            inner: Mutex::new(Some(inner)),
        }
    }

    /// The batch's slot (a panic while it was held cannot leave it half
    /// changed: every change is one push).
    fn slot(&self) -> MutexGuard<'_, Option<blocking::Batch>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the open batch, or raises `ClosedError`.
    fn with<T>(&self, f: impl FnOnce(&mut blocking::Batch) -> T) -> PyResult<T> {
        self.slot().as_mut().map(f).ok_or_else(ended)
    }
}

/// `ClosedError` for a batch already committed or discarded.
fn ended() -> PyErr {
    crate::errors::error_class(
        "ClosedError",
        "CLOSED: the batch was already committed or discarded".to_owned(),
    )
}

/// A refused batch's exception: its class by kind, with `batch_op` the
/// index of the operation that failed (`None` when the batch failed as a
/// whole).
fn batch_err(py: Python<'_>, e: engine::Error) -> PyErr {
    let op = e.batch_op();
    let err = py_err(e);
    // The attribute is best effort: the exception is raised either way.
    drop(err.value(py).setattr("batch_op", op));
    err
}

#[pymethods]
impl Batch {
    /// Adds a put (conditions and ttl as `Store.put`); nothing is written
    /// before the commit.
    #[pyo3(signature = (key, value, *, if_absent=false, if_version=None, ttl=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        if_absent: bool,
        if_version: Option<u64>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let options = put_options(if_absent, if_version, ttl)?;
        let (key, value) = (key_of(key)?, value_of(value)?);
        self.with(|b| {
            b.put_with(&key, value, options);
        })
    }

    /// Adds a delete: of whatever `key` holds (a missing key is no
    /// change), or with `if_version` only of that version.
    #[pyo3(signature = (key, *, if_version=None))]
    fn delete(&self, key: &Bound<'_, PyAny>, if_version: Option<u64>) -> PyResult<()> {
        let key = key_of(key)?;
        self.with(|b| {
            match if_version {
                Some(v) => b.delete_if_version(&key, v),
                None => b.delete(&key),
            };
        })
    }

    /// Commits every operation or none; durable on return. A list with,
    /// per operation in order, the put's `ObjectInfo` or whether the
    /// delete removed an object.
    fn commit<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut batch = self.slot().take().ok_or_else(ended)?;
        let committed = py.detach(|| batch.commit());
        let outcomes = committed.map_err(|e| batch_err(py, e))?;
        outcomes
            .iter()
            .map(|o| match o {
                BatchOutcome::Put(info) => record_out(py, info),
                BatchOutcome::Deleted { existed } => {
                    Ok(pyo3::types::PyBool::new(py, *existed).to_owned().into_any())
                }
                _ => Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "INTERNAL: a batch outcome this binding does not know",
                )),
            })
            .collect()
    }

    /// Drops every operation without writing anything (a no-op once
    /// committed or discarded).
    fn discard(&self) {
        self.slot().take();
    }

    fn __len__(&self) -> usize {
        self.slot().as_ref().map_or(0, |b| b.len())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits on a clean exit; discards when the block raised (and lets
    /// that exception through).
    #[pyo3(signature = (*args))]
    /// Returns None, so the block's exception is never swallowed.
    fn __exit__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        let raised = args.get_item(0).is_ok_and(|t| !t.is_none());
        if raised {
            self.discard();
        } else if self.slot().is_some() {
            self.commit(py)?;
        }
        Ok(())
    }
}
