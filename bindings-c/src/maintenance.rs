//! Calls on the whole store: its figures, growing it, compaction, the sync
//! barrier and backups.

use std::ffi::c_char;

use crate::boundary::{call, engine_err, path_ref, store_ref};
use crate::sized;
use crate::{bc_backup_report, bc_code, bc_compact_report, bc_error, bc_stats, bc_store};
/// Fills `*out` with the store's figures.
#[no_mangle]
pub extern "C" fn bc_store_stats(
    store: *const bc_store,
    out: *mut bc_stats,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = sized::required(out, "out")?;
        let st = s.store.stats();
        out.write(bc_stats {
            struct_size: std::mem::size_of::<bc_stats>(),
            objects: st.objects,
            logical_bytes: st.logical_bytes,
            allocated_bytes: st.allocated_bytes,
            metadata_bytes: st.metadata_bytes,
            free_bytes: st.free_bytes,
            capacity: st.capacity,
            device_bytes_written: st.device_bytes_written,
            user_bytes_written: st.user_bytes_written,
            commit_groups: st.commit_groups,
            direct_io: st.direct_io,
            rolled_back_groups: st.recovery.rolled_back_groups,
            rolled_back_objects: st.recovery.rolled_back_objects,
            repaired: st.recovery.repaired.len() as u64,
            cache_hits: st.cache.hits,
            cache_misses: st.cache.misses,
            cache_bytes: st.cache.bytes,
            cache_capacity: st.cache.capacity,
            largest_free_piece: st.largest_free_piece,
            max_capacity: st.max_capacity.unwrap_or(0),
            clean: st.recovery.clean,
            skipped: st.recovery.skipped.len() as u64,
            hits: st.hits,
            misses: st.misses,
            evictions: st.evictions,
            evicted_bytes: st.evicted_bytes,
        });
        Ok(())
    })
}

/// Grows the store file to `capacity` bytes (rounded down to 4096) now,
/// ahead of the growth a put would trigger: the space is reserved on the
/// file system and the new size is durable on return (`bc_stats.capacity`).
/// The current size is a no-op.
///
/// Errors: BC_INVALID_ARGUMENT if `store` is NULL, `capacity` is below the
/// store's size (a store never shrinks) or above its `max_capacity`;
/// BC_UNSUPPORTED on a block device or a read-only store; BC_NO_SPACE when
/// the file system is full (the store keeps its size); BC_CLOSED after
/// bc_close; BC_IO otherwise.
#[no_mangle]
pub extern "C" fn bc_grow(
    store: *const bc_store,
    capacity: u64,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        store_ref(store)?.store.grow(capacity).map_err(engine_err)
    })
}

/// Moves objects towards the start of the store's heap so that free space
/// left in small holes by deletes joins into large pieces, and an object
/// as large as a good part of the free space fits again. A put that finds
/// no room although enough is free does this by itself; call it to do it
/// ahead of time (e.g. after deleting many objects). Reads and writes from
/// other threads go on meanwhile; moved objects keep their version,
/// creation time and expiry. One compaction runs at a time (a second call
/// waits for the first). `out` may be NULL.
///
/// Errors: BC_INVALID_ARGUMENT if `store` is NULL; BC_UNSUPPORTED on a
/// read-only store; BC_CLOSED after bc_close (also when bc_close runs
/// during the compaction); BC_IO otherwise.
#[no_mangle]
pub extern "C" fn bc_compact(
    store: *const bc_store,
    out: *mut bc_compact_report,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = sized::optional(out, "out")?;
        let r = s.store.compact().map_err(engine_err)?;
        if let Some(out) = out {
            out.write(bc_compact_report {
                struct_size: std::mem::size_of::<bc_compact_report>(),
                moved: r.moved,
                bytes_moved: r.bytes_moved,
                largest_free_before: r.largest_free_before,
                largest_free_after: r.largest_free_after,
                elapsed_micros: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
            });
        }
        Ok(())
    })
}

/// Barrier: returns once everything acknowledged before it is durable.
#[no_mangle]
pub extern "C" fn bc_sync(store: *const bc_store, err: *mut *mut bc_error) -> bc_code {
    call(err, || store_ref(store)?.store.sync().map_err(engine_err))
}

/// Writes a consistent copy of the store to `dest`, a path that must not
/// exist yet, while other threads go on reading and writing. The copy holds
/// the objects live when the call started (compacted: only live data), is
/// reopened and checked against the source's bytes before this returns,
/// and appears under `dest` only once complete: open it with `bc_open`. A
/// file copy (`cp`) of an open store is not a backup. `out` may be NULL.
///
/// Errors: BC_ALREADY_EXISTS if `dest` exists (nothing is ever replaced);
/// BC_NOT_FOUND if the directory of `dest` does not exist;
/// BC_INVALID_ARGUMENT if `store` or `dest` is NULL or `dest` names no
/// file (e.g. "/"); BC_CLOSED after bc_close; BC_CORRUPT
/// if an object of the store fails its checksums (no copy is made);
/// BC_NO_SPACE if the destination's file system cannot hold a store of this
/// one's capacity; BC_IO otherwise.
#[no_mangle]
pub extern "C" fn bc_backup(
    store: *const bc_store,
    dest: *const c_char,
    out: *mut bc_backup_report,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let dest = path_ref(dest, "dest")?;
        let out = sized::optional(out, "out")?;
        let r = s.store.backup(dest).map_err(engine_err)?;
        if let Some(out) = out {
            out.write(bc_backup_report {
                struct_size: std::mem::size_of::<bc_backup_report>(),
                objects: r.objects,
                bytes: r.bytes,
                elapsed_nanos: u64::try_from(r.elapsed.as_nanos()).unwrap_or(u64::MAX),
            });
        }
        Ok(())
    })
}
