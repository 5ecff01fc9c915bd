//! Engine errors as the exception classes of `blobcask.errors`, one per
//! `ErrorKind`, and the type name error messages quote.

use engine::{Error, ErrorKind};
use pyo3::prelude::*;
/// Maps an engine error to the `blobcask.errors` class of its kind.
pub(crate) fn py_err(e: Error) -> PyErr {
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
pub(crate) fn error_class(name: &str, message: String) -> PyErr {
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
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}
