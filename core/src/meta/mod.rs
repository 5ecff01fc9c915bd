//! Metadata: tuples, tuple blocks, the in-memory block table and recovery.

pub mod block;
pub mod recovery;
pub(crate) mod table;
pub mod tuple;
