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

mod batch;
mod blob;
mod bulk_load;
mod convert;
mod errors;
mod event_loop;
mod keys;
mod store;
mod upload;

use pyo3::prelude::*;

use crate::batch::Batch;
use crate::blob::Blob;
use crate::event_loop::EventLoop;
use crate::keys::KeyIterator;
use crate::store::Store;
use crate::upload::{crc32c_of, Upload};

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32c_of, m)?)?;
    m.add_class::<Store>()?;
    m.add_class::<Blob>()?;
    m.add_class::<EventLoop>()?;
    m.add_class::<Upload>()?;
    m.add_class::<Batch>()?;
    m.add_class::<KeyIterator>()?;
    m.add("MAX_KEY_LEN", engine::MAX_KEY_LEN)?;
    m.add("PART_ALIGN", engine::PART_ALIGN)?;
    m.add("MAX_TTL", engine::MAX_TTL.as_secs_f64())?;
    Ok(())
}
