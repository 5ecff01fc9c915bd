//! Calls on one object by key: the puts (conditional, with a time to live),
//! get, read, read into a caller's buffer, stat, delete and contains.

use std::time::Duration;

use engine::{Bytes, PutMode, PutOptions};

use crate::boundary::{
    bytes, call, engine_err, fill_buf, info_of, invalid, out_ref, store_ref, Fail,
};
use crate::sized;
use crate::{bc_buf, bc_code, bc_error, bc_info, bc_put_mode, bc_store};
/// Stores `val[0..val_len]` under `key[0..key_len]`, durably. `info` may
/// be NULL.
#[no_mangle]
pub extern "C" fn bc_put(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    info: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    let overwrite = bc_put_mode::BC_PUT_OVERWRITE as u32;
    bc_put_if(store, key, key_len, val, val_len, overwrite, 0, info, err)
}

/// `bc_put` with a condition, decided in commit order (of racing creates
/// exactly one succeeds): `mode` is a `bc_put_mode` value; `version` is the
/// version `BC_PUT_UPDATE` replaces (ignored by the other modes). A refused
/// put changes nothing.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn bc_put_if(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    mode: u32,
    version: u64,
    info: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        put(
            store,
            (key, key_len),
            (val, val_len),
            mode,
            version,
            None,
            info,
        )
    })
}

/// `bc_put` with a time to live: the object expires `ttl_micros`
/// microseconds after its commit, by the wall clock (`bc_info`'s
/// `expires_unix_micros`). From then on it is invisible (BC_NOT_FOUND to
/// `bc_get`/`bc_stat`, false to `bc_contains`) and its space is freed in the
/// background. A later put without a ttl replaces it with an object that
/// never expires.
///
/// Errors: BC_INVALID_ARGUMENT when `ttl_micros` is 0 (there is no "no
/// ttl" value: use `bc_put`) or above BC_MAX_TTL_MICROS; nothing is
/// stored then. Otherwise as `bc_put`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn bc_put_ttl(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    ttl_micros: u64,
    info: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    let overwrite = bc_put_mode::BC_PUT_OVERWRITE as u32;
    bc_put_if_ttl(
        store, key, key_len, val, val_len, overwrite, 0, ttl_micros, info, err,
    )
}

/// `bc_put_if` with a time to live (see `bc_put_ttl`): the condition is
/// checked against the key's visible object, so an expired one counts as
/// absent. A ttl of 0 or above BC_MAX_TTL_MICROS is BC_INVALID_ARGUMENT
/// and stores nothing.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn bc_put_if_ttl(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    mode: u32,
    version: u64,
    ttl_micros: u64,
    info: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        // 0 is passed on, not taken as "no ttl": the engine refuses it.
        let ttl = Some(Duration::from_micros(ttl_micros));
        put(
            store,
            (key, key_len),
            (val, val_len),
            mode,
            version,
            ttl,
            info,
        )
    })
}

/// A `bc_put_mode` value and the version `BC_PUT_UPDATE` replaces, as the
/// engine's condition.
pub(crate) fn put_mode(mode: u32, version: u64) -> Result<PutMode, Fail> {
    match mode {
        0 => Ok(PutMode::Overwrite),
        1 => Ok(PutMode::Create),
        2 => Ok(PutMode::Update(version)),
        _ => Err(invalid("unknown put mode")),
    }
}

/// The put behind `bc_put*`: `ttl` None = the object never expires.
fn put(
    store: *const bc_store,
    (key, key_len): (*const u8, usize),
    (val, val_len): (*const u8, usize),
    mode: u32,
    version: u64,
    ttl: Option<Duration>,
    info: *mut bc_info,
) -> Result<(), Fail> {
    let mut options = PutOptions::from(put_mode(mode, version)?);
    if let Some(ttl) = ttl {
        options = options.ttl(ttl);
    }
    let s = store_ref(store)?;
    let info = sized::optional(info, "info")?;
    let key = bytes(key, key_len, "key")?;
    let val = Bytes::copy_from_slice(bytes(val, val_len, "value")?);
    let i = s.store.put_with(key, val, options).map_err(engine_err)?;
    if let Some(info) = info {
        info.write(info_of(&i));
    }
    Ok(())
}

/// The whole object, into `*out` (release with bc_buf_free).
#[no_mangle]
pub extern "C" fn bc_get(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    out: *mut bc_buf,
    err: *mut *mut bc_error,
) -> bc_code {
    bc_read(store, key, key_len, 0, u64::MAX, out, err)
}

/// `len` bytes from `offset` (clipped at the end), into `*out` (release
/// with bc_buf_free). An offset past the end is BC_INVALID_ARGUMENT.
#[no_mangle]
pub extern "C" fn bc_read(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    offset: u64,
    len: u64,
    out: *mut bc_buf,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = out_ref(out, "out")?;
        let key = bytes(key, key_len, "key")?;
        let b = s.store.read(key, offset, len).map_err(engine_err)?;
        fill_buf(out, b);
        Ok(())
    })
}

/// Reads up to `dst_len` bytes from `offset` into the caller's buffer;
/// `*out_len` receives how many were written (fewer at the end).
#[no_mangle]
pub extern "C" fn bc_read_into(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    offset: u64,
    dst: *mut u8,
    dst_len: usize,
    out_len: *mut usize,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out_len = out_ref(out_len, "out_len")?;
        let key = bytes(key, key_len, "key")?;
        if dst.is_null() && dst_len > 0 {
            return Err(invalid("dst is NULL"));
        }
        let b = s
            .store
            .read(key, offset, dst_len as u64)
            .map_err(engine_err)?;
        if !b.is_empty() {
            // SAFETY: dst is non-null with room for dst_len >= b.len() bytes.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst, b.len()) };
        }
        *out_len = b.len();
        Ok(())
    })
}

/// Size, version, commit time and expiry of `key` (BC_NOT_FOUND once it
/// has expired).
#[no_mangle]
pub extern "C" fn bc_stat(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    out: *mut bc_info,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = sized::required(out, "out")?;
        let key = bytes(key, key_len, "key")?;
        out.write(info_of(&s.store.stat(key).map_err(engine_err)?));
        Ok(())
    })
}

/// Deletes `key` durably (BC_NOT_FOUND when absent).
#[no_mangle]
pub extern "C" fn bc_delete(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let key = bytes(key, key_len, "key")?;
        s.store.delete(key).map_err(engine_err)
    })
}

/// Sets `*out` to whether `key` has an object.
#[no_mangle]
pub extern "C" fn bc_contains(
    store: *const bc_store,
    key: *const u8,
    key_len: usize,
    out: *mut bool,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = out_ref(out, "out")?;
        *out = s.store.contains(bytes(key, key_len, "key")?);
        Ok(())
    })
}
