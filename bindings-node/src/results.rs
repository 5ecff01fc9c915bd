//! Read results on their way to JavaScript, as Buffers.
//!
//! JavaScript may write into any Buffer, so a Buffer is never made over
//! memory the store still holds (the read cache, an inline value in the
//! index): invariant 9 of core/INVARIANTS.md. Within that, two paths, by
//! the length of the result (judged from the object's size before the
//! read, see [`read_options`]):
//!
//! * up to [`COPY_UP_TO`]: read as the store's own memory
//!   (`ReadOptions::owned(false)`: a cache hit or an inline value is not
//!   copied by the engine, a device read's buffer is freed at once) and
//!   copied into a Buffer that V8 allocates. V8 frees such memory during
//!   its collections, without waiting for the event loop, so a loop of
//!   `getSync` calls holds at most a collection's worth of results, and
//!   malloc can hand the freed memory to the next reads. An external
//!   Buffer's finalizer, by contrast, runs only on a later turn of the
//!   event loop: in a synchronous loop every read needed fresh memory,
//!   page-faulted in (256 faults per MiB: ~350 µs of a 1 MiB cache hit,
//!   against ~40 µs when the memory is reused; see README.md).
//! * larger: read as owned bytes (`ReadOptions::owned(true)`: a heap read
//!   lands in a buffer of its own, never cached at this size) and lent to
//!   JavaScript as an external Buffer over them, without a copy: at these
//!   sizes the device read and the copy would cost more than the faults.
//!
//! Either way the Buffer stays valid whatever happens to the store
//! afterwards (overwrite, delete, close), and runtimes that refuse external
//! buffers (`napi_no_external_buffers_allowed`: Electron and other V8
//! sandbox builds) get a copy.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::sync::{mpsc, Mutex, OnceLock};

use engine::{Bytes, ReadOptions};
use napi::bindgen_prelude::*;

/// Results up to this size are copied into a Buffer V8 allocates; larger
/// ones are lent. The read cache's largest object (see
/// `Options::cache_bytes` in the core), so that no cache hit is lent (it
/// would be a copy made by the engine into fresh memory). Either path is
/// safe whatever the core does; this only decides which is cheaper.
pub(crate) const COPY_UP_TO: usize = 1 << 20;

/// Whether the engine should return memory nothing else holds for a read
/// of `len` bytes from `offset` of `key`: only results that are lent (over
/// [`COPY_UP_TO`]) need it. Should an overwrite make a result longer than
/// judged here, [`ObjectBytes`] copies it rather than lend bytes it does
/// not own.
pub(crate) fn read_options(
    store: &engine::blocking::Store,
    key: &[u8],
    offset: u64,
    len: u64,
) -> ReadOptions {
    let expected = store
        .stat(key)
        .map_or(0, |i| i.size.saturating_sub(offset).min(len));
    ReadOptions::default().owned(expected > COPY_UP_TO as u64)
}

/// Start addresses of the memory lent to JavaScript as external Buffers
/// and not yet finalized. V8 refuses a second ArrayBuffer over a start
/// address that already backs one (it aborts the process), so should the
/// engine ever hand out the same buffer twice, the second one is copied.
static LENT: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn lend(at: usize) -> bool {
    LENT.lock()
        .map(|mut g| g.get_or_insert_with(HashSet::new).insert(at))
        .unwrap_or(false)
}

fn give_back(at: usize) {
    if let Ok(mut g) = LENT.lock() {
        if let Some(set) = g.as_mut() {
            set.remove(&at);
        }
    }
}

/// Buffers at least this large are freed on a thread of their own: giving
/// 48 MiB back to the kernel takes ~4 ms here, which a finalizer would
/// otherwise spend on the event loop.
const FREE_ELSEWHERE: usize = 1 << 20;

fn free(bytes: Bytes) {
    static REAPER: OnceLock<Option<mpsc::Sender<Bytes>>> = OnceLock::new();
    if bytes.len() < FREE_ELSEWHERE {
        return;
    }
    let reaper = REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Bytes>();
        std::thread::Builder::new()
            .name("blobcask-free".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| tx)
    });
    if let Some(tx) = reaper {
        // On failure the bytes come back in the error and are dropped here.
        let _ = tx.send(bytes);
    }
}

/// Tells V8 that `len` bytes outside its heap are held by a Buffer: its
/// collector runs by the memory it knows of, and lent memory would
/// otherwise pile up unseen until some other allocation triggered it.
fn account(env: &Env, len: usize) {
    let _ = env.adjust_external_memory(i64::try_from(len).unwrap_or(i64::MAX));
}

/// The finalizer's half of [`account`].
fn unaccount(env: &Env, len: usize) {
    let _ = env.adjust_external_memory(-i64::try_from(len).unwrap_or(i64::MAX));
}

/// Object bytes on their way to JavaScript (see the module docs).
pub struct ObjectBytes {
    bytes: Bytes,
    /// Whether nothing else holds `bytes` (read with `ReadOptions::owned`),
    /// so they may be lent to JavaScript.
    owned: bool,
}

impl ObjectBytes {
    /// The result of a read made with `options` (from [`read_options`]).
    pub(crate) fn new(bytes: Bytes, options: ReadOptions) -> ObjectBytes {
        ObjectBytes {
            bytes,
            owned: options.owned,
        }
    }
}

impl TypeName for ObjectBytes {
    fn type_name() -> &'static str {
        "Buffer"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for ObjectBytes {
    unsafe fn to_napi_value(raw: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        let env = Env::from_raw(raw);
        let ObjectBytes { bytes, owned } = val;
        let at = bytes.as_ptr() as usize;
        if bytes.len() <= COPY_UP_TO || !owned || !lend(at) {
            return Ok(BufferSlice::copy_from(&env, &bytes)?.raw());
        }
        let len = bytes.len();
        // SAFETY: `bytes` (moved into the finalizer's hint) keeps the `len`
        // bytes at `at` alive until the Buffer is finalized. They are
        // written only by JavaScript, through this one Buffer: the engine
        // holds no other reference to them (see `owned`), and `LENT` keeps
        // a second Buffer from being made over them. When the runtime
        // refuses external buffers, `from_external` copies and runs the
        // finalizer at once.
        let made = unsafe {
            BufferSlice::from_external(&env, at as *mut u8, len, bytes, move |env, b: Bytes| {
                give_back(at);
                unaccount(&env, len);
                free(b);
            })
        };
        match made {
            Ok(buffer) => {
                account(&env, len);
                Ok(buffer.raw())
            }
            Err(e) => {
                give_back(at);
                Err(e)
            }
        }
    }
}
