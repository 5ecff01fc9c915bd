//! Opening a store by path: the lock file (created only where nothing is,
//! or an empty file), its `flock`, what a failed create made and how it
//! is taken back, and the I/O engine on the file. Then `open_engine`.

use std::path::Path;
use std::sync::Arc;

use super::{open_engine, IfBlank};
use crate::error::{Error, ErrorKind, Result};
use crate::format::BLOCK_SIZE;
use crate::io::{self, IoEngine, IoEngineKind, PortableEngine};
use crate::options::{Options, DEFAULT_CAPACITY, MIN_CAPACITY};
use crate::store::Store;

/// The descriptors a store opened by path keeps beside its engine.
pub(crate) struct PathFiles {
    /// The open file description holding the `flock`.
    pub lock: std::fs::File,
    /// A duplicate of the descriptor the engine does its I/O on (the same
    /// open file description, so the same `O_DIRECT` and access mode), for
    /// rings other than the engine's: `Store::local`.
    pub io: std::fs::File,
}

/// What a path-based open made, so a failed create can take it back.
enum Made {
    Nothing,
    /// The file did not exist: remove it.
    NewFile,
    /// The file existed with length 0: truncate it back to 0.
    EmptyFile,
}

fn not_found() -> Error {
    Error::new(ErrorKind::NotFound, "no store at this path")
}

/// What a file of type `ty` is, when a store cannot live in it: a store is
/// a regular file or a block device. Anything else is refused by its kind
/// before it is opened for I/O (a FIFO would block the open, or the read
/// of its superblock, for as long as nobody writes to it).
fn unfit(ty: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ty.is_file() || ty.is_block_device() {
        None
    } else if ty.is_dir() {
        Some("a directory")
    } else if ty.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if ty.is_socket() {
        Some("a socket")
    } else if ty.is_char_device() {
        Some("a character device")
    } else {
        Some("neither a regular file nor a block device")
    }
}

fn unfit_error(kind: &str) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!("is {kind}, not a store: a store is a regular file or a block device"),
    )
}

/// `NotFound` naming the target of `path` when `path` is a symbolic link
/// to nothing (a stat follows it and finds nothing; an exclusive create
/// refuses to follow it). `None` when `path` is not a symbolic link.
fn dangling_link(path: &Path) -> Option<Error> {
    let link = std::fs::symlink_metadata(path).ok()?;
    if !link.is_symlink() {
        return None;
    }
    let target = match std::fs::read_link(path) {
        Ok(t) => t.display().to_string(),
        Err(e) => format!("(unreadable: {e})"),
    };
    Some(Error::new(
        ErrorKind::NotFound,
        format!("is a dangling symbolic link: its target {target} does not exist"),
    ))
}

/// Opens the handle that carries the lock, creating the file (`O_EXCL`)
/// only when nothing is at `path` and the options allow a new store.
fn open_lock_file(path: &Path, options: &Options) -> Result<(std::fs::File, Made)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "the path contains a NUL byte",
        ));
    }
    let may_create = !options.read_only && (options.create || options.create_new);
    // Twice at most: a file created by someone else between the `stat` and
    // the exclusive create is then opened as an existing file.
    for _ in 0..2 {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dangling) = dangling_link(path) {
                    return Err(dangling);
                }
                if !may_create {
                    return Err(not_found());
                }
                match std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(path)
                {
                    Ok(f) => return Ok((f, Made::NewFile)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(Error::io("creating the store file", e)),
                }
            }
            Err(e) => return Err(Error::io("stat of the store file", e)),
            Ok(m) => {
                if let Some(kind) = unfit(m.file_type()) {
                    return Err(unfit_error(kind));
                }
                if options.create_new && m.is_file() && m.len() > 0 {
                    return Err(already_exists());
                }
                // Non-blocking: should the path become a FIFO after the
                // `stat`, the open returns and its type is refused below
                // (`open_path`). No effect on a regular file or a device.
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(!options.read_only)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(path)
                    .map_err(|e| Error::io("opening the store file", e))?;
                return Ok((f, Made::Nothing));
            }
        }
    }
    Err(Error::new(
        ErrorKind::Io,
        "the path kept changing while it was opened",
    ))
}

fn already_exists() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "already exists and is not empty; create_new makes a store only where there is none",
    )
}

/// Takes the file's lock: shared for a read-only open, exclusive otherwise.
fn take_lock(lock: &std::fs::File, read_only: bool) -> Result<()> {
    let taken = if read_only {
        lock.try_lock_shared()
    } else {
        lock.try_lock()
    };
    match taken {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::new(
            ErrorKind::Locked,
            if read_only {
                "the store is open for writing in another handle or process"
            } else {
                "the store is open in another handle or process"
            },
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("locking the store file", e)),
    }
}

pub(crate) async fn open_path(path: &Path, options: Options) -> Result<Store> {
    options.validate()?;
    let shown = path.display().to_string();
    let ctx = |e: Error| e.context(format!("open {shown}"));
    let (lock, mut made) = open_lock_file(path, &options).map_err(ctx)?;
    // A file this open created is left alone when someone else got its lock
    // first: they are creating the store in it.
    take_lock(&lock, options.read_only).map_err(ctx)?;
    let meta = match lock.metadata() {
        Ok(m) => m,
        Err(e) => {
            let e = Error::io("stat of the store file", e);
            return Err(ctx(undo_create(path, &lock, &made, e)));
        }
    };
    if let Some(kind) = unfit(meta.file_type()) {
        let e = unfit_error(kind);
        return Err(ctx(undo_create(path, &lock, &made, e)));
    }
    let if_blank = if meta.is_file() && meta.len() == 0 {
        if options.read_only || !(options.create || options.create_new) {
            return Err(ctx(Error::new(
                ErrorKind::NotFound,
                "no store here (the file is empty)",
            )));
        }
        if matches!(made, Made::Nothing) {
            made = Made::EmptyFile;
        }
        IfBlank::Format
    } else if meta.is_file() {
        // Filled in by someone else between the `stat` and the open.
        if options.create_new {
            return Err(ctx(already_exists()));
        }
        IfBlank::Refuse
    } else if options.create_new {
        // A block device: anything else was refused above.
        IfBlank::Format
    } else {
        IfBlank::Refuse
    };
    // Everything from here on is undone when the open fails after this
    // call made (or filled) the file: a failed create leaves nothing.
    let undo = match made {
        Made::Nothing => None,
        _ => match lock.try_clone() {
            Ok(f) => Some(f),
            Err(e) => {
                let e = Error::io("duplicating the store descriptor", e);
                return Err(ctx(undo_create(path, &lock, &made, e)));
            }
        },
    };
    let fresh = !matches!(made, Made::Nothing);
    let opened = async {
        if fresh {
            // Unset: the default, or the growth limit when that is smaller.
            let asked = options
                .capacity
                .unwrap_or(DEFAULT_CAPACITY.min(options.max_capacity.unwrap_or(u64::MAX)));
            let capacity = asked & !(BLOCK_SIZE as u64 - 1);
            if capacity < MIN_CAPACITY {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("capacity {asked} is below the minimum of {MIN_CAPACITY} bytes"),
                ));
            }
            io::preallocate(&lock, capacity).map_err(|e| {
                let kind = if e.raw_os_error() == Some(libc::ENOSPC)
                    || e.raw_os_error() == Some(libc::EFBIG)
                {
                    ErrorKind::NoSpace
                } else {
                    ErrorKind::Io
                };
                Error::new(kind, format!("reserving {capacity} bytes: {e}"))
            })?;
        }
        let file = io::open_file(path, false, !options.read_only, options.direct_io)
            .map_err(|e| Error::io("opening the store file for I/O", e))?;
        let io = file
            .file
            .try_clone()
            .map_err(|e| Error::io("duplicating the store descriptor", e))?;
        let engine = make_engine(file, options.io_engine)?;
        open_engine(engine, Some(PathFiles { lock, io }), options, if_blank).await
    }
    .await;
    match (opened, undo) {
        (Ok(store), _) => Ok(store),
        (Err(e), Some(undo)) => Err(ctx(undo_create(path, &undo, &made, e))),
        (Err(e), None) => Err(ctx(e)),
    }
}

/// Takes back what a failed create made: removes the file it created, or
/// truncates the empty file it started from back to 0 bytes. `file` is a
/// handle on the same open file description as the lock, so nobody else
/// can have opened the store in between. A failure to clean up is added
/// to `err`'s message.
fn undo_create(path: &Path, file: &std::fs::File, made: &Made, err: Error) -> Error {
    let undone = match made {
        Made::Nothing => return err,
        Made::NewFile => std::fs::remove_file(path),
        Made::EmptyFile => file.set_len(0),
    };
    match undone {
        Ok(()) => err,
        Err(e) => err.context(format!(
            "(and the half-created store file could not be removed: {e})"
        )),
    }
}

fn make_engine(file: io::OpenFile, kind: IoEngineKind) -> Result<Arc<dyn IoEngine>> {
    #[cfg(target_os = "linux")]
    {
        if kind != IoEngineKind::Portable {
            let dup = file
                .file
                .try_clone()
                .map_err(|e| Error::io("duplicating the store descriptor", e))?;
            match io::UringEngine::new(dup, file.direct) {
                Ok(e) => return Ok(Arc::new(e)),
                // Out of descriptors or memory: the kernel has io_uring,
                // this process lacks the resources for a ring right now, an
                // error of its limits rather than of the platform. (`Auto`
                // falls back to the portable engine, which needs neither.)
                Err(e) if kind == IoEngineKind::IoUring && out_of_resources(&e) => {
                    return Err(Error::io("setting up the io_uring ring", e))
                }
                Err(e) if kind == IoEngineKind::IoUring => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("io_uring is unavailable: {e}"),
                    ))
                }
                Err(_) => {}
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    if kind == IoEngineKind::IoUring {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "io_uring exists only on Linux",
        ));
    }
    Ok(Arc::new(PortableEngine::new(file.file, file.direct)))
}

/// Whether a failed ring setup ran out of descriptors (`EMFILE`, `ENFILE`)
/// or memory (`ENOMEM`; locked memory for the rings on older kernels)
/// rather than finding io_uring missing or disabled.
#[cfg(target_os = "linux")]
fn out_of_resources(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOMEM)
    )
}
