//! `EventLoop`: a store's asyncio calls run on the event loop's own thread,
//! their results resolving asyncio futures.

use engine::ReadOptions;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::blob::Blob;
use crate::convert::{key_of, put_options, record_out, value_of};
use crate::errors::{py_err, py_err_in, StorePath};
use crate::store::Store;
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
pub(crate) struct EventLoop {
    inner: engine::event_loop::EventLoop,
    /// Its store's path, named by I/O errors.
    path: StorePath,
}

/// Resolves the asyncio future `fut` with `outcome` (unless it was
/// cancelled meanwhile). Runs inside `EventLoop.run` or a start call, on the
/// loop's thread.
fn resolve<T>(
    path: &StorePath,
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
            Ok(r) => r
                .map_err(py_err_in(Some(path)))
                .and_then(|v| convert(py, v)),
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
        Ok(EventLoop {
            inner,
            path: store.path.clone(),
        })
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
        let path = self.path.clone();
        Ok(self.inner.read(
            key_of(key)?,
            offset,
            len,
            ReadOptions::default(),
            move |out| resolve(&path, fut, out, Blob::into_py),
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
        let path = self.path.clone();
        Ok(self.inner.put(key, value, options, move |out| {
            resolve(&path, fut, out, info_out)
        }))
    }

    /// Starts a stat that resolves `fut` with an `ObjectInfo`.
    fn stat(&self, key: &Bound<'_, PyAny>, fut: Py<PyAny>) -> PyResult<u64> {
        let path = self.path.clone();
        Ok(self
            .inner
            .stat(key_of(key)?, move |out| resolve(&path, fut, out, info_out)))
    }

    /// Starts a delete that resolves `fut` with None once durable.
    fn delete(&self, key: &Bound<'_, PyAny>, fut: Py<PyAny>) -> PyResult<u64> {
        let path = self.path.clone();
        Ok(self.inner.delete(key_of(key)?, move |out| {
            resolve(&path, fut, out, |py, ()| Ok(py.None().into_bound(py)))
        }))
    }
}
