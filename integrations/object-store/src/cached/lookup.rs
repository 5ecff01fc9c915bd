//! Which version of a remote object a read serves: the record kept in
//! the cache store, trusted as the freshness rule allows, else the
//! remote's `head`; and forgetting what the cache holds of an object.

use super::object_store;
use blobcask::MAX_KEY_LEN;
use futures::future::join_all;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt, Result};

use super::identity::{piece_key, record_key, Identity, Piece, Record};
use super::options::Freshness;
use super::Inner;
use crate::tier::Counters;

/// The version a read serves: its metadata as the remote gave it.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    pub meta: ObjectMeta,
    pub identity: Identity,
}

impl Inner {
    /// The version of `location` to serve, or `None` when the object
    /// cannot be cached (the remote names no version of it, or its keys
    /// would be too long for the store): the caller passes the request
    /// through. With `trust_record` false the remote is asked whatever
    /// the freshness rule (a read starting again after a change).
    pub(crate) async fn current(
        &self,
        location: &Path,
        trust_record: bool,
    ) -> Result<Option<Version>> {
        let old = self.record(location).await;
        if let (Freshness::MaxStale(bound), true, Some(record)) =
            (self.freshness, trust_record, &old)
        {
            // A confirmation stamped in the future (the clock stepped
            // back) is not trusted: `duration_since` fails.
            let fresh = (self.clock)()
                .duration_since(record.confirmed)
                .is_ok_and(|age| age <= bound);
            if let (true, Some(identity)) = (fresh, record.identity()) {
                return Ok(Some(Version {
                    meta: record.meta.clone(),
                    identity,
                }));
            }
        }
        // Stamped before the question: the answer was true at least then.
        let asked = (self.clock)();
        Counters::add(&self.counters.remote_heads, 1);
        let meta = match self.remote.head(location).await {
            Ok(meta) => meta,
            Err(e) => {
                if matches!(e, object_store::Error::NotFound { .. }) {
                    self.forget(location).await;
                }
                return Err(e);
            }
        };
        let identity = match Identity::of(&meta) {
            Some(id) if self.keys_fit(location, &id) => id,
            _ => {
                self.forget(location).await;
                return Ok(None);
            }
        };
        let known = old.as_ref().and_then(Record::identity);
        let changed = known.as_ref() != Some(&identity);
        if changed {
            if let Some(old) = &old {
                self.forget_pieces(location, old).await;
            }
        }
        // Revalidating reads never trust the stamp: write the record only
        // when the identity changed (a durable commit per read otherwise).
        if changed || matches!(self.freshness, Freshness::MaxStale(_)) {
            let record = Record {
                meta: meta.clone(),
                confirmed: asked,
            };
            if self
                .cache
                .put(record_key(location), record.encode())
                .await
                .is_err()
            {
                Counters::add(&self.counters.fills_refused, 1);
            }
        }
        Ok(Some(Version { meta, identity }))
    }

    /// Whether every key of `location` under `identity` fits the store.
    fn keys_fit(&self, location: &Path, identity: &Identity) -> bool {
        let longest = Piece::Chunk {
            size: self.chunk_size,
            index: u64::MAX,
        };
        piece_key(location, identity, longest).len() <= MAX_KEY_LEN
    }

    async fn record(&self, location: &Path) -> Option<Record> {
        let bytes = self.cache.get(record_key(location)).await.ok()?;
        Record::decode(location, &bytes)
    }

    /// Drops the record of `location` and the pieces of the version it
    /// names (after a write through the tier, or when the remote no longer
    /// has the object). Failures are ignored: a piece left behind is keyed
    /// by its version and never served for another.
    pub(crate) async fn forget(&self, location: &Path) {
        if let Some(record) = self.record(location).await {
            // The record first: no read trusts it once its pieces go.
            let _ = self.cache.delete(record_key(location)).await;
            self.forget_pieces(location, &record).await;
        }
    }

    async fn forget_pieces(&self, location: &Path, record: &Record) {
        let Some(identity) = record.identity() else {
            return;
        };
        let chunks = if record.meta.size > self.whole_object_limit {
            record.meta.size.div_ceil(self.chunk_size)
        } else {
            0
        };
        let keys = std::iter::once(Piece::Whole)
            .chain((0..chunks).map(|index| Piece::Chunk {
                size: self.chunk_size,
                index,
            }))
            .map(|piece| piece_key(location, &identity, piece))
            // An in-memory lookup: only pieces present cost a delete.
            .filter(|key| self.cache.contains(key));
        join_all(keys.map(|key| async move {
            let _ = self.cache.delete(key).await;
        }))
        .await;
    }
}
