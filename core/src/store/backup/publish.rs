//! Step 4, publishing: the copy's temporary name beside the destination,
//! and the link to the destination that never replaces a file.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// Whether `dest`, as written, names a directory (`d/`, `d/.`, `..`):
/// `Path` drops a trailing `/` or `.` when it takes a path apart.
pub(super) fn names_a_directory(dest: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let raw = dest.as_os_str().as_bytes();
    raw.ends_with(b"/")
        || raw.ends_with(b"/.")
        || raw.ends_with(b"/..")
        || raw == b"."
        || raw == b".."
}

/// The temporary name of the copy being made for `dest`, in its directory:
/// `.NAME.partial-PID-N-NANOS`, unique within the process (`N` counts its
/// backups) and across processes (the PID), with `NAME` cut so the whole
/// stays within 255 bytes.
pub(super) fn partial_path(dest: &Path) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    static BACKUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = dest.file_name().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            "the destination must name a file",
        )
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = BACKUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!(".partial-{}-{n}-{nanos}", std::process::id());
    let room = 255usize.saturating_sub(1 + suffix.len());
    let cut = name.as_bytes().get(..room).unwrap_or(name.as_bytes());
    let mut partial = std::ffi::OsString::from(".");
    partial.push(std::ffi::OsStr::from_bytes(cut));
    partial.push(suffix);
    Ok(dest.with_file_name(partial))
}

/// Gives the finished copy its name without replacing anything, durably.
pub(super) fn publish(temp: &Path, dest: &Path) -> Result<()> {
    let named = |e: std::io::Error| {
        let kind = if e.kind() == std::io::ErrorKind::AlreadyExists {
            ErrorKind::AlreadyExists
        } else {
            ErrorKind::Io
        };
        Error::new(kind, format!("naming the finished copy: {e}"))
    };
    match std::fs::hard_link(temp, dest) {
        Ok(()) => {
            std::fs::remove_file(temp).map_err(|e| Error::io("removing the temporary copy", e))?;
        }
        // A file system without hard links (vfat, some FUSE and network
        // ones): a rename, after checking the name is free (a file that
        // appears in between would be replaced: the one window left).
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
            ) =>
        {
            if dest.symlink_metadata().is_ok() {
                return Err(named(std::io::Error::from(
                    std::io::ErrorKind::AlreadyExists,
                )));
            }
            std::fs::rename(temp, dest).map_err(named)?;
        }
        Err(e) => return Err(named(e)),
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("syncing the destination's directory", e))
}
