//! The error object's accessors (code, message), its free, and the names
//! of the codes.

use std::ffi::{c_char, CStr};

use crate::{bc_code, bc_error};
/// The error's code.
#[no_mangle]
pub extern "C" fn bc_error_code(err: *const bc_error) -> bc_code {
    if err.is_null() {
        return bc_code::BC_INVALID_ARGUMENT;
    }
    // SAFETY: non-null errors come from this library.
    unsafe { &*err }.code
}

/// The error's message (valid until bc_error_free); "" for NULL.
#[no_mangle]
pub extern "C" fn bc_error_message(err: *const bc_error) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    // SAFETY: non-null errors come from this library.
    unsafe { &*err }.message.as_ptr()
}

/// Frees an error. NULL is a no-op.
#[no_mangle]
pub extern "C" fn bc_error_free(err: *mut bc_error) {
    if !err.is_null() {
        // SAFETY: errors are boxed by `call`; freed exactly once.
        drop(unsafe { Box::from_raw(err) });
    }
}

/// A static, human-readable name for a code ("NOT_FOUND", ...).
#[no_mangle]
pub extern "C" fn bc_code_name(code: i32) -> *const c_char {
    let name: &'static CStr = match code {
        0 => c"OK",
        1 => c"NOT_FOUND",
        2 => c"INVALID_ARGUMENT",
        3 => c"TOO_LARGE",
        4 => c"NO_SPACE",
        5 => c"CORRUPT",
        6 => c"IO",
        7 => c"LOCKED",
        8 => c"UNSUPPORTED",
        9 => c"CLOSED",
        10 => c"ALREADY_EXISTS",
        11 => c"VERSION_MISMATCH",
        12 => c"CANCELLED",
        _ => c"INTERNAL",
    };
    name.as_ptr()
}
