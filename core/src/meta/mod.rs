//! Metadata, one layer: tuples, tuple-block slots, the two superblock
//! copies, recovery (used by open and `check` alike) and the committer's
//! in-memory block table.

pub mod block;
pub mod recovery;
pub(crate) mod superblock;
pub(crate) mod table;
pub mod tuple;
