//! The commands on the whole store: `create` (only where nothing is),
//! `grow` (and `--max-capacity`), `compact` and `backup`.

use std::path::{Path, PathBuf};

use blobcask::blocking::Store;
use blobcask::{ErrorKind, IndexKind, Options};
use blobcask_bench::parse_size;

use crate::open::{open, open_read_only, open_with};
use crate::progress::Progress;
use crate::text::human;

/// `create [--capacity SIZE] [--max-capacity SIZE] [--index KIND]`.
pub fn create(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    capacity: &Option<String>,
    max_capacity: &Option<String>,
    index: &Option<String>,
) -> Result<(), String> {
    let path = store_path()?;
    // create_new: a new store only where nothing is (a missing path,
    // an empty file) or on a block device; never over a file. Only
    // what was given is passed; the rest are the engine's defaults.
    let mut options = Options::new().create_new(true);
    if let Some(c) = capacity {
        options = options.capacity(parse_size(c)?);
    }
    if let Some(m) = max_capacity {
        options = options.max_capacity(parse_limit(m)?);
    }
    if let Some(i) = index {
        options = options.index(i.parse::<IndexKind>().map_err(|e| e.to_string())?);
    }
    let s = Store::open(&path, options).map_err(|e| match e.kind() {
                ErrorKind::InvalidArgument if e.message().contains("already") => format!(
                    "{} already exists; `create` never overwrites it (remove it first or pick another path)",
                    path.display()
                ),
                _ => e.to_string(),
            })?;
    let st = s.stats();
    println!(
        "created {} ({}, index {})",
        path.display(),
        human(st.capacity),
        st.index.name()
    );
    s.close().map_err(|e| e.to_string())
}

/// `grow SIZE [--max-capacity SIZE]`.
pub fn grow(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    size: &str,
    max_capacity: &Option<String>,
) -> Result<(), String> {
    let size = parse_size(size)?;
    let limit = max_capacity.as_deref().map(parse_limit).transpose()?;
    let path = store_path()?;
    if let Some(m) = limit.filter(|&m| size > m) {
        // Refused before the open would store the new limit.
        return Err(format!(
            "cannot grow {} to {} above --max-capacity {}",
            path.display(),
            size_text(size),
            size_text(m)
        ));
    }
    let mut options = Options::new().create(false);
    if let Some(m) = limit {
        options = options.max_capacity(m);
    }
    let s = open_with(&path, options)?;
    let before = s.stats().capacity;
    if size < before {
        let _ = s.close();
        return Err(format!(
            "cannot grow {} to {}: it is already {}, and a store never shrinks",
            path.display(),
            size_text(size),
            size_text(before)
        ));
    }
    s.grow(size).map_err(|e| e.to_string())?;
    let after = s.stats().capacity;
    if after == before {
        println!("{} is already {}", path.display(), size_text(after));
    } else {
        println!(
            "grew {} from {} to {}",
            path.display(),
            size_text(before),
            size_text(after)
        );
    }
    if let Some(m) = limit {
        println!("max capacity         {}", size_text(m));
    }
    s.close().map_err(|e| e.to_string())
}

/// `compact`.
pub fn compact(store_path: &dyn Fn() -> Result<PathBuf, String>) -> Result<(), String> {
    let s = open(&store_path()?)?;
    let r = Progress::around("compact", "moving objects".into(), || s.compact())
        .map_err(|e| e.to_string())?;
    println!(
        "moved {} objects ({}) in {:.2} s; largest free piece {} -> {}",
        r.moved,
        human(r.bytes_moved),
        r.elapsed.as_secs_f64(),
        human(r.largest_free_before),
        human(r.largest_free_after)
    );
    s.close().map_err(|e| e.to_string())
}

/// `backup DEST`.
pub fn backup(store_path: &dyn Fn() -> Result<PathBuf, String>, dest: &Path) -> Result<(), String> {
    let s = open_read_only(&store_path()?, None)?;
    let st = s.stats();
    let what = format!("{} objects, {}", st.objects, human(st.logical_bytes));
    let r = Progress::around("backup", what, || s.backup(dest)).map_err(|e| e.to_string())?;
    println!(
        "backed up {} objects ({}) to {} in {:.2} s ({}/s), verified",
        r.objects,
        human(r.bytes),
        r.path.display(),
        r.elapsed.as_secs_f64(),
        human(r.bytes_per_sec() as u64)
    );
    s.close().map_err(|e| e.to_string())
}

/// A size limit: a size as `parse_size` takes it, or `none` (no limit).
fn parse_limit(s: &str) -> Result<u64, String> {
    if s.trim().eq_ignore_ascii_case("none") {
        return Ok(u64::MAX);
    }
    parse_size(s).map_err(|e| format!("{e}, or none for no limit"))
}

/// A size with its human form, or "no limit" for `u64::MAX`.
fn size_text(n: u64) -> String {
    if n == u64::MAX {
        "no limit".into()
    } else {
        format!("{n} ({})", human(n))
    }
}
