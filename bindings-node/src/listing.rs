//! `Listing`: one listing in progress (`Store.listStart`), handed to
//! lib.js's `list()` a page at a time.
//!
//! A listing is one engine `Keys`, kept between pages: on the hash index
//! its start reads the keys from the tuple blocks once, so a page must not
//! start a new listing (each would be that pass again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::js_err;
use crate::host;

/// A listing in progress: the keys of `Store.listStart`, in byte order.
#[napi]
pub struct Listing {
    keys: Mutex<engine::Keys>,
    /// The store's `closing` flag: pages after `close()` fail with CLOSED.
    store_closing: Arc<AtomicBool>,
}

impl Listing {
    pub(crate) fn new(keys: engine::Keys, store_closing: Arc<AtomicBool>) -> Listing {
        Listing {
            keys: Mutex::new(keys),
            store_closing,
        }
    }
}

#[napi]
impl Listing {
    /// Up to `limit` next keys, fewer only at the end (an empty page: the
    /// listing is over). Memory only: the index's pages (BTree, FST) or
    /// the snapshot taken at the start, each key looked up again (hash).
    /// CLOSED once the store is closed.
    #[napi]
    pub fn next_page(&self, limit: u32) -> Result<Vec<Buffer>> {
        if self.store_closing.load(Ordering::Acquire) {
            return Err(host::closed());
        }
        // A page that panicked left the iterator as it was: go on with it.
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.by_ref()
            .take(limit as usize)
            .map(|entry| entry.map(|e| Buffer::from(e.key.to_vec())).map_err(js_err))
            .collect()
    }
}
