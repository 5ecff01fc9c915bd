//! pread/pwrite engine: blocking syscalls on the engine's helper threads
//! (`store::helpers`), so the returned futures are `Send` and
//! runtime-agnostic.

use std::fs::File;
use std::io;
use std::sync::Arc;

use super::{AlignedBuf, BufResult, IoEngine, IoFuture};

/// Portable engine over a shared file handle.
pub struct PortableEngine {
    file: Arc<File>,
    direct: bool,
    /// A regular file (not a block device), decided once here: asked on
    /// every heap allocation.
    resizable: bool,
}

impl PortableEngine {
    /// Wraps an open file; `direct` says whether it was opened `O_DIRECT`.
    pub fn new(file: File, direct: bool) -> Self {
        PortableEngine {
            resizable: super::is_regular(&file),
            file: Arc::new(file),
            direct,
        }
    }
}

impl IoEngine for PortableEngine {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let file = self.file.clone();
        Box::pin(crate::store::fork::unblock(move || {
            super::pread_full(&file, buf, offset)
        }))
    }

    fn read_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        super::pread_full(&self.file, buf, offset)
    }

    fn write_at_blocking(&self, buf: AlignedBuf, offset: u64) -> BufResult<()> {
        super::pwrite_all(&self.file, buf, offset)
    }

    fn sync_blocking(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        let file = self.file.clone();
        Box::pin(crate::store::fork::unblock(move || {
            super::pwrite_all(&file, buf, offset)
        }))
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        let file = self.file.clone();
        Box::pin(crate::store::fork::unblock(move || file.sync_data()))
    }

    fn resizable(&self) -> bool {
        self.resizable
    }

    fn grow(&self, from: u64, len: u64) -> io::Result<()> {
        super::grow_file(&self.file, from, len)
    }

    fn size(&self) -> io::Result<u64> {
        super::file_size(&self.file)
    }

    fn name(&self) -> &'static str {
        "portable"
    }

    fn direct_io(&self) -> bool {
        self.direct
    }
}
