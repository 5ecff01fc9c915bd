//! Aligned, zero-initialised, owned buffers for direct I/O.
//!
//! Invariants:
//! * the allocation is `BLOCK_SIZE`-aligned and its capacity is a multiple of
//!   `BLOCK_SIZE`, so any buffer can be handed to an `O_DIRECT` read or write;
//! * every byte of the allocation is initialised (zero-filled at creation), so
//!   safe code can never observe uninitialised memory;
//! * the pointer never changes while the buffer lives, which is what io_uring
//!   needs while the kernel owns the buffer.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::format::BLOCK_SIZE;

/// An owned buffer aligned to the device block, valid length `len`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); no
// interior mutability or shared aliasing exists.
unsafe impl Send for AlignedBuf {}
// SAFETY: &AlignedBuf only gives out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes; capacity rounds up to a block.
    pub fn zeroed(len: usize) -> Self {
        let cap = round_up(len.max(1), BLOCK_SIZE);
        let layout = Layout::from_size_align(cap, BLOCK_SIZE).expect("aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, cap, len }
    }

    /// A buffer holding a copy of `data`, zero-padded to the block. One
    /// pass over the memory: the copy initialises the data bytes and only
    /// the padding is zeroed.
    pub fn copy_from(data: &[u8]) -> Self {
        let cap = round_up(data.len().max(1), BLOCK_SIZE);
        let layout = Layout::from_size_align(cap, BLOCK_SIZE).expect("aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds cap >= data.len() bytes and cannot
        // overlap `data`; after these two writes all cap bytes are
        // initialised, which is the invariant every other method relies on.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), data.len());
            std::ptr::write_bytes(ptr.as_ptr().add(data.len()), 0, cap - data.len());
        }
        AlignedBuf {
            ptr,
            cap,
            len: data.len(),
        }
    }

    /// A buffer of `len` bytes holding each `(offset, bytes)` part at its
    /// offset and zeros everywhere else, written in one pass (no zero-fill
    /// under the parts). Parts must lie inside `len` and not overlap.
    pub fn gather(len: usize, parts: &[(usize, &[u8])]) -> Self {
        let cap = round_up(len.max(1), BLOCK_SIZE);
        let layout = Layout::from_size_align(cap, BLOCK_SIZE).expect("aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let mut at = 0usize;
        for &(offset, bytes) in parts {
            assert!(
                offset >= at && offset + bytes.len() <= len,
                "gather parts out of order or range"
            );
            // SAFETY: [at, offset + bytes.len()) lies inside the allocation
            // (checked above, cap >= len) and does not overlap `bytes`.
            unsafe {
                std::ptr::write_bytes(ptr.as_ptr().add(at), 0, offset - at);
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    ptr.as_ptr().add(offset),
                    bytes.len(),
                );
            }
            at = offset + bytes.len();
        }
        // SAFETY: zeroes the rest; afterwards every byte up to cap is
        // initialised, the invariant all other methods rely on.
        unsafe { std::ptr::write_bytes(ptr.as_ptr().add(at), 0, cap - at) };
        AlignedBuf { ptr, cap, len }
    }

    /// Valid length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the valid length is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allocated bytes, a multiple of the block size.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Sets the valid length; the bytes are already initialised.
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap, "AlignedBuf::set_len beyond capacity");
        self.len = len;
    }

    /// The valid bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for cap >= len initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The valid bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The whole allocation, mutable (for reads that fill the buffer).
    pub fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: all cap bytes are initialised and exclusively owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, BLOCK_SIZE).expect("aligned layout");
        // SAFETY: allocated in `zeroed` with this exact layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(target_os = "linux")]
// SAFETY: the pointer is stable for the buffer's lifetime (heap allocation
// never moves), bytes_init/bytes_total describe initialised memory.
unsafe impl tokio_uring::buf::IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len
    }
    fn bytes_total(&self) -> usize {
        self.cap
    }
}

#[cfg(target_os = "linux")]
// SAFETY: as for IoBuf; every byte up to cap is initialised, so moving the
// valid length forward never exposes uninitialised memory.
unsafe impl tokio_uring::buf::IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    unsafe fn set_init(&mut self, pos: usize) {
        if pos > self.len {
            self.len = pos.min(self.cap);
        }
    }
}

/// Rounds `n` up to a multiple of `align` (a power of two).
pub fn round_up(n: usize, align: usize) -> usize {
    (n + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_block_aligned_and_zeroed() {
        for len in [0, 1, 4095, 4096, 4097, 1 << 20] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % BLOCK_SIZE, 0);
            assert_eq!(b.capacity() % BLOCK_SIZE, 0);
            assert!(b.capacity() >= len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn gather_places_parts_and_zeroes_the_gaps() {
        let b = AlignedBuf::gather(10_000, &[(3, b"abc"), (5000, b"xyz")]);
        assert_eq!(b.len(), 10_000);
        assert_eq!(&b.as_slice()[3..6], b"abc");
        assert_eq!(&b.as_slice()[5000..5003], b"xyz");
        let zeros = b
            .as_slice()
            .iter()
            .enumerate()
            .filter(|(i, _)| !(3..6).contains(i) && !(5000..5003).contains(i));
        assert!(zeros.into_iter().all(|(_, &x)| x == 0));
    }

    #[test]
    fn copy_from_pads_with_zeros() {
        let mut b = AlignedBuf::copy_from(b"hello");
        assert_eq!(b.as_slice(), b"hello");
        assert!(b.full_mut()[5..].iter().all(|&x| x == 0));
    }
}
