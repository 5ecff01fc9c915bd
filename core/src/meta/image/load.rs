//! Reading an index image at open into the same [`Recovered`] value a scan
//! of the tuple blocks gives, or saying why it cannot serve (the caller
//! then scans). Nothing here writes.

use std::collections::BTreeSet;

use super::{
    decode_record, device_offset, pieces_len, Header, ImageSink, InlineFp, Record, BLOCK_STATE_LEN,
    INLINE_FP_LEN, SECRET_LEN,
};
use crate::alloc::BuddyAllocator;
use crate::format::{Layout, Superblock, BLOCK_SIZE, SUPER_BLOCKS};
use crate::index::Fingerprint;
use crate::io::{AlignedBuf, IoEngine};
use crate::meta::block::BLOCK_PAYLOAD;
use crate::meta::recovery::{claim_metadata, Recovered, RecoveryReport};
use crate::meta::table::TupleBlockTable;
use crate::meta::tuple::{Tuple, TupleValue};

/// Bytes read from the device at a time: with two more read ahead (and
/// kept by the buffer pool after), 4 MiB of buffers at most.
const CHUNK: usize = 1 << 20;

/// What recovery already read when the image serves as a checkpoint
/// (format 7): the blocks written since its stamp, resolved. The image's
/// records of those blocks are not used; any other record of a key they
/// hold means the two disagree (the image does not serve).
pub(crate) struct Since<'a> {
    /// The allocator with the metadata and the read blocks' objects
    /// claimed.
    pub alloc: BuddyAllocator,
    pub metadata_bytes: u64,
    /// Per block: its state was read from the device.
    pub read: &'a [bool],
    /// The keys of the objects read.
    pub keys: Vec<&'a [u8]>,
    /// The change map's piece (claimed as metadata while it is named).
    pub map: crate::meta::tuple::Piece,
}

/// Loads the image `sb` names: `Err(why)` when there is none that reflects
/// the tuple blocks exactly (stale, damaged, not this store's, or
/// inconsistent) or it records key fingerprints and the index opened holds
/// keys (`fingerprints` false), in which case the caller scans. An image
/// of keys serves either kind of index. The objects go to `sink` as they
/// are read (the `Recovered` has no `tuples`).
pub(crate) async fn load(
    engine: &dyn IoEngine,
    sb: &Superblock,
    fingerprints: bool,
    sink: &mut dyn ImageSink,
    since: Option<Since<'_>>,
) -> std::result::Result<Recovered, String> {
    let r = sb.index_image.ok_or("not named by the superblock")?;
    let Layout::Journaled(_) = sb.layout() else {
        return Err("named by a store with two slots per tuple block".into());
    };
    if sb.clean_seq == 0 || r.seq != sb.clean_seq {
        return Err(format!(
            "reflects sequence {} but the store was last closed cleanly at {}",
            r.seq, sb.clean_seq
        ));
    }
    let total = sb.total_blocks();
    if r.start.saturating_add(1 << r.order) > total {
        return Err("lies beyond the end of the store".into());
    }
    let (res, head) = engine
        .read_at(AlignedBuf::zeroed(BLOCK_SIZE), r.start * BLOCK_SIZE as u64)
        .await;
    res.map_err(|e| format!("header unreadable: {e}"))?;
    let header = Header::decode(head.as_slice(), sb.store_id)?;
    if header.stamp != r.seq || header.next_version != r.seq + 1 {
        return Err(format!(
            "header stamped {} (next version {}), the superblock names {}",
            header.stamp, header.next_version, r.seq
        ));
    }
    if header.fingerprints && !fingerprints {
        return Err("records key fingerprints, and the index opened holds keys".into());
    }
    let fingerprints = header.fingerprints;
    if header.pieces.first().map(|p| (p.start, p.order)) != Some((r.start, r.order)) {
        return Err("header's first piece is not the one the superblock names".into());
    }
    if pieces_len(&header.pieces) < BLOCK_SIZE as u64 + header.payload_len {
        return Err("payload longer than the image's pieces".into());
    }
    // What recovery read already: its allocator, its blocks and their keys.
    let (base, read, keys, map) = match since {
        Some(s) => (
            Some((s.alloc, s.metadata_bytes)),
            s.read,
            s.keys,
            Some(s.map),
        ),
        None => (None, &[][..], Vec::new(), None),
    };
    let is_read = |no: u32| read.get(no as usize).copied().unwrap_or(false);
    let (mut alloc, mut metadata_bytes) = match base {
        Some(base) => base,
        None => {
            let mut alloc = BuddyAllocator::new(SUPER_BLOCKS, total - SUPER_BLOCKS, sb.max_order);
            let bytes = claim_metadata(&mut alloc, sb).map_err(|e| e.to_string())?;
            (alloc, bytes)
        }
    };
    // The image's own pieces (and its map's) count as metadata while it is
    // named.
    metadata_bytes += pieces_len(&header.pieces);
    if let Some(map) = map {
        metadata_bytes += map.len_bytes();
        if map.start.saturating_add(1 << map.order) > total {
            return Err("change map lies beyond the end of the store".into());
        }
        alloc
            .mark_allocated(map)
            .map_err(|e| format!("change map at block {}: {e}", map.start))?;
    }
    for p in &header.pieces {
        alloc
            .mark_allocated(*p)
            .map_err(|e| format!("piece at block {}: {e}", p.start))?;
    }
    let layout = sb.layout();
    let offsets: Vec<u64> = sb
        .meta_extents
        .iter()
        .flat_map(|e| (0..e.tuple_blocks(layout)).map(move |i| (e.start + i) * BLOCK_SIZE as u64))
        .collect();
    // Blocks the metadata area grew by since a checkpoint's image: written
    // since (marked) or empty.
    let grown = map.is_some() && offsets.len() > header.blocks as usize;
    if offsets.len() != header.blocks as usize && !grown {
        return Err(format!(
            "holds {} tuple blocks, the store {}",
            header.blocks,
            offsets.len()
        ));
    }

    // The payload is read on a thread of its own while this one decodes
    // it (nothing below awaits).
    let mut blocks = std::thread::scope(|scope| -> std::result::Result<_, String> {
        let mut reader = Payload::start(scope, engine, &header.pieces, header.payload_len);
        let mut pending: Vec<u8> = Vec::new();
        let mut at = 0usize;
        // The fingerprints' secret, then the blocks' states: a state byte and
        // the payload bytes used, each.
        let secret_len = if fingerprints { SECRET_LEN } else { 0 };
        let states_len = header.blocks as usize * BLOCK_STATE_LEN;
        while pending.len() < secret_len + states_len {
            if !reader.next(&mut pending)? {
                return Err("payload ends inside the block states".into());
            }
        }
        let mut secret = [0u8; 16];
        if fingerprints {
            secret.copy_from_slice(pending.get(..SECRET_LEN).ok_or("secret truncated")?);
            at += SECRET_LEN;
        }
        let fingerprint_of = crate::index::HashIndex::with_secret(secret);
        // The keys recovery read from the blocks written since: as the image
        // records them.
        let mut taken_keys = std::collections::HashSet::new();
        let mut taken_fps = std::collections::HashSet::new();
        for k in keys {
            if fingerprints {
                taken_fps.insert(fingerprint_of.of(k));
            } else {
                taken_keys.insert(k);
            }
        }
        let mut blocks = Vec::with_capacity(offsets.len());
        for (no, b) in pending
            .get(at..at + states_len)
            .unwrap_or_default()
            .chunks_exact(BLOCK_STATE_LEN)
            .enumerate()
        {
            let (state, used) = match b {
                &[state, lo, hi] => (state, u16::from_le_bytes([lo, hi])),
                _ => return Err("block state truncated".into()),
            };
            match (state, used) {
                (0, 0) | (1, _) if used as usize <= BLOCK_PAYLOAD => {
                    blocks.push((state == 1, used))
                }
                _ => return Err(format!("block {no}: state {state}, {used} bytes used")),
            }
        }
        at += states_len;

        let objects = usize::try_from(header.objects).map_err(|_| "object count out of range")?;
        sink.begin(objects.min(1 << 26), fingerprints.then_some(secret));
        let mut seen = 0usize;
        // The previous record's key or fingerprint: each must ascend.
        let mut previous_key: Vec<u8> = Vec::new();
        let mut previous_fp: Option<Fingerprint> = None;
        while seen < objects {
            let rest = pending.get(at..).unwrap_or_default();
            // The common record first: an inline object that does not
            // expire, in an image of fingerprints (no tuple built).
            if let Some(o) = fingerprints.then(|| InlineFp::decode(rest)).flatten() {
                at += INLINE_FP_LEN;
                o.check(&header)?;
                if previous_fp.is_some_and(|p| p >= o.fp) {
                    return Err("fingerprints out of order".into());
                }
                previous_fp = Some(o.fp);
                seen += 1;
                if is_read(o.block) {
                    continue;
                }
                if !taken_fps.is_empty() && taken_fps.contains(&o.fp) {
                    return Err(format!(
                        "holds an object in block {}, written since in another",
                        o.block
                    ));
                }
                sink.inline_fp(o);
                continue;
            }
            match decode_record(rest, fingerprints)? {
                Some((record, n)) => {
                    at += n;
                    let Record {
                        block,
                        tuple: t,
                        tuple_len: len,
                        key_len,
                        fp,
                    } = record;
                    check_record(&t, block, len, &header)?;
                    match fp {
                        None => {
                            if seen > 0 && previous_key.as_slice() >= &*t.key {
                                return Err("keys out of order".into());
                            }
                            previous_key.clear();
                            previous_key.extend_from_slice(&t.key);
                        }
                        Some(fp) => {
                            if previous_fp.is_some_and(|p| p >= fp) {
                                return Err("fingerprints out of order".into());
                            }
                            if fp == 0 {
                                return Err("a fingerprint of zero".into());
                            }
                            if !t.key.is_empty() && fingerprint_of.of(&t.key) != fp {
                                return Err("a key that is not its fingerprint's".into());
                            }
                            previous_fp = Some(fp);
                        }
                    }
                    if is_read(block) {
                        // Its state was read from the device.
                        seen += 1;
                        continue;
                    }
                    let taken = match fp {
                        Some(fp) => taken_fps.contains(&fp),
                        None => taken_keys.contains(&*t.key),
                    };
                    if taken {
                        return Err(format!(
                            "holds object {} in block {block}, written since in another",
                            crate::error::show_key(&t.key)
                        ));
                    }
                    if let TupleValue::Heap { pieces, .. } = &t.value {
                        for p in pieces {
                            if p.start.saturating_add(1 << p.order) > total {
                                return Err(format!(
                                    "piece at block {} lies past the store",
                                    p.start
                                ));
                            }
                            alloc
                                .mark_allocated(*p)
                                .map_err(|e| format!("piece at block {}: {e}", p.start))?;
                        }
                    }
                    seen += 1;
                    sink.object(block, t, fp.map(|fp| (fp, key_len)));
                }
                None => {
                    pending.drain(..at);
                    at = 0;
                    if !reader.next(&mut pending)? {
                        return Err("payload ends inside a record".into());
                    }
                }
            }
        }
        let crc = reader.finish(&mut pending)?;
        if at != pending.len() || reader.read != header.payload_len {
            return Err("payload longer than its records".into());
        }
        if crc != Some(header.payload_crc) {
            return Err("payload checksum mismatch".into());
        }
        Ok(blocks)
    })?;

    blocks.resize(offsets.len(), (false, 0));
    let mut table = TupleBlockTable::new(layout);
    table.blocks.reserve_exact(offsets.len());
    table.push_described(
        offsets
            .iter()
            .zip(&blocks)
            .map(|(&offset, &(state, used))| (offset, 0, state, used)),
    );
    let state_at = offsets
        .iter()
        .zip(&blocks)
        .map(|(&offset, &(state, _))| state.then_some(offset))
        .collect();
    Ok(Recovered {
        alloc,
        metadata_bytes,
        table,
        tuples: Vec::new(),
        state_at,
        replay: Vec::new(),
        pinned: Vec::new(),
        dirty: BTreeSet::new(),
        next_version: header.next_version,
        report: RecoveryReport {
            clean: true,
            from_image: true,
            ..Default::default()
        },
        image_pieces: header.pieces,
        change_map: None,
    })
}

/// One record's fields against the image's own bounds: its block,
/// versions below the next one, a tuple that fits a block. (The caller
/// checks the keys or fingerprints are in strictly ascending order: one
/// per key. How full each block is comes with the block's state, under the
/// payload's checksum: summing it here again would cost a random access
/// per object.)
fn check_record(
    t: &Tuple,
    block: u32,
    len: usize,
    header: &Header,
) -> std::result::Result<(), String> {
    if block >= header.blocks {
        return Err(format!("record in block {block} of {}", header.blocks));
    }
    if t.version == 0 || t.version >= header.next_version {
        return Err(format!("version {} not below the next", t.version));
    }
    if len > BLOCK_PAYLOAD {
        return Err(format!("a tuple of {len} bytes"));
    }
    Ok(())
}

/// The payload, read sequentially in chunks over the image's pieces on a
/// thread of its own (the next chunk is read, and its checksum computed,
/// while this one is decoded).
struct Payload {
    chunks: std::sync::mpsc::Receiver<Chunk>,
    /// Set once the last chunk was taken: the payload's checksum.
    crc: Option<u32>,
    /// Bytes taken so far.
    read: u64,
}

/// What the reading thread sends.
enum Chunk {
    /// The next bytes (the buffer's first `usize`).
    Bytes(AlignedBuf, usize),
    /// Every byte was read: their CRC32C.
    Done(u32),
    Failed(String),
}

impl Payload {
    /// Starts reading `len` bytes after the image's header block, over
    /// `pieces`, on a thread of `scope`.
    fn start<'scope>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        engine: &'scope dyn IoEngine,
        pieces: &'scope [crate::meta::tuple::Piece],
        len: u64,
    ) -> Payload {
        // Two chunks ahead at most: bounded memory.
        let (tx, mut chunks) = std::sync::mpsc::sync_channel(2);
        let read_all = move |tx: &std::sync::mpsc::SyncSender<Chunk>| {
            let mut read = 0u64;
            let mut crc = 0u32;
            while read < len {
                let at = BLOCK_SIZE as u64 + read;
                let Some((dev, room)) = device_offset(pieces, at) else {
                    return Chunk::Failed("payload beyond its pieces".into());
                };
                let want = (len - read).min(room).min(CHUNK as u64) as usize;
                let buf = AlignedBuf::zeroed(crate::io::round_up(want, BLOCK_SIZE));
                let (r, buf) = engine.read_at_blocking(buf, dev);
                if let Err(e) = r {
                    return Chunk::Failed(format!("payload unreadable: {e}"));
                }
                let Some(bytes) = buf.as_slice().get(..want) else {
                    return Chunk::Failed("payload: short read".into());
                };
                crc = crc32c::crc32c_append(crc, bytes);
                read += want as u64;
                if tx.send(Chunk::Bytes(buf, want)).is_err() {
                    // The decoding stopped.
                    return Chunk::Done(crc);
                }
            }
            Chunk::Done(crc)
        };
        let spawned = std::thread::Builder::new()
            .name("blobcask-open-read".into())
            .spawn_scoped(scope, move || {
                let last = read_all(&tx);
                let _ = tx.send(last);
            });
        if let Err(e) = spawned {
            let (tx, failed) = std::sync::mpsc::sync_channel(1);
            let _ = tx.send(Chunk::Failed(format!("no thread to read the image: {e}")));
            chunks = failed;
        }
        Payload {
            chunks,
            crc: None,
            read: 0,
        }
    }

    /// Appends the next chunk to `out`; false at the end.
    fn next(&mut self, out: &mut Vec<u8>) -> std::result::Result<bool, String> {
        if self.crc.is_some() {
            return Ok(false);
        }
        match self.chunks.recv() {
            Ok(Chunk::Bytes(buf, n)) => {
                out.extend_from_slice(buf.as_slice().get(..n).unwrap_or_default());
                self.read += n as u64;
                Ok(true)
            }
            Ok(Chunk::Done(crc)) => {
                self.crc = Some(crc);
                Ok(false)
            }
            Ok(Chunk::Failed(why)) => Err(why),
            Err(_) => Err("the image's reading thread ended early".into()),
        }
    }

    /// The payload's checksum, once every chunk was taken (`None` before).
    fn finish(&mut self, out: &mut Vec<u8>) -> std::result::Result<Option<u32>, String> {
        while self.next(out)? {}
        Ok(self.crc)
    }
}

/// An image's objects as read, in order (`check` compares them with a
/// scan).
#[derive(Default)]
pub(crate) struct Collected {
    pub tuples: Vec<(u32, Tuple)>,
    /// A fingerprint image's secret, and each object's key fingerprint and
    /// length.
    pub secret: Option<[u8; 16]>,
    pub fps: Vec<(Fingerprint, u16)>,
}

impl ImageSink for Collected {
    fn begin(&mut self, objects: usize, secret: Option<[u8; 16]>) {
        self.tuples.reserve(objects);
        self.secret = secret;
    }
    fn object(&mut self, block: u32, tuple: Tuple, fp: Option<(Fingerprint, u16)>) {
        self.tuples.push((block, tuple));
        self.fps.extend(fp);
    }
    fn discard(&mut self) {
        *self = Collected::default();
    }
}

/// The first difference between the state a scan rebuilt and the one an
/// image holds (`check`: `image` its state, `objects` its objects), if
/// any. Inline values are compared by size (the image holds none of their
/// bytes); an image of fingerprints by each scanned key's fingerprint and
/// length.
/// Blocks `read` marks (written since a checkpoint's image) are left out.
pub(crate) fn compare(
    scanned: &Recovered,
    image: &Recovered,
    objects: &Collected,
    read: &[bool],
) -> Option<String> {
    let left_out = |b: u32| read.get(b as usize).copied().unwrap_or(false);
    let kept: Vec<&(u32, Tuple)> = scanned
        .tuples
        .iter()
        .filter(|(b, _)| !left_out(*b))
        .collect();
    if kept.len() != objects.tuples.len() {
        return Some(format!(
            "holds {} objects, the tuple blocks {}",
            objects.tuples.len(),
            kept.len()
        ));
    }
    // The scanned tuples in the image's order, each with what the image
    // says of its key: the key itself, or its fingerprint and length.
    let mut order: Vec<usize> = (0..kept.len()).collect();
    let mut scanned_fps = Vec::new();
    if let Some(secret) = objects.secret {
        let of = crate::index::HashIndex::with_secret(secret);
        scanned_fps = kept.iter().map(|(_, t)| of.of(&t.key)).collect();
        order.sort_by_key(|&i| scanned_fps.get(i).copied());
    }
    for (n, (&i, (ib, it))) in order.iter().zip(&objects.tuples).enumerate() {
        let Some((sb, s)) = kept.get(i).copied() else {
            return Some("differs from the tuple blocks".into());
        };
        let same_key = match objects.secret {
            None => s.key == it.key,
            Some(_) => {
                objects.fps.get(n).map(|&(fp, len)| (fp, len as usize))
                    == scanned_fps.get(i).map(|&fp| (fp, s.key.len()))
                    && (it.key.is_empty() || it.key == s.key)
            }
        };
        let same_value = match (&s.value, &it.value) {
            (TupleValue::Inline(_), TupleValue::Inline(_)) => true,
            (a, b) => a == b,
        };
        if sb != ib
            || !same_key
            || s.version != it.version
            || s.created_micros != it.created_micros
            || s.size != it.size
            || s.expires_micros != it.expires_micros
            || !same_value
        {
            return Some(format!(
                "differs from the tuple blocks at object {}",
                crate::error::show_key(&s.key)
            ));
        }
    }
    let states = |r: &Recovered| {
        r.table
            .blocks
            .iter()
            .enumerate()
            .filter(|(no, _)| !left_out(*no as u32))
            .map(|(_, b)| b.has_state)
            .collect::<Vec<_>>()
    };
    if states(scanned) != states(image) {
        return Some("differs from the tuple blocks in which blocks hold state".into());
    }
    None
}
