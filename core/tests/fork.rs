//! A handle inherited through `fork()` refuses every call (`Locked`) and
//! writes nothing when dropped, so a child cannot destroy the parent's
//! store (a hostile-user test once lost every acknowledged object of the
//! parent that way). The only test in this binary: the child forks from
//! as few threads as possible.
#![allow(unsafe_code)]

mod common;

use blobcask::{ErrorKind, IoEngineKind};
use common::*;

#[test]
fn an_inherited_handle_refuses_every_call_and_writes_nothing() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let b = blobcask::blocking::Store::open(&t.path, options(engine)).unwrap();
        for i in 0..20u64 {
            b.put(format!("parent/{i}"), pattern(i, 64 << 10)).unwrap();
        }
        // SAFETY: the child only calls the store and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let put = b.put("child", vec![1u8; 64 << 10]);
            let del = b.delete("parent/0");
            let get = b.get("parent/1");
            let ok = matches!(put, Err(ref e) if e.kind() == ErrorKind::Locked)
                && matches!(del, Err(ref e) if e.kind() == ErrorKind::Locked)
                && matches!(get, Err(ref e) if e.kind() == ErrorKind::Locked)
                && b.close().is_ok();
            drop(b);
            // SAFETY: ends the child without running the parent's atexit
            // handlers or test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's calls through the inherited handle were not all refused ({status:#x})"
        );
        // The parent's store is intact and still its own.
        for i in 0..20u64 {
            assert_eq!(
                &b.get(format!("parent/{i}")).unwrap()[..],
                &pattern(i, 64 << 10)[..]
            );
        }
        b.put("after", vec![2u8; 5000]).unwrap();
        b.close().unwrap();
        let b = blobcask::blocking::Store::open(&t.path, options(engine)).unwrap();
        assert!(!b.contains("child"));
        for i in 0..20u64 {
            assert_eq!(
                &b.get(format!("parent/{i}")).unwrap()[..],
                &pattern(i, 64 << 10)[..]
            );
        }
        assert!(
            b.stats().recovery.clean,
            "the child's drop must not touch the store"
        );
    }
}
