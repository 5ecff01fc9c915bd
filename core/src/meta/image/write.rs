//! Writing an index image at a clean close: its pieces allocated at once
//! for the exact length, the payload streamed out in large writes as the
//! caller hands it records, then the header; the caller syncs and
//! publishes the superblock naming it (the image is durable before it is
//! named).

use super::{device_offset, encode_record, Header, MAX_IMAGE_PIECES};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ImageRef, BLOCK_SIZE};
use crate::io::{round_up, AlignedBuf, IoEngine};
use crate::meta::tuple::{Checksums, Piece};

/// Bytes written to the device at a time.
const CHUNK: usize = 1 << 20;

/// One object as the image records it (a tuple's fields, its block, and
/// for a heap object its pieces, checksums and `unsynced` flag).
pub(crate) struct ImageObject<'a> {
    /// The key: in a fingerprint image only of an object that expires
    /// (empty otherwise).
    pub key: &'a [u8],
    pub key_len: usize,
    /// The key's fingerprint, in a fingerprint image.
    pub fp: Option<crate::index::Fingerprint>,
    pub block: u32,
    pub version: u64,
    pub created_micros: u64,
    pub size: u64,
    pub expires_micros: Option<u64>,
    pub heap: Option<(&'a [Piece], &'a Checksums, bool)>,
}

/// An image being written: pieces allocated, payload streamed.
pub(crate) struct ImageWriter<'a> {
    engine: &'a dyn IoEngine,
    pieces: Vec<Piece>,
    /// Payload bytes not written yet; they start at payload offset
    /// `flushed`.
    buf: Vec<u8>,
    flushed: u64,
    crc: u32,
    payload_len: u64,
    blocks: u32,
    objects: u64,
    fingerprints: bool,
}

impl<'a> ImageWriter<'a> {
    /// The payload's length for these blocks and objects' record lengths
    /// (`fingerprints`: with the secret).
    pub fn payload_len(fingerprints: bool, blocks: usize, records: u64) -> u64 {
        let secret = if fingerprints { super::SECRET_LEN } else { 0 };
        (secret + blocks * super::BLOCK_STATE_LEN) as u64 + records
    }

    /// Starts an image of `payload_len` payload bytes in `pieces` (the
    /// caller allocated them: at least `BLOCK_SIZE + payload_len` bytes,
    /// at most `MAX_IMAGE_PIECES`), the payload beginning with the
    /// fingerprints' secret when its records hold fingerprints (`secret`),
    /// then each block's state: whether it has state, and the payload
    /// bytes used.
    pub fn start(
        engine: &'a dyn IoEngine,
        pieces: Vec<Piece>,
        secret: Option<[u8; 16]>,
        blocks_state: &[(bool, u16)],
        payload_len: u64,
    ) -> Result<Self> {
        let blocks = u32::try_from(blocks_state.len())
            .map_err(|_| Error::new(ErrorKind::Corrupt, "more tuple blocks than a u32 counts"))?;
        if pieces.len() > MAX_IMAGE_PIECES
            || super::pieces_len(&pieces) < BLOCK_SIZE as u64 + payload_len
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "index image pieces do not fit its header or its length",
            ));
        }
        let mut w = ImageWriter {
            engine,
            pieces,
            buf: Vec::with_capacity(CHUNK * 2),
            flushed: 0,
            crc: 0,
            payload_len,
            blocks,
            objects: 0,
            fingerprints: secret.is_some(),
        };
        if let Some(secret) = secret {
            w.buf.extend_from_slice(&secret);
        }
        for &(state, used) in blocks_state {
            w.buf.push(u8::from(state));
            w.buf.extend_from_slice(&used.to_le_bytes());
        }
        Ok(w)
    }

    /// Appends one object's record (in key or fingerprint order; written by the next
    /// [`write_full`](Self::write_full) or [`finish`](Self::finish)).
    pub fn push(&mut self, o: &ImageObject<'_>) {
        encode_record(o, &mut self.buf);
        self.objects += 1;
    }

    /// Writes every whole chunk pushed so far.
    pub async fn write_full(&mut self) -> Result<()> {
        if self.buf.len() >= CHUNK {
            self.flush(false).await?;
        }
        Ok(())
    }

    /// Writes whole chunks of `buf` (all of it, padded to a block, when
    /// `last`).
    async fn flush(&mut self, last: bool) -> Result<()> {
        let take = if last {
            self.buf.len()
        } else {
            self.buf.len() / CHUNK * CHUNK
        };
        if take == 0 {
            return Ok(());
        }
        let bytes: Vec<u8> = self.buf.drain(..take).collect();
        self.crc = crc32c::crc32c_append(self.crc, &bytes);
        let mut done = 0usize;
        while done < bytes.len() {
            let at = BLOCK_SIZE as u64 + self.flushed + done as u64;
            let (dev, room) = device_offset(&self.pieces, at)
                .ok_or_else(|| Error::new(ErrorKind::Io, "index image longer than its pieces"))?;
            let n = (bytes.len() - done).min(usize::try_from(room).unwrap_or(usize::MAX));
            let part = bytes.get(done..done + n).unwrap_or_default();
            let mut buf = AlignedBuf::zeroed(round_up(n, BLOCK_SIZE));
            if let Some(head) = buf.as_mut_slice().get_mut(..n) {
                head.copy_from_slice(part);
            }
            let (r, _) = self.engine.write_at(buf, dev).await;
            r.map_err(|e| Error::io("writing the index image", e))?;
            done += n;
        }
        self.flushed += bytes.len() as u64;
        Ok(())
    }

    /// Writes the rest of the payload and the header. The caller syncs
    /// before naming the image in the superblock.
    pub async fn finish(
        mut self,
        store_id: u64,
        stamp: u64,
        next_version: u64,
    ) -> Result<(ImageRef, Vec<Piece>)> {
        self.flush(true).await?;
        if self.flushed != self.payload_len {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "index image payload of {} bytes, {} planned",
                    self.flushed, self.payload_len
                ),
            ));
        }
        let header = Header {
            fingerprints: self.fingerprints,
            store_id,
            stamp,
            next_version,
            objects: self.objects,
            blocks: self.blocks,
            pieces: self.pieces.clone(),
            payload_len: self.payload_len,
            payload_crc: self.crc,
        };
        let first = *self
            .pieces
            .first()
            .ok_or_else(|| Error::new(ErrorKind::Io, "index image without pieces"))?;
        let (r, _) = self
            .engine
            .write_at(AlignedBuf::copy_from(&header.encode()), first.offset())
            .await;
        r.map_err(|e| Error::io("writing the index image header", e))?;
        Ok((
            ImageRef {
                start: first.start,
                order: first.order,
                seq: stamp,
            },
            self.pieces,
        ))
    }
}
