//! The documented defaults are the ones in effect.

mod common;

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
