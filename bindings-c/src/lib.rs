//! C API over the blocking blobcask store.
//!
//! Every exported function catches panics and reports them as
//! `BC_INTERNAL`, so nothing unwinds into C; every pointer argument is
//! checked for NULL; errors carry a `bc_code` mapped one-to-one from
//! `ErrorKind` plus a message. Ownership rules are in the generated header.
// FFI: raw pointers cross this boundary; each dereference states why it holds.
#![allow(unsafe_code)]
#![allow(non_camel_case_types)]
// These functions are C entry points: their pointer contract is the one the
// header states, and every pointer is NULL-checked before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use engine::blocking::{Store, Upload};
use engine::{
    Bytes, Durability, Error, ErrorKind, IndexKind, IoEngineKind, Keys, ListEntry, ObjectInfo,
    Options, PutMode, PutOptions,
};

/// Longest time to live `bc_put_ttl` and `bc_put_if_ttl` accept, in
/// microseconds: 100 years of 365 days (the Rust `MAX_TTL`).
pub const BC_MAX_TTL_MICROS: u64 = 3_153_600_000_000_000;

/// Result codes. `BC_OK` is 0; every other value names an error kind.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_code {
    BC_OK = 0,
    BC_NOT_FOUND = 1,
    BC_INVALID_ARGUMENT = 2,
    BC_TOO_LARGE = 3,
    BC_NO_SPACE = 4,
    BC_CORRUPT = 5,
    BC_IO = 6,
    BC_LOCKED = 7,
    BC_UNSUPPORTED = 8,
    BC_CLOSED = 9,
    /// A create-only put found the key present.
    BC_ALREADY_EXISTS = 10,
    /// A put conditional on a version found another version or none.
    BC_VERSION_MISMATCH = 11,
    /// The caller stopped the call: a `bc_bulk_load` item callback returned
    /// a negative value.
    BC_CANCELLED = 12,
    /// A bug in blobcask (a caught panic); the message says where.
    BC_INTERNAL = 99,
}

/// Index backend (see the Rust `IndexKind`). The kind is stored in the
/// store: an explicit kind at a read-write open replaces the stored one (a
/// read-only open uses it for itself only).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_index {
    BC_INDEX_HASH = 0,
    BC_INDEX_BTREE = 1,
    BC_INDEX_FST = 2,
    /// The store's stored kind; BC_INDEX_HASH for a new store (the default).
    BC_INDEX_STORED = 3,
}

/// What a put may replace (see the Rust `PutMode`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_put_mode {
    /// Create or replace (what `bc_put` does).
    BC_PUT_OVERWRITE = 0,
    /// Create only: BC_ALREADY_EXISTS if the key has an object.
    BC_PUT_CREATE = 1,
    /// Replace only the version given: BC_VERSION_MISMATCH otherwise.
    BC_PUT_UPDATE = 2,
}

/// I/O engine (see the Rust `IoEngineKind`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_io_engine {
    BC_IO_AUTO = 0,
    BC_IO_URING = 1,
    BC_IO_PORTABLE = 2,
}

/// When an acknowledged change is durable (see the Rust `Durability`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_durability {
    /// A put, commit or delete returns once it is synced to the device: it
    /// survives a crash or power cut. Concurrent changes share one sync.
    /// The default.
    BC_DURABILITY_SYNC = 0,
    /// Changes are acknowledged at once and written as one group at most
    /// `bc_options.max_delay_micros` later (or at bc_sync/bc_close). A
    /// crash loses the changes of up to the last `max_delay_micros`,
    /// acknowledged or not; what survives is a prefix of them in commit
    /// order, every object whole, and everything before the last bc_sync.
    BC_DURABILITY_BUFFERED = 1,
}

/// Options for `bc_open`. Start from `bc_options_default()`; fields left at
/// their default take the engine's defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_options {
    /// Size of the store file in bytes. A new store file starts at it
    /// (0 = 16 MiB) and grows by itself as it fills, up to `max_capacity`
    /// (a block device keeps its size). At reopen, 0 keeps the store's
    /// size, a larger one grows the store, a smaller one is fine when the
    /// store grew past it by itself and BC_INVALID_ARGUMENT below a size
    /// asked for before (a store never shrinks).
    pub capacity: u64,
    /// A `bc_index` value (an integer, so any value C passes is defined);
    /// BC_INDEX_STORED (the default) uses the store's stored kind. Any
    /// other value is BC_INVALID_ARGUMENT.
    pub index: u32,
    /// A `bc_io_engine` value; any other is BC_INVALID_ARGUMENT.
    pub io_engine: u32,
    /// Inline threshold in bytes; -1 = the store's stored threshold (1024
    /// for a new store). Stored in the store like `index`. Below -1 is
    /// BC_INVALID_ARGUMENT.
    pub inline_threshold: i64,
    /// 1 = O_DIRECT (default), 0 = buffered I/O. This flag and the three
    /// below take 0 or 1 only: any other value is BC_INVALID_ARGUMENT.
    pub direct_io: i32,
    /// 1 = create a store where nothing is: a missing path or an empty file
    /// (default); 0 = fail with BC_NOT_FOUND. Any other file without a
    /// blobcask superblock is refused (BC_CORRUPT) and left untouched.
    pub create: i32,
    /// 1 = insist on a new store: an existing non-empty file is refused
    /// (BC_INVALID_ARGUMENT) and left untouched; 0 = no (default).
    pub create_new: i32,
    /// 1 = open an existing store read-only: shared lock (several readers
    /// may share it, a writer gets BC_LOCKED), read-only descriptor, every
    /// change fails with BC_UNSUPPORTED, nothing is ever written; 0 = no
    /// (default).
    pub read_only: i32,
    /// Bytes of the read cache of whole small objects; -1 = default
    /// (64 MiB), 0 = off. Hits are the store's memory behind a `const`
    /// pointer: never write through `bc_buf.data`.
    pub cache_bytes: i64,
    /// Largest size in bytes the store file grows to by itself: a put that
    /// needs more fails with BC_NO_SPACE, and bc_grow beyond it with
    /// BC_INVALID_ARGUMENT. Stored in the store like `index`: 0 = the
    /// stored limit (none for a new store); UINT64_MAX = explicitly no
    /// limit (stored as such at a read-write open).
    pub max_capacity: u64,
    /// A `bc_durability` value: BC_DURABILITY_SYNC (the default) or
    /// BC_DURABILITY_BUFFERED; any other is BC_INVALID_ARGUMENT. Not
    /// stored: each open chooses its own.
    pub durability: u32,
    /// With BC_DURABILITY_BUFFERED: the longest time in microseconds an
    /// acknowledged change stays unwritten (more than 0). Must be 0 with
    /// BC_DURABILITY_SYNC (the default). Otherwise BC_INVALID_ARGUMENT.
    pub max_delay_micros: u64,
    /// 1 = salvage, with `read_only` = 1 only (otherwise
    /// BC_INVALID_ARGUMENT): open a store that a plain open refuses for a
    /// damaged tuple block, skipping the block. Its objects are missing
    /// (BC_NOT_FOUND, never an older copy), `bc_stats.skipped` counts such
    /// blocks; copy out what reads with `bc_backup`. 0 = no (default).
    pub salvage: i32,
}

/// What a commit produced, or what `bc_stat` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_info {
    pub size: u64,
    pub version: u64,
    /// Commit time, microseconds since the Unix epoch.
    pub created_unix_micros: u64,
    /// Whether the value is stored inline in its tuple.
    pub is_inline: bool,
    /// When this version expires, microseconds since the Unix epoch (put
    /// with a ttl: `bc_put_ttl`, `bc_put_if_ttl`); 0 = never. From then on
    /// the object is gone (BC_NOT_FOUND) though its space is freed later.
    pub expires_unix_micros: u64,
}

/// Space and content figures of a store.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_stats {
    pub objects: u64,
    pub logical_bytes: u64,
    pub allocated_bytes: u64,
    pub metadata_bytes: u64,
    pub free_bytes: u64,
    pub capacity: u64,
    pub device_bytes_written: u64,
    pub user_bytes_written: u64,
    pub commit_groups: u64,
    pub direct_io: bool,
    /// Recovery at open: commit groups rolled back whole.
    pub rolled_back_groups: u64,
    /// Recovery at open: object versions rolled back.
    pub rolled_back_objects: u64,
    /// Recovery at open: damaged copies repaired (nothing lost).
    pub repaired: u64,
    /// Reads served from the read cache.
    pub cache_hits: u64,
    /// Reads of objects the cache takes that went to the device.
    pub cache_misses: u64,
    /// Bytes the read cache holds now.
    pub cache_bytes: u64,
    /// The read cache's bound in bytes (0: off).
    pub cache_capacity: u64,
    /// The largest free piece: the largest run a new object gets in one
    /// piece.
    pub largest_free_piece: u64,
    /// Largest size the store grows to by itself; 0: no limit but the file
    /// system.
    pub max_capacity: u64,
    /// Recovery at open: whether the store had been closed cleanly.
    pub clean: bool,
    /// Recovery at open: damaged tuple blocks a salvage open skipped (their
    /// objects are missing); 0 otherwise.
    pub skipped: u64,
}

/// What `bc_backup` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_backup_report {
    /// Objects in the copy: the live objects when the backup started.
    pub objects: u64,
    /// Their bytes (keys not counted).
    pub bytes: u64,
    /// Nanoseconds from the call to the copy being verified and published.
    pub elapsed_nanos: u64,
}

/// What `bc_compact` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_compact_report {
    /// Objects moved to lower addresses.
    pub moved: u64,
    /// Heap bytes copied.
    pub bytes_moved: u64,
    /// Largest free piece before, in bytes: the largest object that could
    /// be stored in one piece.
    pub largest_free_before: u64,
    /// Largest free piece after, in bytes.
    pub largest_free_after: u64,
    /// Microseconds the compaction took.
    pub elapsed_micros: u64,
}

/// An upload in progress, as `bc_list_uploads` shows it. `key` points to
/// `key_len` bytes valid only during the `visit` call that receives it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_upload_info {
    /// Identifies the upload in its store until it ends (`bc_upload_id`,
    /// `bc_abort_upload`); never 0.
    pub id: u64,
    /// The key the upload will commit (not NUL-terminated).
    pub key: *const u8,
    pub key_len: usize,
    /// The object size given to `bc_upload_begin`.
    pub size: u64,
    /// Bytes written so far (whole parts).
    pub written: u64,
    /// When `bc_upload_begin` was called, microseconds since the Unix
    /// epoch.
    pub started_micros: i64,
}

/// Bytes returned by blobcask. Read `data[0..len]`; release with
/// `bc_buf_free` (which also resets the struct).
#[repr(C)]
#[derive(Debug)]
pub struct bc_buf {
    pub data: *const u8,
    pub len: usize,
    /// Owner of the bytes; opaque to C.
    pub owner: *mut std::ffi::c_void,
}

/// An open store (opaque). Thread-safe.
pub struct bc_store {
    store: Store,
    closed: AtomicBool,
}

/// An upload in progress (opaque).
pub struct bc_upload {
    upload: Upload,
}

/// An error: a code and a message (opaque).
pub struct bc_error {
    code: bc_code,
    message: CString,
}

type Fail = (bc_code, String);

fn code_of(kind: ErrorKind) -> bc_code {
    match kind {
        ErrorKind::NotFound => bc_code::BC_NOT_FOUND,
        ErrorKind::InvalidArgument => bc_code::BC_INVALID_ARGUMENT,
        ErrorKind::TooLarge => bc_code::BC_TOO_LARGE,
        ErrorKind::NoSpace => bc_code::BC_NO_SPACE,
        ErrorKind::Corrupt => bc_code::BC_CORRUPT,
        ErrorKind::Io => bc_code::BC_IO,
        ErrorKind::Locked => bc_code::BC_LOCKED,
        ErrorKind::Unsupported => bc_code::BC_UNSUPPORTED,
        ErrorKind::Closed => bc_code::BC_CLOSED,
        ErrorKind::AlreadyExists => bc_code::BC_ALREADY_EXISTS,
        ErrorKind::VersionMismatch => bc_code::BC_VERSION_MISMATCH,
        _ => bc_code::BC_INTERNAL,
    }
}

fn engine_err(e: Error) -> Fail {
    (code_of(e.kind()), e.to_string())
}

fn invalid(msg: &str) -> Fail {
    (
        bc_code::BC_INVALID_ARGUMENT,
        format!("INVALID_ARGUMENT: {msg}"),
    )
}

/// Runs `f`, turning errors and panics into a code (and `*err`).
fn call(err: *mut *mut bc_error, f: impl FnOnce() -> Result<(), Fail>) -> bc_code {
    let outcome = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err((bc_code::BC_INTERNAL, format!("INTERNAL: {what}")))
    });
    match outcome {
        Ok(()) => bc_code::BC_OK,
        Err((code, message)) => {
            if !err.is_null() {
                let message = CString::new(message.replace('\0', "?")).unwrap_or_default();
                // SAFETY: `err` is non-null and, per the header, points to a
                // writable `bc_error*`.
                unsafe { *err = Box::into_raw(Box::new(bc_error { code, message })) };
            }
            code
        }
    }
}

/// Borrows `len` bytes at `ptr` for the duration of a call.
fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Fail> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL with length {len}")));
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes that
    // stay valid and unmodified during the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

fn store_ref<'a>(store: *const bc_store) -> Result<&'a bc_store, Fail> {
    if store.is_null() {
        return Err(invalid("store is NULL"));
    }
    // SAFETY: non-null handles come from bc_open and stay valid until
    // bc_store_free, which the caller must not race with other calls.
    let s = unsafe { &*store };
    if s.closed.load(Ordering::Acquire) {
        return Err((bc_code::BC_CLOSED, "CLOSED: the store is closed".into()));
    }
    Ok(s)
}

/// Borrows the NUL-terminated UTF-8 path `ptr` for the duration of a call.
fn path_ref<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null and, per the header, a NUL-terminated string that
    // stays valid during the call.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| invalid(&format!("{what} is not valid UTF-8")))
}

fn out_ref<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null and, per the header, points to writable storage.
    Ok(unsafe { &mut *ptr })
}

/// A commit time as `bc_info` and `bc_list_entry` carry it.
fn created_micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// An expiry as `bc_info` and `bc_list_entry` carry it: 0 for never. An
/// expiry at or before the epoch cannot be set (it counts from a commit),
/// so 0 stays free to mean "never".
fn expires_micros(t: Option<SystemTime>) -> u64 {
    t.map_or(0, |t| {
        t.duration_since(UNIX_EPOCH).map_or(1, |d| {
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
        })
    })
}

fn info_of(i: &ObjectInfo) -> bc_info {
    bc_info {
        size: i.size,
        version: i.version,
        created_unix_micros: created_micros(i.created),
        is_inline: i.inline,
        expires_unix_micros: expires_micros(i.expires),
    }
}

fn fill_buf(out: &mut bc_buf, b: Bytes) {
    let owner = Box::new(b);
    out.data = owner.as_ptr();
    out.len = owner.len();
    out.owner = Box::into_raw(owner).cast();
}

/// The default options.
#[no_mangle]
pub extern "C" fn bc_options_default() -> bc_options {
    bc_options {
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
/// not NULL.
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
            options_of(&bc_options_default())?
        } else {
            // SAFETY: non-null and points to a bc_options.
            options_of(unsafe { &*opts })?
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
    let mode = match mode {
        0 => PutMode::Overwrite,
        1 => PutMode::Create,
        2 => PutMode::Update(version),
        _ => return Err(invalid("unknown put mode")),
    };
    let mut options = PutOptions::from(mode);
    if let Some(ttl) = ttl {
        options = options.ttl(ttl);
    }
    let s = store_ref(store)?;
    let key = bytes(key, key_len, "key")?;
    let val = Bytes::copy_from_slice(bytes(val, val_len, "value")?);
    let i = s.store.put_with(key, val, options).map_err(engine_err)?;
    if !info.is_null() {
        *out_ref(info, "info")? = info_of(&i);
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
        let out = out_ref(out, "out")?;
        let key = bytes(key, key_len, "key")?;
        *out = info_of(&s.store.stat(key).map_err(engine_err)?);
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
        let i = up.upload.commit().map_err(engine_err)?;
        if !info.is_null() {
            *out_ref(info, "info")? = info_of(&i);
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

/// One key of a listing, as `bc_list_next` fills it. `key` points to
/// `key_len` bytes owned by the cursor, valid until the next
/// `bc_list_next` or `bc_list_free` on it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_list_entry {
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
/// (every key when `prefix_len` is 0), in byte order; `*out` receives the
/// cursor. The listing is read a page at a time as `bc_list_next` goes: it
/// never blocks writers, sees every key that exists for its whole
/// duration, and keys added or removed meanwhile may or may not appear.
///
/// Errors: BC_UNSUPPORTED with the hash index (use `bc_keys_open`, or open
/// with BC_INDEX_BTREE or BC_INDEX_FST); BC_INVALID_ARGUMENT if `store` or
/// `out` is NULL or `prefix` is NULL with a length; BC_CLOSED after
/// bc_close. `*out` is left untouched on failure.
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
        let entry = out_ref(entry, "entry")?;
        let has_entry = out_ref(has_entry, "has_entry")?;
        c.current = None;
        if c.done {
            *has_entry = false;
            return Ok(());
        }
        if c.store.is_closed() {
            c.done = true;
            return Err((
                bc_code::BC_CLOSED,
                "CLOSED: the store of this listing is closed".into(),
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
                *entry = bc_list_entry {
                    key: e.key.as_ptr(),
                    key_len: e.key.len(),
                    size: e.size,
                    version: e.version,
                    created_unix_micros: created_micros(e.created),
                    expires_unix_micros: expires_micros(e.expires),
                };
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

/// One item of a bulk load, filled by the `next` callback of
/// `bc_bulk_load`. Its bytes are copied before `next` is called again, so
/// they need to stay valid only until then.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_bulk_item {
    pub key: *const u8,
    pub key_len: usize,
    pub value: *const u8,
    pub value_len: usize,
}

/// What `bc_bulk_load` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_load_report {
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
            self.stopped = Some((
                bc_code::BC_CANCELLED,
                format!(
                    "CANCELLED: bulk_load: the item callback returned {rc} after {n} items; they are loaded"
                ),
            ));
            return None;
        }
        let copy = |ptr, len, what| {
            bytes(ptr, len, what)
                .map(Bytes::copy_from_slice)
                .map_err(|(code, m)| {
                    (
                        code,
                        format!("{m} (item {n} of bulk_load; the {n} before it are loaded)"),
                    )
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
        let mut items = CallbackItems {
            next,
            ctx,
            given: 0,
            stopped: None,
        };
        let r = s.store.bulk_load(&mut items).map_err(engine_err)?;
        if !out.is_null() {
            *out_ref(out, "out")? = bc_load_report {
                objects: r.objects,
                bytes: r.bytes,
                groups: r.groups,
                elapsed_nanos: u64::try_from(r.elapsed.as_nanos()).unwrap_or(u64::MAX),
            };
        }
        match items.stopped {
            Some(stop) => Err(stop),
            None => Ok(()),
        }
    })
}

/// Fills `*out` with the store's figures.
#[no_mangle]
pub extern "C" fn bc_store_stats(
    store: *const bc_store,
    out: *mut bc_stats,
    err: *mut *mut bc_error,
) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        let out = out_ref(out, "out")?;
        let st = s.store.stats();
        *out = bc_stats {
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
        };
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
        let r = store_ref(store)?.store.compact().map_err(engine_err)?;
        if !out.is_null() {
            *out_ref(out, "out")? = bc_compact_report {
                moved: r.moved,
                bytes_moved: r.bytes_moved,
                largest_free_before: r.largest_free_before,
                largest_free_after: r.largest_free_after,
                elapsed_micros: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
            };
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
/// BC_INVALID_ARGUMENT if `store` or `dest` is NULL, `dest` is not valid
/// UTF-8 or names no file (e.g. "/"); BC_CLOSED after bc_close; BC_CORRUPT
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
        let r = s.store.backup(dest).map_err(engine_err)?;
        if !out.is_null() {
            *out_ref(out, "out")? = bc_backup_report {
                objects: r.objects,
                bytes: r.bytes,
                elapsed_nanos: u64::try_from(r.elapsed.as_nanos()).unwrap_or(u64::MAX),
            };
        }
        Ok(())
    })
}

/// Closes the store: pending commits finish, the lock is released. The
/// handle stays valid (calls return BC_CLOSED) until bc_store_free. A
/// second close returns BC_CLOSED.
#[no_mangle]
pub extern "C" fn bc_close(store: *const bc_store, err: *mut *mut bc_error) -> bc_code {
    call(err, || {
        let s = store_ref(store)?;
        if s.closed.swap(true, Ordering::AcqRel) {
            return Err((
                bc_code::BC_CLOSED,
                "CLOSED: the store is already closed".into(),
            ));
        }
        s.store.close().map_err(engine_err)
    })
}

/// Frees the handle (closing the store first if needed). NULL is a no-op.
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

#[cfg(test)]
mod tests {
    #[test]
    fn max_ttl_is_the_engines() {
        assert_eq!(
            u128::from(super::BC_MAX_TTL_MICROS),
            engine::MAX_TTL.as_micros()
        );
    }

    #[test]
    fn checked_in_header_matches_the_generated_one() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/blobcask.h"));
        let checked_in = include_str!("../include/blobcask.h");
        assert!(
            generated == checked_in,
            "bindings-c/include/blobcask.h is stale: run BLOBCASK_UPDATE_HEADER=1 cargo build -p blobcask-c"
        );
    }
}
