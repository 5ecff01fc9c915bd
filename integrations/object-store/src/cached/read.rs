//! Serving byte ranges of one version: from cached pieces where the cache
//! has them, the missing ones fetched from the remote pinned to that
//! version (adjacent missing chunks in one request) and cached.

use std::collections::BTreeMap;
use std::ops::Range;

use super::object_store;
use blobcask::ErrorKind;
use bytes::{Bytes, BytesMut};
use futures::future::{join_all, try_join_all};
use object_store::path::Path;
use object_store::{GetOptions, GetRange};

use super::identity::{piece_key, Piece};
use super::lookup::Version;
use super::Inner;
use crate::tier::Counters;

/// Why serving one version failed.
pub(crate) enum Miss {
    /// The remote object is no longer that version (changed or deleted
    /// since the version was looked up): start again.
    Moved,
    Failed(object_store::Error),
}

/// Cached spans of one chunk within this distance are read as one (as
/// `BlobcaskObjectStore::get_ranges` merges ranges): a wider gap costs
/// more to read and verify than a second concurrent read.
const COALESCE_GAP: u64 = 4 << 10;

/// Bytes of one chunk held for a read: segments as (offset within the
/// chunk, bytes), together covering every span the read needs.
struct Held(Vec<(u64, Bytes)>);

impl Inner {
    /// `ranges` (each within the object) of `version`, every byte from
    /// pieces of that version only.
    pub(crate) async fn read_ranges(
        &self,
        location: &Path,
        version: &Version,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, Miss> {
        if version.meta.size <= self.whole_object_limit {
            let whole = self.whole(location, version).await?;
            return Ok(ranges
                .iter()
                .map(|r| whole.slice(r.start as usize..r.end as usize))
                .collect());
        }
        let c = self.chunk_size;
        // Per chunk touched, the spans of it the ranges need (nearby ones
        // merged).
        let mut spans: BTreeMap<u64, Vec<Range<u64>>> = BTreeMap::new();
        for r in ranges.iter().filter(|r| r.start < r.end) {
            for i in r.start / c..=(r.end - 1) / c {
                let lo = r.start.max(i * c) - i * c;
                let hi = r.end.min((i + 1) * c) - i * c;
                spans.entry(i).or_default().push(lo..hi);
            }
        }
        for list in spans.values_mut() {
            *list = merged(std::mem::take(list));
        }
        let looked = join_all(
            spans
                .iter()
                .map(|(&i, list)| self.cached_spans(location, version, i, list)),
        )
        .await;
        let mut held = BTreeMap::new();
        let mut missing = Vec::new();
        for (&i, got) in spans.keys().zip(looked) {
            match got {
                Some(segments) => {
                    held.insert(i, Held(segments));
                }
                None => missing.push(i),
            }
        }
        let fetched = try_join_all(
            runs(&missing)
                .into_iter()
                .map(|run| self.fetch_chunks(location, version, run)),
        )
        .await?;
        for (i, bytes) in fetched.into_iter().flatten() {
            held.insert(i, Held(vec![(0, bytes)]));
        }
        Ok(ranges.iter().map(|r| assemble(r, c, &held)).collect())
    }

    /// The cached `spans` of chunk `index` as (offset, bytes), or `None`
    /// if any is missing (absent, or dropped as damaged): the chunk is
    /// then fetched whole.
    async fn cached_spans(
        &self,
        location: &Path,
        version: &Version,
        index: u64,
        spans: &[Range<u64>],
    ) -> Option<Vec<(u64, Bytes)>> {
        let key = piece_key(
            location,
            &version.identity,
            Piece::Chunk {
                size: self.chunk_size,
                index,
            },
        );
        let reads = spans.iter().map(|span| {
            let key = &key;
            async move {
                let len = span.end - span.start;
                let got = self.cache.read(key, span.start, len).await;
                Some((span.start, self.checked(key, got, len).await?))
            }
        });
        let segments = join_all(reads)
            .await
            .into_iter()
            .collect::<Option<Vec<_>>>()?;
        Counters::add(&self.counters.hits, 1);
        Some(segments)
    }

    /// The whole object `version`, from its cached piece or fetched.
    async fn whole(&self, location: &Path, version: &Version) -> Result<Bytes, Miss> {
        let key = piece_key(location, &version.identity, Piece::Whole);
        let got = self.cache.get(&key).await;
        if let Some(bytes) = self.checked(&key, got, version.meta.size).await {
            Counters::add(&self.counters.hits, 1);
            return Ok(bytes);
        }
        let bytes = self.fetch(location, version, None).await?;
        Counters::add(&self.counters.misses, 1);
        self.fill(key, bytes.clone()).await;
        Ok(bytes)
    }

    /// A cache read's bytes if they are `len` bytes: a piece that fails
    /// its checksum or has the wrong size is deleted, never served.
    async fn checked(&self, key: &[u8], got: blobcask::Result<Bytes>, len: u64) -> Option<Bytes> {
        match got {
            Ok(bytes) if bytes.len() as u64 == len => return Some(bytes),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::InvalidArgument) => {}
            // Absent, or the cache cannot answer (closed, I/O): fetch.
            Err(_) => return None,
        }
        Counters::add(&self.counters.damaged_dropped, 1);
        let _ = self.cache.delete(key).await;
        None
    }

    /// Chunks `run` of `version` in one remote request, cached, each as
    /// (index, bytes).
    async fn fetch_chunks(
        &self,
        location: &Path,
        version: &Version,
        run: Range<u64>,
    ) -> Result<Vec<(u64, Bytes)>, Miss> {
        let c = self.chunk_size;
        let start = run.start * c;
        let end = (run.end * c).min(version.meta.size);
        let bytes = self.fetch(location, version, Some(start..end)).await?;
        let chunks: Vec<(u64, Bytes)> = run
            .map(|i| {
                let lo = (i * c - start) as usize;
                let hi = (((i + 1) * c).min(end) - start) as usize;
                (i, bytes.slice(lo..hi))
            })
            .collect();
        Counters::add(&self.counters.misses, chunks.len() as u64);
        join_all(chunks.iter().map(|(i, b)| {
            let key = piece_key(
                location,
                &version.identity,
                Piece::Chunk { size: c, index: *i },
            );
            self.fill(key, b.clone())
        }))
        .await;
        Ok(chunks)
    }

    /// `range` (or all) of `version` from the remote, refused by the
    /// remote unless the object still is that version.
    async fn fetch(
        &self,
        location: &Path,
        version: &Version,
        range: Option<Range<u64>>,
    ) -> Result<Bytes, Miss> {
        let options = GetOptions {
            range: range.clone().map(GetRange::Bounded),
            ..version.identity.pin(GetOptions::default())
        };
        Counters::add(&self.counters.remote_gets, 1);
        let got = match self.remote.get_opts(location, options).await {
            Ok(got) => got,
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => return Err(Miss::Moved),
            Err(e) => return Err(Miss::Failed(e)),
        };
        // A remote that ignored the condition answers with another
        // version: never keep its bytes under this one's name.
        if !version.identity.names(&got.meta) {
            return Err(Miss::Moved);
        }
        let bytes = got.bytes().await.map_err(Miss::Failed)?;
        Counters::add(&self.counters.bytes_fetched, bytes.len() as u64);
        let want = range.map_or(version.meta.size, |r| r.end - r.start);
        if bytes.len() as u64 != want {
            return Err(Miss::Failed(object_store::Error::Generic {
                store: super::STORE,
                source: format!(
                    "{location}: the remote sent {} bytes of version {:?} where {want} were asked",
                    bytes.len(),
                    version.identity
                )
                .into(),
            }));
        }
        Ok(bytes)
    }

    /// Keeps a fetched piece; a cache that refuses it (full, closed, I/O)
    /// costs the next read a fetch, never this read its answer.
    async fn fill(&self, key: Vec<u8>, bytes: Bytes) {
        if self.cache.put(key, bytes).await.is_err() {
            Counters::add(&self.counters.fills_refused, 1);
        }
    }
}

/// `spans` sorted, with those at most `COALESCE_GAP` apart joined.
fn merged(mut spans: Vec<Range<u64>>) -> Vec<Range<u64>> {
    spans.sort_by_key(|s| s.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end + COALESCE_GAP => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

/// Sorted chunk indexes as runs of adjacent ones.
fn runs(sorted: &[u64]) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for &i in sorted {
        match out.last_mut() {
            Some(run) if run.end == i => run.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Range `r` of the object from the chunks held (every chunk it touches
/// is held, with the span it needs).
fn assemble(r: &Range<u64>, c: u64, held: &BTreeMap<u64, Held>) -> Bytes {
    if r.start >= r.end {
        return Bytes::new();
    }
    let part = |i: u64| {
        let lo = r.start.max(i * c) - i * c;
        let hi = r.end.min((i + 1) * c) - i * c;
        let (at, bytes) = held[&i]
            .0
            .iter()
            .find(|(at, b)| *at <= lo && hi <= at + b.len() as u64)
            .expect("every span a range needs is held");
        bytes.slice((lo - at) as usize..(hi - at) as usize)
    };
    let (first, last) = (r.start / c, (r.end - 1) / c);
    if first == last {
        return part(first);
    }
    let mut out = BytesMut::with_capacity((r.end - r.start) as usize);
    for i in first..=last {
        out.extend_from_slice(&part(i));
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_at_most_the_gap_apart_are_merged() {
        let g = COALESCE_GAP;
        assert_eq!(
            merged(vec![3 * g..3 * g + 10, 0..10, 10 + g..20 + g, 5..6]),
            vec![0..20 + g, 3 * g..3 * g + 10]
        );
    }

    #[test]
    fn adjacent_chunks_form_one_run() {
        assert_eq!(runs(&[]), Vec::<Range<u64>>::new());
        assert_eq!(runs(&[3]), vec![3..4]);
        assert_eq!(runs(&[0, 1, 2, 5, 7, 8]), vec![0..3, 5..6, 7..9]);
    }

    #[test]
    fn a_range_is_assembled_from_partial_spans_of_its_chunks() {
        let c = 10u64;
        let object: Vec<u8> = (0..35u8).collect();
        let seg = |at: usize, end: usize| {
            (
                at as u64 - at as u64 / c * c,
                Bytes::copy_from_slice(&object[at..end]),
            )
        };
        let mut held = BTreeMap::new();
        // Chunk 0 held from offset 4, chunk 1 whole and a part of it again,
        // chunk 2 up to 23.
        held.insert(0, Held(vec![seg(4, 10)]));
        held.insert(1, Held(vec![seg(12, 14), seg(10, 20)]));
        held.insert(2, Held(vec![seg(20, 23)]));
        for r in [4..23, 5..6, 10..20, 12..22, 7..7, 12..14] {
            assert_eq!(
                assemble(&r, c, &held),
                object[r.start as usize..r.end as usize],
                "{r:?}"
            );
        }
    }
}
