//! The commands on one key: `put` (with `--ttl`), `get` (with `--range`,
//! streamed in chunks, never onto the store itself), `stat` and `rm`.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blobcask::{PutOptions, MAX_TTL};

use crate::keys::KeyForm;
use crate::load;
use crate::open::{is_the_store, open, open_read_only};
use crate::progress::Progress;
use crate::text::{human, time_left};

/// `put KEY FILE [--ttl DURATION]`.
pub fn put(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    key: &OsString,
    file: &str,
    form: &KeyForm,
    ttl: &Option<String>,
) -> Result<(), String> {
    let mut options = PutOptions::default();
    if let Some(t) = ttl {
        options = options.ttl(parse_ttl(t)?);
    }
    let raw = form.parse(key, "key")?;
    let key = form.show(&raw);
    let path = store_path()?;
    let source = load::Source::open(file, &path)?;
    let s = open(&path)?;
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

/// `get KEY [-o FILE] [--range RANGE]`.
pub fn get(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    key: &OsString,
    form: &KeyForm,
    output: &Option<PathBuf>,
    range: &Option<String>,
) -> Result<(), String> {
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
    let size = s.stat(&key).map_err(|e| e.to_string())?.size;
    let (off, len) = match range {
        Some((r, text)) => r.within(size, text, &form.show(&key))?,
        None => (0, size),
    };
    let mut chunks = Chunks {
        s: &s,
        key: &key,
        at: off,
        end: off + len.min(size - off),
    };
    // Read before the output is made: a failed first read leaves a file
    // named by `-o` as it was.
    let first = chunks.next_chunk()?;
    match output {
        Some(p) => {
            let existed = std::fs::symlink_metadata(p).is_ok();
            let shown = p.display().to_string();
            let written = std::fs::File::create(p)
                .map_err(|e| format!("writing {shown}: {e}"))
                .and_then(|mut f| chunks.write_out(first, &mut f, &shown));
            if written.is_err() && !existed {
                let _ = std::fs::remove_file(p);
            }
            written?
        }
        None => chunks.write_out(first, &mut std::io::stdout().lock(), "stdout")?,
    }
    s.close().map_err(|e| e.to_string())
}

/// The bytes `at..end` of an object, read [`load::CHUNK`] bytes at a time,
/// so `get` holds one chunk whatever the object's size. The read-only open
/// holds the store's shared lock, so no writer can replace the object
/// between two reads (an expiry can still end it: the next read fails).
struct Chunks<'a> {
    s: &'a blobcask::blocking::Store,
    key: &'a [u8],
    at: u64,
    end: u64,
}

impl Chunks<'_> {
    /// The next chunk, empty at the end.
    fn next_chunk(&mut self) -> Result<blobcask::Bytes, String> {
        if self.at >= self.end {
            return Ok(blobcask::Bytes::new());
        }
        let n = (self.end - self.at).min(load::CHUNK);
        let bytes = self
            .s
            .read(self.key, self.at, n)
            .map_err(|e| e.to_string())?;
        self.at += bytes.len() as u64;
        if bytes.is_empty() {
            self.end = self.at; // clipped: the object ended early
        }
        Ok(bytes)
    }

    /// Writes `first` and every chunk after it to `out` (`shown` in
    /// errors).
    fn write_out(
        &mut self,
        mut chunk: blobcask::Bytes,
        out: &mut dyn Write,
        shown: &str,
    ) -> Result<(), String> {
        let write_err = |e: std::io::Error| format!("writing {shown}: {e}");
        while !chunk.is_empty() {
            out.write_all(&chunk).map_err(write_err)?;
            chunk = self.next_chunk()?;
        }
        out.flush().map_err(write_err)
    }
}

/// `stat KEY`.
pub fn stat(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    key: &OsString,
    form: &KeyForm,
) -> Result<(), String> {
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

/// `rm KEY`.
pub fn rm(
    store_path: &dyn Fn() -> Result<PathBuf, String>,
    key: &OsString,
    form: &KeyForm,
) -> Result<(), String> {
    let key = form.parse(key, "key")?;
    let s = open(&store_path()?)?;
    s.delete(&key).map_err(|e| e.to_string())?;
    s.close().map_err(|e| e.to_string())
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

/// Seconds and microseconds since the Unix epoch, as `stat` shows times.
fn unix_time(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    format!("{}.{:06} (unix)", d.as_secs(), d.subsec_micros())
}

/// Fails when `target` (the metadata of where output goes, if it exists)
/// is the store file itself: writing there would destroy the store.
fn refuse_the_store(
    target: Option<std::fs::Metadata>,
    store: &Path,
    shown: &Path,
) -> Result<(), String> {
    if target.is_some_and(|t| is_the_store(&t, store)) {
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
}
