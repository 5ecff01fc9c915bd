//! The entry points' common plumbing: engine errors mapped to `bc_code`,
//! panics caught (`call`), pointer arguments borrowed after a NULL check,
//! and engine values converted to the C structs.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use engine::{Bytes, Error, ErrorKind, ObjectInfo};

use crate::{bc_buf, bc_code, bc_error, bc_info, bc_store};
/// Why a call failed: what `call` turns into its `bc_code` and `bc_error`.
/// The message never starts with the code's name: C callers print both
/// (`bc_code_name(code)`, `bc_error_message(err)`), and a prefix here read
/// "NOT_FOUND: NOT_FOUND: ...".
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: bc_code,
    pub(crate) message: String,
    /// The OS `errno` behind the error (`bc_error_errno`); 0 for none.
    pub(crate) os_errno: i32,
}

impl Fail {
    pub(crate) fn new(code: bc_code, message: impl Into<String>) -> Fail {
        Fail {
            code,
            message: message.into(),
            os_errno: 0,
        }
    }
}

pub(crate) fn code_of(kind: ErrorKind) -> bc_code {
    match kind {
        ErrorKind::NotFound => bc_code::BC_NOT_FOUND,
        ErrorKind::InvalidArgument => bc_code::BC_INVALID_ARGUMENT,
        ErrorKind::TooLarge => bc_code::BC_TOO_LARGE,
        ErrorKind::NoSpace => bc_code::BC_NO_SPACE,
        ErrorKind::Corrupt => bc_code::BC_CORRUPT,
        ErrorKind::Io => bc_code::BC_IO,
        ErrorKind::Locked => bc_code::BC_LOCKED,
        ErrorKind::Unsupported => bc_code::BC_UNSUPPORTED,
        ErrorKind::Closed => bc_code::BC_CLOSED,
        ErrorKind::AlreadyExists => bc_code::BC_ALREADY_EXISTS,
        ErrorKind::VersionMismatch => bc_code::BC_VERSION_MISMATCH,
        _ => bc_code::BC_INTERNAL,
    }
}

/// An engine error as C sees it: its kind's code; its message and cause
/// without the kind's name (the engine's `Display` starts with it); the
/// OS error number of the first `io::Error` among its causes.
pub(crate) fn engine_err(e: Error) -> Fail {
    use std::error::Error as _;
    let mut message = e.message().to_owned();
    let mut os_errno = 0;
    let mut cause = e.source();
    while let Some(c) = cause {
        message.push_str(&format!(": {c}"));
        if os_errno == 0 {
            if let Some(n) = c
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::raw_os_error)
            {
                os_errno = n;
            }
        }
        cause = c.source();
    }
    Fail {
        code: code_of(e.kind()),
        message,
        os_errno,
    }
}

pub(crate) fn invalid(msg: &str) -> Fail {
    Fail::new(bc_code::BC_INVALID_ARGUMENT, msg)
}

/// Runs `f`, turning errors and panics into a code (and `*err`).
pub(crate) fn call(err: *mut *mut bc_error, f: impl FnOnce() -> Result<(), Fail>) -> bc_code {
    let outcome = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Fail::new(bc_code::BC_INTERNAL, format!("panic: {what}")))
    });
    match outcome {
        Ok(()) => bc_code::BC_OK,
        Err(Fail {
            code,
            message,
            os_errno,
        }) => {
            if !err.is_null() {
                let message = CString::new(message.replace('\0', "?")).unwrap_or_default();
                let error = bc_error {
                    code,
                    message,
                    os_errno,
                };
                // SAFETY: `err` is non-null and, per the header, points to a
                // writable `bc_error*`.
                unsafe { *err = Box::into_raw(Box::new(error)) };
            }
            code
        }
    }
}

/// Borrows `len` bytes at `ptr` for the duration of a call.
pub(crate) fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL with length {len}")));
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes that
    // stay valid and unmodified during the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

pub(crate) fn store_ref<'a>(store: *const bc_store) -> Result<&'a bc_store, Fail> {
    if store.is_null() {
        return Err(invalid("store is NULL"));
    }
    // SAFETY: non-null handles come from bc_open and stay valid until
    // bc_store_free, which the caller must not race with other calls.
    let s = unsafe { &*store };
    if s.closed.load(Ordering::Acquire) {
        return Err(Fail::new(bc_code::BC_CLOSED, "the store is closed"));
    }
    Ok(s)
}

/// Borrows the NUL-terminated path `ptr` for the duration of a call: the
/// file system's own bytes, UTF-8 or not (as `open(2)` takes them).
pub(crate) fn path_ref<'a>(ptr: *const c_char, what: &str) -> Result<&'a Path, Fail> {
    use std::os::unix::ffi::OsStrExt;
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null and, per the header, a NUL-terminated string that
    // stays valid during the call.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    Ok(Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

pub(crate) fn out_ref<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null and, per the header, points to writable storage.
    Ok(unsafe { &mut *ptr })
}

/// A commit time as `bc_info` and `bc_list_entry` carry it.
pub(crate) fn created_micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// An expiry as `bc_info` and `bc_list_entry` carry it: 0 for never. An
/// expiry at or before the epoch cannot be set (it counts from a commit),
/// so 0 stays free to mean "never".
pub(crate) fn expires_micros(t: Option<SystemTime>) -> u64 {
    t.map_or(0, |t| {
        t.duration_since(UNIX_EPOCH).map_or(1, |d| {
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
        })
    })
}

pub(crate) fn info_of(i: &ObjectInfo) -> bc_info {
    bc_info {
        struct_size: std::mem::size_of::<bc_info>(),
        size: i.size,
        version: i.version,
        created_unix_micros: created_micros(i.created),
        is_inline: i.inline,
        expires_unix_micros: expires_micros(i.expires),
    }
}

pub(crate) fn fill_buf(out: &mut bc_buf, b: Bytes) {
    let owner = Box::new(b);
    out.data = owner.as_ptr();
    out.len = owner.len();
    out.owner = Box::into_raw(owner).cast();
}
