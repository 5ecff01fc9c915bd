//! Atomic batches: puts and deletes gathered in a `bc_batch`, committed
//! all or nothing (one commit, one sync) by `bc_batch_commit`.

use engine::{blocking, BatchOutcome, Bytes, PutOptions};

use crate::boundary::{bytes, call, engine_err, info_of, invalid, out_ref, store_ref, Fail};
use crate::objects::put_mode;
use crate::sized;
use crate::{bc_code, bc_error, bc_info, bc_store};

/// Puts and deletes to commit together (opaque). Used by one thread at a
/// time; nothing is written before `bc_batch_commit`.
pub struct bc_batch {
    batch: blocking::Batch,
}

/// Borrows a batch for a call.
fn batch_mut<'a>(batch: *mut bc_batch) -> Result<&'a mut bc_batch, Fail> {
    out_ref(batch, "batch")
}

/// A new, empty batch on `store` into `*out` (free with `bc_batch_free`).
#[no_mangle]
pub extern "C" fn bc_batch_new(
    store: *const bc_store,
    out: *mut *mut bc_batch,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = out_ref(out, "out")?;
        *out = Box::into_raw(Box::new(bc_batch {
            batch: s.store.batch(),
        }));
        Ok(())
    })
}

/// Adds a put of `val[0..val_len]` under `key[0..key_len]` (both copied),
/// with a condition as `bc_put_if`'s: `mode` a `bc_put_mode` value,
/// `version` the version BC_PUT_UPDATE requires.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn bc_batch_put(
    batch: *mut bc_batch,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    mode: u32,
    version: u64,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let mode = put_mode(mode, version)?;
        let b = batch_mut(batch)?;
        let key = bytes(key, key_len, "key")?;
        let val = Bytes::copy_from_slice(bytes(val, val_len, "value")?);
        b.batch.put_with(key, val, PutOptions::from(mode));
        Ok(())
    })
}

/// Adds a delete of `key[0..key_len]`. A key without an object is no
/// change, not an error.
#[no_mangle]
pub extern "C" fn bc_batch_delete(
    batch: *mut bc_batch,
    key: *const u8,
    key_len: usize,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let b = batch_mut(batch)?;
        b.batch.delete(bytes(key, key_len, "key")?);
        Ok(())
    })
}

/// Adds a delete of `key[0..key_len]` only if it holds `version`
/// (BC_VERSION_MISMATCH from `bc_batch_commit` otherwise).
#[no_mangle]
pub extern "C" fn bc_batch_delete_if(
    batch: *mut bc_batch,
    key: *const u8,
    key_len: usize,
    version: u64,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let b = batch_mut(batch)?;
        b.batch
            .delete_if_version(bytes(key, key_len, "key")?, version);
        Ok(())
    })
}

/// How many operations the batch holds (0 for NULL).
#[no_mangle]
pub extern "C" fn bc_batch_len(batch: *const bc_batch) -> usize {
    if batch.is_null() {
        return 0;
    }
    // SAFETY: non-null batches come from bc_batch_new and are valid until
    // bc_batch_free.
    unsafe { &*batch }.batch.len()
}

/// Commits every operation or none; durable on BC_OK. The batch is empty
/// afterwards, whatever the result (free it with `bc_batch_free`, or fill
/// it again), except when refused before the commit for its own
/// arguments (NULL batch, too few `infos`, an `infos` entry whose
/// `struct_size` is not set).
///
/// `infos` may be NULL; otherwise it is an array of `infos_len` entries,
/// at least `bc_batch_len(batch)` (else BC_INVALID_ARGUMENT, nothing
/// committed), each initialised with `BC_INFO_INIT` (the array's stride is
/// its entries' `struct_size`, which must all be the same), and receives
/// per operation in order a put's new version's info, or, for a delete,
/// all zeros except `size` = 1 when it removed an object.
///
/// `failed_op` may be NULL; otherwise it receives the index of the
/// operation that refused the batch (a failed condition:
/// BC_ALREADY_EXISTS, BC_VERSION_MISMATCH; a bad key or value, or a key
/// twice: BC_INVALID_ARGUMENT, ...), or SIZE_MAX when the batch committed
/// or failed as a whole. A refused batch changes nothing.
#[no_mangle]
pub extern "C" fn bc_batch_commit(
    batch: *mut bc_batch,
    infos: *mut bc_info,
    infos_len: usize,
    failed_op: *mut usize,
    err: *mut *mut bc_error,
) -> bc_code {
    if !failed_op.is_null() {
        // SAFETY: non-null and, per the header, points to a writable size_t.
        unsafe { *failed_op = usize::MAX };
    }
    call(err, || {
        let b = batch_mut(batch)?;
        let n = b.batch.len();
        let outs = if infos.is_null() {
            Vec::new()
        } else {
            if infos_len < n {
                return Err(invalid(
                    "infos has fewer entries than the batch has operations",
                ));
            }
            info_slots(infos, n)?
        };
        let outcomes = b.batch.commit().map_err(|e| {
            if let (Some(i), false) = (e.batch_op(), failed_op.is_null()) {
                // SAFETY: as above.
                unsafe { *failed_op = i };
            }
            engine_err(e)
        })?;
        for (out, o) in outs.iter().zip(outcomes.iter()) {
            match o {
                BatchOutcome::Put(info) => out.write(info_of(info)),
                BatchOutcome::Deleted { existed } => out.write(bc_info {
                    struct_size: 0,
                    size: u64::from(*existed),
                    version: 0,
                    created_unix_micros: 0,
                    is_inline: false,
                    expires_unix_micros: 0,
                }),
                _ => return Err(invalid("a batch outcome this library does not know")),
            }
        }
        Ok(())
    })
}

/// The first `n` entries of the program's `infos` array, each checked
/// (its `struct_size` one a header gave `bc_info`, the same for all: the
/// array's stride) before anything is committed.
fn info_slots(infos: *mut bc_info, n: usize) -> Result<Vec<sized::Out<bc_info>>, Fail> {
    let first = sized::required(infos, "infos[0]")?;
    let stride = first.size();
    let mut outs = Vec::with_capacity(n);
    outs.push(first);
    for i in 1..n {
        // SAFETY: the program's array has `infos_len >= n` entries of
        // `stride` bytes each (its own sizeof, which it set in every
        // entry's struct_size: checked one by one).
        let entry = unsafe { infos.cast::<u8>().add(i * stride) }.cast::<bc_info>();
        let out = sized::required(entry, &format!("infos[{i}]"))?;
        if out.size() != stride {
            return Err(invalid(&format!(
                "infos[{i}].struct_size is {}, infos[0]'s {stride}: every entry of the array \
                 is initialised with the same BC_INFO_INIT",
                out.size()
            )));
        }
        outs.push(out);
    }
    Ok(outs)
}

/// Frees a batch (its operations are dropped, nothing written). NULL is a
/// no-op.
#[no_mangle]
pub extern "C" fn bc_batch_free(batch: *mut bc_batch) {
    if !batch.is_null() {
        // SAFETY: batches are boxed by bc_batch_new; this takes ownership
        // back exactly once.
        drop(unsafe { Box::from_raw(batch) });
    }
}
