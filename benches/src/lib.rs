//! Benchmark programs for blobcask and the pieces they share: raw-device
//! baselines (`raw`) and the comparison against other engines (`compare`),
//! which the `compare` binary and the CLI's `bench` command both run.
//! `figures` writes what a bench measured as JSON lines, the input of
//! `benches/results.py`, which regenerates `benches/RESULTS.md`.

pub mod compare;
pub mod raw;

/// Deterministic pseudo-random bytes (xorshift), the same for the same
/// `seed` and `len`: values a bench writes and checks when it reads them
/// back.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Parses a byte size written as a number with an optional K, M, G or T
/// suffix (powers of 1024, either case): "64M", "10G", "4096".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, shift) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        Some('T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("bad size {s:?} (use e.g. 64M or 10G)"))
}

/// Machine-readable figures: one JSON object per line for every figure a
/// bench run measures, appended to the file given with `--json FILE`
/// (`benches/results/figures/*.jsonl` keeps the ones the results page is
/// made from).
///
/// A record names the figure (`figure`, a stable id; `label`, the row as
/// the printed table shows it), its `value` and `unit`, the baseline
/// measured in the same run (`baseline`, `baseline_of`) and the `ratio` to
/// it, where the bench has them, the `phase`, `engine` and runtime flavour
/// (`runtime`), and the run: `date` (UTC), `started`, `commit` (`$BLOBCASK_COMMIT`,
/// else `git rev-parse --short HEAD`, else "unknown"), the exact `command`
/// line and `quick`. A value that is not a finite number is written as
/// `null`, never as a made-up figure.
pub mod figures {
    use std::fmt::Write as _;
    use std::io::Write as _;
    use std::path::Path;
    use std::sync::Mutex;
    use std::time::{SystemTime, UNIX_EPOCH};

    /// One measured figure. Built with [`Figure::new`] and the setters.
    pub struct Figure {
        phase: String,
        id: String,
        label: String,
        value: f64,
        unit: String,
        baseline: Option<(f64, String)>,
        ratio: Option<f64>,
        engine: Option<String>,
        runtime: Option<String>,
    }

    impl Figure {
        pub fn new(phase: &str, id: &str, label: &str, value: f64, unit: &str) -> Self {
            Figure {
                phase: phase.into(),
                id: id.into(),
                label: label.into(),
                value,
                unit: unit.into(),
                baseline: None,
                ratio: None,
                engine: None,
                runtime: None,
            }
        }
        /// The baseline's value in the same run and what it is.
        pub fn baseline(mut self, value: f64, of: &str) -> Self {
            self.baseline = Some((value, of.into()));
            self
        }
        /// The ratio the printed table gives for this row.
        pub fn ratio(mut self, ratio: f64) -> Self {
            self.ratio = Some(ratio);
            self
        }
        pub fn engine(mut self, engine: &str) -> Self {
            self.engine = Some(engine.into());
            self
        }
        pub fn runtime(mut self, runtime: Option<&str>) -> Self {
            self.runtime = runtime.map(Into::into);
            self
        }
    }

    /// Where a run's figures go: nowhere, or appended to a JSONL file.
    pub struct Sink {
        out: Option<Mutex<std::fs::File>>,
        /// The run's fields, already written as JSON (`"date":…,"quick":…`).
        run: String,
    }

    impl Sink {
        /// A sink that drops every figure (no `--json`).
        pub fn none() -> Self {
            Sink {
                out: None,
                run: String::new(),
            }
        }

        /// Appends to `path` (created if missing), stamping each record
        /// with this run: now, the commit, the command line, `quick`.
        pub fn append(path: &Path, quick: bool) -> std::io::Result<Self> {
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            let (date, started) = utc_now();
            let command = std::env::args()
                .map(|a| shell_word(&a))
                .collect::<Vec<_>>()
                .join(" ");
            let mut run = String::new();
            field_str(&mut run, "date", &date);
            field_str(&mut run, "started", &started);
            field_str(&mut run, "commit", &commit());
            field_str(&mut run, "command", &command);
            let _ = write!(run, "\"quick\":{quick},\"source\":\"bench\"");
            Ok(Sink {
                out: Some(Mutex::new(out)),
                run,
            })
        }

        /// Writes one record as one line (a single write, so concurrent
        /// records never interleave). A failed write stops the bench: a
        /// run whose figures were asked for and lost would look complete.
        pub fn record(&self, f: Figure) {
            let Some(out) = &self.out else { return };
            let mut line = String::from("{");
            field_str(&mut line, "figure", &f.id);
            field_str(&mut line, "label", &f.label);
            field_num(&mut line, "value", Some(f.value));
            field_str(&mut line, "unit", &f.unit);
            field_num(&mut line, "baseline", f.baseline.as_ref().map(|b| b.0));
            field_opt(
                &mut line,
                "baseline_of",
                f.baseline.as_ref().map(|b| b.1.as_str()),
            );
            field_num(&mut line, "ratio", f.ratio);
            field_str(&mut line, "phase", &f.phase);
            field_opt(&mut line, "engine", f.engine.as_deref());
            field_opt(&mut line, "runtime", f.runtime.as_deref());
            line.push_str(&self.run);
            line.push_str("}\n");
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            out.write_all(line.as_bytes())
                .expect("writing a figure to the --json file");
        }
    }

    /// A row's label as an id: lower-case letters and digits, other runs
    /// of characters one `-` ("Store::put (async), 16 writers" ->
    /// "store-put-async-16-writers").
    pub fn slug(label: &str) -> String {
        let mut s = String::new();
        for c in label.chars() {
            if c.is_ascii_alphanumeric() {
                s.push(c.to_ascii_lowercase());
            } else if !s.is_empty() && !s.ends_with('-') {
                s.push('-');
            }
        }
        while s.ends_with('-') {
            s.pop();
        }
        s
    }

    /// A JSON string literal of `s`: quotes, backslashes and control
    /// characters escaped; everything else as UTF-8.
    pub fn json_str(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A JSON number, or `null` for none, NaN or an infinity (which JSON
    /// cannot hold). Rust's shortest round-trip form has no exponent, so
    /// it is a valid JSON number as it is.
    fn json_num(v: Option<f64>) -> String {
        match v {
            Some(v) if v.is_finite() => format!("{v}"),
            _ => "null".into(),
        }
    }

    fn field_str(out: &mut String, key: &str, value: &str) {
        let _ = write!(out, "\"{key}\":{},", json_str(value));
    }

    fn field_opt(out: &mut String, key: &str, value: Option<&str>) {
        match value {
            Some(v) => field_str(out, key, v),
            None => {
                let _ = write!(out, "\"{key}\":null,");
            }
        }
    }

    fn field_num(out: &mut String, key: &str, value: Option<f64>) {
        let _ = write!(out, "\"{key}\":{},", json_num(value));
    }

    /// An argument as a shell would need it to give it back unchanged.
    fn shell_word(a: &str) -> String {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
        if plain {
            a.into()
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    }

    /// The commit the figures are of: `$BLOBCASK_COMMIT` (for a binary
    /// built elsewhere), else the working tree's `HEAD`, else "unknown".
    fn commit() -> String {
        if let Ok(c) = std::env::var("BLOBCASK_COMMIT") {
            if !c.trim().is_empty() {
                return c.trim().into();
            }
        }
        std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "unknown".into())
    }

    /// Today's date and the time now, UTC: ("2026-11-28", "2026-11-28T15:04:05Z").
    fn utc_now() -> (String, String) {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (y, m, d) = civil_from_days((secs / 86_400) as i64);
        let t = secs % 86_400;
        let date = format!("{y:04}-{m:02}-{d:02}");
        let started = format!("{date}T{:02}:{:02}:{:02}Z", t / 3600, t / 60 % 60, t % 60);
        (date, started)
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01
    /// (Howard Hinnant's `civil_from_days`, restated).
    fn civil_from_days(days: i64) -> (i64, u32, u32) {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let y = yoe + era * 400 + i64::from(m <= 2);
        (y, m, d)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn strings_are_escaped_for_json() {
            assert_eq!(json_str("plain µs"), "\"plain µs\"");
            assert_eq!(json_str("a\"b\\c"), r#""a\"b\\c""#);
            assert_eq!(json_str("x\ny\t\u{1}"), r#""x\ny\t\u0001""#);
        }

        #[test]
        fn numbers_that_json_cannot_hold_are_null() {
            assert_eq!(json_num(Some(1.5)), "1.5");
            assert_eq!(json_num(Some(1e21)), "1000000000000000000000");
            assert_eq!(json_num(Some(f64::NAN)), "null");
            assert_eq!(json_num(None), "null");
        }

        #[test]
        fn dates_and_words() {
            assert_eq!(civil_from_days(0), (1970, 1, 1));
            assert_eq!(civil_from_days(20_420), (2025, 11, 28));
            assert_eq!(civil_from_days(11_016), (2000, 2, 29));
            assert_eq!(
                slug("Store::put (async), 16 writers"),
                "store-put-async-16-writers"
            );
            assert_eq!(shell_word("--phase"), "--phase");
            assert_eq!(shell_word("a b'c"), "'a b'\\''c'");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_parse_with_suffixes_and_refuse_garbage() {
        use super::parse_size;
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16k"), Ok(16 << 10));
        assert_eq!(parse_size(" 64M "), Ok(64 << 20));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert!(parse_size("M").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("99999999999T").is_err(), "overflow is an error");
    }
}
