//! What names a version of a remote object, the cache keys derived from
//! it, and the per-object record kept in the cache store.
//!
//! Keys in the cache store (byte strings; the location comes last, so a
//! key is unambiguous whatever the location holds):
//! * `m/LOCATION`: the record: the remote's metadata of the version last
//!   seen and when the remote last confirmed it;
//! * `p/K/LEN/IDENTITY/PIECE/LOCATION`: a piece of one version: `K` is
//!   `e` (ETag) or `v` (version id), `LEN` the identity's length in hex,
//!   `PIECE` `w` (the whole object) or `cSIZE-INDEX` (chunk `INDEX` of
//!   `SIZE`-byte chunks, both hex). A piece is only ever written with
//!   bytes fetched under that identity, so a read that takes every piece
//!   under one identity never mixes versions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::object_store;
use chrono::{DateTime, Utc};
use object_store::path::Path;
use object_store::{GetOptions, ObjectMeta};

/// One version of a remote object, as the remote names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    ETag(String),
    /// The remote gives no ETag but a version id.
    Version(String),
}

impl Identity {
    /// The ETag, else the version; `None` when the remote gives neither
    /// (such an object is never cached: nothing would tell its versions
    /// apart).
    pub(crate) fn of(meta: &ObjectMeta) -> Option<Identity> {
        match (&meta.e_tag, &meta.version) {
            (Some(tag), _) if !tag.is_empty() => Some(Identity::ETag(tag.clone())),
            (_, Some(v)) if !v.is_empty() => Some(Identity::Version(v.clone())),
            _ => None,
        }
    }

    /// `options` narrowed to this version: a request the remote answers
    /// only while the object still is this version (`if_match` on the
    /// ETag; the version id selects it).
    pub(crate) fn pin(&self, mut options: GetOptions) -> GetOptions {
        match self {
            Identity::ETag(tag) => options.if_match = Some(tag.clone()),
            Identity::Version(v) => options.version = Some(v.clone()),
        }
        options
    }

    /// Whether `meta` (a remote's answer) is of this version.
    pub(crate) fn names(&self, meta: &ObjectMeta) -> bool {
        match self {
            Identity::ETag(tag) => meta.e_tag.as_ref() == Some(tag),
            Identity::Version(v) => meta.version.as_ref() == Some(v),
        }
    }

    fn kind_and_name(&self) -> (char, &str) {
        match self {
            Identity::ETag(t) => ('e', t),
            Identity::Version(v) => ('v', v),
        }
    }
}

/// Which piece of a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    Whole,
    /// Chunk `index` of `size`-byte chunks.
    Chunk {
        size: u64,
        index: u64,
    },
}

pub(crate) fn record_key(location: &Path) -> Vec<u8> {
    let mut k = b"m/".to_vec();
    k.extend_from_slice(location.as_ref().as_bytes());
    k
}

pub(crate) fn piece_key(location: &Path, identity: &Identity, piece: Piece) -> Vec<u8> {
    let (kind, name) = identity.kind_and_name();
    let piece = match piece {
        Piece::Whole => "w".to_string(),
        Piece::Chunk { size, index } => format!("c{size:x}-{index:x}"),
    };
    format!(
        "p/{kind}/{:x}/{name}/{piece}/{}",
        name.len(),
        location.as_ref()
    )
    .into_bytes()
}

/// What the cache knows of a remote object: its metadata (as the remote
/// gave it) and when the remote last confirmed that identity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub meta: ObjectMeta,
    pub confirmed: SystemTime,
}

const RECORD_MAGIC: &[u8; 4] = b"BCT1";
/// Marks an absent string field.
const ABSENT: u16 = u16::MAX;

impl Record {
    pub(crate) fn identity(&self) -> Option<Identity> {
        Identity::of(&self.meta)
    }

    /// `magic | confirmed ms | size | last_modified s | last_modified ns |
    /// e_tag | version`, integers little-endian, strings as a u16 length
    /// (`ABSENT` for none) and the bytes. The store checksums the value.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = RECORD_MAGIC.to_vec();
        let confirmed = self
            .confirmed
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        out.extend_from_slice(&confirmed.to_le_bytes());
        out.extend_from_slice(&self.meta.size.to_le_bytes());
        out.extend_from_slice(&self.meta.last_modified.timestamp().to_le_bytes());
        out.extend_from_slice(
            &self
                .meta
                .last_modified
                .timestamp_subsec_nanos()
                .to_le_bytes(),
        );
        for field in [&self.meta.e_tag, &self.meta.version] {
            match field {
                // Longer strings are not kept (`decode` of the record
                // then fails and the record counts as absent).
                Some(s) if s.len() < ABSENT as usize => {
                    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                _ => out.extend_from_slice(&ABSENT.to_le_bytes()),
            }
        }
        out
    }

    /// The record of `location` encoded in `bytes`; `None` if they are not
    /// one (a record that cannot be read counts as no record).
    pub(crate) fn decode(location: &Path, bytes: &[u8]) -> Option<Record> {
        let mut r = Reader(bytes);
        if r.take(4)? != RECORD_MAGIC {
            return None;
        }
        let confirmed = u64::from_le_bytes(r.array()?);
        let size = u64::from_le_bytes(r.array()?);
        let secs = i64::from_le_bytes(r.array()?);
        let nanos = u32::from_le_bytes(r.array()?);
        let e_tag = r.string()?;
        let version = r.string()?;
        if !r.0.is_empty() {
            return None;
        }
        Some(Record {
            meta: ObjectMeta {
                location: location.clone(),
                last_modified: DateTime::<Utc>::from_timestamp(secs, nanos)?,
                size,
                e_tag,
                version,
            },
            confirmed: UNIX_EPOCH.checked_add(Duration::from_millis(confirmed))?,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// `Some(None)` for an absent field, `None` for bytes that are not a
    /// field.
    fn string(&mut self) -> Option<Option<String>> {
        let len = u16::from_le_bytes(self.array()?);
        if len == ABSENT {
            return Some(None);
        }
        let bytes = self.take(len as usize)?;
        Some(Some(std::str::from_utf8(bytes).ok()?.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(e_tag: Option<&str>, version: Option<&str>) -> Record {
        let location = Path::from("a/b.parquet");
        Record {
            meta: ObjectMeta {
                location,
                last_modified: DateTime::<Utc>::from_timestamp(1_790_000_000, 123_456_789).unwrap(),
                size: 12_345_678,
                e_tag: e_tag.map(str::to_string),
                version: version.map(str::to_string),
            },
            confirmed: UNIX_EPOCH + Duration::from_millis(1_790_000_001_234),
        }
    }

    #[test]
    fn a_record_round_trips_with_every_field_present_or_absent() {
        for (e, v) in [
            (Some("\"abc\""), Some("v1")),
            (None, Some("v1")),
            (Some(""), None),
            (None, None),
        ] {
            let r = record(e, v);
            let back = Record::decode(&r.meta.location, &r.encode()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn a_truncated_extended_or_foreign_record_is_no_record() {
        let r = record(Some("tag"), None);
        let bytes = r.encode();
        for n in 0..bytes.len() {
            assert_eq!(Record::decode(&r.meta.location, &bytes[..n]), None, "{n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Record::decode(&r.meta.location, &longer), None);
        let mut foreign = bytes;
        foreign[0] ^= 1;
        assert_eq!(Record::decode(&r.meta.location, &foreign), None);
    }

    #[test]
    fn the_etag_names_a_version_before_the_version_id_and_nothing_names_none() {
        let r = record(Some("t"), Some("v"));
        assert_eq!(r.identity(), Some(Identity::ETag("t".into())));
        assert_eq!(
            record(None, Some("v")).identity(),
            Some(Identity::Version("v".into()))
        );
        assert_eq!(record(Some(""), None).identity(), None);
    }

    #[test]
    fn piece_keys_of_two_versions_or_pieces_differ() {
        let p = Path::from("x/y");
        let a = Identity::ETag("1".into());
        let b = Identity::ETag("12".into());
        let v = Identity::Version("1".into());
        let c = |index| Piece::Chunk {
            size: 1 << 20,
            index,
        };
        let keys = [
            piece_key(&p, &a, Piece::Whole),
            piece_key(&p, &b, Piece::Whole),
            piece_key(&p, &v, Piece::Whole),
            piece_key(&p, &a, c(0)),
            piece_key(&p, &a, c(1)),
            piece_key(
                &p,
                &a,
                Piece::Chunk {
                    size: 4096,
                    index: 0,
                },
            ),
        ];
        for (i, x) in keys.iter().enumerate() {
            for y in &keys[i + 1..] {
                assert_ne!(x, y);
            }
        }
    }
}
