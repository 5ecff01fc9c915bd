//! `BulkLoad`: a bulk load fed from the JavaScript thread in batches, run
//! by the engine on a thread of its own.

use std::sync::mpsc::SyncSender;
use std::sync::Mutex;
use std::thread::JoinHandle;

use engine::Bytes;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::key_of;
use crate::errors::{invalid, js_err};
use crate::records::{js, Js};
/// One batch of a bulk load's items, keys and values copied.
pub(crate) type Batch = Vec<(Bytes, Bytes)>;

/// Batches fed to one bulk load and not yet taken by it: with the batch
/// being filled, what the load holds of the caller's values beyond its own
/// batches (at most about 3 x [`FEED_BYTES`]).
pub(crate) const FEED_BATCHES: usize = 2;
/// Items per fed batch, at most.
const FEED_ITEMS: usize = 1024;
/// Value bytes per fed batch, about: a batch is full once it holds this
/// much (one value may take it further).
const FEED_BYTES: usize = 4 << 20;

/// A bulk load in progress (`Store.bulkLoad` in lib.js): lib.js takes the
/// items from the caller's iterable on the JavaScript thread and `add`s
/// each here, which copies it into the batch being filled; full batches
/// are fed (`feed`) to the engine's `bulk_load`, which runs on a thread of
/// its own over them, in order, until `finish`. A thread, not the event
/// loop or napi-rs's runtime, because the engine takes the items from a
/// blocking iterator: it waits for the next batch inside the load. Ending
/// the feed early (`finish` after a failure on the JavaScript side, or the
/// `BulkLoad` collected) loads the items fed so far.
#[napi]
pub struct BulkLoad {
    /// The batch being filled and its value bytes.
    pub(crate) batch: Mutex<(Batch, usize)>,
    pub(crate) feed: Mutex<Option<SyncSender<Batch>>>,
    pub(crate) load: Mutex<Option<JoinHandle<engine::Result<engine::LoadReport>>>>,
}

/// `BulkLoad.feed` on the libuv thread pool: waits for room in the feed.
pub struct Feed {
    feed: Option<SyncSender<Batch>>,
    batch: Batch,
}

impl Task for Feed {
    type Output = bool;
    type JsValue = bool;

    fn compute(&mut self) -> Result<bool> {
        let batch = std::mem::take(&mut self.batch);
        // The sender is dropped here, not whenever napi-rs drops the task,
        // so that `finish` holds the last one and ends the feed.
        // `false`: the load has ended (it failed; `finish` says how).
        Ok(match self.feed.take() {
            Some(feed) if !batch.is_empty() => feed.send(batch).is_ok(),
            Some(_) => true,
            None => false,
        })
    }

    fn resolve(&mut self, _: Env, fed: bool) -> Result<bool> {
        Ok(fed)
    }
}

/// `BulkLoad.finish` on the libuv thread pool: feeds the last batch, ends
/// the feed and waits for the load's end.
pub struct Finish {
    feed: Option<SyncSender<Batch>>,
    batch: Batch,
    load: Option<JoinHandle<engine::Result<engine::LoadReport>>>,
}

impl Task for Finish {
    type Output = Js;
    type JsValue = Js;

    fn compute(&mut self) -> Result<Js> {
        // The feed ends here, when this last sender is dropped: `feed`
        // tasks have resolved (and dropped theirs) before lib.js finishes.
        if let Some(feed) = self.feed.take() {
            let batch = std::mem::take(&mut self.batch);
            if !batch.is_empty() {
                // A load that has ended says why below.
                let _ = feed.send(batch);
            }
        }
        let load = self
            .load
            .take()
            .ok_or_else(|| invalid("the bulk load was already finished"))?;
        match load.join() {
            Ok(r) => r.map(|r| js(&r)).map_err(js_err),
            Err(_) => Err(Error::from_reason("INTERNAL: the bulk load panicked")),
        }
    }

    fn resolve(&mut self, _: Env, report: Js) -> Result<Js> {
        Ok(report)
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::from_reason("INTERNAL: a bulk load lock was poisoned")
}

#[napi]
impl BulkLoad {
    /// Copies one item into the batch being filled; returns whether the
    /// batch is full (then lib.js calls `feed` before adding more).
    #[napi]
    pub fn add(&self, key: Either<String, Uint8Array>, value: Uint8Array) -> Result<bool> {
        let mut batch = self.batch.lock().map_err(poisoned)?;
        batch.1 += value.len();
        batch.0.push((key_of(key), Bytes::copy_from_slice(&value)));
        Ok(batch.0.len() >= FEED_ITEMS || batch.1 >= FEED_BYTES)
    }

    /// Feeds the batch being filled to the load. Resolves once the load
    /// has room for it: `true`, or `false` when the load has already ended
    /// (then `finish` rejects with why).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn feed(&self) -> Result<AsyncTask<Feed>> {
        let (batch, _) = std::mem::take(&mut *self.batch.lock().map_err(poisoned)?);
        let feed = self.feed.lock().map_err(poisoned)?.clone();
        Ok(AsyncTask::new(Feed { feed, batch }))
    }

    /// Feeds the batch being filled, ends the feed and resolves with the
    /// load's report once everything fed is committed; rejects with the
    /// load's error.
    #[napi(ts_return_type = "Promise<LoadReport>")]
    pub fn finish(&self) -> Result<AsyncTask<Finish>> {
        let (batch, _) = std::mem::take(&mut *self.batch.lock().map_err(poisoned)?);
        let feed = self.feed.lock().map_err(poisoned)?.take();
        let load = self.load.lock().map_err(poisoned)?.take();
        Ok(AsyncTask::new(Finish { feed, batch, load }))
    }
}
