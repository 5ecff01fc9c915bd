//! Opening a store: the default options, their conversion to the engine's
//! `Options`, and `bc_open`.

use std::ffi::c_char;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use engine::blocking::Store;
use engine::{Durability, Eviction, IndexKind, IoEngineKind, Options};

use crate::boundary::{call, engine_err, invalid, path_ref, Fail};
use crate::sized::{out_of_size, read_in};
use crate::{
    bc_code, bc_durability, bc_error, bc_eviction, bc_index, bc_io_engine, bc_options, bc_store,
};

/// Fills `*opts` with the default options, as BC_OPTIONS_INIT does (for
/// callers that cannot use a C macro, e.g. through an FFI): `struct_size`
/// is the program's `sizeof(bc_options)`, and only that many bytes are
/// written.
///
/// Errors: BC_INVALID_ARGUMENT if `opts` is NULL or `struct_size` is no
/// size a blobcask.h gave bc_options; nothing is written then.
#[no_mangle]
pub extern "C" fn bc_options_init(
    opts: *mut bc_options,
    struct_size: usize,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        out_of_size(opts, struct_size, "opts")?.write(defaults());
        Ok(())
    })
}

/// The defaults: what BC_OPTIONS_INIT spells out, and what a field beyond
/// an older program's `struct_size` takes.
fn defaults() -> bc_options {
    bc_options {
        struct_size: std::mem::size_of::<bc_options>(),
        capacity: 0,
        index: bc_index::BC_INDEX_STORED as u32,
        io_engine: bc_io_engine::BC_IO_AUTO as u32,
        inline_threshold: -1,
        direct_io: 1,
        create: 1,
        create_new: 0,
        read_only: 0,
        cache_bytes: -1,
        max_capacity: 0,
        durability: bc_durability::BC_DURABILITY_SYNC as u32,
        max_delay_micros: 0,
        salvage: 0,
        eviction: bc_eviction::BC_EVICTION_NONE as u64,
    }
}

fn options_of(o: &bc_options) -> Result<Options, Fail> {
    let mut opts = Options::new();
    if o.capacity > 0 {
        opts = opts.capacity(o.capacity);
    }
    // Only what the caller set: an index, threshold or limit passed here
    // would replace the one the store has stored.
    match o.index {
        0 => opts = opts.index(IndexKind::Hash),
        1 => opts = opts.index(IndexKind::BTree),
        2 => opts = opts.index(IndexKind::Fst),
        3 => {}
        _ => return Err(invalid("unknown index")),
    }
    if o.max_capacity > 0 {
        opts = opts.max_capacity(o.max_capacity);
    }
    opts = opts.io_engine(match o.io_engine {
        0 => IoEngineKind::Auto,
        1 => IoEngineKind::IoUring,
        2 => IoEngineKind::Portable,
        _ => return Err(invalid("unknown io_engine")),
    });
    match o.inline_threshold {
        -1 => {}
        t => {
            let t = usize::try_from(t).map_err(|_| {
                invalid(&format!(
                    "inline_threshold must be -1 (the stored one) or a size, not {t}"
                ))
            })?;
            opts = opts.inline_threshold(t);
        }
    }
    opts = opts.durability(match (o.durability, o.max_delay_micros) {
        (0, 0) => Durability::Sync,
        (0, _) => {
            return Err(invalid(
                "max_delay_micros is for BC_DURABILITY_BUFFERED only; leave it 0",
            ))
        }
        (1, 0) => {
            return Err(invalid(
                "max_delay_micros must be more than 0 with BC_DURABILITY_BUFFERED",
            ))
        }
        (1, micros) => Durability::Buffered {
            max_delay: Duration::from_micros(micros),
        },
        (d, _) => return Err(invalid(&format!("unknown durability {d}"))),
    });
    opts = opts.eviction(match o.eviction {
        0 => Eviction::None,
        1 => Eviction::S3Fifo,
        e => return Err(invalid(&format!("unknown eviction {e}"))),
    });
    match o.cache_bytes {
        -1 => {}
        c => {
            let c = u64::try_from(c)
                .map_err(|_| invalid("cache_bytes must be -1 (default), 0 (off) or a size"))?;
            opts = opts.cache_bytes(c);
        }
    }
    let flag = |v: i32, name: &str| match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(invalid(&format!("{name} must be 0 or 1, not {v}"))),
    };
    Ok(opts
        .direct_io(flag(o.direct_io, "direct_io")?)
        .create(flag(o.create, "create")?)
        .create_new(flag(o.create_new, "create_new")?)
        .read_only(flag(o.read_only, "read_only")?)
        .salvage(flag(o.salvage, "salvage")?))
}

/// Opens (creating when missing) the store at `path`. `opts` may be NULL
/// for defaults. Returns NULL on failure, with `*err` set when `err` is
/// not NULL: BC_INVALID_ARGUMENT among others when `opts->struct_size` is
/// no size a blobcask.h gave bc_options (start from BC_OPTIONS_INIT).
#[no_mangle]
pub extern "C" fn bc_open(
    path: *const c_char,
    opts: *const bc_options,
    err: *mut *mut bc_error,
) -> *mut bc_store {
    let mut handle = std::ptr::null_mut();
    call(err, || {
        let path = path_ref(path, "path")?;
        let options = if opts.is_null() {
            options_of(&defaults())?
        } else {
            options_of(&read_in(opts, defaults(), "opts")?)?
        };
        let store = Store::open(path, options).map_err(engine_err)?;
        handle = Box::into_raw(Box::new(bc_store {
            store,
            closed: AtomicBool::new(false),
        }));
        Ok(())
    });
    handle
}
