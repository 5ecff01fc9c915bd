//! The types C sees: result codes, the enums passed as integers, options,
//! the info and report structs, buffers, and the opaque handles.

use std::ffi::CString;
use std::sync::atomic::AtomicBool;

use engine::blocking::{Store, Upload};
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

/// Whether a store is a cache that evicts to make room (see the Rust
/// `Eviction`), for `bc_options.eviction`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum bc_eviction {
    /// A put that finds no room fails with BC_NO_SPACE. The default.
    BC_EVICTION_NONE = 0,
    /// A bounded cache: a put or an upload that finds no room deletes
    /// objects the S3-FIFO policy gives up (durably, like any delete; never
    /// one being read) until it fits. The store never grows past
    /// `max_capacity`, or without one past its size.
    BC_EVICTION_S3FIFO = 1,
}

/// Options for `bc_open`. Start from BC_OPTIONS_INIT (or
/// `bc_options_init`); fields left at their default take the engine's
/// defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct bc_options {
    /// The size of this struct as the program knows it: set by
    /// BC_OPTIONS_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
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
    /// 1 = salvage, with `read_only` = 1 only (otherwise
    /// BC_INVALID_ARGUMENT): open a store that a plain open refuses for a
    /// damaged tuple block, skipping the block. Its objects are missing
    /// (BC_NOT_FOUND, never an older copy), `bc_stats.skipped` counts such
    /// blocks; copy out what reads with `bc_backup`. 0 = no (default).
    pub salvage: i32,
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
    /// A `bc_eviction` value: BC_EVICTION_NONE (the default) or
    /// BC_EVICTION_S3FIFO; any other is BC_INVALID_ARGUMENT. Not stored:
    /// each open chooses its own. (64 bits wide so the struct keeps no
    /// padding.)
    pub eviction: u64,
}

/// What a commit produced, or what `bc_stat` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_info {
    /// The size of this struct as the program knows it: set by
    /// BC_INFO_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
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
    /// The size of this struct as the program knows it: set by
    /// BC_STATS_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
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
    /// Reads since open that found their key.
    pub hits: u64,
    /// Reads since open of keys with no object (BC_NOT_FOUND).
    pub misses: u64,
    /// Objects a cache store (BC_EVICTION_S3FIFO) gave up to make room
    /// since open; 0 otherwise.
    pub evictions: u64,
    /// Sum of the sizes of the objects counted in `evictions`.
    pub evicted_bytes: u64,
}

/// What `bc_backup` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct bc_backup_report {
    /// The size of this struct as the program knows it: set by
    /// BC_BACKUP_REPORT_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
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
    /// The size of this struct as the program knows it: set by
    /// BC_COMPACT_REPORT_INIT (see "Structs that grow" at the top of this header).
    pub struct_size: usize,
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
    /// The size of this struct as the library knows it (set by the
    /// library): a field added after the program's header was released is
    /// there when BC_HAS_FIELD(info, bc_upload_info, field).
    pub struct_size: usize,
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
/// `bc_buf_free` (which also resets the struct). The one struct without
/// `struct_size`: its three fields are fixed for good.
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
    pub(crate) store: Store,
    pub(crate) closed: AtomicBool,
}

/// An upload in progress (opaque).
pub struct bc_upload {
    pub(crate) upload: Upload,
}

/// An error: a code, a message and, when the OS reported it, the OS error
/// number (opaque).
pub struct bc_error {
    pub(crate) code: bc_code,
    pub(crate) message: CString,
    pub(crate) os_errno: i32,
}
