//! Every report a store gives (its stats, an object's info, what a backup,
//! compaction or bulk load did, an upload in progress) as one list of named
//! figures: the single description from which each binding builds the
//! objects of its own language, so that none copies a report field by field
//! and none drifts from the core when a figure is added.
//!
//! Names are the Rust field names (`snake_case`); a binding may respell them
//! in its language's style (`largestFreePiece`). Units are the binding's to
//! choose only for [`Figure::Time`] and [`Figure::Span`] (seconds in Python,
//! milliseconds in JavaScript); every other figure crosses as it is.
//!
//! Each `record` takes its struct apart without `..`: a field added to a
//! report does not compile until it has its figure here, and so reaches
//! every binding at once.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::store::{
    BackupReport, CacheStats, CompactReport, LoadReport, ObjectInfo, Stats, UploadInfo,
};
use crate::RecoveryReport;

/// One figure of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Figure {
    /// A count of things or bytes, an id or a version.
    Count(u64),
    /// A ratio or a rate.
    Real(f64),
    /// A yes or no.
    Flag(bool),
    /// A name (an index backend, an I/O engine).
    Text(String),
    /// A key, as the raw bytes it is.
    Key(Bytes),
    /// A file system path, as the caller gave it.
    Path(PathBuf),
    /// Human-readable lines.
    Lines(Vec<String>),
    /// A moment (a commit, an expiry, the start of an upload).
    Time(SystemTime),
    /// How long something took.
    Span(Duration),
    /// A figure that has no value here (an object that never expires, an
    /// amplification of an empty store): `None`, `null`.
    Absent,
    /// A report inside the report (`Stats::cache`).
    Record(Record),
}

/// A report as its kind's name (the type name a binding gives it) and its
/// figures, in a fixed order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The report's kind: `"Stats"`, `"ObjectInfo"`, ...
    pub kind: &'static str,
    /// The figures, named.
    pub figures: Vec<(&'static str, Figure)>,
}

/// A value that reports itself as a [`Record`].
pub trait Report {
    /// The report as named figures.
    fn record(&self) -> Record;
}

/// A [`Figure::Time`] as seconds since the Unix epoch (negative before
/// it), the form every binding starts from.
pub fn unix_seconds(t: SystemTime) -> f64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

fn real_or_absent(v: Option<f64>) -> Figure {
    v.map_or(Figure::Absent, Figure::Real)
}

/// `per` units over `elapsed`, never divided by zero.
fn rate(per: u64, elapsed: Duration) -> Figure {
    Figure::Real(per as f64 / elapsed.as_secs_f64().max(1e-9))
}

impl Report for Stats {
    fn record(&self) -> Record {
        use Figure::{Count, Flag, Text};
        let Stats {
            objects,
            logical_bytes,
            allocated_bytes,
            metadata_bytes,
            free_bytes,
            largest_free_piece,
            capacity,
            max_capacity,
            device_bytes_written,
            user_bytes_written,
            commit_groups,
            io_engine,
            direct_io,
            index,
            recovery,
            cache,
            hits,
            misses,
            evictions,
            evicted_bytes,
        } = self;
        Record {
            kind: "Stats",
            figures: vec![
                ("objects", Count(*objects)),
                ("logical_bytes", Count(*logical_bytes)),
                ("allocated_bytes", Count(*allocated_bytes)),
                ("metadata_bytes", Count(*metadata_bytes)),
                ("free_bytes", Count(*free_bytes)),
                ("largest_free_piece", Count(*largest_free_piece)),
                ("capacity", Count(*capacity)),
                ("max_capacity", max_capacity.map_or(Figure::Absent, Count)),
                ("device_bytes_written", Count(*device_bytes_written)),
                ("user_bytes_written", Count(*user_bytes_written)),
                ("commit_groups", Count(*commit_groups)),
                ("hits", Count(*hits)),
                ("misses", Count(*misses)),
                ("evictions", Count(*evictions)),
                ("evicted_bytes", Count(*evicted_bytes)),
                (
                    "space_amplification",
                    real_or_absent(self.space_amplification()),
                ),
                (
                    "write_amplification",
                    real_or_absent(self.write_amplification()),
                ),
                ("io_engine", Text((*io_engine).to_owned())),
                ("direct_io", Flag(*direct_io)),
                ("index", Text(index.name().to_owned())),
                ("cache", Figure::Record(cache.record())),
                ("recovery", Figure::Record(recovery.record())),
            ],
        }
    }
}

impl Report for CacheStats {
    fn record(&self) -> Record {
        use Figure::{Count, Flag};
        let CacheStats {
            hits,
            misses,
            bytes,
            capacity,
            warmed_blocks,
            warming,
        } = self;
        Record {
            kind: "CacheStats",
            figures: vec![
                ("hits", Count(*hits)),
                ("misses", Count(*misses)),
                ("bytes", Count(*bytes)),
                ("capacity", Count(*capacity)),
                ("warmed_blocks", Count(*warmed_blocks)),
                ("warming", Flag(*warming)),
            ],
        }
    }
}

impl Report for RecoveryReport {
    fn record(&self) -> Record {
        use Figure::{Count, Flag, Lines};
        let RecoveryReport {
            clean,
            rolled_back_groups,
            rolled_back_objects,
            repaired,
            details,
            skipped,
            from_image,
        } = self;
        Record {
            kind: "RecoveryReport",
            figures: vec![
                ("clean", Flag(*clean)),
                ("rolled_back_groups", Count(*rolled_back_groups)),
                ("rolled_back_objects", Count(*rolled_back_objects)),
                ("repaired", Lines(repaired.clone())),
                ("details", Lines(details.clone())),
                ("skipped", Lines(skipped.clone())),
                ("from_image", Flag(*from_image)),
            ],
        }
    }
}

impl Report for ObjectInfo {
    fn record(&self) -> Record {
        use Figure::{Count, Flag, Time};
        let ObjectInfo {
            size,
            version,
            created,
            inline,
            expires,
        } = self;
        Record {
            kind: "ObjectInfo",
            figures: vec![
                ("size", Count(*size)),
                ("version", Count(*version)),
                ("created", Time(*created)),
                ("inline", Flag(*inline)),
                ("expires", expires.map_or(Figure::Absent, Time)),
            ],
        }
    }
}

impl Report for BackupReport {
    fn record(&self) -> Record {
        use Figure::{Count, Path, Span};
        let BackupReport {
            path,
            objects,
            bytes,
            elapsed,
        } = self;
        Record {
            kind: "BackupReport",
            figures: vec![
                ("path", Path(path.clone())),
                ("objects", Count(*objects)),
                ("bytes", Count(*bytes)),
                ("elapsed", Span(*elapsed)),
                ("bytes_per_sec", rate(*bytes, *elapsed)),
            ],
        }
    }
}

impl Report for CompactReport {
    fn record(&self) -> Record {
        use Figure::{Count, Span};
        let CompactReport {
            moved,
            bytes_moved,
            largest_free_before,
            largest_free_after,
            elapsed,
        } = self;
        Record {
            kind: "CompactReport",
            figures: vec![
                ("moved", Count(*moved)),
                ("bytes_moved", Count(*bytes_moved)),
                ("largest_free_before", Count(*largest_free_before)),
                ("largest_free_after", Count(*largest_free_after)),
                ("elapsed", Span(*elapsed)),
            ],
        }
    }
}

impl Report for LoadReport {
    fn record(&self) -> Record {
        use Figure::{Count, Span};
        let LoadReport {
            objects,
            bytes,
            groups,
            elapsed,
        } = self;
        Record {
            kind: "LoadReport",
            figures: vec![
                ("objects", Count(*objects)),
                ("bytes", Count(*bytes)),
                ("groups", Count(*groups)),
                ("elapsed", Span(*elapsed)),
                ("objects_per_sec", rate(*objects, *elapsed)),
                ("bytes_per_sec", rate(*bytes, *elapsed)),
            ],
        }
    }
}

impl Report for UploadInfo {
    fn record(&self) -> Record {
        use Figure::{Count, Key, Time};
        let UploadInfo {
            id,
            key,
            size,
            written,
            started,
        } = self;
        Record {
            kind: "UploadInfo",
            figures: vec![
                ("id", Count(*id)),
                ("key", Key(key.clone())),
                ("size", Count(*size)),
                ("written", Count(*written)),
                ("started", Time(*started)),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, PutOptions, Store};

    fn figure<'a>(r: &'a Record, name: &str) -> &'a Figure {
        let found: Vec<_> = r.figures.iter().filter(|(n, _)| *n == name).collect();
        assert_eq!(
            found.len(),
            1,
            "{} has {name} {} times",
            r.kind,
            found.len()
        );
        &found[0].1
    }

    /// A store's stats and an object's info, as records, carry the values
    /// of the structs (nested reports included), each name once.
    #[test]
    fn records_carry_every_figure_once_with_its_value() {
        futures::executor::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path().join("s"), Options::new().capacity(16 << 20))
                .await
                .unwrap();
            s.put("small", vec![1u8; 10]).await.unwrap();
            let ttl = PutOptions::default().ttl(Duration::from_secs(60));
            let info = s.put_with("big", vec![2u8; 70_000], ttl).await.unwrap();
            let stats = s.stats();
            let r = stats.record();
            assert_eq!(r.kind, "Stats");
            assert_eq!(figure(&r, "objects"), &Figure::Count(2));
            assert_eq!(figure(&r, "logical_bytes"), &Figure::Count(70_010));
            assert_eq!(
                figure(&r, "largest_free_piece"),
                &Figure::Count(stats.largest_free_piece)
            );
            assert_eq!(
                figure(&r, "space_amplification"),
                &Figure::Real(stats.space_amplification().unwrap())
            );
            assert_eq!(figure(&r, "max_capacity"), &Figure::Absent);
            let Figure::Record(cache) = figure(&r, "cache") else {
                panic!("cache is no record")
            };
            assert_eq!(cache.kind, "CacheStats");
            assert_eq!(
                figure(cache, "capacity"),
                &Figure::Count(stats.cache.capacity)
            );
            let Figure::Record(recovery) = figure(&r, "recovery") else {
                panic!("recovery is no record")
            };
            assert_eq!(figure(recovery, "skipped"), &Figure::Lines(Vec::new()));
            let names: std::collections::HashSet<_> = r.figures.iter().map(|(n, _)| n).collect();
            assert_eq!(names.len(), r.figures.len());

            let r = info.record();
            assert_eq!(figure(&r, "size"), &Figure::Count(70_000));
            assert_eq!(figure(&r, "inline"), &Figure::Flag(false));
            assert_eq!(figure(&r, "expires"), &Figure::Time(info.expires.unwrap()));
            let r = s.stat("small").await.unwrap().record();
            assert_eq!(figure(&r, "expires"), &Figure::Absent);
            assert_eq!(figure(&r, "inline"), &Figure::Flag(true));
            s.close().await.unwrap();
        });
    }
}
