//! Errors as they cross into JavaScript: the `"CODE: message"` form lib.js
//! turns into a `BlobcaskError`, option names in JavaScript's spelling.

use napi::bindgen_prelude::*;

use crate::records;
/// The engine's error as it crosses into JavaScript: `"CODE: message"`,
/// where the message ends with the operating system's words when the
/// error has an OS cause, and `"CODE/errno: message"` when that cause has
/// an error number (lib.js makes it the `cause`, with Node's name for it).
/// A napi-rs Promise carries only napi's own statuses, hence the prefix.
pub(crate) fn js_err(e: engine::Error) -> Error {
    let code = e.kind().code();
    let source = std::error::Error::source(&e);
    let errno = source
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error);
    let tag = match errno {
        Some(n) => format!("{code}/{n}"),
        None => code.to_string(),
    };
    let message = match source {
        Some(s) => format!("{}: {s}", e.message()),
        None => e.message().to_string(),
    };
    Error::new(
        Status::GenericFailure,
        format!("{tag}: {}", js_names(&message)),
    )
}

/// The core's messages name options and conditions as Rust and Python do
/// (`read_only`, `if_absent`); JavaScript callers passed `readOnly`,
/// `ifAbsent`. Whole words only, so a key that contains one is left alone.
fn js_names(message: &str) -> String {
    const NAMES: [&str; 11] = [
        "read_only",
        "create_new",
        "io_engine",
        "direct_io",
        "cache_bytes",
        "max_capacity",
        "inline_threshold",
        "max_piece_size",
        "max_delay",
        "if_absent",
        "if_version",
    ];
    let mut out = message.to_owned();
    for name in NAMES {
        let mut from = 0;
        while let Some(at) = out.get(from..).and_then(|rest| rest.find(name)) {
            let (start, end) = (from + at, from + at + name.len());
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            let before = out.get(..start).and_then(|s| s.chars().next_back());
            let after = out.get(end..).and_then(|s| s.chars().next());
            if word(before) || word(after) {
                from = end;
                continue;
            }
            let camel = records::camel(name);
            out.replace_range(start..end, &camel);
            from = start + camel.len();
        }
    }
    out
}

pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(
        Status::InvalidArg,
        format!("INVALID_ARGUMENT: {}", msg.into()),
    )
}
