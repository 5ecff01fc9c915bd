//! Node bindings: Promise methods over the async engine, `...Sync` twins
//! over the blocking engine for scripts, and lib.js over both (argument
//! checks that need JavaScript, iteration, errors).
//!
//! Errors cross as a message `"CODE: message"`, or `"CODE/errno: message"`
//! when the operating system reported the cause, which lib.js turns into a
//! `BlobcaskError` with that `code` (`'NOT_FOUND'`, `'NO_SPACE'`, ...) and
//! the OS error as its `cause` (see [`errors::js_err`]).
//!
//! Where Promise calls run: `get`, `read`, `put`, `stat` and `delete` run
//! on the store's own [`engine::event_loop::EventLoop`], hosted on Node's
//! libuv loop (`host.rs`): the call submits its I/O from the JavaScript
//! thread, the loop's `uv_poll` handles see the completion, and the promise
//! is settled in that same libuv callback. No thread hop either way.
//! Transfers of 1 MiB and more run on a helper thread instead (the
//! engine's `EventLoop::read_op`/`put_op`: their checksums and copies would
//! stall the loop). Uploads, `sync`, `backup` and `close` run on napi-rs's
//! runtime; a bulk load on a thread of its own (see [`BulkLoad`]); the
//! start of a listing on that runtime's blocking threads (see [`Listing`]).
//! The `...Sync` calls made while Promise calls are pending keep the loop
//! running while they wait (the engine's invariant L4): a commit group one
//! of those leads completes only when the loop runs.
//!
//! After `close()` (or once the JavaScript `Store` is collected) new
//! Promise calls reject with CLOSED; pending ones still settle, then the
//! loop's handles are closed. An open store with nothing pending does not
//! keep Node alive.
//!
//! Bytes in and out: values passed to `put`/`writePart`/`bulkLoad` are
//! copied before the call returns (the caller may reuse its Buffer at
//! once), except a `put` of 1 MiB or more, which keeps a reference to the
//! caller's bytes and writes them from the helper thread (the caller
//! leaves them unchanged until the promise settles, as with `fs.write`);
//! read results become Buffers as `results.rs` describes.
#![deny(unsafe_code)]

mod args;
mod batch;
mod bulk_load;
mod errors;
mod host;
mod listing;
mod records;
mod results;
mod store;
mod upload;

pub use args::{BufferedDurability, OpenOptions, PutConditions};
pub use batch::BatchOperation;
pub use bulk_load::{BulkLoad, Feed, Finish};
pub use listing::Listing;
pub use store::{open, open_sync, Store};
pub use upload::{crc32c_of, Upload};
