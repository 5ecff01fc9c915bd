//! Key listings: the cursor, opened by prefix or over every key, advanced
//! one entry at a time, freed.

use std::panic::{catch_unwind, AssertUnwindSafe};

use engine::blocking::Store;
use engine::{Keys, ListEntry};

use crate::boundary::{
    bytes, call, created_micros, engine_err, expires_micros, out_ref, store_ref, Fail,
};
use crate::sized;
use crate::{bc_code, bc_error, bc_store};
/// One key of a listing, as `bc_list_next` fills it. `key` points to
/// `key_len` bytes owned by the cursor, valid until the next
/// `bc_list_next` or `bc_list_free` on it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_list_entry {
    /// The size of this struct as the program knows it: set by
    /// BC_LIST_ENTRY_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
    /// The key (not NUL-terminated).
    pub key: *const u8,
    pub key_len: usize,
    /// Object size in bytes.
    pub size: u64,
    pub version: u64,
    /// Commit time, microseconds since the Unix epoch.
    pub created_unix_micros: u64,
    /// When the object expires, microseconds since the Unix epoch; 0 =
    /// never. Expired objects are not listed.
    pub expires_unix_micros: u64,
}

/// A listing in progress (opaque): from `bc_list_open` or `bc_keys_open`,
/// advanced with `bc_list_next`, released with `bc_list_free`. Not
/// thread-safe: one thread at a time per cursor (several cursors may run at
/// once, alongside any other call on the store).
pub struct bc_list_cursor {
    /// The store listed: checked before every step, because the engine's
    /// iterator hands out the rest of a page it already copied even after
    /// the store closed.
    store: Store,
    keys: Keys,
    /// The entry `bc_list_next` last handed out: owns its key's bytes.
    current: Option<ListEntry>,
    /// The listing ended (or failed): every later call reports the end.
    done: bool,
}

fn cursor_out(out: *mut *mut bc_list_cursor, store: &Store, keys: Keys) -> Result<(), Fail> {
    *out_ref(out, "out")? = Box::into_raw(Box::new(bc_list_cursor {
        store: store.clone(),
        keys,
        current: None,
        done: false,
    }));
    Ok(())
}

/// Starts a listing of the keys that start with `prefix[0..prefix_len]`
/// (every key when `prefix_len` is 0), in byte order, with every index;
/// `*out` receives the cursor. The listing never blocks writers, reports
/// every key that exists for its whole duration once, and keys added or
/// removed meanwhile may or may not appear. With BC_INDEX_BTREE and
/// BC_INDEX_FST it is read from memory a page at a time as `bc_list_next`
/// goes. The hash index (BC_INDEX_HASH, the default) holds no keys: this
/// call reads them from the tuple blocks (one pass over the blocks that
/// hold a live object: it blocks for that long) and keeps the matching
/// ones, sorted; `bc_list_next` looks each up again (a key deleted by then
/// is skipped).
///
/// Errors: BC_INVALID_ARGUMENT if `store` or `out` is NULL or `prefix` is
/// NULL with a length; BC_CLOSED after bc_close; BC_CORRUPT or BC_IO if a
/// tuple block cannot be read (hash index). `*out` is left untouched on
/// failure.
#[no_mangle]
pub extern "C" fn bc_list_open(
    store: *const bc_store,
    prefix: *const u8,
    prefix_len: usize,
    out: *mut *mut bc_list_cursor,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        out_ref(out, "out")?;
        let prefix = bytes(prefix, prefix_len, "prefix")?;
        cursor_out(out, &s.store, s.store.list(prefix).map_err(engine_err)?)
    })
}

/// Starts a listing of every key, with any index: in byte order with
/// BC_INDEX_BTREE and BC_INDEX_FST (as `bc_list_open` with an empty
/// prefix); with the hash index in no particular order, from a snapshot of
/// the keys taken by this call (a key deleted meanwhile is skipped, one
/// added meanwhile is not seen). `*out` receives the cursor.
///
/// Errors: BC_INVALID_ARGUMENT if `store` or `out` is NULL; BC_CLOSED
/// after bc_close.
#[no_mangle]
pub extern "C" fn bc_keys_open(
    store: *const bc_store,
    out: *mut *mut bc_list_cursor,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        out_ref(out, "out")?;
        cursor_out(out, &s.store, s.store.keys().map_err(engine_err)?)
    })
}

/// Advances the cursor: on BC_OK, `*has_entry` says whether `*entry` holds
/// the next key (true) or the listing is over (false; every later call
/// says the same). The entry's `key` stays valid until the next call on
/// this cursor or `bc_list_free`.
///
/// A cursor outlives its store's handle safely: after bc_close or
/// bc_store_free this returns BC_CLOSED (and the listing is over).
///
/// Errors: BC_INVALID_ARGUMENT if `cursor`, `entry` or `has_entry` is
/// NULL; BC_CLOSED once the store is closed or freed; BC_CORRUPT or BC_IO
/// if the index cannot be read. After an error the listing is over.
#[no_mangle]
pub extern "C" fn bc_list_next(
    cursor: *mut bc_list_cursor,
    entry: *mut bc_list_entry,
    has_entry: *mut bool,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let c = out_ref(cursor, "cursor")?;
        let entry = sized::required(entry, "entry")?;
        let has_entry = out_ref(has_entry, "has_entry")?;
        c.current = None;
        if c.done {
            *has_entry = false;
            return Ok(());
        }
        if c.store.is_closed() {
            c.done = true;
            return Err(Fail::new(
                bc_code::BC_CLOSED,
                "the store of this listing is closed",
            ));
        }
        match c.keys.next() {
            None => {
                c.done = true;
                *has_entry = false;
                Ok(())
            }
            Some(Err(e)) => {
                c.done = true;
                Err(engine_err(e))
            }
            Some(Ok(e)) => {
                entry.write(bc_list_entry {
                    struct_size: std::mem::size_of::<bc_list_entry>(),
                    key: e.key.as_ptr(),
                    key_len: e.key.len(),
                    size: e.size,
                    version: e.version,
                    created_unix_micros: created_micros(e.created),
                    expires_unix_micros: expires_micros(e.expires),
                });
                *has_entry = true;
                c.current = Some(e);
                Ok(())
            }
        }
    })
}

/// Frees a cursor (at any point of its listing, before or after its
/// store's bc_close/bc_store_free). NULL is a no-op.
#[no_mangle]
pub extern "C" fn bc_list_free(cursor: *mut bc_list_cursor) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !cursor.is_null() {
            // SAFETY: cursors are boxed by bc_list_open/bc_keys_open and
            // freed exactly once.
            drop(unsafe { Box::from_raw(cursor) });
        }
    }));
}
