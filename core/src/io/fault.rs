//! An in-memory device that models power cuts, for crash tests and fuzzing.
//!
//! It keeps two images: `volatile` (what reads see: every completed write)
//! and `durable` (what survives a power cut: the state at the last sync).
//! Writes since the last sync are kept in order. A crash can be armed at the
//! N-th write: that write and everything after it fail, as if power went
//! out. [`MemDevice::crash_image`] then builds what the disk could hold after
//! the cut: the durable image plus any subset of the unsynced writes, each
//! whole, missing, or torn at a random byte.

use std::io;

use parking_lot::Mutex;

use super::{AlignedBuf, BufResult, IoEngine, IoFuture};

/// What happens to writes that were not synced when the power went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Every unsynced write is lost.
    DropUnsynced,
    /// Every unsynced write reached the disk whole, the interrupted one too.
    KeepUnsynced,
    /// Each unsynced write independently lands whole, is lost, or is torn
    /// at a random byte; the choice is drawn from the seed.
    Random(u64),
    /// Only the last write issued (the interrupted one, at a cut) reached
    /// the disk, whole; every earlier unsynced write is lost: a device that
    /// reorders writes between syncs, at its most adversarial for code that
    /// relies on issue order instead of a sync.
    LastOnly,
}

#[derive(Default)]
struct State {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    /// Unsynced writes in issue order, including the interrupted one.
    pending: Vec<(u64, Vec<u8>)>,
    writes: u64,
    syncs: u64,
    crash_at_write: Option<u64>,
    crashed: bool,
    /// Whether `grow` may extend the device (a file, not a disk).
    resizable: bool,
}

/// In-memory block device with a durable and a volatile image.
#[derive(Default)]
pub struct MemDevice {
    state: Mutex<State>,
}

fn power_cut() -> io::Error {
    io::Error::other("simulated power cut")
}

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: usize) -> Self {
        Self::from_image(vec![0; size])
    }

    /// A device whose durable and volatile contents are `image`.
    pub fn from_image(image: Vec<u8>) -> Self {
        MemDevice {
            state: Mutex::new(State {
                durable: image.clone(),
                volatile: image,
                ..State::default()
            }),
        }
    }

    /// This device, made one a store may extend as it extends a file: a
    /// new length is durable at the next sync (a power cut before it keeps
    /// the old length), and growing counts as a write, so
    /// [`crash_after_writes`](Self::crash_after_writes) can cut there too.
    pub fn growable(self) -> Self {
        self.state.lock().resizable = true;
        self
    }

    /// Arms a power cut at the `n`-th write from now (1 = the next write).
    pub fn crash_after_writes(&self, n: u64) {
        let mut s = self.state.lock();
        s.crash_at_write = Some(s.writes + n);
    }

    /// Cuts the power now: every later operation fails.
    pub fn crash_now(&self) {
        self.state.lock().crashed = true;
    }

    /// True once the power is cut.
    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// Writes issued so far (including failed ones).
    pub fn writes(&self) -> u64 {
        self.state.lock().writes
    }

    /// Syncs completed so far.
    pub fn syncs(&self) -> u64 {
        self.state.lock().syncs
    }

    /// Flips the low bit of the byte at `offset` in what the disk holds and
    /// what a reader sees: media damage while a store runs on the device.
    pub fn flip(&self, offset: usize) {
        let s = &mut *self.state.lock();
        for image in [&mut s.volatile, &mut s.durable] {
            if let Some(b) = image.get_mut(offset) {
                *b ^= 1;
            }
        }
    }

    /// The volatile image (what a reader sees now).
    pub fn volatile_image(&self) -> Vec<u8> {
        self.state.lock().volatile.clone()
    }

    /// What the disk holds after a power cut now, under `mode`.
    pub fn crash_image(&self, mode: CrashMode) -> Vec<u8> {
        let s = self.state.lock();
        let mut img = s.durable.clone();
        let mut rng = match mode {
            CrashMode::Random(seed) => seed | 1,
            _ => 0,
        };
        let mut next = move || {
            // xorshift64: a tiny reproducible generator for crash choices.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let last = s.pending.len().saturating_sub(1);
        for (i, (offset, data)) in s.pending.iter().enumerate() {
            let at = *offset as usize;
            let len = match mode {
                CrashMode::DropUnsynced => 0,
                CrashMode::KeepUnsynced => data.len(),
                CrashMode::LastOnly if i == last => data.len(),
                CrashMode::LastOnly => 0,
                CrashMode::Random(_) => match next() % 3 {
                    0 => 0,
                    1 => data.len(),
                    _ => (next() % data.len().max(1) as u64) as usize,
                },
            };
            // `write_at` refused writes past the end; `len <= data.len()`.
            if let (Some(dst), Some(src)) = (img.get_mut(at..at + len), data.get(..len)) {
                dst.copy_from_slice(src);
            }
        }
        img
    }
}

impl IoEngine for MemDevice {
    fn read_at(&self, mut buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let s = self.state.lock();
        let r = if s.crashed {
            Err(power_cut())
        } else {
            let at = offset as usize;
            let out = buf.full_mut();
            match s.volatile.get(at..at + out.len()) {
                Some(src) => {
                    out.copy_from_slice(src);
                    let cap = buf.capacity();
                    buf.set_len(cap);
                    Ok(())
                }
                None => Err(io::ErrorKind::UnexpectedEof.into()),
            }
        };
        drop(s);
        Box::pin(std::future::ready((r, buf)))
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let mut s = self.state.lock();
        let at = offset as usize;
        let len = buf.len();
        let r = if s.crashed {
            Err(power_cut())
        } else if at + len > s.volatile.len() {
            Err(io::Error::other("write past the end of the device"))
        } else {
            s.writes += 1;
            s.pending.push((offset, buf.as_slice().to_vec()));
            if s.crash_at_write == Some(s.writes) {
                // The interrupted write stays in `pending`: it may have
                // reached the disk whole, partly, or not at all.
                s.crashed = true;
                Err(power_cut())
            } else if let Some(dst) = s.volatile.get_mut(at..at + len) {
                dst.copy_from_slice(buf.as_slice());
                Ok(())
            } else {
                Err(io::Error::other("write past the end of the device"))
            }
        };
        drop(s);
        Box::pin(std::future::ready((r, buf)))
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        let mut s = self.state.lock();
        let r = if s.crashed {
            Err(power_cut())
        } else {
            let len = s.volatile.len();
            zero_extend(&mut s.durable, len);
            let pending = std::mem::take(&mut s.pending);
            for (offset, data) in pending {
                let at = offset as usize;
                // `write_at` refused writes past the end of the device.
                if let Some(dst) = s.durable.get_mut(at..at + data.len()) {
                    dst.copy_from_slice(&data);
                }
            }
            s.syncs += 1;
            Ok(())
        };
        Box::pin(std::future::ready(r))
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.state.lock().volatile.len() as u64)
    }

    fn resizable(&self) -> bool {
        self.state.lock().resizable
    }

    fn grow(&self, _from: u64, len: u64) -> io::Result<()> {
        let mut s = self.state.lock();
        if !s.resizable {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this device has a fixed size",
            ));
        }
        if s.crashed {
            return Err(power_cut());
        }
        s.writes += 1;
        if s.crash_at_write == Some(s.writes) {
            s.crashed = true;
            return Err(power_cut());
        }
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::ENOSPC))?;
        zero_extend(&mut s.volatile, len);
        Ok(())
    }

    fn name(&self) -> &'static str {
        "memory"
    }

    fn direct_io(&self) -> bool {
        false
    }
}

/// Extends `v` with zeros to `len` bytes (no-op when it is as long): one
/// zeroed allocation and a copy, not a byte at a time (`Vec::resize` is a
/// per-element loop in the unoptimised builds the test suites run).
fn zero_extend(v: &mut Vec<u8>, len: usize) {
    if let Some(n) = len.checked_sub(v.len()).filter(|&n| n > 0) {
        v.extend_from_slice(&vec![0u8; n]);
    }
}
