//! Aligned, owned buffers for direct I/O, recycled when large or of a small
//! power-of-two size.
//!
//! Invariants:
//! * the allocation is `BLOCK_SIZE`-aligned and the capacity is a multiple
//!   of `BLOCK_SIZE`, so any buffer can be handed to an `O_DIRECT` read or
//!   write;
//! * every byte up to the capacity is initialised (zero-filled, or written
//!   by the constructor), so safe code can never observe uninitialised
//!   memory; bytes of the allocation past the capacity are never exposed;
//! * the pointer never changes while the buffer lives, which is what io_uring
//!   needs while the kernel owns the buffer.
//!
//! Large buffers (capacity above `POOL_MIN / 2`, up to `POOL_MAX`) are allocated in
//! power-of-two sizes and, when dropped, kept in a process-wide pool of at
//! most `POOL_BYTES` for the next buffer of their size class: a fresh large
//! allocation is fresh memory from the kernel, and every one of its pages
//! faults (and is zeroed by the kernel) on first touch, which cost a backup
//! about 8 % of its time. A recycled buffer's pages are resident.
//!
//! Small buffers whose size is a power of two (a block up to `POOL_MIN / 2`:
//! a 4 KiB read, a tuple block's image, a 16 KiB value's copy) are pooled
//! too, each class up to `SMALL_CLASS_BYTES`, and are
//! not rounded up (a small value's buffer may live on in the caller's
//! `Bytes`). The allocator serves a block-aligned request by splitting a
//! larger chunk and freeing the pieces around it; at 64 reads in flight
//! that was about a sixth of the reading thread's user time.
//!
//! A recycled buffer's old bytes are overwritten before it is handed out
//! (zeroed, or the data a constructor copies in), so nothing of a previous
//! buffer is ever seen.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::format::BLOCK_SIZE;

/// Smallest large allocation: a capacity above half of it is rounded up to
/// its power of two.
const POOL_MIN: usize = 256 << 10;
/// Largest pooled allocation.
const POOL_MAX: usize = 8 << 20;
/// Most bytes the pool keeps of all large allocations together.
const POOL_BYTES: usize = 32 << 20;
/// Most bytes the pool keeps of each small class (`BLOCK_SIZE` up to
/// `POOL_MIN / 2`, powers of two, never rounded up).
const SMALL_CLASS_BYTES: usize = 1 << 20;
/// Size classes: BLOCK_SIZE, 2 × BLOCK_SIZE, … POOL_MAX; the first
/// `SMALL_CLASSES` of them small.
const CLASSES: usize = (POOL_MAX / BLOCK_SIZE).trailing_zeros() as usize + 1;
const SMALL_CLASSES: usize = (POOL_MIN / BLOCK_SIZE).trailing_zeros() as usize;

/// Free allocations by size class (addresses; each allocated with the
/// class's size and `BLOCK_SIZE` alignment), and the bytes they hold:
/// large classes together in `POOLED`, each small one in `POOLED_SMALL`.
static POOL: [Mutex<Vec<usize>>; CLASSES] = [const { Mutex::new(Vec::new()) }; CLASSES];
static POOLED: AtomicUsize = AtomicUsize::new(0);
static POOLED_SMALL: [AtomicUsize; SMALL_CLASSES] = [const { AtomicUsize::new(0) }; SMALL_CLASSES];

/// The size class index of an allocation of `size` bytes, if pooled.
fn class_of(size: usize) -> Option<usize> {
    (size.is_power_of_two() && (BLOCK_SIZE..=POOL_MAX).contains(&size))
        .then(|| (size / BLOCK_SIZE).trailing_zeros() as usize)
}

/// The count of pooled bytes a pooled allocation of `size` belongs to,
/// and its bound.
fn budget(size: usize) -> (&'static AtomicUsize, usize) {
    match class_of(size).and_then(|c| POOLED_SMALL.get(c)) {
        Some(small) => (small, SMALL_CLASS_BYTES),
        None => (&POOLED, POOL_BYTES),
    }
}

/// The allocation size for a buffer of capacity `cap`: its power-of-two
/// class when large, else `cap` itself (pooled when a power of two).
fn alloc_size(cap: usize) -> usize {
    if (POOL_MIN / 2 + 1..=POOL_MAX).contains(&cap) {
        cap.next_power_of_two().max(POOL_MIN)
    } else {
        cap
    }
}

#[expect(
    clippy::expect_used,
    reason = "fails only for a size within 4 KiB of isize::MAX, which no \
              store, object or read length reaches (they are bounded by \
              the device's capacity and checked against it first)"
)]
fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, BLOCK_SIZE).expect("aligned layout")
}

/// How long a pool lock is waited for (it is held for a push or a pop).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_micros(200);

/// A class's free list, waited for at most `LOCK_WAIT` (large classes) or
/// not at all (small ones, taken at every small read: there the allocator
/// is cheaper than a wait): past that the pool is skipped. So a child
/// forked while another thread held the lock (which stays locked in the
/// child forever) uses the allocator instead of hanging, while ordinary
/// contention still finds the pool.
fn lock(size: usize, pool: &Mutex<Vec<usize>>) -> Option<parking_lot::MutexGuard<'_, Vec<usize>>> {
    if size < POOL_MIN {
        pool.try_lock()
    } else {
        pool.try_lock_for(LOCK_WAIT)
    }
}

/// An allocation of `size` bytes (uninitialised, or holding an earlier
/// buffer's bytes): the caller initialises what it exposes.
fn allocate(size: usize) -> NonNull<u8> {
    if let Some(c) = class_of(size) {
        if let Some(addr) = POOL.get(c).and_then(|p| lock(size, p)?.pop()) {
            budget(size).0.fetch_sub(size, Ordering::Relaxed);
            // SAFETY (of the cast back): pooled addresses come from
            // `NonNull` allocations of this class (see `release`).
            if let Some(ptr) = NonNull::new(addr as *mut u8) {
                return ptr;
            }
        }
    }
    let layout = layout(size);
    // SAFETY: layout has non-zero size (cap >= BLOCK_SIZE).
    let raw = unsafe { alloc::alloc(layout) };
    NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

/// Gives an allocation of `size` bytes back: to the pool while it has room
/// for it, else to the allocator.
fn release(ptr: NonNull<u8>, size: usize) {
    if let Some(pool) = class_of(size).and_then(|c| POOL.get(c)) {
        let (pooled, bound) = budget(size);
        // Counted only while within the bound: the count never exceeds it.
        let room = pooled
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                (k + size <= bound).then_some(k + size)
            })
            .is_ok();
        if room {
            if let Some(mut free) = lock(size, pool) {
                free.push(ptr.as_ptr() as usize);
                return;
            }
            pooled.fetch_sub(size, Ordering::Relaxed);
        }
    }
    // SAFETY: allocated by `allocate` with this exact layout.
    unsafe { alloc::dealloc(ptr.as_ptr(), layout(size)) }
}

/// An owned buffer aligned to the device block, valid length `len`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    /// Usable bytes (what I/O on the buffer covers), all initialised.
    cap: usize,
    len: usize,
    /// Bytes allocated (at least `cap`; a size class when pooled).
    size: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); no
// interior mutability or shared aliasing exists.
unsafe impl Send for AlignedBuf {}
// SAFETY: &AlignedBuf only gives out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// An allocation for `len` valid bytes, capacity rounded up to a block;
    /// nothing in it initialised yet (the constructors below do that).
    fn raw(len: usize) -> AlignedBuf {
        let cap = round_up(len.max(1), BLOCK_SIZE);
        let size = alloc_size(cap);
        AlignedBuf {
            ptr: allocate(size),
            cap,
            len,
            size,
        }
    }

    /// A zero-filled buffer of `len` bytes; capacity rounds up to a block.
    pub fn zeroed(len: usize) -> Self {
        let b = Self::raw(len);
        // SAFETY: the allocation holds size >= cap bytes; after this every
        // byte up to cap is initialised, the invariant all methods rely on.
        unsafe { std::ptr::write_bytes(b.ptr.as_ptr(), 0, b.cap) };
        b
    }

    /// A buffer holding a copy of `data`, zero-padded to the block. One
    /// pass over the memory: the copy initialises the data bytes and only
    /// the padding is zeroed.
    pub fn copy_from(data: &[u8]) -> Self {
        let b = Self::raw(data.len());
        // SAFETY: the allocation holds cap >= data.len() bytes and cannot
        // overlap `data`; after these two writes all cap bytes are
        // initialised, which is the invariant every other method relies on.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), b.ptr.as_ptr(), data.len());
            std::ptr::write_bytes(b.ptr.as_ptr().add(data.len()), 0, b.cap - data.len());
        }
        b
    }

    /// A buffer of `len` bytes holding each `(offset, bytes)` part at its
    /// offset and zeros everywhere else, written in one pass (no zero-fill
    /// under the parts). Parts must lie inside `len` and not overlap.
    pub fn gather(len: usize, parts: &[(usize, &[u8])]) -> Self {
        let b = Self::raw(len);
        let ptr = b.ptr;
        let mut at = 0usize;
        for &(offset, bytes) in parts {
            assert!(
                offset >= at
                    && offset
                        .checked_add(bytes.len())
                        .is_some_and(|end| end <= len),
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
        unsafe { std::ptr::write_bytes(ptr.as_ptr().add(at), 0, b.cap - at) };
        b
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
        release(self.ptr, self.size);
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

    /// A recycled buffer, large or small, shows nothing of its previous
    /// use, the pool keeps at most its bounds, and I/O covers the capacity
    /// asked for, not the size class.
    #[test]
    fn recycled_buffers_are_overwritten_and_the_pool_is_bounded() {
        // Small capacities are never rounded up; large ones are.
        for cap in [BLOCK_SIZE, 3 * BLOCK_SIZE, POOL_MIN / 2] {
            assert_eq!(alloc_size(cap), cap);
        }
        assert_eq!(alloc_size(POOL_MIN / 2 + BLOCK_SIZE), POOL_MIN);
        let caps = [
            BLOCK_SIZE,
            4 * BLOCK_SIZE,
            POOL_MIN / 2,
            POOL_MIN,
            300 << 10,
            1 << 20,
            POOL_MAX,
        ];
        for cap in caps {
            let size = alloc_size(cap);
            let (pooled, bound) = budget(size);
            let mut held = Vec::new();
            for _ in 0..3 * bound / size {
                let mut b = AlignedBuf::zeroed(cap);
                b.as_mut_slice().fill(0xAB);
                held.push(b);
            }
            drop(held);
            assert!(pooled.load(Ordering::Relaxed) <= bound, "{cap}");
            let kept = POOL[class_of(size).unwrap()].lock().len() * size;
            assert!(kept <= bound, "{cap}");
            if size < POOL_MIN {
                // A small class has its own bound: whatever other classes
                // hold, it took some of these.
                assert!(kept > 0, "{cap}");
            }
            for len in [cap, cap.saturating_sub(5000).max(1)] {
                let b = AlignedBuf::zeroed(len);
                assert_eq!(b.capacity(), round_up(len, BLOCK_SIZE));
                assert_eq!(b.size, alloc_size(b.capacity()));
                assert!(b.as_slice().iter().all(|&x| x == 0), "{len}");
                drop(b);
                let part = vec![7u8; len / 2];
                let g = AlignedBuf::gather(len, &[(len / 4, &part)]);
                assert!(g.as_slice()[..len / 4].iter().all(|&x| x == 0));
                assert!(g.as_slice()[len / 4 + part.len()..].iter().all(|&x| x == 0));
                drop(g);
                let mut c = AlignedBuf::copy_from(&part);
                assert_eq!(c.as_slice(), &part[..]);
                assert!(c.full_mut()[part.len()..].iter().all(|&x| x == 0));
            }
        }
    }

    /// A child forked while another thread holds a pool lock (here: this
    /// thread, across the fork) still gets its buffers: it does not wait
    /// for a lock nobody in it will release.
    #[test]
    fn a_forked_child_allocates_while_the_pool_is_locked() {
        let class = class_of(1 << 20).unwrap();
        let held = POOL[class].lock();
        // SAFETY: the child only allocates, drops and exits with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = std::panic::catch_unwind(|| {
                for _ in 0..4 {
                    let b = AlignedBuf::zeroed(1 << 20);
                    assert!(b.as_slice().iter().all(|&x| x == 0));
                }
            })
            .is_ok();
            // SAFETY: ends the child without running the parent's
            // destructors or test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(held);
        let mut status = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the forked child hung on the buffer pool");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
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
