//! `ls [PREFIX] [-l]`: the keys in byte order, through a BTree index built
//! for this read-only open.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use blobcask::IndexKind;

use crate::keys::KeyForm;
use crate::open::open_read_only;
use crate::text::time_left;

/// `ls [PREFIX] [-l]`.
pub fn ls(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    prefix: &OsString,
    form: &KeyForm,
    long: &bool,
) -> Result<(), String> {
    let prefix = form.parse(prefix, "prefix")?;
    // Listing needs an ordered index: a BTree, for this open only.
    let s = open_read_only(&store_path()?, Some(IndexKind::BTree))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for entry in s.list(&prefix).map_err(|e| e.to_string())? {
        let e = entry.map_err(|e| e.to_string())?;
        let key = form.show(&e.key);
        let line = if *long {
            let expires = e.expires.map_or_else(|| "-".into(), time_left);
            format!("{:>12} {:>8} {expires:>8} {key}", e.size, e.version)
        } else {
            key
        };
        if writeln!(out, "{line}").is_err() {
            break; // closed pipe (e.g. `| head`)
        }
    }
    drop(out);
    s.close().map_err(|e| e.to_string())
}
