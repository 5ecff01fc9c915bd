//! A store poisoned by a failed metadata write refuses every later change
//! until it is reopened, and the commit path's refusals say why: they
//! carry the kind and the message of the failure that stopped it
//! (invariants 1 and 6 in `core/INVARIANTS.md`: nothing more is written
//! once the device's state is unknown; a damaged block is reported as
//! damage, never as something else).

use crate::common;

use std::sync::Arc;

use blobcask::blocking::Store;
use blobcask::io::fault::MemDevice;
use blobcask::{ErrorKind, Options};
use common::pattern;

/// A key no other bytes of the store contain, so its offsets in the device
/// image are the tuple's.
const VICTIM: &[u8] = b"poison-victim-key-7f3a9c";

/// Flips a byte of every copy of `needle` on the device: its tuple block's
/// home slot and any journal slot holding an image of that block.
fn damage_every_copy(dev: &MemDevice, needle: &[u8]) -> usize {
    let image = dev.volatile_image();
    let at: Vec<usize> = image
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    for &i in &at {
        dev.flip(i + needle.len() / 2);
    }
    at.len()
}

// Before the cause was kept, the sync after the failed put was refused as
// `Io` "failed metadata write", whatever had stopped the store.
#[test]
fn a_store_stopped_by_a_corrupt_block_refuses_changes_as_corrupt() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    s.put(VICTIM, pattern(1, 100)).unwrap();
    s.close().unwrap();
    // Reopened, the victim's block is not in the committer's image cache:
    // changing the key reads it back from the device.
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    assert!(
        damage_every_copy(&dev, VICTIM) > 0,
        "the key is not on the device"
    );

    let first = s.put(VICTIM, pattern(2, 100)).unwrap_err();
    assert_eq!(first.kind(), ErrorKind::Corrupt, "{first}");

    // The store is poisoned now: the next change the commit path refuses
    // is refused as what stopped it, saying so.
    let later = s.sync().unwrap_err();
    assert_eq!(later.kind(), ErrorKind::Corrupt, "{later}");
    assert!(
        later.message().contains("failed metadata write"),
        "the refusal does not say the store stopped: {later}"
    );
    assert!(
        later.message().contains("no longer reads back"),
        "the refusal lost its cause: {later}"
    );
    // Calls refused before they reach the commit path (the store's own
    // check) say the same: a put, a delete, an upload.
    for refused in [
        s.put("another", pattern(3, 100)).map(|_| ()).unwrap_err(),
        s.delete(VICTIM).unwrap_err(),
        s.begin_upload("big", 1 << 20).map(|_| ()).unwrap_err(),
    ] {
        assert_eq!(refused.kind(), ErrorKind::Corrupt, "{refused}");
        assert!(
            refused.message().contains("no longer reads back"),
            "the refusal lost its cause: {refused}"
        );
    }
    drop(s);
}

#[test]
fn a_store_stopped_by_a_failed_write_says_which_write_failed() {
    let dev = Arc::new(MemDevice::new(4 << 20));
    let s = Store::open_with_engine(dev.clone(), Options::new()).unwrap();
    s.put("a", pattern(1, 10_000)).unwrap();
    dev.crash_now();
    let first = s.put("b", pattern(2, 10_000)).unwrap_err();
    assert_eq!(first.kind(), ErrorKind::Io, "{first}");

    let later = s.sync().unwrap_err();
    assert_eq!(later.kind(), ErrorKind::Io, "{later}");
    assert!(
        later.message().contains("simulated power cut"),
        "the refusal lost its cause: {later}"
    );
    drop(s);
}
