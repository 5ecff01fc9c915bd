//! The core's integration suites, one module per suite, in one test binary:
//! each binary in `tests/` links the crate and its dependencies on its own,
//! and libtest runs the tests of one binary on every core, so one binary
//! builds faster and leaves no core idle behind a binary's longest test.
//!
//! The suites that need a process of their own stay in `tests/` as their
//! own binaries: `fork.rs` and `fork_child_store.rs` (fork with as few
//! threads as possible), `descriptor_limit.rs` (lowers the process's
//! descriptor limit), `runtime_without_io.rs` (sets the process's panic
//! hook), and `runtimes.rs`, `event_loop.rs` and `uring_local.rs` (check
//! that no io_uring fallback completion thread exists in the process,
//! which suites here start).
//!
//! One suite alone: `cargo test -p blobcask --test all crash::`.

#[path = "../common/mod.rs"]
mod common;

mod backup;
mod batch;
mod behaviour;
mod cache;
mod cancel;
mod commit_path;
mod corruption;
mod crash;
mod create_safety;
mod damage_rounds;
mod eviction;
mod fixtures;
mod growth;
mod index_image;
mod inline_values;
mod integrity;
mod lifecycle;
mod loopdev;
mod model;
mod options;
mod poison;
mod rollback_room;
mod uploads;
mod uring_driver;
mod warm_up;
