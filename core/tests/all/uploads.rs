//! Incomplete uploads (issue 17, part 3): listed while in progress, aborted
//! from the store wherever their handle is, gone (space free) at reopen.

use crate::common;

use blobcask::blocking::Store;
use blobcask::{ErrorKind, IoEngineKind, Options, PART_ALIGN};
use common::{pattern, temp_path};

const ENGINES: [IoEngineKind; 2] = [IoEngineKind::IoUring, IoEngineKind::Portable];

fn opts(engine: IoEngineKind) -> Options {
    Options::new()
        .io_engine(engine)
        .capacity(32 << 20)
        .max_capacity(32 << 20)
}

#[test]
fn uploads_in_progress_are_listed_until_they_end() {
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(&t.path, opts(engine)).unwrap();
        assert!(s.list_uploads().is_empty());
        let a = s.begin_upload("a", 3 * PART_ALIGN + 10).unwrap();
        let b = s.begin_upload("b", 100).unwrap(); // inline-sized
        let again = s.begin_upload("a", 8192).unwrap(); // same key, another upload
        a.write_part(PART_ALIGN, pattern(1, PART_ALIGN as usize))
            .unwrap();
        let list = s.list_uploads();
        let seen: Vec<(&[u8], u64, u64)> = list
            .iter()
            .map(|u| (&u.key[..], u.size, u.written))
            .collect();
        assert_eq!(
            seen,
            vec![
                (&b"a"[..], 3 * PART_ALIGN + 10, PART_ALIGN),
                (&b"b"[..], 100, 0),
                (&b"a"[..], 8192, 0),
            ],
            "{engine:?}"
        );
        assert_eq!(list[0].id, a.id());
        assert!(list.windows(2).all(|w| w[0].id < w[1].id));
        drop(again);
        b.abort().unwrap();
        assert_eq!(s.list_uploads().len(), 1);
        a.write_part(0, pattern(0, PART_ALIGN as usize)).unwrap();
        a.write_part(2 * PART_ALIGN, pattern(2, PART_ALIGN as usize + 10))
            .unwrap();
        a.commit().unwrap();
        assert!(s.list_uploads().is_empty());
        assert_eq!(s.get("a").unwrap().len() as u64, 3 * PART_ALIGN + 10);
    }
}

#[test]
fn abort_upload_frees_the_space_and_fails_the_handle_with_closed() {
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(&t.path, opts(engine)).unwrap();
        let free = s.stats().free_bytes;
        let up = s.begin_upload("big", 8 << 20).unwrap();
        up.write_part(0, pattern(3, 1 << 20)).unwrap();
        assert!(s.stats().free_bytes <= free - (8 << 20));
        let id = s.list_uploads()[0].id;
        s.abort_upload(id).unwrap();
        assert_eq!(
            s.stats().free_bytes,
            free,
            "{engine:?}: space freed at once"
        );
        assert!(s.list_uploads().is_empty());
        let e = up.write_part(1 << 20, pattern(4, 4096)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
        let e = up.commit().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
        assert!(!s.contains("big"));
        // Unknown or finished ids.
        assert_eq!(s.abort_upload(id).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(s.abort_upload(999).unwrap_err().kind(), ErrorKind::NotFound);
        // An inline-sized upload aborted the same way.
        let small = s.begin_upload("small", 10).unwrap();
        s.abort_upload(small.id()).unwrap();
        assert_eq!(
            small.write_part(0, vec![1u8; 10]).unwrap_err().kind(),
            ErrorKind::Closed
        );
    }
}

#[test]
fn an_abort_racing_parts_never_lets_their_pieces_be_reused_under_them() {
    // Writers keep writing parts while another thread aborts the upload and
    // puts objects that reuse the space: every put reads back exactly, and
    // each part either lands (before the abort) or fails with Closed.
    let t = temp_path();
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    for round in 0..20u64 {
        let up = std::sync::Arc::new(s.begin_upload("u", 4 << 20).unwrap());
        let writer = {
            let up = up.clone();
            std::thread::spawn(move || {
                for i in 0..16u64 {
                    match up.write_part(i * (256 << 10), pattern(i, 256 << 10)) {
                        Ok(()) => {}
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
                            return;
                        }
                    }
                }
            })
        };
        std::thread::sleep(std::time::Duration::from_micros(300 * round));
        let _ = s.abort_upload(up.id());
        let key = format!("reuse/{round}");
        s.put(&key, pattern(round + 100, 3 << 20)).unwrap();
        writer.join().unwrap();
        assert_eq!(s.get(&key).unwrap(), pattern(round + 100, 3 << 20));
        s.delete(&key).unwrap();
    }
}

#[test]
fn uploads_not_committed_are_gone_at_reopen_and_their_space_is_free() {
    let t = temp_path();
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    let free = s.stats().free_bytes;
    let up = s.begin_upload("half", 6 << 20).unwrap();
    up.write_part(0, pattern(5, 1 << 20)).unwrap();
    // The process "ends" with the upload open: the handle is leaked.
    std::mem::forget(up);
    s.close().unwrap();
    let s = Store::open(&t.path, Options::new().create(false)).unwrap();
    assert!(s.list_uploads().is_empty());
    assert!(!s.contains("half"));
    assert_eq!(s.stats().free_bytes, free);
}

#[test]
fn written_counts_a_short_last_part_by_its_length() {
    let t = temp_path();
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    let size = 3 * PART_ALIGN + 123;
    let up = s.begin_upload("k", size).unwrap();
    up.write_part(3 * PART_ALIGN, pattern(1, 123)).unwrap();
    assert_eq!(s.list_uploads()[0].written, 123);
    up.write_part(2 * PART_ALIGN, pattern(2, PART_ALIGN as usize))
        .unwrap();
    assert_eq!(s.list_uploads()[0].written, PART_ALIGN + 123);
    up.write_part(0, pattern(3, 2 * PART_ALIGN as usize))
        .unwrap();
    assert_eq!(s.list_uploads()[0].written, size);
    // Once its commit has begun the upload is no longer listed or
    // abortable; after close nothing is listed.
    let id = up.id();
    up.commit().unwrap();
    assert_eq!(s.abort_upload(id).unwrap_err().kind(), ErrorKind::NotFound);
    let _open = s.begin_upload("other", 10).unwrap();
    let handle = s.clone();
    s.close().unwrap();
    assert!(handle.list_uploads().is_empty());
}

/// An upload handle is used by reference only (the bindings share it
/// between threads without wrapping it): a commit while a part is being
/// written is refused and leaves the upload as it was, and the part's
/// bytes are in the object committed after it. Once the upload has ended,
/// every call says how: committed, or refused.
#[test]
fn a_commit_racing_a_part_is_refused_and_the_upload_stays_whole() {
    use futures::task::noop_waker_ref;
    use std::future::Future;
    use std::task::Context;
    for engine in ENGINES {
        let t = temp_path();
        let s = Store::open(&t.path, opts(engine)).unwrap();
        let size = 16 << 20;
        let up = futures::executor::block_on(s.as_async().begin_upload("big", size)).unwrap();
        let head = pattern(1, 4096);
        let tail = pattern(2, size as usize - 4096);
        futures::executor::block_on(up.write_part(0, head.clone())).unwrap();
        // A part under way: polled once, it waits for its write.
        let mut part = Box::pin(up.write_part(4096, tail.clone()));
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(
            part.as_mut().poll(&mut cx).is_pending(),
            "{engine:?}: a 16 MiB part finished inside its first poll"
        );
        let e = futures::executor::block_on(up.commit()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("still being written"), "{e}");
        assert_eq!(s.list_uploads().len(), 1, "the upload is still there");
        futures::executor::block_on(part).unwrap();
        let info = futures::executor::block_on(up.commit()).unwrap();
        assert_eq!(info.size, size);
        let mut want = head.clone();
        want.extend_from_slice(&tail);
        assert!(
            s.get("big").unwrap() == want,
            "{engine:?}: the object is whole"
        );
        let e = futures::executor::block_on(up.commit()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Closed);
        assert!(e.to_string().contains("already committed"), "{e}");
        let e = futures::executor::block_on(up.write_part(0, head.clone())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Closed);

        // A commit refused for bytes never written ends the upload.
        let gap = s.begin_upload("gap", 8192).unwrap();
        gap.write_part(0, pattern(3, 4096)).unwrap();
        assert_eq!(gap.commit().unwrap_err().kind(), ErrorKind::InvalidArgument);
        let e = gap.write_part(4096, pattern(3, 4096)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Closed);
        assert!(e.to_string().contains("refused"), "{e}");
        assert!(s.list_uploads().is_empty() && !s.contains("gap"));
        s.close().unwrap();
    }
}

/// A handle kept after its upload ended does not keep the store open: the
/// bindings keep handles until their garbage collector runs.
#[test]
fn an_ended_upload_handle_does_not_hold_the_store() {
    let t = temp_path();
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    let committed = s.begin_upload("a", 10).unwrap();
    committed.write_part(0, vec![1u8; 10]).unwrap();
    committed.commit().unwrap();
    let aborted = s.begin_upload("b", 1 << 20).unwrap();
    aborted.abort().unwrap();
    drop(s);
    // The lock went with the last handle on the store.
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    assert_eq!(s.get("a").unwrap(), vec![1u8; 10]);
    let e = committed.write_part(0, vec![2u8; 10]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed);
    assert!(e.to_string().contains("already committed"), "{e}");
    assert_eq!(aborted.commit().unwrap_err().kind(), ErrorKind::Closed);
    aborted.abort().unwrap();
    s.close().unwrap();
}

/// An upload aborted from the store (`abort_upload`) lets go of the store
/// too: a handle kept afterwards does not hold its lock.
#[test]
fn an_upload_aborted_from_the_store_does_not_hold_it() {
    let t = temp_path();
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    let up = s.begin_upload("b", 1 << 20).unwrap();
    s.abort_upload(up.id()).unwrap();
    drop(s);
    let s = Store::open(&t.path, opts(IoEngineKind::Auto)).unwrap();
    let e = up.write_part(0, vec![1u8; 4096]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed);
    assert!(e.to_string().contains("aborted"), "{e}");
    s.close().unwrap();
}
