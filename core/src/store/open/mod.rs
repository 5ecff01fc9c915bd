//! Creating a store and rebuilding one at open.
//!
//! Open is recovery: there is no log to replay. The superblock gives the
//! geometry, the metadata extents and (format 4) the metadata journal,
//! whose images only stand in for home slots not yet rewritten. Recovery
//! (`meta::recovery::recover`, the same code `check` and a salvage open
//! run) loads the index image a clean close left (format 6), or else reads
//! every tuple block, and returns one `Recovered` value: the
//! largest version of each key, the allocator with every live piece
//! claimed again (a piece claimed twice meaning corruption), and what to
//! rewrite. Open turns it into the store's state and, read-write, puts the
//! device in order before anything is served: journal images copied home
//! and the journal erased, losing duplicates and rolled-back slots
//! rewritten.

//!
//! `path.rs` opens the file (lock, create, engine); this file opens a
//! store on an engine: the superblock, creation, and the rebuild.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::RwLock;

use super::commit::Committer;
use super::{data, now_micros, Geometry, Shared, Store};
use crate::alloc::BuddyAllocator;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{
    Layout, MetaExtent, Superblock, BLOCK_SHIFT, BLOCK_SIZE, JOURNAL_ORDER, SUPER_BLOCKS,
};
use crate::io::{self, AlignedBuf, IoEngine};
use crate::meta::recovery;
use crate::meta::superblock::{
    choose_superblock, publish_superblock, read_extent_table, write_extent_table, Head,
};
use crate::meta::tuple::{Piece, Tuple, TupleValue};
use crate::options::{Options, MIN_CAPACITY};

mod entries;
mod path;

pub(crate) use path::{open_path, PathFiles};

/// What open does with a device whose first blocks hold no superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfBlank {
    /// A caller-supplied engine ([`Store::open_with_engine`]): an all-zero
    /// head gets a new store when `Options::create` is set.
    CreateIfZeroed,
    /// A path that held something before this open (a non-empty file, a
    /// block device): no superblock means "not a store", never "blank",
    /// whatever the head holds (invariant 7).
    Refuse,
    /// A new store is wanted here: a file this open made or found empty,
    /// or a device opened with `create_new`. Formatted unless it already
    /// holds a store.
    Format,
}

async fn read_blocks(engine: &dyn IoEngine, first: u64, count: usize) -> Result<AlignedBuf> {
    let (r, buf) = engine
        .read_at(
            AlignedBuf::zeroed(count * BLOCK_SIZE),
            first * BLOCK_SIZE as u64,
        )
        .await;
    r.map_err(|e| Error::io("reading the superblock", e))?;
    Ok(buf)
}

/// Opens a store on `engine`; what happens when its head holds no
/// superblock is `if_blank`'s to say.
pub(crate) async fn open_engine(
    engine: Arc<dyn IoEngine>,
    files: Option<PathFiles>,
    options: Options,
    if_blank: IfBlank,
) -> Result<Store> {
    options.validate()?;
    let size = engine
        .size()
        .map_err(|e| Error::io("size of the store", e))?;
    let head_bytes = SUPER_BLOCKS * BLOCK_SIZE as u64;
    if if_blank == IfBlank::Refuse && size < head_bytes {
        return Err(not_a_store(&options));
    }
    if if_blank != IfBlank::Refuse && size < MIN_CAPACITY {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{size} bytes is below the minimum store size of {MIN_CAPACITY}"),
        ));
    }
    let head = read_blocks(engine.as_ref(), 0, SUPER_BLOCKS as usize).await?;
    if if_blank == IfBlank::Format {
        if choose_superblock(head.as_slice()).is_ok_and(|h| h.is_some()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "already holds a blobcask store; create_new never formats a store over another",
            ));
        }
        let sb = create(engine.as_ref(), size, &options).await?;
        let head = Head {
            sb,
            republish: false,
            repaired: Vec::new(),
        };
        return rebuild(engine, files, options, head, size).await;
    }
    let head = match choose_superblock(head.as_slice())? {
        Some(h) => h,
        None => {
            if if_blank == IfBlank::Refuse {
                return Err(not_a_store(&options));
            }
            if !options.create || options.read_only {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    "no store here (blank device)",
                ));
            }
            Head {
                sb: create(engine.as_ref(), size, &options).await?,
                republish: false,
                repaired: Vec::new(),
            }
        }
    };
    rebuild(engine, files, options, head, size).await
}

/// Writes `sb`'s extent table to a new piece, syncs, publishes the
/// superblock naming it, then frees `old`: the old table stays whole until
/// the new one is published, as when the metadata area grows.
async fn rewrite_extent_table(shared: &Shared, sb: &mut Superblock, old: MetaExtent) -> Result<()> {
    let piece = shared.alloc.lock().alloc(old.order).ok_or_else(|| {
        Error::new(
            ErrorKind::NoSpace,
            "no room to rewrite the damaged metadata extent table",
        )
    })?;
    let to = MetaExtent {
        start: piece.start,
        order: piece.order,
    };
    let engine = shared.engine.as_ref();
    write_extent_table(engine, sb, to).await?;
    engine
        .sync()
        .await
        .map_err(|e| Error::io("syncing the metadata extent table", e))?;
    let mut next = sb.clone();
    next.extent_table = Some(to);
    *sb = publish_superblock(engine, &next)?;
    *shared.superblock.lock() = sb.clone();
    shared.alloc.lock().free(Piece {
        start: old.start,
        order: old.order,
    });
    Ok(())
}

fn not_a_store(options: &Options) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        if options.read_only || !(options.create || options.create_new) {
            "not a blobcask store (no superblock)"
        } else {
            "not a blobcask store (no superblock); refusing to format it"
        },
    )
}

/// Writes a fresh superblock (both copies) and a zeroed first metadata
/// extent.
async fn create(engine: &dyn IoEngine, size: u64, options: &Options) -> Result<Superblock> {
    let capacity = size & !(BLOCK_SIZE as u64 - 1);
    let total = capacity >> BLOCK_SHIFT;
    let heap = total - SUPER_BLOCKS;
    let piece_order = (options.max_piece_size >> BLOCK_SHIFT).trailing_zeros() as u8;
    // A store that grows keeps its largest piece size as it grows; one of
    // fixed size needs no piece larger than its heap.
    let max_order = if engine.resizable() {
        piece_order
    } else {
        piece_order.min(63 - heap.leading_zeros() as u8)
    };
    let mut alloc = BuddyAllocator::new(SUPER_BLOCKS, heap, max_order);
    // First metadata extent: about 1/512 of the store, between one tuple
    // block and 1 MiB; it grows by an eighth at a time later
    // (`Superblock::next_extent_order`).
    let init = (63 - (total / 512).max(2).leading_zeros() as u8).clamp(1, 8.min(max_order));
    let piece = alloc
        .alloc(init)
        .ok_or_else(|| Error::new(ErrorKind::NoSpace, "no room for the metadata area"))?;
    // The metadata journal: about 1/64 of the store, between 8 slots and
    // 256 (1 MiB); it grows when a group needs more (`Committer`).
    let journal_order = (63 - (total / 64).max(8).leading_zeros() as u8)
        .clamp(1, JOURNAL_ORDER.min(max_order.max(1)));
    let journal_piece = alloc
        .alloc(journal_order)
        .ok_or_else(|| Error::new(ErrorKind::NoSpace, "no room for the metadata journal"))?;
    let mut id = [0u8; 8];
    getrandom::fill(&mut id)
        .map_err(|e| Error::new(ErrorKind::Io, format!("random store id: {e}")))?;
    let journal = (!options.paired_layout).then_some(MetaExtent {
        start: journal_piece.start,
        order: journal_piece.order,
    });
    let sb = Superblock {
        format_version: if journal.is_some() {
            crate::format::JOURNALED_FORMAT_VERSION
        } else {
            crate::format::PAIRED_FORMAT_VERSION
        },
        block_size: BLOCK_SIZE as u32,
        capacity,
        max_order,
        store_id: u64::from_le_bytes(id),
        seq: 0,
        created_micros: now_micros(),
        clean_seq: 0,
        meta_extents: vec![MetaExtent {
            start: piece.start,
            order: piece.order,
        }],
        settings: Some(options.settings(None).stored()),
        journal,
        extent_table: None,
        index_image: None,
        change_map: None,
        unread_extents: 0,
    };
    if journal.is_none() {
        alloc.free(journal_piece);
    }
    for p in [piece, journal_piece] {
        let (r, _) = engine
            .write_at(AlignedBuf::zeroed(p.len_bytes() as usize), p.offset())
            .await;
        r.map_err(|e| Error::io("zeroing the metadata area", e))?;
    }
    engine
        .sync()
        .await
        .map_err(|e| Error::io("syncing a new store", e))?;
    // The superblock goes last: a crash before it leaves a blank device.
    publish_superblock(engine, &sb)
}

fn corrupt(msg: String) -> Error {
    Error::new(ErrorKind::Corrupt, msg)
}

/// Rebuilds the store `head` describes: its geometry and settings checked
/// against `options`, recovery run, and its `Recovered` value turned into
/// the store's state; read-write, the device is put in order before the
/// store is served.
async fn rebuild(
    engine: Arc<dyn IoEngine>,
    files: Option<PathFiles>,
    options: Options,
    head: Head,
    size: u64,
) -> Result<Store> {
    let Head {
        mut sb,
        republish,
        repaired,
    } = head;
    if sb.capacity > size {
        return Err(corrupt(format!(
            "store geometry says {} bytes but the file holds {size}",
            sb.capacity
        )));
    }
    let total = sb.total_blocks();
    // Extents beyond the superblock's own list (format 5).
    let table_damage = read_extent_table(engine.as_ref(), &mut sb).await?;
    if total <= SUPER_BLOCKS {
        return Err(corrupt("store geometry is too small".into()));
    }
    let mut settings = options.settings(sb.settings.as_ref());
    // A two-slot store that never stored its settings (formats 1 and 2)
    // keeps the default it was written under: it still has the
    // superblock's 200-extent ceiling, which the larger default would
    // reach sooner.
    if (sb.settings.is_none(), options.inline_threshold, sb.layout())
        == (true, None, Layout::Paired)
    {
        settings.inline_threshold = crate::options::PAIRED_DEFAULT_INLINE_THRESHOLD;
    }
    // An explicit capacity larger than the store grows it once it is open;
    // one below a capacity asked for before (or a max_capacity below the
    // store's size) is refused before anything is read or written. A block
    // device has its own size, whatever is asked.
    let resizable = engine.resizable();
    let refuse = |m: String| Err(Error::new(ErrorKind::InvalidArgument, m));
    if let Some(m) = options
        .max_capacity
        .filter(|&m| m != u64::MAX && m < sb.capacity && resizable)
    {
        return refuse(format!(
            "max_capacity {m} is below the store's size of {} bytes; a store never shrinks",
            sb.capacity
        ));
    }
    let asked_before = sb.settings.map_or(0, |s| s.asked_capacity);
    let grow_to = match options.capacity.map(|c| c & !(BLOCK_SIZE as u64 - 1)) {
        // Less than the store grew to by itself is fine (an application
        // passing the same options at every start); less than a capacity
        // asked for before is a mistake.
        Some(c) if resizable && c < asked_before => {
            return refuse(format!(
                "capacity {c} is below the {asked_before} bytes this store was given before; \
                 a store never shrinks (open it without a capacity to keep its size)"
            ));
        }
        Some(c) if resizable && c > sb.capacity => {
            if options.read_only {
                return refuse(format!(
                    "capacity {c} is above the store's size of {} bytes, and a read-only open \
                     never grows a store",
                    sb.capacity
                ));
            }
            if let Some(m) = settings.max_capacity.filter(|&m| c > m) {
                return refuse(format!(
                    "capacity {c} exceeds the store's max_capacity of {m} bytes"
                ));
            }
            Some(c)
        }
        _ => None,
    };
    let verify_engine = engine.clone();
    let salvage = options.salvage;
    // The same recovery as `check` and a salvage open (both read-only opens).
    let image_use = if options.scan_metadata {
        recovery::ImageUse::Verify
    } else {
        recovery::ImageUse::Load
    };
    let fingerprints = settings.index.holds_fingerprints();
    // An image's objects become entries as it is read.
    let mut rebuilt = entries::Rebuilt::new(settings.index);
    let recovered = recovery::recover(
        engine.as_ref(),
        &sb,
        salvage,
        image_use,
        fingerprints,
        &mut rebuilt,
        |t: Tuple| {
            let engine = verify_engine.clone();
            async move {
                if let TupleValue::Heap { pieces, .. } = &t.value {
                    if let Some(p) = pieces.iter().find(|p| p.start + (1u64 << p.order) > total) {
                        return Ok(Some(format!(
                            "piece at block {} lies past the end of the store",
                            p.start
                        )));
                    }
                }
                data::verify_object(engine.as_ref(), &t).await
            }
        },
    )
    .await?;
    let recovery::Recovered {
        alloc,
        metadata_bytes,
        table,
        tuples,
        state_at,
        replay,
        pinned,
        dirty,
        next_version,
        mut report,
        image_pieces,
        change_map,
    } = recovered;
    report.repaired.splice(0..0, repaired);
    // Nothing was written after the last clean close.
    let clean = report.clean;
    // Journal images of groups recovery rolled back must not outlive it.
    let rolled_back = report.rolled_back();
    let alloc = crate::sync::Arc::new(crate::sync::Mutex::new(alloc));
    // A scan's objects (an image's went to `rebuilt` as it was read).
    rebuilt.scanned(tuples, &dirty);
    let (mut state, expiring, held) = rebuilt.finish(&alloc)?;
    if options.eviction != crate::options::Eviction::None && !options.read_only {
        // Not persisted: every object starts in the main queue, in id order.
        state.track_all(super::evict::S3Fifo::default());
    }

    let read_only = options.read_only;
    let (lock, io_file) = match files {
        Some(PathFiles { lock, io }) => (Some(lock), Some(io)),
        None => (None, None),
    };
    let cache_bytes = options.cache_bound();
    // From here on every write goes through one counter, below every
    // writer: `Stats::device_bytes_written` is what the device was asked
    // to write since the store opened, counted once.
    let device_bytes_written = Arc::new(AtomicU64::new(0));
    let engine: Arc<dyn IoEngine> =
        Arc::new(io::Counted::new(engine, device_bytes_written.clone()));
    let shared = Arc::new(Shared {
        engine,
        io_file,
        geometry: Geometry {
            store_id: sb.store_id,
        },
        capacity: AtomicU64::new(sb.capacity),
        uploads: Default::default(),
        superblock: parking_lot::Mutex::new(sb.clone()),
        settings,
        state: RwLock::new(state),
        options,
        alloc: alloc.clone(),
        failed: Default::default(),
        sealed: AtomicBool::new(false),
        device_bytes_written,
        user_bytes_written: AtomicU64::new(0),
        commit_groups: AtomicU64::new(0),
        metadata_bytes: AtomicU64::new(metadata_bytes),
        tables: data::new_table_cache(),
        cache: super::cache::ReadCache::new(cache_bytes),
        landing: super::landing::Landing::new(),
        recovery: parking_lot::Mutex::new(report),
        maintenance: super::commit::Maintenance::new(),
        compacting: futures::lock::Mutex::new(()),
        futile_compaction: AtomicU64::new(u64::MAX),
        evict: Default::default(),
        expiring: Default::default(),
        retired: Default::default(),
    });
    {
        let mut st = shared.state.write();
        st.reserve_slots(state_at.len());
        // Where readers find each written block's state.
        for (no, at) in state_at.iter().enumerate() {
            if let Some(at) = at {
                st.set_slot(no as u32, *at);
            }
        }
    }
    if let (Some(why), Some(old)) = (&table_damage, sb.extent_table) {
        let done = match read_only {
            true => "a read-write open rewrites it".to_owned(),
            false => match rewrite_extent_table(&shared, &mut sb, old).await {
                Ok(()) => "rewritten from it".to_owned(),
                // A full heap: the whole copy serves; a later open (once
                // there is room) rewrites it.
                Err(e) if e.kind() == ErrorKind::NoSpace => {
                    format!("not rewritten: {}", e.message())
                }
                Err(e) => return Err(e),
            },
        };
        shared.recovery.lock().repaired.push(format!(
            "metadata extent table {why}; the other copy is whole, nothing lost; {done}"
        ));
    }
    let stored = Some(settings.stored());
    // An index image open did not load (damaged, stale) is dropped now; one
    // it loaded stays named until the first change (`Committer::drop_image`),
    // so an open and close that change nothing write nothing.
    let loaded = !image_pieces.is_empty();
    let drop_image = sb.index_image.is_some() && !loaded;
    if (republish || sb.settings != stored || drop_image) && !read_only {
        // Both copies current, in this build's format and with the settings
        // in effect, before anything of this format is written.
        let mut up = sb.clone();
        if drop_image {
            up.index_image = None;
            up.change_map = None;
        }
        up.format_version = up.current_version();
        up.settings = stored;
        *shared.superblock.lock() = publish_superblock(shared.engine.as_ref(), &up)?;
    }
    let mut committer = Committer::new(shared.clone(), table, next_version);
    if loaded && !read_only {
        committer.keep_checkpoint(image_pieces, change_map);
    }
    for (key, at, version, size) in expiring {
        committer.track_expiry(key, at, version, size);
    }
    for (id, version) in held {
        committer.hold_inline(id, version);
    }
    let restore = !read_only && (rolled_back || !replay.is_empty());
    if restore && loaded {
        // The blocks whose state is a journal image are marked in the
        // change map before the journal is erased: from then on their home
        // slots are the only copies.
        let blocks = replay.iter().map(|&(b, _, _)| b).collect();
        committer.mark_now(&blocks).await?;
    }
    if let (true, Layout::Journaled(journal)) = (restore, sb.layout()) {
        // After a crash: each block whose state is a journal image gets it
        // copied home (synced), readers then find it there, and every
        // journal slot but those recovery's edits still need is zeroed
        // (synced), so no image of a group recovery rolled back can come
        // back once newer groups follow. A cut at any point leaves the
        // images not yet zeroed, and the homes copied so far equal to them:
        // recovery decides again as before.
        let engine = shared.engine.as_ref();
        recovery::journal::restore_homes(engine, &replay).await?;
        {
            let mut st = shared.state.write();
            for &(block, home, _) in &replay {
                st.set_slot(block, home);
            }
        }
        recovery::journal::erase(engine, journal, &pinned).await?;
    }
    committer.pin_journal(&pinned);
    if read_only {
        // Recovery's decisions hold in memory only: nothing is written.
    } else if loaded && clean {
        // Loaded from the index image of a clean close, nothing written
        // since: everything it reflects was synced before it was named.
    } else if dirty.is_empty() {
        // What was verified may so far sit only in a volatile cache (the
        // previous process died before its sync): make it durable before
        // anything is served on top of it.
        shared
            .engine
            .sync()
            .await
            .map_err(|e| Error::io("syncing at open", e))?;
    } else {
        // Drop losing duplicates and rejected slots from disk before
        // anything can reuse the pieces they point at (this syncs too).
        // Home slots the last process rewrote may not be durable yet, and
        // the journal slots backing them count as free from now on: sync
        // first.
        shared
            .engine
            .sync()
            .await
            .map_err(|e| Error::io("syncing at open", e))?;
        let seq = committer.bump();
        committer.write_blocks(&dirty, seq, seq, 0).await?;
    }
    let store = Store::start(shared, committer, lock)?;
    if let Some(c) = grow_to {
        super::grow::grow_to(store.shared(), c)?;
    }
    Ok(store)
}
