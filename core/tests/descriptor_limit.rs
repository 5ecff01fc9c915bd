//! A process out of file descriptors gets an `Io` error from an open that
//! asks for io_uring, not `Unsupported` (which says the kernel lacks
//! io_uring or refuses it, and sends users to the wrong fix), and the
//! failed open leaves no file behind (invariant 3). The only test in this
//! binary: it lowers the process's descriptor limit and takes every
//! descriptor under it.
#![allow(unsafe_code)]

mod common;

use blobcask::{ErrorKind, IoEngineKind};
use common::*;

/// Opens `/dev/null` until the process has no descriptor left; returns
/// them.
fn take_every_descriptor(held: &mut Vec<std::fs::File>) {
    while let Ok(f) = std::fs::File::open("/dev/null") {
        held.push(f);
    }
}

#[test]
fn running_out_of_descriptors_is_an_io_error_not_unsupported() {
    // Paths first: each is a directory of its own, made while descriptors
    // are still free.
    let paths: Vec<TempStore> = (0..12).map(|_| temp_path()).collect();
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut old) },
        0
    );
    let low = libc::rlimit {
        rlim_cur: 256.min(old.rlim_cur),
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);

    let mut held = Vec::new();
    let mut outcomes = Vec::new();
    for (free, t) in paths.iter().enumerate() {
        // Every descriptor taken, then `free` of them given back: the open
        // runs out at a different step each time (the file, its duplicate,
        // the ring, its eventfd, ...) or, with enough, succeeds.
        take_every_descriptor(&mut held);
        for _ in 0..free {
            held.pop();
        }
        let r = blobcask::blocking::Store::open(&t.path, options(IoEngineKind::IoUring));
        outcomes.push(match r {
            Ok(s) => {
                s.close().expect("close");
                None
            }
            Err(e) => Some((free, e.kind(), e.to_string(), t.path.exists())),
        });
    }
    drop(held);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) }, 0);

    let errors: Vec<_> = outcomes.iter().flatten().collect();
    for (free, kind, message, left_a_file) in &errors {
        assert_eq!(
            *kind,
            ErrorKind::Io,
            "{free} descriptors free: {message} (out of descriptors is no missing feature)"
        );
        assert!(
            !left_a_file,
            "{free} descriptors free: the failed open left a file: {message}"
        );
    }
    assert!(
        errors.iter().any(|(_, _, m, _)| m.contains("io_uring")),
        "no open failed at the ring's setup: {errors:?}"
    );
    assert!(
        outcomes.last().is_some_and(Option::is_none),
        "11 free descriptors were not enough to open a store: {errors:?}"
    );
}
