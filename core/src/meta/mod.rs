//! Metadata, one layer: tuples, tuple-block slots, the two superblock
//! copies, the metadata journal (format 4), the index image (format 6),
//! recovery (used by open and
//! `check` alike) and the committer's in-memory block table.

pub mod block;
pub(crate) mod image;
pub(crate) mod journal;
pub mod recovery;
pub(crate) mod superblock;
pub(crate) mod table;
pub mod tuple;
