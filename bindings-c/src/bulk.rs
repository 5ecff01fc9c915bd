//! Bulk load: a C callback's items fed to the engine's bulk load.

use std::ffi::{c_int, c_void};

use engine::Bytes;

use crate::boundary::{bytes, call, engine_err, invalid, store_ref, Fail};
use crate::sized::{self, own_size};
use crate::{bc_code, bc_error, bc_store};
/// One item of a bulk load, filled by the `next` callback of
/// `bc_bulk_load`. Its bytes are copied before `next` is called again, so
/// they need to stay valid only until then.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_bulk_item {
    /// The size of this struct as the library knows it (set by the
    /// library before each call): fill a field added after the program's
    /// header was released only when BC_HAS_FIELD(item, bc_bulk_item,
    /// field).
    pub struct_size: usize,
    pub key: *const u8,
    pub key_len: usize,
    pub value: *const u8,
    pub value_len: usize,
}

/// What `bc_bulk_load` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_load_report {
    /// The size of this struct as the program knows it: set by
    /// BC_LOAD_REPORT_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
    /// Objects committed.
    pub objects: u64,
    /// Their value bytes.
    pub bytes: u64,
    /// Commit groups they were made visible in (each all-or-nothing).
    pub groups: u64,
    /// Nanoseconds the whole load took.
    pub elapsed_nanos: u64,
}

/// The items a C callback yields, as the iterator the engine's bulk load
/// takes. Records why it stopped early, if it did.
struct CallbackItems {
    next: unsafe extern "C" fn(item: *mut bc_bulk_item, ctx: *mut c_void) -> c_int,
    ctx: *mut c_void,
    given: u64,
    stopped: Option<Fail>,
}

// SAFETY: the engine's blocking bulk load drives its future on the calling
// thread (`block_on`), and the iterator is advanced only from that future,
// so `ctx` and the callback are used on the thread that passed them, as
// the header promises; `Send` is needed only by the future's signature.
unsafe impl Send for CallbackItems {}

impl Iterator for CallbackItems {
    type Item = (Bytes, Bytes);

    fn next(&mut self) -> Option<(Bytes, Bytes)> {
        if self.stopped.is_some() {
            return None;
        }
        let mut item = bc_bulk_item {
            struct_size: own_size::<bc_bulk_item>(),
            key: std::ptr::null(),
            key_len: 0,
            value: std::ptr::null(),
            value_len: 0,
        };
        // SAFETY: the caller's non-NULL callback, called as the header
        // states: `item` is writable during the call, `ctx` passed through.
        let rc = unsafe { (self.next)(&mut item, self.ctx) };
        if rc == 0 {
            return None;
        }
        let n = self.given;
        if rc < 0 {
            self.stopped = Some(Fail::new(
                bc_code::BC_CANCELLED,
                format!(
                    "bulk_load: the item callback returned {rc} after {n} items; they are loaded"
                ),
            ));
            return None;
        }
        let copy = |ptr, len, what| {
            bytes(ptr, len, what)
                .map(Bytes::copy_from_slice)
                .map_err(|mut f| {
                    f.message.push_str(&format!(
                        " (item {n} of bulk_load; the {n} before it are loaded)"
                    ));
                    f
                })
        };
        match (
            copy(item.key, item.key_len, "key"),
            copy(item.value, item.value_len, "value"),
        ) {
            (Ok(key), Ok(value)) => {
                self.given += 1;
                Some((key, value))
            }
            (Err(e), _) | (_, Err(e)) => {
                self.stopped = Some(e);
                None
            }
        }
    }
}

/// Loads many objects at sequential-write speed, replacing existing keys:
/// `next(item, ctx)` is called on this thread for one item at a time and
/// returns 1 (or any positive value) after filling `*item`, 0 when there
/// are no more, or a negative value to stop the load. The item's bytes are
/// copied before the next call. Values are taken in batches as they are
/// written, so memory stays bounded whatever the total. Objects become
/// visible commit group by commit group, in the order given; a crash
/// leaves a prefix of them. `out` may be NULL.
///
/// `next` must not call `bc_close` or `bc_store_free` on this store.
///
/// Errors: BC_CANCELLED when `next` returned a negative value: the items
/// given before it are loaded and `*out` says so. BC_INVALID_ARGUMENT if
/// `store` or `next` is NULL, or an item's key or value is NULL with a
/// length (the items before it are loaded) or its key is empty;
/// BC_TOO_LARGE for a key over the maximum; BC_UNSUPPORTED on a read-only
/// store; BC_NO_SPACE when the store is full; BC_CLOSED after bc_close.
/// On an engine error the objects of the groups committed before it stay
/// (the message says how many) and `*out` is not filled.
#[no_mangle]
pub extern "C" fn bc_bulk_load(
    store: *const bc_store,
    next: Option<unsafe extern "C" fn(item: *mut bc_bulk_item, ctx: *mut c_void) -> c_int>,
    ctx: *mut c_void,
    out: *mut bc_load_report,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let Some(next) = next else {
            return Err(invalid("next is NULL"));
        };
        let out = sized::optional(out, "out")?;
        let mut items = CallbackItems {
            next,
            ctx,
            given: 0,
            stopped: None,
        };
        let r = s.store.bulk_load(&mut items).map_err(engine_err)?;
        if let Some(out) = &out {
            out.write(bc_load_report {
                struct_size: std::mem::size_of::<bc_load_report>(),
                objects: r.objects,
                bytes: r.bytes,
                groups: r.groups,
                elapsed_nanos: u64::try_from(r.elapsed.as_nanos()).unwrap_or(u64::MAX),
            });
        }
        match items.stopped {
            Some(stop) => Err(stop),
            None => Ok(()),
        }
    })
}
