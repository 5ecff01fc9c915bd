//! One error type for the whole engine: a flat [`ErrorKind`] that bindings map
//! on, plus a human message carrying the context (operation, key, offset).

use std::fmt;

/// What went wrong, as a flat list every binding maps one-to-one.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The key has no committed object.
    NotFound,
    /// An argument is out of its legal range (empty key, offset past the end,
    /// misaligned upload part, bad option).
    InvalidArgument,
    /// A key, value or tuple exceeds a hard limit of the format.
    TooLarge,
    /// The heap or the metadata area has no room left; the store stays usable.
    NoSpace,
    /// The file is not a blobcask store, or its metadata fails a checksum.
    Corrupt,
    /// The operating system reported an I/O error.
    Io,
    /// Another handle (in this or another process) holds the store's lock.
    Locked,
    /// The operation or format version is not supported by this build or
    /// by the chosen options (for example a write to a read-only store).
    Unsupported,
    /// The store was closed.
    Closed,
    /// A conditional create (`PutMode::Create`) found the key present.
    AlreadyExists,
    /// A conditional update (`PutMode::Update`) found another version, or
    /// no object, under the key.
    VersionMismatch,
}

impl ErrorKind {
    /// A stable upper-snake-case name, used by the bindings as error code.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::TooLarge => "TOO_LARGE",
            ErrorKind::NoSpace => "NO_SPACE",
            ErrorKind::Corrupt => "CORRUPT",
            ErrorKind::Io => "IO",
            ErrorKind::Locked => "LOCKED",
            ErrorKind::Unsupported => "UNSUPPORTED",
            ErrorKind::Closed => "CLOSED",
            ErrorKind::AlreadyExists => "ALREADY_EXISTS",
            ErrorKind::VersionMismatch => "VERSION_MISMATCH",
        }
    }
}

/// The error returned by every fallible blobcask call.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<std::io::Error>,
    /// The operation of a batch that failed (its index in the batch).
    batch_op: Option<usize>,
    /// A `NoSpace` for want of tuple room: the metadata area could not
    /// grow (a cache store's eviction then frees tuple room, not heap).
    tuple_room: bool,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            source: None,
            batch_op: None,
            tuple_room: false,
        }
    }

    pub(crate) fn io(context: impl Into<String>, err: std::io::Error) -> Self {
        Error {
            kind: ErrorKind::Io,
            message: context.into(),
            source: Some(err),
            batch_op: None,
            tuple_room: false,
        }
    }

    /// The kind to branch on.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message with its context, without the kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For an error that aborted a batch ([`Store::batch`](crate::Store::batch)):
    /// the index of the operation that failed (its condition, key or
    /// value), counted from 0 in the order they were added; the message
    /// names it and its key too. `None` for any other error, and for a
    /// batch that failed as a whole (a closed store, a failed sync).
    pub fn batch_op(&self) -> Option<usize> {
        self.batch_op
    }

    /// Marks the error as operation `index` of a batch, and says so (and
    /// which operation on which key) in the message.
    pub(crate) fn in_batch(mut self, index: usize, op: &str, key: &[u8]) -> Self {
        self.batch_op = Some(index);
        self.context(format!("batch operation {index} ({op} {})", show_key(key)))
    }

    /// Marks a `NoSpace` as one for tuple room (the metadata area could
    /// not grow), which a cache store's eviction makes by freeing tuples.
    pub(crate) fn for_tuple_room(mut self) -> Self {
        self.tuple_room = true;
        self
    }

    /// Whether [`for_tuple_room`](Self::for_tuple_room) marked it.
    pub(crate) fn wants_tuple_room(&self) -> bool {
        self.tuple_room
    }

    /// Prefixes more context (e.g. the operation and key) to the message.
    pub(crate) fn context(mut self, ctx: impl fmt::Display) -> Self {
        self.message = format!("{ctx}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)?;
        if let Some(src) = &self.source {
            write!(f, ": {src}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Renders a key for error messages: UTF-8 when printable, hex otherwise,
/// shortened so a 1 KiB key does not flood a log line.
pub(crate) fn show_key(key: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = key.get(..MAX).unwrap_or(key);
    let mut s = match std::str::from_utf8(shown) {
        Ok(t) if t.chars().all(|c| !c.is_control()) => format!("{t:?}"),
        _ => {
            let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    };
    if key.len() > MAX {
        s.push_str(&format!("…({} bytes)", key.len()));
    }
    s
}
