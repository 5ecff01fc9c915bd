//! Transparent huge pages for the large tables open fills in one go (the
//! entry table, the hash index's slots): a 40 MB table written from start
//! to end takes ten thousand page faults in 4 KiB pages and twenty in 2 MiB
//! ones. Only advice: where the kernel does not honour it (huge pages
//! off, or only "always"), nothing changes.

/// Bytes of a huge page on x86-64 and aarch64 with 4 KiB pages.
const HUGE: usize = 2 << 20;

/// Advises the kernel to back the whole 2 MiB pages inside `len` elements
/// from `start` with huge pages. For memory this process owns and has not
/// written yet (a table just reserved), under 4 MiB it does nothing.
#[allow(unsafe_code)]
pub(crate) fn advise<T>(start: *const T, len: usize) {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    if bytes < 2 * HUGE {
        return;
    }
    let from = (start as usize).next_multiple_of(HUGE);
    let to = (start as usize).saturating_add(bytes) / HUGE * HUGE;
    if to > from {
        // SAFETY: madvise with MADV_HUGEPAGE only changes how the kernel
        // backs the range, never its contents; the range lies inside an
        // allocation the caller owns (`start..start + len`).
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}
