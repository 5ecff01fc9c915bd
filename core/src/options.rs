//! Store options. Each setter documents its trade-off and default; the
//! defaults are named constants checked by `tests/all/options.rs`.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::format::StoredSettings;
use crate::index::IndexKind;
use crate::io::IoEngineKind;

/// Capacity of a newly created store when none is given: 16 MiB. A file
/// store grows from there as it fills (see [`Options::max_capacity`]).
pub const DEFAULT_CAPACITY: u64 = 16 << 20;
/// A store full to this size grows by its own size; larger ones grow by
/// this much at a time (and always by at least what the write needs).
pub const MAX_GROWTH_STEP: u64 = 1 << 30;
/// Smallest capacity accepted: 1 MiB.
pub const MIN_CAPACITY: u64 = 1 << 20;
/// Values up to this many bytes are stored inside their tuple by default:
/// three 1 KiB values (with keys up to ~250 bytes) share a 4 KiB tuple
/// block, where each would take a 4 KiB heap piece, and a kept block
/// serves them without a copy. Larger values fit at most two to a block;
/// the gain shrinks and overwrites cost more (`benches/log/
/// 2026-11-24-inline-threshold-512.md`, `2026-11-24-extent-table.md`).
pub const DEFAULT_INLINE_THRESHOLD: usize = 1024;
/// The default for two-slot (format 1 to 3) stores that never stored their
/// settings: what they were written under.
pub(crate) const PAIRED_DEFAULT_INLINE_THRESHOLD: usize = 512;
/// Largest inline threshold accepted (a tuple must fit in one block with a
/// maximum-length key).
pub const MAX_INLINE_THRESHOLD: usize = 2048;
/// Bytes of the read cache by default: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
/// Largest heap piece of a newly created store: 16 MiB.
pub const DEFAULT_MAX_PIECE_SIZE: u64 = 16 << 20;

/// The machine's memory in bytes as this process may use it: the
/// system's total (`/proc/meminfo`), or the cgroup's limit when lower
/// (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`). 0 when unknown.
fn memory_bytes() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        })
        .unwrap_or(0);
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok())
    .min();
    match limit {
        Some(l) if total == 0 || l < total => l,
        _ => total,
    }
}

/// When an acknowledged change is durable.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A put, commit or delete returns only after its tuple block (and its
    /// data) is synced to the device: it survives a process kill and a power
    /// cut. Concurrent changes share one sync. The default.
    #[default]
    Sync,
    /// Changes are applied and acknowledged at once and written as one
    /// group (one sync) at most `max_delay` later, or at `sync()`/`close()`.
    /// **A power cut or crash loses the changes of up to the last
    /// `max_delay`**, acknowledged or not; what survives is always a prefix
    /// of the acknowledged changes in commit order, every object whole, and
    /// everything acknowledged before the last completed `sync()`. Object
    /// data is still written before the call returns; only the metadata
    /// write and the syncs are deferred. Freed space is reused only after
    /// the group is written.
    Buffered {
        /// Longest time an acknowledged change stays unwritten.
        max_delay: std::time::Duration,
    },
}

impl Durability {
    /// The mode as the bindings name it: `"sync"` (no `max_delay`) or
    /// `"buffered"` with a `max_delay` (required: how much a crash may lose
    /// is the caller's to say, never a default). Anything else is
    /// `InvalidArgument`; a `max_delay` under 1 µs is refused at open.
    pub fn named(mode: &str, max_delay: Option<Duration>) -> Result<Durability> {
        let bad = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m));
        match (mode, max_delay) {
            ("sync", None) => Ok(Durability::Sync),
            ("sync", Some(_)) => bad("max_delay applies to durability \"buffered\" only".into()),
            ("buffered", Some(max_delay)) => Ok(Durability::Buffered { max_delay }),
            ("buffered", None) => bad(
                "durability \"buffered\" needs a max_delay: the longest an acknowledged \
                 change may stay unwritten, so what a crash may lose"
                    .into(),
            ),
            (other, _) => bad(format!(
                "unknown durability {other:?}: expected \"sync\" or \"buffered\""
            )),
        }
    }
}

/// Whether a store is a cache that gives objects up to make room
/// ([`Options::eviction`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Eviction {
    /// A put that finds no room fails with `NoSpace`. The default.
    #[default]
    None,
    /// S3-FIFO: a small FIFO (about a tenth of the bytes) that new objects
    /// enter, a main FIFO with a 2-bit read count per object for those read
    /// while in the small one (or put again soon after their eviction),
    /// and a ghost FIFO of recently evicted keys' 64-bit hashes. Keeps a
    /// hot set under a one-pass scan of cold keys; reads cost one relaxed
    /// byte update.
    S3Fifo,
}

impl Eviction {
    /// Lower-case name, as the bindings spell it: `none`, `s3fifo`.
    pub fn name(self) -> &'static str {
        match self {
            Eviction::None => "none",
            Eviction::S3Fifo => "s3fifo",
        }
    }
}

impl std::str::FromStr for Eviction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        [Eviction::None, Eviction::S3Fifo]
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("unknown eviction {s:?}: expected \"none\" or \"s3fifo\""),
                )
            })
    }
}

/// How a store is opened or created. Build with [`Options::new`] and the
/// setters; pass to [`Store::open`](crate::Store::open).
#[derive(Debug, Clone)]
pub struct Options {
    /// `None`: not set by the caller (the store's own, or the default).
    pub(crate) capacity: Option<u64>,
    pub(crate) index: Option<IndexKind>,
    pub(crate) inline_threshold: Option<usize>,
    /// `Some(u64::MAX)`: explicitly no limit.
    pub(crate) max_capacity: Option<u64>,
    pub(crate) io_engine: IoEngineKind,
    pub(crate) direct_io: bool,
    pub(crate) max_piece_size: u64,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) read_only: bool,
    /// Skip tuple blocks whose newest copy is damaged instead of refusing
    /// the open (read-only opens only).
    pub(crate) salvage: bool,
    pub(crate) scan_metadata: bool,
    pub(crate) durability: Durability,
    pub(crate) cache_bytes: u64,
    /// The read cache's bound as a fraction of the machine's memory (wins
    /// over `cache_bytes` when set).
    pub(crate) cache_fraction: Option<f64>,
    pub(crate) warm_up: bool,
    /// Tuple-block writes after which an idle store writes a checkpoint
    /// in the background (`None`: automatic; 0: only at close).
    pub(crate) checkpoint_after: Option<u64>,
    /// Expired objects stay until a later open removes them (a backup's
    /// copy while it is written and verified: it must hold what the
    /// snapshot held, expired since or not).
    pub(crate) keep_expired: bool,
    /// Create a format-3 store (two slots per tuple block, no journal).
    pub(crate) paired_layout: bool,
    pub(crate) eviction: Eviction,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capacity: None,
            index: None,
            inline_threshold: None,
            max_capacity: None,
            io_engine: IoEngineKind::default(),
            direct_io: true,
            max_piece_size: DEFAULT_MAX_PIECE_SIZE,
            create: true,
            create_new: false,
            read_only: false,
            salvage: false,
            scan_metadata: false,
            durability: Durability::Sync,
            cache_bytes: DEFAULT_CACHE_BYTES,
            cache_fraction: None,
            warm_up: true,
            checkpoint_after: None,
            keep_expired: false,
            paired_layout: false,
            eviction: Eviction::None,
        }
    }
}

impl Options {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bound of the read cache, in bytes: objects of up to 1 MiB read
    /// whole twice are kept in RAM (checked, by version, so a read never
    /// returns a superseded version) and later reads of them, whole or in
    /// part, skip the device. Inline values too: they are not kept in RAM
    /// otherwise, but read from their tuple blocks. A scan does not flush
    /// what is read often. 0 turns the cache off.
    /// [`Stats::cache`](crate::Stats) reports hits, misses and bytes held.
    /// Defaults to [`DEFAULT_CACHE_BYTES`].
    pub fn cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self.cache_fraction = None;
        self
    }

    /// Bound of the read cache as a fraction of the machine's memory (more
    /// than 0, at most 1): `0.25` keeps up to a quarter of it. The memory
    /// is the system's total, or the cgroup's limit when lower (a
    /// container's); read at open. Replaces [`cache_bytes`](Self::cache_bytes)
    /// (the last of the two set wins). A fraction outside (0, 1] is refused
    /// at open with `InvalidArgument`.
    pub fn cache_fraction(mut self, fraction: f64) -> Self {
        self.cache_fraction = Some(fraction);
        self
    }

    /// Whether open warms the read cache (default true): after open, the
    /// tuple blocks that hold inline values are read into the cache in the
    /// background, a batch at a time, yielding to reads and only into free
    /// room, so small objects are memory hits from their first get after
    /// a restart. [`Stats::cache`](crate::Stats) reports `warmed_blocks`
    /// and `warming`. Has no effect with the cache off.
    pub fn warm_up(mut self, on: bool) -> Self {
        self.warm_up = on;
        self
    }

    /// How much may be written before the store writes a new checkpoint
    /// by itself: once this many tuple blocks were written since the last
    /// one, the maintenance thread writes one when the store is idle (the
    /// index image and an empty change map, as a clean close does; writers
    /// wait while it is written). An open after a crash then reads the
    /// image and at most about this many tuple blocks, instead of every
    /// block. 0: only a clean close writes one. Default: a quarter of the
    /// store's tuple blocks, at least 4096 (16 MiB of them).
    pub fn checkpoint_after(mut self, blocks: u64) -> Self {
        self.checkpoint_after = Some(blocks);
        self
    }

    /// The read cache's bound in bytes: `cache_bytes`, or the fraction of
    /// memory `cache_fraction` asks for (checked by `validate`).
    pub(crate) fn cache_bound(&self) -> u64 {
        match self.cache_fraction {
            // A fraction in (0, 1] of a u64: the product fits.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(f) => (memory_bytes() as f64 * f) as u64,
            None => self.cache_bytes,
        }
    }

    /// Size of the store file (rounded down to 4 KiB). A new store's file
    /// is created and preallocated at this size; a file store then grows
    /// by itself as it fills (up to [`max_capacity`](Self::max_capacity)),
    /// so this is a starting size, not a limit. Opening an existing store
    /// with a larger capacity grows it to that size first; one below what
    /// the store has grown to by itself does nothing (the same options can
    /// be passed at every start), but one below a capacity asked for
    /// explicitly before (at creation or an earlier open) is refused with
    /// `InvalidArgument`: a store never shrinks. A block device always has
    /// its own size, whatever is asked.
    /// Defaults to [`DEFAULT_CAPACITY`] for a new store, and to the
    /// store's current size at reopen.
    pub fn capacity(mut self, bytes: u64) -> Self {
        self.capacity = Some(bytes);
        self
    }

    /// Largest size a file store grows to by itself (rounded down to 4 KiB).
    /// A put that needs more room gets `NoSpace` once the store is this
    /// large (and when the file system is full, whatever the limit).
    /// [`Store::grow`](crate::Store::grow) beyond it is refused, and so is a
    /// limit below the store's size at reopen. `u64::MAX` means no limit.
    /// Stored in the store: set at creation, or at a later read-write open
    /// to change it; reopening without it keeps the stored limit.
    /// Defaults to no limit but the file system.
    pub fn max_capacity(mut self, bytes: u64) -> Self {
        self.max_capacity = Some(bytes);
        self
    }

    /// Index backend built in memory at open. Any backend opens any store.
    /// Stored in the store: reopening without this option builds the kind
    /// the store was last opened read-write with; setting it at a read-write
    /// open stores the new kind (a read-only open uses it for itself only).
    /// Defaults to [`IndexKind::Hash`] for a new store, and to the stored
    /// kind at reopen.
    pub fn index(mut self, kind: IndexKind) -> Self {
        self.index = Some(kind);
        self
    }

    /// Values of at most this many bytes live inside their tuple: no heap
    /// piece, so a small value costs about its own size instead of a 4 KiB
    /// block, at the price of making tuple blocks fuller (fewer tuples per
    /// metadata write). At most [`MAX_INLINE_THRESHOLD`]; 0 keeps every
    /// non-empty value on the heap. Objects already stored keep where they
    /// are. Stored in the store like [`index`](Self::index).
    /// Defaults to [`DEFAULT_INLINE_THRESHOLD`] for a new store, and to the
    /// stored threshold at reopen.
    pub fn inline_threshold(mut self, bytes: usize) -> Self {
        self.inline_threshold = Some(bytes);
        self
    }

    /// Which I/O engine moves the bytes. `Auto` uses io_uring where the
    /// kernel allows it and the portable pread/pwrite engine otherwise.
    /// Defaults to [`IoEngineKind::Auto`].
    pub fn io_engine(mut self, kind: IoEngineKind) -> Self {
        self.io_engine = kind;
        self
    }

    /// Use `O_DIRECT` so reads and writes bypass the page cache. When the
    /// file system refuses it (tmpfs) the store falls back to buffered I/O
    /// with `fdatasync`, and [`Stats::direct_io`](crate::Stats) says so.
    /// Turning it off trades predictable latency for page-cache hits.
    /// Defaults to `true`.
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }

    /// Largest heap piece of a new store (a power of two, 4 KiB..=1 GiB).
    /// Larger pieces mean fewer pieces (and reads) per large object; smaller
    /// ones mean less contiguous space needed. Stored in the superblock at
    /// creation; ignored when opening an existing store.
    /// Defaults to [`DEFAULT_MAX_PIECE_SIZE`].
    pub fn max_piece_size(mut self, bytes: u64) -> Self {
        self.max_piece_size = bytes;
        self
    }

    /// Creates a store in format 3 (two slots per tuple block, no metadata
    /// journal), as builds before format 4 did: for tests of the two-slot
    /// layout, which stores written by those builds keep. Not for new
    /// stores (their metadata takes twice the space).
    #[doc(hidden)]
    pub fn create_format_3(mut self) -> Self {
        self.paired_layout = true;
        self
    }

    /// Create a store when there is none yet: when the path does not exist,
    /// or is a regular file of length 0. With `false`, such a path is
    /// `NotFound`.
    ///
    /// Opening never formats anything that may hold data (invariant 7): a
    /// non-empty file, or a block device, whose head holds no blobcask
    /// superblock is refused with `Corrupt` and left exactly as it was,
    /// even when its first blocks are all zero. To put a new store on a
    /// block device, ask for it with [`create_new`](Self::create_new).
    /// A create that fails (no space, an I/O error) removes the file it
    /// made, or truncates an empty file it started from back to 0 bytes.
    ///
    /// [`Store::open_with_engine`](crate::Store::open_with_engine) has no
    /// path: there, `create` formats an engine whose first blocks are all
    /// zero.
    /// Defaults to `true`.
    pub fn create(mut self, yes: bool) -> Self {
        self.create = yes;
        self
    }

    /// Insist on a new store, as `O_EXCL` does for files: open succeeds
    /// only by creating one. A missing path or an empty regular file gets a
    /// new store; a block device is formatted (whatever its head holds,
    /// unless it already holds a blobcask store: that is refused too, so a
    /// store is never wiped by a repeated create). An existing non-empty
    /// regular file is refused with `InvalidArgument` ("already exists")
    /// and left untouched. Overrides [`create`](Self::create); cannot be
    /// combined with [`read_only`](Self::read_only).
    /// Defaults to `false`.
    pub fn create_new(mut self, yes: bool) -> Self {
        self.create_new = yes;
        self
    }

    /// Open an existing store for reading only: the file is opened
    /// `O_RDONLY` (so a file with mode 0444 works) and locked *shared*, so
    /// any number of read-only handles, in this or other processes, can
    /// have it open at once while a writer gets `Locked` (and a read-only
    /// open while a writer has it gets `Locked`). Never creates (a missing
    /// path or an empty file is `NotFound`), never grows, never writes:
    /// `put`, `delete`, `begin_upload` and `bulk_load` fail with
    /// `Unsupported` ("the store is open read-only"); `sync` succeeds and
    /// does nothing. Implies `create(false)`. Recovery runs as in a
    /// read-write open but only in memory: what it would roll back or
    /// repair is reported in [`Stats::recovery`](crate::Stats), not written
    /// (this is how `blobcask check` looks at a store).
    /// Defaults to `false`.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Open a damaged store to copy out what still reads. A tuple block
    /// whose newest copy is damaged (an open refuses that store as
    /// `Corrupt`: the block's latest tuples are lost) is skipped: its
    /// objects are missing (`NotFound`), never served from an older copy,
    /// and the block is named in [`Stats::recovery`](crate::Stats)`.skipped`.
    /// Everything else reads and is verified as usual. A lost copy proves
    /// its commit group (and every older one) was synced, so no such group
    /// is rolled back for missing the skipped block. When a crash also
    /// interrupted a newer group (a rollback next to a skipped block), the
    /// salvage open is refused as `Corrupt` too: the state rolled back to
    /// could hold an older version of an object lost with the block, and
    /// nothing tells it from a current one. Only with [`read_only`](Self::read_only):
    /// nothing is written, and the store stays as damaged as it was (copy
    /// what reads into a new store, e.g. `blobcask --salvage get`).
    /// Defaults to `false`.
    pub fn salvage(mut self, yes: bool) -> Self {
        self.salvage = yes;
        self
    }

    /// Read every tuple block at open even when the store was closed
    /// cleanly with an index image (which an open otherwise loads instead,
    /// in a fraction of the time), and compare the image with them: a
    /// difference, or a damaged image, is listed in
    /// [`Stats::recovery`](crate::Stats)`.repaired` and the tuple blocks
    /// serve. What `blobcask check` does. Defaults to `false`.
    pub fn scan_metadata(mut self, yes: bool) -> Self {
        self.scan_metadata = yes;
        self
    }

    /// Makes the store a bounded cache: a put, an upload or a batch that
    /// finds no room deletes objects the policy gives up (through the
    /// commit path, durable like any delete) until it fits, instead of
    /// failing with `NoSpace`. Objects being read are never chosen. The
    /// store never grows past [`max_capacity`](Self::max_capacity), or,
    /// without one, past the size it has ([`capacity`](Self::capacity)).
    /// Its metadata area (the tuple blocks, which hold inline values, and
    /// their journal) is held to half that bound: past it, small puts
    /// evict small objects rather than grow it, so the other half is
    /// always room for values; its journal to an eighth of that half (8
    /// to 256 slots), so an atomic batch holds at most that many
    /// operations (more is `TooLarge`). A bulk load evicts too.
    /// A value that could never fit is still `TooLarge` (or `NoSpace` when
    /// everything left is being read or written). Not stored: give it at
    /// every open; the policy's state starts afresh at each (every object
    /// in the main queue, in entry order, no reads counted).
    /// [`Stats`](crate::Stats) counts `hits`, `misses`, `evictions` and
    /// `evicted_bytes`. Ignored by a read-only open.
    /// Defaults to [`Eviction::None`].
    pub fn eviction(mut self, policy: Eviction) -> Self {
        self.eviction = policy;
        self
    }

    /// Whether the store is opened read-only (recovery must not write).
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// When acknowledged changes are durable; see [`Durability`]. Buffered
    /// trades the last `max_delay` of changes on a crash for calls that do
    /// not wait for the device's sync.
    /// Defaults to [`Durability::Sync`].
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m));
        if self.read_only && self.create_new {
            return bad(
                "read_only and create_new cannot be combined: a new store is written".into(),
            );
        }
        if let Durability::Buffered { max_delay } = self.durability {
            if max_delay < Duration::from_micros(1) {
                return bad(format!(
                    "max_delay {max_delay:?} is under 1 µs: buffered durability needs a delay"
                ));
            }
        }
        if let Some(f) = self
            .cache_fraction
            .filter(|f| !(f.is_finite() && *f > 0.0 && *f <= 1.0))
        {
            return bad(format!(
                "cache_fraction {f} is not a fraction of memory: give a number in (0, 1]"
            ));
        }
        if self.salvage && !self.read_only {
            return bad(
                "salvage needs read_only: a salvaged store is only read, never written".into(),
            );
        }
        if let Some(t) = self.inline_threshold.filter(|&t| t > MAX_INLINE_THRESHOLD) {
            return bad(format!(
                "inline_threshold {t} exceeds the maximum {MAX_INLINE_THRESHOLD}"
            ));
        }
        if let Some(m) = self.max_capacity.filter(|&m| m < MIN_CAPACITY) {
            return bad(format!(
                "max_capacity {m} is below the minimum store size of {MIN_CAPACITY} bytes"
            ));
        }
        if let (Some(c), Some(m)) = (self.capacity, self.max_capacity) {
            if c > m {
                return bad(format!("capacity {c} exceeds max_capacity {m}"));
            }
        }
        if !self.max_piece_size.is_power_of_two()
            || !(4096..=(1 << 30)).contains(&self.max_piece_size)
        {
            return bad(format!(
                "max_piece_size {} must be a power of two between 4 KiB and 1 GiB",
                self.max_piece_size
            ));
        }
        Ok(())
    }
}

/// The settings a store runs with: the caller's where set, else the
/// store's stored ones, else the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    pub index: IndexKind,
    pub inline_threshold: usize,
    /// `None`: no limit but the file system. A multiple of 4 KiB.
    pub max_capacity: Option<u64>,
    /// The largest capacity asked for explicitly, now or before (0: none).
    pub asked_capacity: u64,
}

impl Options {
    /// The settings to run with over what the store has stored.
    pub(crate) fn settings(&self, stored: Option<&StoredSettings>) -> Settings {
        let block = !(crate::format::BLOCK_SIZE as u64 - 1);
        let max = |m: u64| (m != 0 && m != u64::MAX).then_some(m & block);
        Settings {
            index: self.index.or(stored.map(|s| s.index)).unwrap_or_default(),
            inline_threshold: self
                .inline_threshold
                .or(stored.map(|s| s.inline_threshold as usize))
                .unwrap_or(DEFAULT_INLINE_THRESHOLD),
            max_capacity: match self.max_capacity {
                Some(m) => max(m),
                None => stored.and_then(|s| max(s.max_capacity)),
            },
            asked_capacity: self
                .capacity
                .map_or(0, |c| c & block)
                .max(stored.map_or(0, |s| s.asked_capacity)),
        }
    }
}

impl Settings {
    /// The record the superblock keeps.
    pub(crate) fn stored(&self) -> StoredSettings {
        StoredSettings {
            index: self.index,
            // Validated: at most MAX_INLINE_THRESHOLD.
            inline_threshold: self.inline_threshold.min(MAX_INLINE_THRESHOLD) as u16,
            max_capacity: self.max_capacity.unwrap_or(0),
            asked_capacity: self.asked_capacity,
        }
    }
}

/// What a put may replace. The condition is checked by the commit path
/// when the put is applied, in commit order, so two racing conditional
/// puts of one key never both succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutMode {
    /// Create the object or replace whatever is there (plain `put`).
    #[default]
    Overwrite,
    /// Create only: `AlreadyExists` if the key has an object.
    Create,
    /// Replace only the given version: `VersionMismatch` if the key holds
    /// another version or nothing (compare-and-swap on
    /// [`ObjectInfo::version`](crate::ObjectInfo::version)).
    Update(u64),
}

/// Options of one put ([`Store::put_with`](crate::Store::put_with)):
/// `PutOptions::default().mode(PutMode::Create)`, or `PutMode::Create.into()`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PutOptions {
    /// What the put may replace; the default replaces anything.
    pub mode: PutMode,
    /// Time to live: the object expires this long after its commit (its
    /// [`ObjectInfo::created`](crate::ObjectInfo::created)), by the wall
    /// clock. From then on it is invisible (reads, `stat`, `contains`,
    /// listings, backups see no such key; a conditional put sees none) and
    /// the store removes it in the background, freeing its space. `None`
    /// (the default): it never expires. A put without a ttl replaces an
    /// object that had one with one that does not expire. Counted in whole
    /// microseconds (a fraction of one is dropped); must be at least 1 µs
    /// and at most [`MAX_TTL`].
    pub ttl: Option<Duration>,
}

/// Longest time to live a put accepts (about 100 years).
pub const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl PutOptions {
    /// Sets what the put may replace.
    pub fn mode(mut self, mode: PutMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the time to live (see [`PutOptions::ttl`]).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Checks the options without using them: `InvalidArgument` for a ttl
    /// of zero (or under 1 µs) or above [`MAX_TTL`]. A put or an upload's
    /// commit checks them itself (a commit refused for them leaves the
    /// upload as it was); this checks them ahead, without a store.
    pub fn check(&self) -> Result<()> {
        self.ttl_micros().map(drop)
    }

    /// The ttl in microseconds, checked: `InvalidArgument` when zero (or
    /// under 1 µs) or above [`MAX_TTL`].
    pub(crate) fn ttl_micros(&self) -> Result<Option<u64>> {
        let Some(ttl) = self.ttl else { return Ok(None) };
        // Whole microseconds first (a fraction of one is dropped), then
        // the range.
        if ttl.as_micros() > MAX_TTL.as_micros() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("ttl of {ttl:?} exceeds the maximum of {MAX_TTL:?}"),
            ));
        }
        match ttl.as_micros() as u64 {
            0 => Err(Error::new(
                ErrorKind::InvalidArgument,
                "ttl must be at least 1 microsecond",
            )),
            micros => Ok(Some(micros)),
        }
    }
}

impl PutMode {
    /// The mode a put's conditions ask for, as the bindings take them:
    /// `if_absent` (create only), `if_version` (replace only that version),
    /// neither (create or replace). Both at once is `InvalidArgument`.
    pub fn from_conditions(if_absent: bool, if_version: Option<u64>) -> Result<PutMode> {
        match (if_absent, if_version) {
            (false, None) => Ok(PutMode::Overwrite),
            (true, None) => Ok(PutMode::Create),
            (false, Some(v)) => Ok(PutMode::Update(v)),
            (true, Some(_)) => Err(Error::new(
                ErrorKind::InvalidArgument,
                "if_absent and if_version cannot be combined",
            )),
        }
    }
}

impl From<PutMode> for PutOptions {
    fn from(mode: PutMode) -> Self {
        PutOptions::default().mode(mode)
    }
}

/// Options of one read ([`Store::read_with`](crate::Store::read_with)).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions {
    /// The bytes come back in memory nothing else holds, so the caller may
    /// write into it (a binding that lends them as a mutable buffer: Node's
    /// Buffers). Off by default: a read-cache hit or an inline value is then
    /// the store's own memory, handed out without a copy and read-only, as
    /// `Bytes` already is in Rust. On, a hit or an inline value is copied
    /// and a miss admitted to the cache is kept as a copy.
    pub owned: bool,
}

impl ReadOptions {
    /// Asks for bytes nothing else holds (see [`ReadOptions::owned`]).
    pub fn owned(mut self, yes: bool) -> Self {
        self.owned = yes;
        self
    }
}

impl PutMode {
    /// Checks this condition against the version the key holds now
    /// (`None`: no object).
    pub(crate) fn check(self, current: Option<u64>) -> Result<()> {
        match (self, current) {
            (PutMode::Overwrite, _) | (PutMode::Create, None) => Ok(()),
            (PutMode::Create, Some(v)) => Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("the key exists (version {v})"),
            )),
            (PutMode::Update(want), Some(v)) if want == v => Ok(()),
            (PutMode::Update(want), Some(v)) => Err(Error::new(
                ErrorKind::VersionMismatch,
                format!("expected version {want}, the key holds version {v}"),
            )),
            (PutMode::Update(want), None) => Err(Error::new(
                ErrorKind::VersionMismatch,
                format!("expected version {want}, the key has no object"),
            )),
        }
    }
}
