//! The caller's side of `Store.bulk_load`: items taken from the Python
//! iterable in chunks, and the progress callback.

use std::time::Duration;

use engine::Bytes;
use pyo3::prelude::*;

use crate::convert::{key_of, value_of};
use crate::errors::type_name;
/// Pairs taken from the iterable given to `Store.bulk_load` at once.
const PULL_OBJECTS: usize = 256;
/// Value bytes taken from the iterable at most at once (a chunk ends after
/// the item that crosses it).
const PULL_BYTES: usize = 8 << 20;
/// Chunks taken and not yet loaded, at most (what a load holds of the
/// caller's values beyond what the core itself holds).
pub(crate) const LOAD_QUEUE: usize = 2;
/// Least time between two calls of a bulk load's `progress`.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// The caller's side of a `Store.bulk_load`: takes the items from the
/// Python iterable, a chunk at a time with the GIL, on the caller's thread,
/// while the load runs on a thread of its own. The Python code that runs
/// here (a generator, `progress`) may use any store, this one included:
/// it runs outside the load, whose commits go on meanwhile.
pub(crate) struct LoadSource<'py> {
    pub(crate) iter: Bound<'py, pyo3::types::PyIterator>,
    pub(crate) progress: Option<Bound<'py, PyAny>>,
    /// Objects and value bytes taken so far.
    pub(crate) taken: (u64, u64),
    pub(crate) reported: std::time::Instant,
    pub(crate) done: bool,
}

impl<'py> LoadSource<'py> {
    /// The next chunk; on an error (the iterable raised, an item was
    /// refused, `progress` raised, a signal) also the error, the chunk then
    /// holding the items taken before it, and the source is done.
    pub(crate) fn pull(&mut self) -> (Vec<(Bytes, Bytes)>, Option<PyErr>) {
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
