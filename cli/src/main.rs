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

mod bench;
mod check;
mod import;
mod keys;
mod load;
mod ls;
mod maintain;
mod object;
mod open;
mod progress;
mod stats;
mod text;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use bench::bench;
use clap::{Parser, Subcommand};
use keys::KeyForm;
use open::SALVAGE;

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
    /// a multipart upload, in bounded memory; bytes from a pipe are too,
    /// once more than 8 MiB of them are spooled to a temporary file in
    /// TMPDIR (a pipe's size is known only at its end).
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
    /// Write KEY's bytes to stdout or a file, 8 MiB at a time (memory
    /// stays bounded whatever the object's size).
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
    /// multipart upload. Symbolic links (not followed), special files,
    /// unreadable files and the store file itself are skipped, each
    /// reported on stderr, and make the exit code non-zero (after storing
    /// the rest) unless --skip-errors.
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
        } => maintain::create(&store_path, capacity, max_capacity, index),
        Cmd::Put {
            key,
            file,
            form,
            ttl,
        } => object::put(&store_path, key, file, form, ttl),
        Cmd::Get {
            key,
            form,
            output,
            range,
        } => object::get(&store_path, key, form, output, range),
        Cmd::Stat { key, form } => object::stat(&store_path, key, form),
        Cmd::Rm { key, form } => object::rm(&store_path, key, form),
        Cmd::Ls { prefix, form, long } => ls::ls(&store_path, prefix, form, long),
        Cmd::Import { dir, skip_errors } => import::import(&store_path, dir, skip_errors),
        Cmd::Compact => maintain::compact(&store_path),
        Cmd::Backup { dest } => maintain::backup(&store_path, dest),
        Cmd::Stats { json } => stats::stats(&store_path, json),
        Cmd::Grow { size, max_capacity } => maintain::grow(&store_path, size, max_capacity),
        Cmd::Check { data } => check::command(&store_path, data),
        Cmd::Bench {
            sizes,
            budget,
            concurrency,
        } => bench(cli.store.as_deref(), sizes, budget, *concurrency),
    }
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
