//! Benchmark programs for blobcask and the pieces they share: raw-device
//! baselines (`raw`) and the comparison against other engines (`compare`),
//! which the `compare` binary and the CLI's `bench` command both run.

pub mod compare;
pub mod raw;
