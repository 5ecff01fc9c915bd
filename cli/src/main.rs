//! `blobcask`: poke at a store from the shell.
//!
//! ```text
//! blobcask -s media.blobcask create --max-capacity 100G --index btree
//! blobcask -s media.blobcask put thumbs/cat.jpg cat.jpg      # or - for stdin
//! blobcask -s media.blobcask put session/42 state.json --ttl 30m  # gone after 30 minutes
//! blobcask -s media.blobcask get thumbs/cat.jpg -o out.jpg --range 0-4095
//! blobcask -s media.blobcask get video.mp4 --range -65536  # the last 64 KiB (or 4096- : from 4096 on)
//! blobcask -s media.blobcask stat thumbs/cat.jpg
//! blobcask -s media.blobcask ls thumbs/
//! blobcask -s media.blobcask get --key-hex 00ff0a           # any bytes as a key
//! blobcask -s media.blobcask get -e 'raw\x00key'           # the form `ls` prints
//! blobcask -s media.blobcask import ./photos
//! blobcask -s media.blobcask stats
//! blobcask -s media.blobcask grow 10G     # grow the file now (it also grows as it fills)
//! blobcask -s media.blobcask compact      # join free space left in holes by deletes
//! blobcask -s media.blobcask backup media-2026-11-23.blobcask
//! blobcask -s media.blobcask check        # read-only verification
//! blobcask -s media.blobcask bench        # a quick benchmark on a scratch store
//! ```
//!
//! The store may also come from `BLOBCASK_STORE`. Errors are one line on
//! stderr and a non-zero exit code (`import` also reports each file it
//! skips on a line of its own). Long `import`, `backup` and `compact` runs
//! show a progress line on stderr when it is a terminal.
//!
//! Keys are bytes: a KEY argument is taken as the argument's own bytes, as
//! hex with `--key-hex`, or in the escaped form `ls` prints with
//! `--key-escaped` (`\\` a backslash, `\xHH` any byte); see `keys.rs`.
//! `put` and `import` stream files larger than 8 MiB through a multipart
//! upload, so memory stays bounded whatever the file size (see `load.rs`).
//!
//! Only `create` makes a store, and only where nothing is (a missing path,
//! an empty file) or on a block device; it never overwrites a file.
//! `put`, `rm`, `import`, `grow` and `compact` need an existing store. `get`,
//! `stat`, `ls`, `stats`, `backup` and `check` open it read-only (shared lock,
//! so several can run at once): they never create, grow or write a file.
//!
//! A store keeps its index kind, inline threshold and max capacity: set at
//! `create` (and the max capacity by `grow --max-capacity`); no other
//! command passes its own, so the stored ones apply (`ls` builds a BTree
//! index for itself: read-only, nothing stored).

mod check;
mod keys;
mod load;
mod progress;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blobcask::blocking::Store;
use blobcask::report::Report;
use blobcask::{ErrorKind, IndexKind, Options, PutOptions, MAX_TTL};
use blobcask_bench::parse_size;
use clap::{Parser, Subcommand};
use keys::KeyForm;
use progress::Progress;

#[derive(Parser)]
#[command(name = "blobcask", version, about = "Inspect and use a blobcask store")]
struct Cli {
    /// Store file or block device.
    #[arg(short, long, env = "BLOBCASK_STORE", global = true)]
    store: Option<PathBuf>,
    /// Read a damaged store that an open refuses: tuple blocks whose newest
    /// copy is damaged are skipped (their objects missing, never served
    /// from an older copy) and named by `check`. Read-only commands only
    /// (get, ls, stat, stats, check, backup): copy out what still reads.
    #[arg(long, global = true)]
    salvage: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a new store where nothing is (a missing path, an empty file)
    /// or on a block device; an existing file is never overwritten.
    Create {
        /// Starting size of the file, e.g. 64M, 10G (default 16M). A file
        /// store grows by itself as it fills, up to --max-capacity; a block
        /// device always has its own size.
        #[arg(long)]
        capacity: Option<String>,
        /// Largest size the file grows to by itself, e.g. 100G, or `none`
        /// (the default): no limit but the file system. Stored in the store.
        #[arg(long)]
        max_capacity: Option<String>,
        /// Index backend: hash (default), btree or fst. Stored in the store.
        #[arg(long)]
        index: Option<String>,
    },
    /// Store FILE (or - for stdin) under KEY. A file (stdin redirected
    /// from one too) larger than 8 MiB is streamed in 8 MiB parts through
    /// a multipart upload, in bounded memory; bytes from a pipe are read
    /// whole first.
    Put {
        /// The key: the argument's bytes, or hex (--key-hex), or the
        /// escaped form `ls` prints (--key-escaped).
        key: OsString,
        file: String,
        #[command(flatten)]
        form: KeyForm,
        /// Time to live: the object expires this long after the put, e.g.
        /// 500ms, 30s, 5m, 2h, 7d, or a number of seconds. From then on it
        /// is gone (get, stat, ls no longer see it). Without it the object
        /// never expires (also when it replaces one that had a ttl).
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
        ttl: Option<String>,
    },
    /// Write KEY's bytes to stdout or a file.
    Get {
        /// The key: the argument's bytes, or hex (--key-hex), or the
        /// escaped form `ls` prints (--key-escaped).
        key: OsString,
        #[command(flatten)]
        form: KeyForm,
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Byte range, as in HTTP: A-B (bytes A to B, inclusive; clipped at
        /// the end), A- (from A to the end) or -N (the last N bytes, or the
        /// whole object if shorter). A range starting past the end is an
        /// error.
        #[arg(long, allow_hyphen_values = true)]
        range: Option<String>,
    },
    /// Size, version, time and expiry of KEY.
    Stat {
        /// The key: the argument's bytes, or hex (--key-hex), or the
        /// escaped form `ls` prints (--key-escaped).
        key: OsString,
        #[command(flatten)]
        form: KeyForm,
    },
    /// Delete KEY.
    Rm {
        /// The key: the argument's bytes, or hex (--key-hex), or the
        /// escaped form `ls` prints (--key-escaped).
        key: OsString,
        #[command(flatten)]
        form: KeyForm,
    },
    /// List keys starting with PREFIX, in byte order, one per line in the
    /// escaped form (a backslash as \\, control characters and bytes
    /// that are not UTF-8 as \xHH; read back with --key-escaped), or in
    /// hex with --key-hex.
    Ls {
        /// Only keys starting with these bytes (same forms as a key).
        #[arg(default_value = "")]
        prefix: OsString,
        #[command(flatten)]
        form: KeyForm,
        /// Also print size, version and time left before expiry (- for
        /// none).
        #[arg(short, long)]
        long: bool,
    },
    /// Store every file under DIR, keyed by its path relative to DIR: small
    /// files by bulk load in batches, files over 8 MiB streamed by
    /// multipart upload. Symbolic links (not followed), special files and
    /// unreadable files are skipped, each reported on stderr, and make the
    /// exit code non-zero (after storing the rest) unless --skip-errors.
    Import {
        dir: PathBuf,
        /// Exit 0 even when files were skipped (still reported).
        #[arg(long)]
        skip_errors: bool,
    },
    /// Objects, bytes, capacity, space amplification, free space,
    /// fragmentation.
    Stats {
        /// Every figure of the engine's stats as one JSON object (the
        /// names and nesting of `blobcask::report`; times and durations in
        /// seconds), for scripts and monitoring.
        #[arg(long)]
        json: bool,
    },
    /// Grow the store file to SIZE (e.g. 64M, 10G) now, with the space
    /// reserved on the file system; a store never shrinks.
    Grow {
        size: String,
        /// Also set the largest size the file grows to by itself (a size,
        /// or `none` for no limit), stored in the store in place of the
        /// one it has.
        #[arg(long)]
        max_capacity: Option<String>,
    },
    /// Move objects towards the start of the store so that free space left
    /// in small holes by deletes joins into large pieces (a put that needs
    /// the room does this by itself). Objects keep their version, time and
    /// expiry.
    Compact,
    /// Write a consistent, compacted, verified copy of the store to DEST (a
    /// new file; never replaces one). The store is opened read-only, so
    /// other read-only users may go on; a process that has it open for
    /// writing backs it up through the library (`Store::backup`) instead.
    Backup { dest: PathBuf },
    /// Run recovery read-only and report what it finds (nothing is
    /// written); exit code 0 only when nothing is wrong.
    Check {
        /// Also read every object back against its checksums (a scrub).
        #[arg(long)]
        data: bool,
    },
    /// A quick run of the comparative benchmark (raw device, blobcask, file
    /// per object) in a scratch directory next to STORE (or in /tmp).
    Bench {
        /// Object sizes (each run at size + 1/8).
        #[arg(long, default_value = "16K,1M")]
        sizes: String,
        /// Bytes written per size.
        #[arg(long, default_value = "16M")]
        budget: String,
        /// Operations in flight.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
}

/// A byte range of `get --range`, as HTTP writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteRange {
    /// `A-B` (`len` = B - A + 1) or `A-` (`len` = `u64::MAX`).
    From { start: u64, len: u64 },
    /// `-N`: the last N bytes.
    Last(u64),
}

fn parse_range(s: &str) -> Result<ByteRange, String> {
    let bad = |why: &str| {
        format!("bad range {s:?}: {why}; use A-B, A- (to the end) or -N (the last N bytes)")
    };
    // Digits only: `u64::from_str` would also take a sign.
    let number = |t: &str, what: &str| {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(&format!("{what} {t:?} is not a number")));
        }
        t.parse::<u64>()
            .map_err(|_| bad(&format!("{what} {t:?} is too large")))
    };
    let (a, b) = s.split_once('-').ok_or_else(|| bad("no '-'"))?;
    match (a, b) {
        ("", "") => Err(bad("no bounds")),
        ("", n) => match number(n, "length")? {
            0 => Err(bad("the last 0 bytes are no bytes")),
            n => Ok(ByteRange::Last(n)),
        },
        (a, "") => Ok(ByteRange::From {
            start: number(a, "start")?,
            len: u64::MAX,
        }),
        (a, b) => {
            let (a, b) = (number(a, "start")?, number(b, "end")?);
            if b < a {
                return Err(bad("it ends before it starts"));
            }
            Ok(ByteRange::From {
                start: a,
                len: (b - a).saturating_add(1),
            })
        }
    }
}

impl ByteRange {
    /// Offset and length of the range in an object of `size` bytes.
    fn within(self, size: u64, text: &str, key: &str) -> Result<(u64, u64), String> {
        match self {
            ByteRange::Last(n) => Ok((size.saturating_sub(n), n.min(size))),
            ByteRange::From { start, len } if start < size => Ok((start, len)),
            ByteRange::From { start, .. } => Err(format!(
                "range {text:?} starts at byte {start}, past the end of {key} ({size} bytes)"
            )),
        }
    }
}

/// A time to live: a whole number with a unit (`500ms`, `30s`, `5m`, `2h`,
/// `7d`) or without one (seconds); more than zero and at most
/// [`MAX_TTL`]. Checked before the store is opened, so a bad one stores
/// nothing.
fn parse_ttl(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "bad ttl {s:?}: use a whole number with a unit, e.g. 500ms, 30s, 5m, 2h, 7d (no unit: seconds)"
        )
    };
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..digits].parse().map_err(|_| bad())?;
    let millis_per_unit: u64 = match t[digits..].trim_start() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let ttl = n
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .filter(|d| *d <= MAX_TTL)
        .ok_or_else(|| {
            format!(
                "bad ttl {s:?}: longer than the maximum, {}d",
                MAX_TTL.as_secs() / 86_400
            )
        })?;
    if ttl.is_zero() {
        return Err(format!("bad ttl {s:?}: must be more than zero"));
    }
    Ok(ttl)
}

/// Time left until `at`, short: `29.8s`, `4m59s`, `1h59m`, `6d23h`.
fn time_left(at: SystemTime) -> String {
    let left = at
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    let s = left.as_secs();
    match s {
        0..60 => format!("{:.1}s", left.as_secs_f64()),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// Seconds and microseconds since the Unix epoch, as `stat` shows times.
fn unix_time(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    format!("{}.{:06} (unix)", d.as_secs(), d.subsec_micros())
}

/// Set from `--salvage`: read-only opens skip damaged tuple blocks.
static SALVAGE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn salvage() -> bool {
    SALVAGE.load(std::sync::atomic::Ordering::Relaxed)
}

impl Cmd {
    /// The commands that only read a store: the ones `--salvage` serves.
    fn only_reads(&self) -> bool {
        matches!(
            self,
            Cmd::Get { .. }
                | Cmd::Ls { .. }
                | Cmd::Stat { .. }
                | Cmd::Stats { .. }
                | Cmd::Check { .. }
                | Cmd::Backup { .. }
        )
    }
}

/// Opens an existing store for a command that changes it. Never creates:
/// a missing store is an error that says how to make one. No index, inline
/// threshold or capacity is passed: the store's stored ones apply (one
/// passed here would replace them).
fn open(path: &Path) -> Result<Store, String> {
    open_with(path, Options::new().create(false))
}

/// Fails when `target` (the metadata of where output goes, if it exists)
/// is the store file itself: writing there would destroy the store.
fn refuse_the_store(
    target: Option<std::fs::Metadata>,
    store: &Path,
    shown: &Path,
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let (Some(t), Ok(st)) = (target, std::fs::metadata(store)) else {
        return Ok(());
    };
    if t.dev() == st.dev() && t.ino() == st.ino() {
        return Err(format!(
            "{} is the store {} itself: writing the object there would destroy the store; nothing written",
            shown.display(),
            store.display()
        ));
    }
    Ok(())
}

/// What stdout is, when it is a file (a redirection).
fn stdout_metadata() -> Option<std::fs::Metadata> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    std::fs::File::from(fd).metadata().ok()
}

/// Opens an existing store for a command that only reads it: shared lock,
/// read-only descriptor; nothing is created, grown or written. `index`
/// overrides the stored kind for this open only (a read-only open stores
/// nothing).
fn open_read_only(path: &Path, index: Option<IndexKind>) -> Result<Store, String> {
    let options = Options::new().read_only(true).salvage(salvage());
    open_with(
        path,
        match index {
            Some(kind) => options.index(kind),
            None => options,
        },
    )
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

fn open_with(path: &Path, options: Options) -> Result<Store, String> {
    Store::open(path, options).map_err(|e| match e.kind() {
        ErrorKind::NotFound => no_store(path, &e.to_string()),
        _ => e.to_string(),
    })
}

fn no_store(path: &Path, why: &str) -> String {
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

fn human(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

fn run(cli: Cli) -> Result<(), String> {
    if cli.salvage && !cli.cmd.only_reads() {
        return Err(
            "--salvage only reads (get, ls, stat, stats, check, backup): a damaged store is never written"
                .into(),
        );
    }
    SALVAGE.store(cli.salvage, std::sync::atomic::Ordering::Relaxed);
    let store_path = || {
        cli.store
            .clone()
            .ok_or_else(|| "no store: pass -s PATH or set BLOBCASK_STORE".to_string())
    };
    match &cli.cmd {
        Cmd::Create {
            capacity,
            max_capacity,
            index,
        } => {
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
        Cmd::Put {
            key,
            file,
            form,
            ttl,
        } => {
            let mut options = PutOptions::default();
            if let Some(t) = ttl {
                options = options.ttl(parse_ttl(t)?);
            }
            let raw = form.parse(key, "key")?;
            let key = form.show(&raw);
            let source = load::Source::open(file)?;
            let s = open(&store_path()?)?;
            let mut progress = Progress::new("put");
            let info = load::put(&s, &raw, source, options, &mut |at| {
                progress.update(|| human(at))
            })?;
            progress.clear();
            match info.expires {
                Some(at) => println!(
                    "{key}: {} bytes, version {}, expires in {}",
                    info.size,
                    info.version,
                    time_left(at)
                ),
                None => println!("{key}: {} bytes, version {}", info.size, info.version),
            }
            s.close().map_err(|e| e.to_string())
        }
        Cmd::Get {
            key,
            form,
            output,
            range,
        } => {
            let key = form.parse(key, "key")?;
            // Checked before the store is opened.
            let range = match range.as_deref() {
                Some(r) => Some((parse_range(r)?, r)),
                None => None,
            };
            let path = store_path()?;
            // The bytes must not land on the store itself (`-o` naming the
            // store, or stdout redirected into it with `>>`).
            match output {
                Some(p) => refuse_the_store(std::fs::metadata(p).ok(), &path, p)?,
                None => refuse_the_store(stdout_metadata(), &path, Path::new("stdout"))?,
            }
            let s = open_read_only(&path, None)?;
            let bytes = match range {
                Some((r, text)) => {
                    let size = s.stat(&key).map_err(|e| e.to_string())?.size;
                    let (off, len) = r.within(size, text, &form.show(&key))?;
                    s.read(&key, off, len)
                }
                None => s.get(&key),
            }
            .map_err(|e| e.to_string())?;
            match output {
                Some(p) => std::fs::write(p, &bytes)
                    .map_err(|e| format!("writing {}: {e}", p.display()))?,
                None => std::io::stdout()
                    .write_all(&bytes)
                    .map_err(|e| format!("writing stdout: {e}"))?,
            }
            s.close().map_err(|e| e.to_string())
        }
        Cmd::Stat { key, form } => {
            let raw = form.parse(key, "key")?;
            let key = form.show(&raw);
            let s = open_read_only(&store_path()?, None)?;
            let i = s.stat(&raw).map_err(|e| e.to_string())?;
            println!(
                "key      {key}\nsize     {} ({})\nversion  {}\ncreated  {}\nstorage  {}",
                i.size,
                human(i.size),
                i.version,
                unix_time(i.created),
                if i.inline { "inline" } else { "heap" }
            );
            if let Some(at) = i.expires {
                println!("expires  {}, in {}", unix_time(at), time_left(at));
            }
            s.close().map_err(|e| e.to_string())
        }
        Cmd::Rm { key, form } => {
            let key = form.parse(key, "key")?;
            let s = open(&store_path()?)?;
            s.delete(&key).map_err(|e| e.to_string())?;
            s.close().map_err(|e| e.to_string())
        }
        Cmd::Ls { prefix, form, long } => {
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
        Cmd::Import { dir, skip_errors } => {
            let s = open(&store_path()?)?;
            let report = load::import(&s, dir, &mut Progress::new("import"))?;
            s.close().map_err(|e| e.to_string())?;
            if report.skipped > 0 && !skip_errors {
                return Err(format!(
                    "{} file(s) skipped (listed above; the rest is stored); --skip-errors exits 0 for that",
                    report.skipped
                ));
            }
            Ok(())
        }
        Cmd::Compact => {
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
        Cmd::Backup { dest } => {
            let s = open_read_only(&store_path()?, None)?;
            let st = s.stats();
            let what = format!("{} objects, {}", st.objects, human(st.logical_bytes));
            let r =
                Progress::around("backup", what, || s.backup(dest)).map_err(|e| e.to_string())?;
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
        Cmd::Stats { json } => {
            let path = store_path()?;
            let s = open_read_only(&path, None)?;
            let st = s.stats();
            if *json {
                println!("{}", report_json(&st.record()));
                return s.close().map_err(|e| e.to_string());
            }
            println!("objects              {}", st.objects);
            println!(
                "capacity             {} ({})",
                st.capacity,
                human(st.capacity)
            );
            println!(
                "logical bytes        {} ({})",
                st.logical_bytes,
                human(st.logical_bytes)
            );
            println!(
                "heap bytes           {} ({})",
                st.allocated_bytes,
                human(st.allocated_bytes)
            );
            println!(
                "metadata bytes       {} ({})",
                st.metadata_bytes,
                human(st.metadata_bytes)
            );
            println!(
                "free bytes           {} ({}) of {}",
                st.free_bytes,
                human(st.free_bytes),
                human(st.capacity)
            );
            match st.space_amplification() {
                Some(a) => println!("space amplification  {a:.3}"),
                None => println!("space amplification  - (empty)"),
            }
            println!("largest free piece   {}", human(st.largest_free_piece));
            println!(
                "fragmentation        {:.1}% (free space not in the largest free piece)",
                if st.free_bytes > 0 {
                    100.0 * (1.0 - st.largest_free_piece as f64 / st.free_bytes as f64)
                } else {
                    0.0
                }
            );
            println!(
                "io engine            {} (direct I/O: {})",
                st.io_engine, st.direct_io
            );
            println!("index                {}", st.index.name());
            let r = &st.recovery;
            if r.is_empty() {
                println!(
                    "recovery at open     nothing to do ({})",
                    if r.clean {
                        "closed cleanly"
                    } else {
                        "not closed cleanly; newest group intact"
                    }
                );
            } else {
                println!(
                    "recovery at open     rolled back {} group(s), {} object version(s); repaired {}; skipped {} damaged tuple block(s)",
                    r.rolled_back_groups,
                    r.rolled_back_objects,
                    r.repaired.len(),
                    r.skipped.len()
                );
                for line in r.skipped.iter().chain(&r.repaired).chain(&r.details) {
                    println!("  {line}");
                }
            }
            s.close().map_err(|e| e.to_string())
        }
        Cmd::Grow { size, max_capacity } => {
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
        Cmd::Check { data } => {
            let path = store_path()?;
            match std::fs::metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(no_store(&path, "the path does not exist"))
                }
                Ok(m) if m.is_file() && m.len() == 0 => {
                    return Err(no_store(&path, "the file is empty"))
                }
                _ => {}
            }
            let outcome = check::run(&path, *data, salvage(), human);
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
        Cmd::Bench {
            sizes,
            budget,
            concurrency,
        } => bench(cli.store.as_deref(), sizes, budget, *concurrency),
    }
}

/// The comparison of `blobcask-bench` (raw device, blobcask on io_uring,
/// file per object) at a few sizes, in a scratch directory that is removed
/// afterwards. Engine failures (e.g. a full disk) become one error line.
fn bench(
    next_to: Option<&Path>,
    sizes: &str,
    budget: &str,
    concurrency: usize,
) -> Result<(), String> {
    use blobcask_bench::compare;

    let parent = next_to
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let mut cfg =
        compare::Config::new(parent.join(format!("blobcask-cli-bench-{}", std::process::id())));
    cfg.engines = ["raw", "blobcask-uring", "files"]
        .map(String::from)
        .to_vec();
    cfg.sizes = sizes
        .split(',')
        .map(|s| parse_size(s).map(|v| v as usize))
        .collect::<Result<_, _>>()?;
    cfg.budget = parse_size(budget)? as usize;
    if cfg.sizes.contains(&0) || cfg.budget == 0 || concurrency == 0 {
        return Err("sizes, budget and concurrency must be positive".into());
    }
    cfg.concurrency = concurrency;
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(|| compare::run(&cfg, |line| eprintln!("{line}")));
    let _ = std::panic::take_hook();
    let _ = std::fs::remove_dir_all(&cfg.dir);
    let report = outcome.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".into());
        format!("benchmark failed: {}", msg.lines().next().unwrap_or(""))
    })?;
    println!("{}", report.phase_table());
    println!("{}", report.run_table());
    println!("blobcask (io_uring) is N× faster than each engine (> 1: blobcask wins):\n");
    println!("{}", report.ratio_table());
    if !report.cache_dropped {
        println!("(page cache not dropped before reads: not running as root)");
    }
    println!("full comparison: cargo run --release -p blobcask-bench --features sqlite,fjall --bin compare");
    Ok(())
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes
    // away (`blobcask stat k | head -1`) instead of panicking in `println!`.
    // SAFETY: resetting a signal's disposition to its default, before any
    // thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blobcask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A report of the engine (`blobcask::report`) as a JSON object, every
/// figure under its own name: times as Unix seconds, durations as seconds,
/// a key as its bytes in hex, an absent figure as `null`.
fn report_json(r: &blobcask::report::Record) -> serde_json::Value {
    use blobcask::report::Figure;
    use serde_json::Value;
    let figures = r.figures.iter().map(|(name, figure)| {
        let value = match figure {
            Figure::Count(n) => Value::from(*n),
            Figure::Real(x) => Value::from(*x),
            Figure::Flag(b) => Value::from(*b),
            Figure::Text(t) => Value::from(t.as_str()),
            Figure::Key(k) => Value::from(k.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            Figure::Path(p) => Value::from(p.to_string_lossy().into_owned()),
            Figure::Lines(l) => Value::from(l.clone()),
            Figure::Time(t) => Value::from(blobcask::report::unix_seconds(*t)),
            Figure::Span(d) => Value::from(d.as_secs_f64()),
            Figure::Record(inner) => report_json(inner),
            _ => Value::Null,
        };
        ((*name).to_owned(), value)
    });
    Value::Object(figures.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_parse_with_units_and_refuse_garbage() {
        assert_eq!(parse_ttl("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_ttl("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_ttl(" 90 "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_ttl("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_ttl("36500d"), Ok(MAX_TTL));
        for bad in [
            "",
            "s",
            "0",
            "0ms",
            "-5s",
            "1.5s",
            "5x",
            "5M",
            "5 minutes",
            "36501d",
            "99999999999999999999",
            "18446744073709551615d",
        ] {
            let e = parse_ttl(bad).unwrap_err();
            assert!(e.starts_with("bad ttl"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn time_left_is_short() {
        let now = SystemTime::now();
        assert_eq!(time_left(now - Duration::from_secs(5)), "0.0s");
        assert_eq!(
            time_left(now + Duration::from_secs(4 * 60 + 59) + Duration::from_millis(500)),
            "4m59s"
        );
        assert_eq!(
            time_left(now + Duration::from_secs(2 * 3_600 + 90)),
            "2h01m"
        );
        assert_eq!(
            time_left(now + Duration::from_secs(7 * 86_400 + 3_700)),
            "7d01h"
        );
    }
}
