//! Python arguments to engine values (sizes, put options, durations,
//! durability, keys, values, writable buffers) and engine values back to
//! Python (`bytes`, the report records of `blobcask._records`).

use std::time::Duration;

use engine::report::{unix_seconds, Figure, Record, Report};
use engine::{Bytes, Durability, PutMode, PutOptions};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDelta, PyDeltaAccess, PyDict, PyMemoryView, PyString};

use crate::blob::Blob;
use crate::errors::{error_class, py_err, type_name};
/// A size (or upload id) argument: an `int` from 0 to 2**64 - 1 (not a
/// `bool`, which Python would otherwise take for 0 or 1).
pub(crate) fn byte_count(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
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

/// A fraction given as a float (or an int, never a bool); its range is
/// checked at open (`InvalidArgumentError`).
pub(crate) fn fraction_of(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if obj.is_instance_of::<pyo3::types::PyBool>()
        || !(obj.is_instance_of::<pyo3::types::PyFloat>()
            || obj.is_instance_of::<pyo3::types::PyInt>())
    {
        let type_name = type_name(obj);
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{name} must be a float, not {type_name}"
        )));
    }
    obj.extract::<f64>()
}

/// The options of a put (or upload commit) from its keyword arguments.
pub(crate) fn put_options(
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
pub(crate) fn durability_of(
    durability: &str,
    max_delay: Option<&Bound<'_, PyAny>>,
) -> PyResult<Durability> {
    let max_delay = max_delay.map(|d| duration_of(d, "max_delay")).transpose()?;
    Durability::named(durability, max_delay).map_err(py_err)
}

/// A key: `str` (UTF-8) or any bytes-like object.
pub(crate) fn key_of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if obj.is_instance_of::<PyString>() {
        return Ok(Bytes::from(obj.extract::<String>()?.into_bytes()));
    }
    value_of(obj)
}

/// A value: `bytes` and `Blob` are shared without a copy, `bytearray` and
/// other buffer objects (memoryview, numpy arrays) are copied once.
pub(crate) fn value_of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
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
pub(crate) fn writable_buffer(obj: &Bound<'_, PyAny>) -> PyResult<pyo3::buffer::PyUntypedBuffer> {
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

pub(crate) fn bytes_out<'py>(py: Python<'py>, b: &Bytes) -> Bound<'py, PyBytes> {
    PyBytes::new(py, b)
}

/// A report of the core as the dataclass of the same name in
/// `blobcask._records`, built from the core's one description of it
/// (`engine::report`): times as Unix seconds, durations as seconds.
pub(crate) fn record_out<'py>(
    py: Python<'py>,
    report: &impl Report,
) -> PyResult<Bound<'py, PyAny>> {
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
