//! loom models of the engine's two concurrency protocols. Run with
//!
//! ```text
//! RUSTFLAGS="--cfg blobcask_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p blobcask --release --lib loom_models
//! ```
//!
//! Each protocol has a deliberately broken variant that loom must catch
//! (`#[should_panic]`): if a change to the model made the check vacuous,
//! the broken variant would start passing and the suite would fail.

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc as LoomArc, RwLock};
use loom::thread;

use super::Extent;
use crate::alloc::BuddyAllocator;
use crate::loom_check::model;
use crate::sync::{Arc, Mutex};

/// Invariant 2, with the real `Extent` and allocator: a reader that found
/// an object reads its bytes, never those of an object that reused its
/// space after a delete. The device block holds an owner tag.
fn reclaim(broken: bool) {
    model(move || {
        let alloc = Arc::new(Mutex::new(BuddyAllocator::new(0, 1, 0)));
        let piece = alloc.lock().alloc(0).expect("one block");
        let device = LoomArc::new(AtomicU64::new(1)); // object 1 owns block 0
                                                      // Broken protocol: the handle does not own the space; the writer
                                                      // frees it at unlink instead.
        let owned = if broken { vec![] } else { vec![piece] };
        let extent = LoomArc::new(Extent {
            pieces: owned,
            alloc: alloc.clone(),
        });
        let index = LoomArc::new(RwLock::new(Some(extent)));

        let reader = {
            let (index, device) = (index.clone(), device.clone());
            thread::spawn(move || {
                // Look up under the lock, pin the extent, read without it.
                let pinned = index.read().unwrap().clone();
                if let Some(extent) = pinned {
                    let owner = device.load(Ordering::SeqCst);
                    assert_eq!(owner, 1, "a reader saw another object's bytes");
                    drop(extent);
                }
            })
        };
        let writer = thread::spawn(move || {
            // Delete object 1 (the unlink is durable by now), then put
            // object 2, which takes whatever block is free.
            let unlinked = index.write().unwrap().take();
            drop(unlinked);
            if broken {
                // Broken: free the pieces at unlink, ignoring readers.
                alloc.lock().free(piece);
            }
            let reused = alloc.lock().alloc(0);
            if reused.is_some() {
                device.store(2, Ordering::SeqCst);
            }
        });
        reader.join().unwrap();
        writer.join().unwrap();
    });
}

#[test]
fn reclaim_waits_for_readers() {
    reclaim(false);
}

#[test]
#[should_panic(expected = "another object's bytes")]
fn reclaim_without_waiting_for_readers_is_caught() {
    reclaim(true);
}

/// Leader/follower group commit (`store::commit::CommitPath`): each of
/// two writers queues its change, then waits for its reply or, holding
/// the lead, takes every queued change as a group, assigns versions, makes
/// the group durable and acknowledges. Whenever a writer sees its
/// acknowledgement its version must already be durable, and once every
/// writer returned, every change was acknowledged (none left queued with
/// nobody to lead it). (No thread waits in an unbounded loop: a writer
/// leads at most twice.)
fn group_commit(broken: bool) {
    model(move || {
        const WRITERS: usize = 2;
        let queue = LoomArc::new(loom::sync::Mutex::new(Vec::<usize>::new()));
        // The lead: the next version to assign.
        let lead = LoomArc::new(loom::sync::Mutex::new(1u64));
        let durable = LoomArc::new(AtomicU64::new(0)); // highest durable version
        let acked = LoomArc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (queue, lead, durable, acked) =
                    (queue.clone(), lead.clone(), durable.clone(), acked.clone());
                thread::spawn(move || {
                    queue.lock().unwrap().push(w);
                    for _ in 0..2 {
                        if acked[w].load(Ordering::SeqCst) != 0 {
                            break;
                        }
                        // Take the lead (waiting for it, as the caller's
                        // future waits for the lead or its reply).
                        let mut next = lead.lock().unwrap();
                        let group: Vec<usize> = std::mem::take(&mut *queue.lock().unwrap());
                        let mut versions = Vec::new();
                        for &g in &group {
                            versions.push((g, *next));
                            *next += 1;
                        }
                        let Some(&(_, last)) = versions.last() else {
                            continue;
                        };
                        if broken {
                            // Broken: acknowledge, then write and sync.
                            for &(g, v) in &versions {
                                acked[g].store(v, Ordering::SeqCst);
                            }
                            durable.store(last, Ordering::SeqCst);
                        } else {
                            durable.store(last, Ordering::SeqCst);
                            for &(g, v) in &versions {
                                acked[g].store(v, Ordering::SeqCst);
                            }
                        }
                    }
                    let v = acked[w].load(Ordering::SeqCst);
                    assert!(v != 0, "a change was never committed");
                    assert!(
                        durable.load(Ordering::SeqCst) >= v,
                        "acknowledged before durable"
                    );
                })
            })
            .collect();
        // A reader of acknowledgements, at any point: what it sees
        // acknowledged is durable.
        let observer = {
            let (durable, acked) = (durable.clone(), acked.clone());
            thread::spawn(move || {
                let v = acked[0].load(Ordering::SeqCst);
                if v != 0 {
                    assert!(
                        durable.load(Ordering::SeqCst) >= v,
                        "acknowledged before durable"
                    );
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        observer.join().unwrap();
    });
}

#[test]
fn group_commit_acknowledges_after_durable() {
    group_commit(false);
}

#[test]
#[should_panic(expected = "acknowledged before durable")]
fn group_commit_acknowledging_early_is_caught() {
    group_commit(true);
}
