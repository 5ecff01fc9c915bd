//! `Upload`: a multipart upload (parts, commit, abort), and `crc32c`, the
//! checksum its parts take.

use engine::blocking;
use pyo3::prelude::*;

use crate::convert::{put_options, record_out, value_of};
use crate::errors::{py_err_in, StorePath};
/// A multipart upload; see `Store.begin_upload`.
#[pyclass(frozen, module = "blobcask", name = "Upload")]
pub(crate) struct Upload {
    /// The engine's handle, used by reference from any thread: a commit
    /// while a part is being written is refused and leaves the upload as
    /// it was; once it ended, `write_part` and `commit` raise
    /// `ClosedError`. An ended handle holds no store.
    pub(crate) inner: blocking::Upload,
    /// Its store's path, named by I/O errors.
    pub(crate) path: StorePath,
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
        .map_err(py_err_in(Some(&self.path)))
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
            .map_err(py_err_in(Some(&self.path)))
            .and_then(|r| record_out(py, &r))
    }

    /// Abandons the upload and frees its space (no-op when already done).
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let up = &self.inner;
        py.detach(|| up.abort())
            .map_err(py_err_in(Some(&self.path)))
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
pub(crate) fn crc32c_of(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let data = value_of(data)?;
    Ok(py.detach(|| ::crc32c::crc32c(&data)))
}
