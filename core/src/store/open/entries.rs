//! The store's state rebuilt at open, one object at a time: from the index
//! image as it is read (an [`ImageSink`]: no transient copy of every
//! object), or from the tuples a scan recovered. Each object becomes one
//! entry; the index is loaded at the end in one go from the keys, or, from
//! an image of key fingerprints, built on a thread of its own while the
//! image is read (`Builder`: the table's inserts are random memory
//! accesses, as long as the decoding).

use std::collections::BTreeSet;

use super::super::{Entry, HeapValue, State, Stored};
use crate::error::Result;
use crate::index::{EntryId, Fingerprint, Fingerprints, HashIndex, IndexKind, KeyIndex};
use crate::meta::image::{ImageSink, InlineFp};
use crate::meta::tuple::{Piece, Tuple, TupleValue};
use crate::store::Extent;

/// An expiring version: (key, expiry µs, version, size).
pub(super) type Expiring = (Box<[u8]>, u64, u64, u64);

/// An entry whose inline value waits for its block to be written: (id,
/// version).
pub(super) type Held = (EntryId, u64);

/// A heap object waiting for `finish`: its block, tuple, and key
/// fingerprint and length (fingerprint images).
type HeapObject = (u32, Tuple, Option<(Fingerprint, u16)>);

/// The state under construction.
pub(super) struct Rebuilt {
    kind: IndexKind,
    state: State,
    /// Blocks recovery changed: their inline values are held until the
    /// blocks are written.
    dirty: BTreeSet<u32>,
    /// Index entries to load: keys, or an image's fingerprints.
    keys: Vec<(Box<[u8]>, EntryId)>,
    secret: Option<[u8; 16]>,
    /// Fingerprints not yet handed to the builder (or, without one, all).
    fps: Vec<(Fingerprint, EntryId)>,
    builder: Option<Builder>,
    /// Heap objects, added once the allocator their pieces return to is
    /// shared (`finish`).
    heap: Vec<HeapObject>,
    /// Versions that expire, for the reaper's queue.
    expiring: Vec<Expiring>,
    /// Entries whose inline values wait for their block to be written.
    held: Vec<Held>,
}

impl Rebuilt {
    pub fn new(kind: IndexKind) -> Rebuilt {
        Rebuilt {
            kind,
            state: State::new(crate::index::build(kind)),
            dirty: BTreeSet::new(),
            keys: Vec::new(),
            secret: None,
            fps: Vec::new(),
            builder: None,
            heap: Vec::new(),
            expiring: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Adds a scan's recovered tuples (`dirty`: the blocks recovery
    /// changed): every object of a scan, or, after an image that served as
    /// a checkpoint, those of the blocks written since (fingerprinted
    /// under the image's secret when it holds fingerprints).
    pub fn scanned(&mut self, tuples: Vec<(u32, Tuple)>, dirty: &BTreeSet<u32>) {
        self.dirty.clone_from(dirty);
        let of = self.secret.map(HashIndex::with_secret);
        if of.is_none() {
            self.keys.reserve(tuples.len());
        }
        for (block, t) in tuples {
            let fp = of.as_ref().map(|of| (of.of(&t.key), t.key.len() as u16));
            self.object(block, t, fp);
        }
    }

    /// Adds one inline object now; a heap one waits for `finish`.
    fn add(&mut self, block: u32, t: Tuple, fp: Option<(Fingerprint, u16)>, data: Stored) {
        let key_len = fp.map_or(t.key.len(), |(_, len)| len as usize);
        let pending = data.is_pending();
        let id = self.state.add(Entry::new(
            key_len,
            t.version,
            t.created_micros,
            t.size,
            t.expires_micros,
            data,
            block,
        ));
        if pending {
            self.held.push((id, t.version));
        }
        if let Some(at) = t.expires_micros {
            // As the entry keeps it (`Entry::new`: an expiry of 0 is 1),
            // so the image writer finds the key under the entry's expiry.
            self.expiring
                .push((t.key.clone(), at.max(1), t.version, t.size));
        }
        match fp {
            Some((fp, _)) => {
                self.push_fp(fp, id);
            }
            None => self.keys.push((t.key, id)),
        }
    }

    /// Queues an entry's key fingerprint for the index; a full batch goes
    /// to the builder thread (without one, all wait for `finish`).
    fn push_fp(&mut self, fp: Fingerprint, id: EntryId) {
        self.fps.push((fp, id));
        if self.fps.len() >= BATCH {
            if let Some(b) = &self.builder {
                self.fps = b.send(std::mem::take(&mut self.fps));
            }
        }
    }

    /// The state, every heap object's pieces returning to `alloc` (the
    /// store's), the index loaded; with the versions that expire and the
    /// entries whose inline values wait for their block.
    pub fn finish(
        mut self,
        alloc: &crate::sync::Arc<crate::sync::Mutex<crate::alloc::BuddyAllocator>>,
    ) -> Result<(State, Vec<Expiring>, Vec<Held>)> {
        for (block, mut t, fp) in std::mem::take(&mut self.heap) {
            let value = std::mem::replace(&mut t.value, TupleValue::Inline(Default::default()));
            let TupleValue::Heap {
                pieces,
                sums,
                unsynced,
            } = value
            else {
                continue;
            };
            let extent = std::sync::Arc::new(Extent {
                pieces: pieces as Vec<Piece>,
                alloc: alloc.clone(),
            });
            let data = Stored::heap_object(HeapValue {
                extent,
                sums,
                unsynced,
            });
            self.add(block, t, fp, data);
        }
        match (self.secret, self.builder.take()) {
            (Some(_), Some(b)) => {
                let _ = b.send(std::mem::take(&mut self.fps));
                self.state.index = b.finish()?;
            }
            (Some(secret), None) => {
                // Ascending fingerprints load without a lookup each.
                self.fps.sort_unstable();
                let ids = std::mem::take(&mut self.fps);
                self.state
                    .index
                    .load_fingerprints(Fingerprints { secret, ids })
                    .map_err(|e| e.context("loading the index image"))?;
            }
            (None, _) => {
                // (In no particular order after a checkpoint's scanned
                // blocks or heap objects: each index sorts what it needs.)
                let keys = std::mem::take(&mut self.keys);
                self.state.index.load(keys);
            }
        }
        Ok((self.state, self.expiring, self.held))
    }
}

/// (Fingerprint, id) pairs handed to the builder at a time.
const BATCH: usize = 1 << 14;

/// A hash index built on its own thread from batches of an image's
/// fingerprints (distinct: they ascend strictly in the image).
struct Builder {
    tx: std::sync::mpsc::Sender<Vec<(Fingerprint, EntryId)>>,
    /// Batches the builder is done with, emptied, for reuse (a fresh one
    /// each time costs its pages' faults).
    spent: std::sync::mpsc::Receiver<Vec<(Fingerprint, EntryId)>>,
    thread: std::thread::JoinHandle<HashIndex>,
}

impl Builder {
    /// A builder for `objects` fingerprints made under `secret`; `None`
    /// when no thread can be started (the index is then built at the end).
    fn start(secret: [u8; 16], objects: usize) -> Option<Builder> {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<(Fingerprint, EntryId)>>();
        let (spent_tx, spent) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("blobcask-open-index".into())
            .spawn(move || {
                let mut index = HashIndex::with_secret(secret);
                index.reserve_for(objects, objects.saturating_sub(1) as EntryId);
                for mut batch in rx {
                    index.load_distinct(&batch);
                    batch.clear();
                    let _ = spent_tx.send(batch);
                }
                index
            })
            .ok()?;
        Some(Builder { tx, spent, thread })
    }

    /// Hands `batch` to the builder; returns an empty one to fill next.
    fn send(&self, batch: Vec<(Fingerprint, EntryId)>) -> Vec<(Fingerprint, EntryId)> {
        // A send fails only when the thread ended (it panicked): `finish`
        // reports that.
        let _ = self.tx.send(batch);
        self.spent
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH))
    }

    /// The index, once every batch is in.
    fn finish(self) -> Result<Box<dyn KeyIndex>> {
        drop(self.tx);
        match self.thread.join() {
            Ok(index) => Ok(Box::new(index)),
            Err(_) => Err(crate::Error::new(
                crate::ErrorKind::Io,
                "building the index from its image failed (its thread panicked)",
            )),
        }
    }
}

impl ImageSink for Rebuilt {
    fn begin(&mut self, objects: usize, secret: Option<[u8; 16]>) {
        self.secret = secret;
        self.state.reserve_entries(objects);
        match secret {
            Some(secret) => {
                self.builder = Builder::start(secret, objects);
                if self.builder.is_none() {
                    self.fps.reserve_exact(objects);
                }
            }
            None => self.keys.reserve_exact(objects),
        }
    }

    fn object(&mut self, block: u32, t: Tuple, fp: Option<(Fingerprint, u16)>) {
        let data = match &t.value {
            // The block as recovery left it is on the device only if
            // recovery did not change it; a changed block holds its values
            // until it is written (`Committer::blocks_written`; a
            // read-only open never writes it).
            TupleValue::Inline(b) if self.dirty.contains(&block) => Stored::pending(b.clone()),
            TupleValue::Inline(_) => Stored::INLINE,
            TupleValue::Heap { .. } => {
                self.heap.push((block, t, fp));
                return;
            }
        };
        self.add(block, t, fp, data);
    }

    fn inline_fp(&mut self, o: InlineFp) {
        if self.secret.is_none() || !self.dirty.is_empty() && self.dirty.contains(&o.block) {
            self.object(o.block, o.tuple(), Some((o.fp, o.key_len)));
            return;
        }
        // `add`'s work for this record: no tuple, no held bytes, no expiry.
        let id = self.state.add(Entry::new(
            o.key_len as usize,
            o.version,
            o.created_micros,
            o.size,
            None,
            Stored::INLINE,
            o.block,
        ));
        self.push_fp(o.fp, id);
    }

    fn discard(&mut self) {
        *self = Rebuilt::new(self.kind);
    }
}
