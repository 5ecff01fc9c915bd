//! The error object's accessors (code, message, OS error number), its
//! free, and the names of the codes.

use std::ffi::{c_char, c_int, CStr};

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

/// The error's message (valid until bc_error_free); "" for NULL. It says
/// what failed and why (the operation, the key or path, the OS's own
/// words), without the code's name: print `bc_code_name(code)` beside it
/// if wanted.
#[no_mangle]
pub extern "C" fn bc_error_message(err: *const bc_error) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    // SAFETY: non-null errors come from this library.
    unsafe { &*err }.message.as_ptr()
}

/// The OS error number (an `errno` value such as ENOENT, ENOSPC, EACCES)
/// of the system call that failed, when the error comes from one: a BC_IO
/// error the OS reported (the message ends with the OS's words for it), or
/// an error of another code whose cause was an OS error. 0 when the error
/// has no OS cause (the library detected it itself) and for NULL.
#[no_mangle]
pub extern "C" fn bc_error_errno(err: *const bc_error) -> c_int {
    if err.is_null() {
        return 0;
    }
    // SAFETY: non-null errors come from this library.
    unsafe { &*err }.os_errno
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
