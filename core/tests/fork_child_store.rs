//! A fork child of a process that used a store opens and uses a store of
//! its own, on either engine. The child inherits the bookkeeping of the
//! parent's helper thread pool but none of its threads: open, which hands
//! its work to that pool, used to wait forever there (a hostile-user test:
//! a parent that forks workers, as pre-forking servers and Python's
//! `multiprocessing` do). The only test in this binary, so that the fork
//! happens with as few threads as possible.
#![allow(unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use blobcask::IoEngineKind;
use common::*;

#[test]
fn a_fork_child_opens_and_uses_a_store_of_its_own() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let (mine, theirs) = (temp_path(), temp_path());
        let parent = blobcask::blocking::Store::open(&mine.path, options(engine)).unwrap();
        parent.put("p", pattern(1, 100_000)).unwrap();
        assert_eq!(&parent.get("p").unwrap()[..], &pattern(1, 100_000)[..]);
        // SAFETY: the child only uses a store of its own and leaves with
        // _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let run = || -> blobcask::Result<bool> {
                let s = blobcask::blocking::Store::open(&theirs.path, options(engine))?;
                s.put("c", pattern(2, 100_000))?;
                let same = s.get("c")?[..] == pattern(2, 100_000)[..];
                s.close()?;
                Ok(same)
            };
            let code = if matches!(run(), Ok(true)) { 0 } else { 1 };
            // SAFETY: ends the child without the test harness's exit path.
            unsafe { libc::_exit(code) };
        }
        // Wait with a deadline, so that a hang fails the test rather than
        // hanging it.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut status = 0;
        loop {
            // SAFETY: polls this test's own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if Instant::now() > deadline {
                // SAFETY: ends and reaps this test's own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                panic!("{engine:?}: the fork child's open, put and get did not finish in 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{engine:?}: the child's store did not work ({status:#x})"
        );
        // The parent's store is unaffected.
        parent.put("after", pattern(3, 5000)).unwrap();
        assert_eq!(&parent.get("p").unwrap()[..], &pattern(1, 100_000)[..]);
        parent.close().unwrap();
    }
}
