//! Capacity: a file store starts small and grows as it fills.
//!
//! A growth step keeps invariants 1 and 4 through a cut anywhere in it:
//!
//! 1. the file is extended and its new blocks reserved
//!    ([`IoEngine::grow`](crate::io::IoEngine::grow), `fallocate`), then
//!    synced. A full file system fails here with `NoSpace`, and nothing
//!    else has changed: the store goes on at its old size;
//! 2. the superblock is published with the new capacity (both copies, each
//!    synced). Until the first copy is durable the store opens with its old
//!    capacity (the file is merely longer, and the next growth reuses the
//!    reserved blocks); after it, with the new one;
//! 3. only then does the allocator get the new blocks, so nothing is ever
//!    placed beyond the durable capacity.
//!
//! Growth runs on the thread that needed the room (a put, an upload, a bulk
//! load, the commit path growing the metadata area), under the superblock
//! lock, which serialises it with every other superblock publish. Lock
//! order: the superblock, then the allocator; nothing holds the allocator
//! while it waits for the superblock.

use std::sync::atomic::Ordering;

use crate::alloc::BuddyAllocator;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Superblock, BLOCK_SIZE, SUPER_BLOCKS};
use crate::meta::superblock::publish_superblock;
use crate::options::{MAX_GROWTH_STEP, MIN_CAPACITY};
use crate::store::Shared;

/// Runs `alloc` against the allocator; when it finds no room and the store
/// can grow, grows the store by a step that fits `needed` more bytes and
/// tries again. `alloc` must leave nothing allocated when it fails.
pub(crate) fn with_room<T>(
    shared: &Shared,
    needed: u64,
    mut alloc: impl FnMut(&mut BuddyAllocator) -> Result<T>,
) -> Result<T> {
    // A step fits at least `needed`; pieces in unaligned new space may be
    // smaller, so a try may grow once more. The bound guards against a bug
    // looping forever.
    for _ in 0..8 {
        let seen = shared.capacity();
        // The allocator guard ends with this statement: growing takes the
        // superblock lock, and then the allocator's (lock order).
        let tried = alloc(&mut shared.alloc.lock());
        match tried {
            Err(e) if e.kind() == ErrorKind::NoSpace && shared.engine.resizable() => {
                make_room(shared, seen, needed).map_err(|g| {
                    if g.kind() == ErrorKind::NoSpace {
                        Error::new(
                            ErrorKind::NoSpace,
                            format!("{}; {}", e.message(), g.message()),
                        )
                    } else {
                        g
                    }
                })?;
            }
            r => return r,
        }
    }
    alloc(&mut shared.alloc.lock())
}

/// Grows the store by one step, unless another thread already grew it since
/// the caller saw `seen` bytes (then the caller just tries again).
fn make_room(shared: &Shared, seen: u64, needed: u64) -> Result<()> {
    let mut sb = shared.superblock.lock();
    if shared.capacity() != seen {
        return Ok(());
    }
    let limit = shared.growth_limit().unwrap_or(u64::MAX);
    if seen >= limit {
        return Err(Error::new(
            ErrorKind::NoSpace,
            match shared.settings.max_capacity {
                Some(_) => format!("the store is at its max_capacity of {limit} bytes"),
                None => format!(
                    "the cache store is at its capacity of {limit} bytes (without max_capacity it does not grow)"
                ),
            },
        ));
    }
    // Double (up to a step of MAX_GROWTH_STEP), and at least by what the
    // write needs. Pieces in the new space may be smaller than in aligned
    // space, so the caller tries again and may grow once more.
    let needed = needed.next_multiple_of(MIN_CAPACITY);
    let step = seen.clamp(MIN_CAPACITY, MAX_GROWTH_STEP).max(needed);
    let target = seen.saturating_add(step).min(limit);
    match grow_locked(shared, &mut sb, target) {
        // A file system too full for a whole step may still take what this
        // write needs.
        Err(e) if e.kind() == ErrorKind::NoSpace && step > needed => {
            let smaller = seen.saturating_add(needed).min(limit);
            grow_locked(shared, &mut sb, smaller).map_err(|_| e)
        }
        r => r,
    }
}

/// [`Store::grow`](crate::Store::grow): grows to `capacity` bytes (rounded
/// down to a block); the current size is fine, a smaller one is refused.
pub(crate) fn grow_to(shared: &Shared, capacity: u64) -> Result<()> {
    shared.check_failed()?;
    let capacity = capacity & !(BLOCK_SIZE as u64 - 1);
    let mut sb = shared.superblock.lock();
    let now = shared.capacity();
    if capacity < now {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("capacity {capacity} is below the store's size of {now} bytes; a store never shrinks"),
        ));
    }
    if capacity == now {
        return Ok(());
    }
    if !shared.engine.resizable() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("the store is on a device of fixed size ({now} bytes)"),
        ));
    }
    if let Some(limit) = shared.settings.max_capacity.filter(|&m| capacity > m) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("capacity {capacity} exceeds the store's max_capacity of {limit} bytes"),
        ));
    }
    grow_locked(shared, &mut sb, capacity)
}

/// Steps 1–3 of the module docs, with the superblock lock held (`sb`).
fn grow_locked(shared: &Shared, sb: &mut Superblock, capacity: u64) -> Result<()> {
    if shared.sealed.load(Ordering::Acquire) {
        return Err(Error::new(
            ErrorKind::Closed,
            "the store closed while it was growing",
        ));
    }
    let capacity = capacity & !(BLOCK_SIZE as u64 - 1);
    let engine = shared.engine.as_ref();
    engine.grow(sb.capacity, capacity).map_err(|e| {
        let kind = match e.raw_os_error() {
            Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT) => ErrorKind::NoSpace,
            _ if e.kind() == std::io::ErrorKind::Unsupported => ErrorKind::NoSpace,
            _ => ErrorKind::Io,
        };
        Error::new(
            kind,
            format!(
                "growing the store file from {} to {capacity} bytes: {e}",
                sb.capacity
            ),
        )
    })?;
    engine
        .sync_blocking()
        .map_err(|e| Error::io("syncing the grown store file", e))?;
    let mut next = sb.clone();
    next.capacity = capacity;
    let next = match publish_superblock(engine, &next) {
        Ok(next) => next,
        Err(e) => {
            // A superblock copy may or may not hold the new size: refuse
            // further changes until a reopen reads which one won.
            shared.failed.poison(&e);
            return Err(e);
        }
    };
    *sb = next;
    shared
        .alloc
        .lock()
        .grow((capacity >> crate::format::BLOCK_SHIFT) - SUPER_BLOCKS);
    shared.capacity.store(capacity, Ordering::Release);
    Ok(())
}
