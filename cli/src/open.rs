//! Opening the store the way each command needs it: read-write for the
//! commands that change it (never creating it), read-only (shared lock,
//! `--salvage` applied) for the ones that only read, and the error that
//! says how to make a missing one.

use std::path::Path;

use blobcask::blocking::Store;
use blobcask::{ErrorKind, IndexKind, Options};

/// Set from `--salvage`: read-only opens skip damaged tuple blocks.
pub static SALVAGE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn salvage() -> bool {
    SALVAGE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Opens an existing store for a command that changes it. Never creates:
/// a missing store is an error that says how to make one. No index, inline
/// threshold or capacity is passed: the store's stored ones apply (one
/// passed here would replace them).
pub fn open(path: &Path) -> Result<Store, String> {
    open_with(path, Options::new().create(false))
}

/// Opens an existing store for a command that only reads it: shared lock,
/// read-only descriptor; nothing is created, grown or written. `index`
/// overrides the stored kind for this open only (a read-only open stores
/// nothing).
pub fn open_read_only(path: &Path, index: Option<IndexKind>) -> Result<Store, String> {
    let options = Options::new().read_only(true).salvage(salvage());
    open_with(
        path,
        match index {
            Some(kind) => options.index(kind),
            None => options,
        },
    )
}

pub fn open_with(path: &Path, options: Options) -> Result<Store, String> {
    Store::open(path, options).map_err(|e| match e.kind() {
        // A dangling symbolic link: the error names its target; `create`
        // would not make a store through it either.
        ErrorKind::NotFound if !is_symlink(path) => no_store(path, &e.to_string()),
        _ => e.to_string(),
    })
}

pub fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink())
}

/// Whether `target` (the metadata of a file a command reads or writes) is
/// the store file at `store` itself, or a hard link to it: the same device
/// and inode. False when the store cannot be stat'ed (then it is not
/// there to be harmed).
pub fn is_the_store(target: &std::fs::Metadata, store: &Path) -> bool {
    std::fs::metadata(store).is_ok_and(|st| file_id(target) == file_id(&st))
}

/// A file's identity: its device and inode.
pub fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

pub fn no_store(path: &Path, why: &str) -> String {
    // A path whose directory is missing cannot be created either: say so
    // rather than suggest a `create` that would fail the same way.
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = parent.filter(|d| !d.is_dir()) {
        return format!(
            "no store at {p}: the directory {d} does not exist ({why})",
            p = path.display(),
            d = dir.display()
        );
    }
    format!(
        "no store at {p}; create one with `blobcask -s {p} create` ({why})",
        p = path.display()
    )
}
