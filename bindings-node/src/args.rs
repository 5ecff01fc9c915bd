//! JavaScript arguments to engine values: keys, versions, the open options
//! and durability, a put's conditions and time to live, offsets and limits.

use std::time::Duration;

use engine::{Bytes, Durability, IndexKind, IoEngineKind, Options, PutMode, PutOptions};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::{invalid, js_err};
use crate::records::MAX_SAFE_INTEGER;
/// A key: a string (UTF-8) or a Buffer/Uint8Array.
pub(crate) fn key_of(key: Either<String, Uint8Array>) -> Bytes {
    match key {
        Either::A(s) => Bytes::from(s.into_bytes()),
        Either::B(b) => Bytes::copy_from_slice(&b),
    }
}

/// An `ifVersion`: a number that is a safe integer, or a bigint below 2^64.
pub(crate) fn version_of(v: Either<f64, BigInt>) -> Result<u64> {
    const BAD: &str =
        "ifVersion must be a version: a non-negative safe integer or bigint below 2^64";
    match v {
        Either::A(n) if n.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER as f64).contains(&n) => {
            Ok(n as u64)
        }
        Either::A(n) => Err(invalid(format!("{BAD}, not {n}"))),
        Either::B(b) => match b.get_u64() {
            (false, v, true) => Ok(v),
            _ => Err(invalid(BAD)),
        },
    }
}

/// Options for `Store.open`.
#[napi(object)]
#[derive(Default)]
pub struct OpenOptions {
    /// Size of the store file: a new store starts at it (default 16 MiB)
    /// and grows as it fills; a larger one at reopen grows the store, a
    /// smaller one is refused. Default: the store's current size.
    pub capacity: Option<f64>,
    /// `'hash'`, `'btree'` or `'fst'`. Stored in the store: omitted, an
    /// existing store uses its stored kind (a new one `'hash'`).
    pub index: Option<String>,
    /// Values up to this many bytes are stored inline. Stored like `index`.
    pub inline_threshold: Option<u32>,
    /// Largest size the store file grows to by itself (a put that needs
    /// more rejects with NO_SPACE). Stored like `index`; omitted, an
    /// existing store keeps its stored limit (a new one has none but the
    /// file system). `2 ** 64` or more (e.g. `Infinity`) means no limit.
    pub max_capacity: Option<f64>,
    /// `'auto'` (default), `'io_uring'` or `'portable'`.
    pub io_engine: Option<String>,
    /// Bypass the page cache (default true).
    pub direct_io: Option<bool>,
    /// Create a store where nothing is: a missing path or an empty file
    /// (default true). Any other file without a blobcask superblock is
    /// refused (CORRUPT) and left untouched.
    pub create: Option<bool>,
    /// Insist on a new store: an existing non-empty file is refused
    /// (INVALID_ARGUMENT) and left untouched (default false).
    pub create_new: Option<bool>,
    /// Open an existing store read-only: shared lock (several readers may
    /// share it, a writer gets LOCKED), read-only descriptor, every change
    /// rejected with UNSUPPORTED, nothing ever written (default false).
    pub read_only: Option<bool>,
    /// With `readOnly` only: open a store that a plain open refuses for a
    /// damaged tuple block, skipping the block (its objects are missing,
    /// never served from an older copy; `stats().recovery.skipped` names
    /// it), to copy out what reads (`backup`). Default false.
    pub salvage: Option<bool>,
    /// Bytes of the read cache of whole small objects (default 64 MiB; 0
    /// turns it off). `stats().cache` counts its hits.
    pub cache_bytes: Option<f64>,
    /// The read cache's bound as a fraction of memory instead, in (0, 1]
    /// (the system's, or the cgroup's limit when lower); not with
    /// `cacheBytes`.
    pub cache_fraction: Option<f64>,
    /// Read the tuple blocks of small (inline) values into the cache in the
    /// background after open, into free room only (default true).
    pub warm_up: Option<bool>,
    /// When an acknowledged change is durable: `'sync'` (the default) or
    /// `{ maxDelayMs }` (see [`BufferedDurability`]). Not stored: given
    /// at every open.
    #[napi(ts_type = "'sync' | { maxDelayMs: number }")]
    pub durability: Option<Either<String, BufferedDurability>>,
    /// `'s3fifo'`: a bounded cache. A put or an upload that finds no room
    /// deletes objects the S3-FIFO policy gives up (durably, never one
    /// being read) until it fits; the store never grows past
    /// `maxCapacity`, or without one past its size. `'none'` (the
    /// default) does not evict. Not stored: given at every open.
    #[napi(ts_type = "'none' | 's3fifo'")]
    pub eviction: Option<String>,
}

/// `durability: { maxDelayMs }`: changes are acknowledged at once and
/// written as one group at most `maxDelayMs` later (or at `sync()`,
/// `close()`). A crash loses the changes of up to the last `maxDelayMs`,
/// acknowledged or not; what survives is a prefix of them in commit order.
#[napi(object)]
pub struct BufferedDurability {
    /// Longest time an acknowledged change stays unwritten, in
    /// milliseconds: more than 0 (fractions down to 0.001, 1 µs), finite.
    pub max_delay_ms: f64,
}

fn durability_of(d: Either<String, BufferedDurability>) -> Result<Durability> {
    match d {
        Either::A(s) if s == "sync" => Ok(Durability::Sync),
        Either::A(s) => Err(invalid(format!(
            "durability must be 'sync' or {{ maxDelayMs }}, not {s:?}"
        ))),
        Either::B(BufferedDurability { max_delay_ms: ms }) => {
            match Duration::try_from_secs_f64(ms / 1000.0) {
                Ok(max_delay) if max_delay >= Duration::from_micros(1) => {
                    Ok(Durability::Buffered { max_delay })
                }
                _ => Err(invalid(format!(
                    "durability.maxDelayMs must be a finite number of milliseconds of at least 0.001, not {ms}"
                ))),
            }
        }
    }
}

/// Conditions and expiry of a `put`.
#[napi(object)]
#[derive(Default)]
pub struct PutConditions {
    /// Create only: rejects with ALREADY_EXISTS if the key has an object.
    pub if_absent: Option<bool>,
    /// Replace only this version (`ObjectInfo.version`, a number or a
    /// bigint): rejects with VERSION_MISMATCH if the key holds another
    /// version or nothing.
    #[napi(ts_type = "number | bigint")]
    pub if_version: Option<Either<f64, BigInt>>,
    /// Time to live in milliseconds (fractions down to 0.001, 1 µs): the
    /// object expires that long after its commit. Omitted or `null`, it
    /// never expires (replacing one that would have).
    #[napi(ts_type = "number | null")]
    pub ttl: Option<Either<f64, Null>>,
}

pub(crate) fn put_options(c: Option<PutConditions>) -> Result<PutOptions> {
    let c = c.unwrap_or_default();
    let version = c.if_version.map(version_of).transpose()?;
    let mode = PutMode::from_conditions(c.if_absent.unwrap_or(false), version).map_err(js_err)?;
    let options = PutOptions::from(mode);
    match c.ttl {
        None | Some(Either::B(Null)) => Ok(options),
        Some(Either::A(ms)) => Ok(options.ttl(ttl_of(ms)?)),
    }
}

/// A time to live given in milliseconds. Only what no `Duration` can hold
/// (negative, NaN, infinite, beyond 2^64 seconds) is refused here; the
/// range a put accepts (at least 1 µs, at most `MAX_TTL`) is the core's to
/// check. Both are INVALID_ARGUMENT.
fn ttl_of(ms: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(ms / 1000.0)
        .map_err(|_| invalid(format!("ttl out of range: {ms} ms")))
}

pub(crate) fn options_of(o: Option<OpenOptions>) -> Result<Options> {
    let o = o.unwrap_or_default();
    let mut opts = Options::new();
    if let Some(c) = o.capacity {
        // A whole number, as every other size (a fraction was truncated).
        opts = opts.capacity(offset_of(c, "capacity")?);
    }
    if let Some(i) = o.index {
        opts = opts.index(i.parse::<IndexKind>().map_err(js_err)?);
    }
    if let Some(t) = o.inline_threshold {
        opts = opts.inline_threshold(t as usize);
    }
    if let Some(m) = o.max_capacity {
        opts = opts.max_capacity(limit_of(m, "maxCapacity")?);
    }
    match (o.cache_bytes, o.cache_fraction) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "give cacheBytes or cacheFraction, not both".to_owned(),
            ))
        }
        (Some(c), None) => opts = opts.cache_bytes(offset_of(c, "cacheBytes")?),
        (None, Some(f)) => opts = opts.cache_fraction(f),
        (None, None) => {}
    }
    if let Some(w) = o.warm_up {
        opts = opts.warm_up(w);
    }
    if let Some(d) = o.durability {
        opts = opts.durability(durability_of(d)?);
    }
    if let Some(e) = o.eviction {
        opts = opts.eviction(e.parse::<engine::Eviction>().map_err(js_err)?);
    }
    if let Some(e) = o.io_engine {
        opts = opts.io_engine(e.parse::<IoEngineKind>().map_err(js_err)?);
    }
    Ok(opts
        .direct_io(o.direct_io.unwrap_or(true))
        .create(o.create.unwrap_or(true))
        .create_new(o.create_new.unwrap_or(false))
        .read_only(o.read_only.unwrap_or(false))
        .salvage(o.salvage.unwrap_or(false)))
}

pub(crate) fn offset_of(n: f64, what: &str) -> Result<u64> {
    // 2^64 as a double: the first value `as u64` would saturate.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    if (0.0..LIMIT).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid(format!(
            "{what} must be a non-negative integer below 2^64, not {n}"
        )))
    }
}

/// A size limit: a non-negative integer, where `2 ** 64` and beyond
/// (`Infinity` too) mean no limit (`u64::MAX`).
fn limit_of(n: f64, what: &str) -> Result<u64> {
    if n == f64::INFINITY || (n >= 18_446_744_073_709_551_616.0 && n.fract() == 0.0) {
        return Ok(u64::MAX);
    }
    offset_of(n, what)
}
