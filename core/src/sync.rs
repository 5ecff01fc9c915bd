//! Synchronisation types of the reclaim protocol, swappable for loom.
//!
//! Normal builds use `std::sync::Arc` and `parking_lot::Mutex`. Built with
//! `RUSTFLAGS="--cfg blobcask_loom"`, the same names are loom's, so the
//! loom models in `store::loom_models` run the real `Extent` and allocator
//! code under every interleaving loom explores. (loom cannot model
//! parking_lot, hence the wrapper with parking_lot's guard-returning API.)

#[cfg(not(blobcask_loom))]
pub(crate) use parking_lot::Mutex;
#[cfg(not(blobcask_loom))]
pub(crate) use std::sync::Arc;

#[cfg(blobcask_loom)]
pub(crate) use loom::sync::Arc;

/// loom's mutex with parking_lot's API (no poisoning in the signature).
#[cfg(blobcask_loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(blobcask_loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(t: T) -> Self {
        Mutex(loom::sync::Mutex::new(t))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
