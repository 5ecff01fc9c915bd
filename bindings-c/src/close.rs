//! Giving back what the library handed out: closing and freeing a store,
//! releasing a buffer.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use engine::Bytes;

use crate::boundary::{call, engine_err, store_ref, Fail};
use crate::{bc_buf, bc_code, bc_error, bc_store};
/// Closes the store: pending commits finish, the lock is released. The
/// handle stays valid (calls return BC_CLOSED) until bc_store_free. A
/// second close returns BC_CLOSED.
#[no_mangle]
pub extern "C" fn bc_close(store: *const bc_store, err: *mut *mut bc_error) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        if s.closed.swap(true, Ordering::AcqRel) {
            return Err(Fail::new(bc_code::BC_CLOSED, "the store is already closed"));
        }
        s.store.close().map_err(engine_err)
    })
}

/// Frees the handle (closing the store first if needed). NULL is a no-op.
/// When this frees the last store of the process, and none of its uploads
/// or cursors is left, no thread of the library runs after it returns.
#[no_mangle]
pub extern "C" fn bc_store_free(store: *mut bc_store) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !store.is_null() {
            // SAFETY: handles are boxed by bc_open; freed exactly once.
            let handle = unsafe { Box::from_raw(store) };
            // Close now, not when the last clone goes: an upload still
            // outstanding holds one, and must not commit after the free.
            // (Already closed is fine; a failing close has nowhere to
            // report, as the header says of bc_store_free.)
            let _ = handle.store.close();
        }
    }));
}

/// Releases a buffer filled by bc_get/bc_read and resets it. NULL and an
/// already-released buffer are no-ops.
#[no_mangle]
pub extern "C" fn bc_buf_free(buf: *mut bc_buf) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if buf.is_null() {
            return;
        }
        // SAFETY: non-null, points to a bc_buf.
        let buf = unsafe { &mut *buf };
        if !buf.owner.is_null() {
            // SAFETY: owner was produced by fill_buf from a Box<Bytes>.
            drop(unsafe { Box::from_raw(buf.owner.cast::<Bytes>()) });
        }
        buf.data = std::ptr::null();
        buf.len = 0;
        buf.owner = std::ptr::null_mut();
    }));
}
