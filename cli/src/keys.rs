//! Keys on the command line: how a KEY (or PREFIX) argument becomes bytes,
//! and how a key is printed.
//!
//! A key is any non-empty byte string, so three input forms exist:
//!
//! * raw (the default): the argument's bytes exactly as the shell passes
//!   them, valid UTF-8 or not;
//! * `--key-hex`: hexadecimal, two digits per byte, e.g. `6b65790aff`;
//! * `--key-escaped`: the escaped form that `ls` prints (below).
//!
//! The escaped form writes a key as text: `\\` is a backslash, `\xHH` is
//! the byte with hex value HH, and every other character stands for its
//! own UTF-8 bytes. `ls`, `put`, `stat` and `import` print keys that way:
//! backslashes doubled, control characters (newline, tab, DEL, …) and
//! bytes that are not valid UTF-8 as `\xHH` (lowercase), everything else
//! as it is. A printed key is one line, never ambiguous, and reads back
//! with `--key-escaped` to the same bytes; a key of printable text with no
//! backslash prints unchanged.

use std::ffi::OsStr;
use std::fmt::Write as _;

/// How a KEY or PREFIX argument is written.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct KeyForm {
    /// Take the key (or prefix) as hexadecimal, two digits per byte, e.g.
    /// 6b65790aff; `ls` then prints keys in hex too.
    #[arg(short = 'x', long, conflicts_with = "key_escaped")]
    pub key_hex: bool,
    /// Take the key (or prefix) in the escaped form `ls` prints: \\ for a
    /// backslash, \xHH for the byte HH, any other character as itself.
    #[arg(short = 'e', long)]
    pub key_escaped: bool,
}

impl KeyForm {
    /// The bytes `arg` stands for in this form. `what` names the argument
    /// in errors ("key", "prefix").
    pub fn parse(&self, arg: &OsStr, what: &str) -> Result<Vec<u8>, String> {
        let raw = std::os::unix::ffi::OsStrExt::as_bytes(arg);
        if self.key_hex {
            let text = std::str::from_utf8(raw)
                .map_err(|_| format!("bad {what}: --key-hex takes hexadecimal digits"))?;
            from_hex(text).map_err(|e| format!("bad {what} {text:?}: {e}"))
        } else if self.key_escaped {
            let text = std::str::from_utf8(raw).map_err(|_| {
                format!("bad {what}: the escaped form is text; write other bytes as \\xHH")
            })?;
            unescape(text).map_err(|e| format!("bad {what} {text:?}: {e}"))
        } else {
            Ok(raw.to_vec())
        }
    }

    /// `key` as `ls` prints it in this form: hex with `--key-hex`, the
    /// escaped form otherwise.
    pub fn show(&self, key: &[u8]) -> String {
        if self.key_hex {
            to_hex(key)
        } else {
            escape(key)
        }
    }
}

/// `key` in the escaped form (see the module docs).
pub fn escape(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        let _ = write!(out, "\\x{b:02x}");
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The bytes an escaped key stands for: the inverse of [`escape`].
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        let esc = &rest[at..];
        if let Some(after) = esc.strip_prefix("\\\\") {
            out.push(b'\\');
            rest = after;
        } else if let Some(hex) = esc.strip_prefix("\\x") {
            let digits = hex
                .get(..2)
                .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
            let Some(digits) = digits else {
                return Err(format!(
                    "\\x at byte {} needs two hex digits, as in \\x0a",
                    text.len() - esc.len()
                ));
            };
            out.push(u8::from_str_radix(digits, 16).map_err(|e| e.to_string())?);
            rest = &hex[2..];
        } else {
            return Err(format!(
                "unknown escape at byte {}: use \\\\ for a backslash or \\xHH for a byte",
                text.len() - esc.len()
            ));
        }
    }
    out.extend_from_slice(rest.as_bytes());
    Ok(out)
}

/// `bytes` as lowercase hexadecimal.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes a string of hex digit pairs stands for (either case).
pub fn from_hex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err("odd number of hex digits (two per byte)".into());
    }
    text.as_bytes()
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            std::str::from_utf8(pair)
                .ok()
                .filter(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("not a hex digit pair at byte {}", 2 * i))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_keys_round_trip_and_plain_text_prints_unchanged() {
        let keys: [&[u8]; 9] = [
            b"photos/cat.jpg",
            "фото/кот é".as_bytes(),
            b"a\\b",
            b"line\nbreak\ttab\x7f",
            b"\x00\x01\xff\xfe",
            b"\\x41",
            b"mixed \xe2\x82 cut utf-8 \xe2\x82\xac",
            "\u{85}c1 control".as_bytes(),
            b" spaces ",
        ];
        for key in keys {
            let shown = escape(key);
            assert!(!shown.contains('\n'), "{shown}");
            assert!(!shown.chars().any(char::is_control), "{shown:?}");
            assert_eq!(unescape(&shown).unwrap(), key, "{shown}");
        }
        assert_eq!(escape(b"photos/cat.jpg"), "photos/cat.jpg");
        assert_eq!(escape("фото".as_bytes()), "фото");
        assert_eq!(escape(b"a\\b"), "a\\\\b");
        assert_eq!(escape(b"a\nb\xff"), "a\\x0ab\\xff");
        assert_eq!(escape(b"\\x41"), "\\\\x41");
        assert_eq!(unescape("\\x41\\x4A\\\\").unwrap(), b"AJ\\");
    }

    #[test]
    fn bad_escapes_and_hex_are_refused() {
        for bad in ["\\", "a\\", "\\x", "\\x4", "\\xg0", "\\n", "\\t", "\\u{41}"] {
            assert!(unescape(bad).is_err(), "{bad:?}");
        }
        assert_eq!(from_hex("6b65790AFF").unwrap(), b"key\n\xff");
        assert_eq!(from_hex("").unwrap(), b"");
        for bad in ["6", "6b6", "zz", "6b 6", "+1", "é1"] {
            assert!(from_hex(bad).is_err(), "{bad:?}");
        }
        assert_eq!(to_hex(b"key\n\xff"), "6b65790aff");
    }
}
