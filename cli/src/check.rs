//! `blobcask check [--data]`: the store's own recovery, run read-only.
//!
//! The store is opened with `Options::read_only(true)`: recovery runs in
//! memory exactly as a read-write open would run it (same code), and what
//! it would roll back or repair is reported instead of done. `--data` then
//! reads every object back against its checksums. Nothing is written.
//! The tuple blocks are always read (`Options::scan_metadata`), and an
//! index image the last clean close wrote is compared with them.
//! Exit code 0 only when nothing is wrong.

use std::path::{Path, PathBuf};

use blobcask::blocking::Store;
use blobcask::{ErrorKind, Options};

use crate::open::{is_symlink, no_store, salvage};
use crate::text::human;

/// What a check found: lines to print, and whether anything is wrong.
pub struct Outcome {
    pub lines: Vec<String>,
    pub problems: usize,
}

pub fn run(path: &Path, data: bool, salvage: bool, human: impl Fn(u64) -> String) -> Outcome {
    let mut lines = Vec::new();
    let mut problems = 0;
    let options = Options::new()
        .create(false)
        .read_only(true)
        .salvage(salvage)
        // Every tuple block read, and the index image held to them.
        .scan_metadata(true);
    let store = match Store::open(path, options.clone()) {
        Ok(s) => s,
        Err(e) => {
            let advice = match e.kind() {
                ErrorKind::Corrupt if salvage => {
                    "even a salvage open refuses the store (the problem above); nothing was changed. \
                     Restore it from a backup"
                }
                // Advice that leads somewhere: a salvage is suggested only
                // where a salvage open works (a truncated store refuses it).
                ErrorKind::Corrupt if !salvageable(path, options) => {
                    "the store cannot be opened safely, not even by a salvage open (`--salvage`); \
                     nothing was changed. Restore it from a backup"
                }
                ErrorKind::Corrupt => {
                    "the store cannot be opened safely; nothing was changed. Restore it from a backup \
                     (`blobcask backup` of a healthy copy), or see what still reads with \
                     `blobcask --salvage check` and copy it out with `blobcask --salvage backup NEW` \
                     (or `--salvage get`)"
                }
                ErrorKind::Locked => "another process has the store open; check it when that process has closed it",
                _ => "nothing was changed",
            };
            return Outcome {
                lines: vec![format!("problem: {e}"), format!("what to do: {advice}")],
                problems: 1,
            };
        }
    };
    let stats = store.stats();
    lines.push(format!(
        "{} objects, {} of values, {} of metadata, {} free of {}",
        stats.objects,
        human(stats.logical_bytes),
        human(stats.metadata_bytes),
        human(stats.free_bytes),
        human(stats.capacity)
    ));
    let r = &stats.recovery;
    if !r.clean {
        lines.push("the store was not closed cleanly (a crash or a kill): recovery checked its newest commit group".into());
    }
    for line in &r.skipped {
        problems += 1;
        lines.push(format!(
            "problem: {line} (--salvage): they are lost from this store"
        ));
    }
    for line in &r.repaired {
        problems += 1;
        lines.push(format!("problem: {line} by the next read-write open"));
    }
    if r.rolled_back_groups > 0 || r.rolled_back_objects > 0 {
        problems += 1;
        lines.push(format!(
            "problem: the next read-write open rolls back {} commit group(s) and {} object version(s) \
             (never acknowledged if the process died while writing them; otherwise their bytes were damaged):",
            r.rolled_back_groups, r.rolled_back_objects
        ));
        for d in &r.details {
            lines.push(format!("  {d}"));
        }
    }
    if data {
        match store.scrub() {
            Ok(s) => {
                lines.push(format!(
                    "read back {} objects ({}) against their checksums",
                    s.objects,
                    human(s.bytes)
                ));
                if s.unverified > 0 {
                    lines.push(format!(
                        "note: {} objects were written by format 1 without a checksum and cannot be verified; \
                         write them again (get + put) to give them checksums",
                        s.unverified
                    ));
                }
                for d in &s.damaged {
                    problems += 1;
                    lines.push(format!("problem: {d}"));
                }
                if !s.damaged.is_empty() {
                    lines.push("what to do: reads of the objects above fail with CORRUPT (never wrong bytes); \
                                restore them from a backup or write them again".into());
                }
            }
            Err(e) => {
                problems += 1;
                lines.push(format!("problem: scrub failed: {e}"));
            }
        }
    } else {
        lines.push(
            "metadata checked; `check --data` also reads every object back against its checksums"
                .into(),
        );
    }
    let _ = store.close();
    Outcome { lines, problems }
}

/// Whether a salvage open (read-only, like `options`) opens the store.
fn salvageable(path: &Path, options: Options) -> bool {
    Store::open(path, options.salvage(true)).is_ok_and(|s| s.close().is_ok())
}

/// `check [--data]`: the report printed, and an error when anything is wrong.
pub fn command(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    data: &bool,
) -> Result<(), String> {
    let path = store_path()?;
    match std::fs::metadata(&path) {
        // A dangling symbolic link goes on: the open names its target.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !is_symlink(&path) => {
            return Err(no_store(&path, "the path does not exist"))
        }
        Ok(m) if m.is_file() && m.len() == 0 => return Err(no_store(&path, "the file is empty")),
        _ => {}
    }
    let outcome = run(&path, *data, salvage(), human);
    for line in &outcome.lines {
        println!("{line}");
    }
    if outcome.problems == 0 {
        println!("no problems found");
        Ok(())
    } else {
        Err(format!("{} problem(s) found", outcome.problems))
    }
}
