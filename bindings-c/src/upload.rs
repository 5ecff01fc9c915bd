//! Multipart uploads: begin, write a part, commit, abort, and the uploads
//! in progress (listed, aborted by id).

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{SystemTime, UNIX_EPOCH};

use engine::Bytes;

use crate::boundary::{bytes, call, engine_err, info_of, invalid, out_ref, store_ref};
use crate::sized::{self, own_size};
use crate::{bc_code, bc_error, bc_info, bc_store, bc_upload, bc_upload_info};
/// Starts a multipart upload of exactly `size` bytes; `*out` receives the
/// upload, which bc_upload_commit or bc_upload_abort consumes.
#[no_mangle]
pub extern "C" fn bc_upload_begin(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    size: u64,
    out: *mut *mut bc_upload,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = out_ref(out, "out")?;
        let upload = s
            .store
            .begin_upload(bytes(key, key_len, "key")?, size)
            .map_err(engine_err)?;
        *out = Box::into_raw(Box::new(bc_upload { upload }));
        Ok(())
    })
}

/// Writes one part at `offset` (a multiple of 4096; parts end on a multiple
/// of 4096 or at the object's end). Parts may come in any order and from
/// several threads at once.
#[no_mangle]
pub extern "C" fn bc_upload_write(
    up: *const bc_upload,
    offset: u64,
    data: *const u8,
    len: usize,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        if up.is_null() {
            return Err(invalid("upload is NULL"));
        }
        // SAFETY: non-null uploads come from bc_upload_begin and are valid
        // until committed or aborted.
        let up = unsafe { &*up };
        let part = Bytes::copy_from_slice(bytes(data, len, "data")?);
        up.upload.write_part(offset, part).map_err(engine_err)
    })
}

/// Commits the upload atomically and frees the handle (on failure too).
/// `info` may be NULL. No `bc_upload_write` on the handle may be running
/// (the handle is freed here). Bytes count as written once a
/// `bc_upload_write` of them returned BC_OK; a write that failed after it
/// started leaves its range unwritten, and the commit then fails with
/// BC_INVALID_ARGUMENT for the bytes never written.
#[no_mangle]
pub extern "C" fn bc_upload_commit(
    up: *mut bc_upload,
    info: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        if up.is_null() {
            return Err(invalid("upload is NULL"));
        }
        // SAFETY: uploads are boxed by bc_upload_begin; this call takes
        // ownership back exactly once.
        let up = unsafe { Box::from_raw(up) };
        // Checked before the commit: a refused `info` frees the handle
        // uncommitted, as any failure does.
        let info = sized::optional(info, "info")?;
        let i = up.upload.commit().map_err(engine_err)?;
        if let Some(info) = info {
            info.write(info_of(&i));
        }
        Ok(())
    })
}

/// Abandons the upload, frees its space and the handle. NULL is a no-op.
#[no_mangle]
pub extern "C" fn bc_upload_abort(up: *mut bc_upload) -> bc_code {
    call(std::ptr::null_mut(), || {
        if !up.is_null() {
            // SAFETY: as in bc_upload_commit.
            let up = unsafe { Box::from_raw(up) };
            up.upload.abort().map_err(engine_err)?;
        }
        Ok(())
    })
}

/// The upload's id in `bc_list_uploads` (for `bc_abort_upload`); 0 for
/// NULL (no upload has id 0).
#[no_mangle]
pub extern "C" fn bc_upload_id(up: *const bc_upload) -> u64 {
    catch_unwind(AssertUnwindSafe(|| {
        if up.is_null() {
            return 0;
        }
        // SAFETY: non-null uploads come from bc_upload_begin and are valid
        // until committed or aborted.
        unsafe { &*up }.upload.id()
    }))
    .unwrap_or(0)
}

/// Microseconds since the Unix epoch (negative before it).
fn unix_micros(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_micros()).map_or(i64::MIN, |m| -m),
    }
}

/// Calls `visit(info, ctx)` for each upload in progress on the store
/// (begun through this process's open store and neither committed, aborted
/// nor freed), oldest first, until `visit` returns non-zero. `info` and
/// its `key` are valid only during that call. The listing is taken before
/// the first call, so `visit` may call the store, `bc_abort_upload`
/// included. Memory only, no I/O. Uploads are not persisted: one not
/// committed when the process ends is gone at the next open, its space
/// free.
///
/// Errors: BC_INVALID_ARGUMENT if `store` or `visit` is NULL; BC_CLOSED
/// after bc_close. Stopping early is BC_OK.
#[no_mangle]
pub extern "C" fn bc_list_uploads(
    store: *const bc_store,
    visit: Option<unsafe extern "C" fn(info: *const bc_upload_info, ctx: *mut c_void) -> c_int>,
    ctx: *mut c_void,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let Some(visit) = visit else {
            return Err(invalid("visit is NULL"));
        };
        for u in s.store.list_uploads() {
            let info = bc_upload_info {
                struct_size: own_size::<bc_upload_info>(),
                id: u.id,
                key: u.key.as_ptr(),
                key_len: u.key.len(),
                size: u.size,
                written: u.written,
                started_micros: unix_micros(u.started),
            };
            // SAFETY: `visit` is the caller's non-NULL function, called
            // as the header states: `info` (and the key it points to) live
            // until it returns, and `ctx` is passed through untouched.
            if unsafe { visit(&info, ctx) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

/// Aborts upload `id` (`bc_upload_id`, `bc_upload_info.id`) wherever its
/// handle is: its space is freed once parts being written finish, and the
/// handle's later `bc_upload_write` and `bc_upload_commit` fail with
/// BC_CLOSED. The handle itself stays allocated: release it with
/// `bc_upload_abort` (then a no-op returning BC_OK) or `bc_upload_commit`.
/// A commit already under way is not stopped. Not to be confused with
/// `bc_upload_abort`, which takes the handle.
///
/// Errors: BC_NOT_FOUND when no such upload is in progress (already
/// committed, aborted or freed); BC_INVALID_ARGUMENT if `store` is NULL;
/// BC_CLOSED after bc_close.
#[no_mangle]
pub extern "C" fn bc_abort_upload(
    store: *const bc_store,
    id: u64,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        store_ref(store)?.store.abort_upload(id).map_err(engine_err)
    })
}
