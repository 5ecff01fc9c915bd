//! Engine errors as the exception classes of `blobcask.errors`, one per
//! `ErrorKind`, and the type name error messages quote.
//!
//! An error the operating system reported carries what `OSError` carries:
//! `errno` (from the engine error's `std::io::Error` source), `strerror`
//! and `filename` (the file the call was working on: the store's path, or
//! a backup's destination). `blobcask.errors._from_native` picks the class
//! from the errno as Python's `OSError` does (ENOENT: `FileNotFoundError`,
//! EACCES: `PermissionError`, ...), each also the kind's class.

use std::error::Error as _;
use std::path::Path;

use engine::{Error, ErrorKind};
use pyo3::prelude::*;

/// The path of a store as its handles keep it for error messages.
pub(crate) type StorePath = std::sync::Arc<Path>;

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
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
    }
}

/// The OS error number behind `e`, when the operating system reported it.
fn os_errno(e: &Error) -> Option<i32> {
    e.source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error)
}

/// Maps an engine error to the `blobcask.errors` class of its kind; an
/// `IOError` gets the OS errno, without a file name.
pub(crate) fn py_err(e: Error) -> PyErr {
    py_err_in(None)(e)
}

/// `py_err` for a call on the store at `file`: an `IOError` names it.
pub(crate) fn py_err_in(file: Option<&Path>) -> impl Fn(Error) -> PyErr + '_ {
    move |e| {
        let kind = e.kind();
        let errno = os_errno(&e);
        let file = file.filter(|_| kind == ErrorKind::Io);
        raise(class_name(kind), e.to_string(), errno, file)
    }
}

/// `py_err` for an error about the file at `path` itself (opening a store
/// there, or writing a backup to it): an I/O error names it, and so do
/// the ones Python reports as `OSError`s of their own — nothing at `path`
/// (or no directory for it) is also a `FileNotFoundError` with ENOENT, an
/// existing backup destination a `FileExistsError` with EEXIST.
pub(crate) fn path_err(e: Error, path: &Path) -> PyErr {
    let kind = e.kind();
    let errno = match kind {
        ErrorKind::Io => os_errno(&e),
        // `NotFound` from an open or a backup is about the path: none of
        // the store's keys is involved. An empty file (no store in it)
        // is there, so is not ENOENT.
        ErrorKind::NotFound if nothing_at(path) => Some(libc::ENOENT),
        ErrorKind::AlreadyExists => Some(libc::EEXIST),
        _ => None,
    };
    let file = (kind == ErrorKind::Io || errno.is_some()).then_some(path);
    raise(class_name(kind), e.to_string(), errno, file)
}

/// Whether `path` resolves to nothing: no file there, a dangling symbolic
/// link, or a directory part that does not exist.
fn nothing_at(path: &Path) -> bool {
    std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// An instance of `blobcask.errors.<name>` carrying `message`.
pub(crate) fn error_class(name: &str, message: String) -> PyErr {
    raise(name, message, None, None)
}

/// The exception `blobcask.errors._from_native` makes of these.
fn raise(name: &str, message: String, errno: Option<i32>, file: Option<&Path>) -> PyErr {
    use std::os::unix::ffi::OsStrExt;
    Python::attach(|py| {
        let filename = file.map(|f| pyo3::types::PyBytes::new(py, f.as_os_str().as_bytes()));
        let made = py
            .import("blobcask.errors")
            .and_then(|m| m.getattr("_from_native"))
            .and_then(|make| make.call1((name, message, errno, filename)));
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
