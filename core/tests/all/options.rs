//! The documented defaults are the ones in effect.

use crate::common;

use blobcask::{blocking::Store, IndexKind, Options, DEFAULT_CAPACITY, DEFAULT_INLINE_THRESHOLD};
use common::*;

#[test]
fn default_capacity_is_the_named_constant() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new()).unwrap();
    assert_eq!(s.stats().capacity, DEFAULT_CAPACITY);
    assert_eq!(s.stats().index, IndexKind::Hash);
    assert!(
        s.stats().direct_io,
        "direct I/O is on by default where the file system takes it"
    );
}

#[test]
fn default_inline_threshold_is_the_named_constant() {
    let t = temp_path();
    let s = Store::open(&t.path, Options::new().capacity(8 << 20)).unwrap();
    assert!(
        s.put("at", vec![1u8; DEFAULT_INLINE_THRESHOLD])
            .unwrap()
            .inline
    );
    assert!(
        !s.put("above", vec![1u8; DEFAULT_INLINE_THRESHOLD + 1])
            .unwrap()
            .inline
    );
    assert_eq!(s.stats().allocated_bytes, 4096);
}

#[test]
fn inline_threshold_zero_keeps_values_on_the_heap() {
    let t = temp_path();
    let s = Store::open(
        &t.path,
        Options::new().capacity(8 << 20).inline_threshold(0),
    )
    .unwrap();
    assert!(!s.put("one", vec![1u8]).unwrap().inline);
    assert!(
        s.put("empty", Vec::<u8>::new()).unwrap().inline,
        "empty values need no piece"
    );
}

#[test]
fn capacity_of_an_existing_store_comes_from_its_superblock() {
    // Unset at reopen means "the store's size", not the default for new
    // stores (a larger explicit one grows it: `growth.rs`).
    let t = temp_path();
    Store::open(&t.path, Options::new().capacity(8 << 20))
        .unwrap()
        .close()
        .unwrap();
    let s = Store::open(&t.path, Options::new()).unwrap();
    assert_eq!(s.stats().capacity, 8 << 20);
}

/// The names the bindings pass (`durability="buffered"`, `if_absent`) mean
/// one thing in every binding: parsed here, once.
#[test]
fn bindings_names_for_durability_io_engine_eviction_and_put_conditions() {
    use blobcask::{Durability, ErrorKind, IoEngineKind, PutMode};
    use std::time::Duration;
    let d = Duration::from_millis(5);
    assert_eq!(Durability::named("sync", None).unwrap(), Durability::Sync);
    assert_eq!(
        Durability::named("buffered", Some(d)).unwrap(),
        Durability::Buffered { max_delay: d }
    );
    for (mode, delay) in [
        ("sync", Some(d)),
        ("buffered", None),
        ("Sync", None),
        ("", None),
    ] {
        let e = Durability::named(mode, delay).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{mode:?} {delay:?}");
    }
    for kind in IoEngineKind::ALL {
        assert_eq!(kind.name().parse::<IoEngineKind>().unwrap(), kind);
    }
    assert_eq!(
        "uring".parse::<IoEngineKind>().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        PutMode::from_conditions(false, None).unwrap(),
        PutMode::Overwrite
    );
    assert_eq!(
        PutMode::from_conditions(true, None).unwrap(),
        PutMode::Create
    );
    assert_eq!(
        PutMode::from_conditions(false, Some(7)).unwrap(),
        PutMode::Update(7)
    );
    assert_eq!(
        PutMode::from_conditions(true, Some(7)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // `eviction="s3fifo"`; the default does not evict.
    use blobcask::Eviction;
    assert_eq!(Eviction::default(), Eviction::None);
    for e in [Eviction::None, Eviction::S3Fifo] {
        assert_eq!(e.name().parse::<Eviction>().unwrap(), e);
    }
    assert_eq!("s3fifo".parse::<Eviction>().unwrap(), Eviction::S3Fifo);
    for bad in ["S3FIFO", "lru", ""] {
        let e = bad.parse::<Eviction>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }

    // A buffered store with no delay at all is refused, and nothing made.
    let t = temp_path();
    let zero = Durability::Buffered {
        max_delay: Duration::ZERO,
    };
    let e = Store::open(&t.path, Options::new().durability(zero)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!t.path.exists());
}
