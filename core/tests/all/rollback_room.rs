//! Invariant 6 and recovery's own rule "recovery reports, never panics",
//! where the two meet: a commit group of several puts (writers whose puts
//! coalesce, as group commit does) in which one put shrank its key's tuple
//! in place and another put's new tuple took the room freed, cut before
//! its sync with the block landed and the shrunk object's value lost.
//! Rolling that object back alone gives its block the larger previous
//! tuple again beside the new one.
//!
//! Before the commit path kept such room until the group was written, the
//! rebuilt block no longer fitted its slot and the reopen panicked in the
//! slot encoder's payload assertion (format 3 and format 4 alike). With
//! recovery's fallback alone (a group whose per-object rollback would
//! over-fill a block rolls back whole: `meta/recovery/plan/newest.rs`)
//! nothing panics, but `c`, intact, goes with the group: these tests
//! fail then too, as no image rolls `a` back alone beside `c`.

use crate::common;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use blobcask::io::fault::{CrashMode, MemDevice};
use blobcask::io::{AlignedBuf, BufResult, IoEngine, IoFuture};
use blobcask::{ObjectInfo, Options, Store};
use common::pattern;

/// When syncs may pass: not while `held`, nor once a write of `marker`
/// (a value whose group is to be cut before its sync) was issued.
#[derive(Default)]
struct Gate {
    held: AtomicBool,
    marker: Vec<u8>,
    marked: AtomicBool,
    /// Syncs refused since `marker` was written (each poll counts).
    refused_marked: AtomicU64,
}

impl Gate {
    fn pass(&self) -> bool {
        if self.marked.load(Ordering::SeqCst) {
            self.refused_marked.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        !self.held.load(Ordering::SeqCst)
    }

    fn saw(&self, bytes: &[u8]) {
        if bytes.starts_with(&self.marker) {
            self.marked.store(true, Ordering::SeqCst);
        }
    }
}

/// The fault device, with syncs that wait at a gate: a group's sync is
/// held while the next puts queue behind it, so they commit as one group,
/// whose own sync is held too.
struct HeldSyncs {
    dev: Arc<MemDevice>,
    gate: Arc<Gate>,
}

impl IoEngine for HeldSyncs {
    fn read_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        self.dev.read_at(buf, offset)
    }

    fn write_at(&self, buf: AlignedBuf, offset: u64) -> IoFuture<BufResult<()>> {
        self.gate.saw(buf.as_slice());
        self.dev.write_at(buf, offset)
    }

    fn sync(&self) -> IoFuture<io::Result<()>> {
        let (dev, gate) = (self.dev.clone(), self.gate.clone());
        Box::pin(async move {
            std::future::poll_fn(|cx| {
                if gate.pass() {
                    Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
            dev.sync().await
        })
    }

    fn size(&self) -> io::Result<u64> {
        self.dev.size()
    }

    fn name(&self) -> &'static str {
        "held-syncs"
    }

    fn direct_io(&self) -> bool {
        false
    }
}

type Put<'a> = Pin<Box<dyn Future<Output = blobcask::Result<ObjectInfo>> + Send + 'a>>;

/// Polls `f` once (unless it already finished), keeping its result.
fn poll(f: &mut Put<'_>, out: &mut Option<blobcask::Result<ObjectInfo>>) {
    if out.is_some() {
        return;
    }
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
        *out = Some(r);
    }
}

const A_OLD: usize = 2040;
const A_NEW: usize = 4096;
const F: usize = 1000;
const C: usize = 2000;
const X: usize = 2040;

fn options(format_3: bool) -> Options {
    let o = Options::new().inline_threshold(2048);
    if format_3 {
        o.create_format_3()
    } else {
        o
    }
}

/// Builds the cut group and returns the device (its unsynced writes are
/// the group's), and whether `x`'s put was acknowledged.
///
/// One tuple block holds `a` (inline, 2,068 bytes of tuple) and `f`
/// (1,028); `x` fills another block to 2,068. Then, in one group, `a`
/// becomes a heap object of one block (a 43-byte tuple, in place: the block
/// frees 2,025 bytes) and new key `c` (inline, 2,028 bytes) is placed: the
/// block `x` last filled has no room for it, `a`'s block has just enough.
/// Its value unsynced, `a` is read back at open; when it did not land,
/// it alone rolls back, and its block must then hold `f`, the old `a` and
/// `c`: 5,124 bytes.
fn cut_group(format_3: bool) -> (Arc<MemDevice>, bool) {
    let dev = Arc::new(MemDevice::new(8 << 20));
    let gate = Arc::new(Gate {
        marker: pattern(4, A_NEW),
        ..Gate::default()
    });
    let engine = Arc::new(HeldSyncs {
        dev: dev.clone(),
        gate: gate.clone(),
    });
    let s =
        futures::executor::block_on(Store::open_with_engine(engine, options(format_3))).unwrap();
    futures::executor::block_on(async {
        s.put("a", pattern(1, A_OLD)).await.unwrap();
        s.put("f", pattern(2, F)).await.unwrap();
    });
    gate.held.store(true, Ordering::SeqCst);
    let mut x: Put<'_> = Box::pin(s.put("x", pattern(3, X)));
    let mut a: Put<'_> = Box::pin(s.put("a", pattern(4, A_NEW)));
    let mut c: Put<'_> = Box::pin(s.put("c", pattern(5, C)));
    let (mut xr, mut ar, mut cr) = (None, None, None);
    // `x` leads and waits at its sync; `a` then `c` queue behind it.
    poll(&mut x, &mut xr);
    poll(&mut a, &mut ar);
    poll(&mut c, &mut cr);
    assert!(
        ar.is_none() && cr.is_none(),
        "the puts did not wait for the held sync"
    );
    assert!(
        !gate.marked.load(Ordering::SeqCst),
        "`a`'s value was written before its group"
    );
    // Syncs pass again (`x`'s group) until `a`'s value is written: the
    // next group, `a` and `c`, is written and waits at its own sync.
    gate.held.store(false, Ordering::SeqCst);
    let mut rounds = 0;
    while gate.refused_marked.load(Ordering::SeqCst) == 0 {
        poll(&mut x, &mut xr);
        poll(&mut a, &mut ar);
        poll(&mut c, &mut cr);
        rounds += 1;
        assert!(
            rounds < 100_000,
            "the group of `a` and `c` never reached its sync"
        );
        std::thread::yield_now();
    }
    assert!(
        ar.is_none() && cr.is_none(),
        "`a` or `c` was acknowledged before its group's sync"
    );
    let x_acked = matches!(xr, Some(Ok(_)));
    // The power goes out with the group's writes unsynced.
    dev.crash_now();
    gate.marked.store(false, Ordering::SeqCst);
    drop((x, a, c));
    drop(s);
    (dev, x_acked)
}

/// Reopens each image the cut may leave: never a panic, every
/// acknowledged object intact, `a` and `c` each whole or absent. Returns
/// how many images rolled `a` back alone and kept `c`.
fn reopen_every_landing(format_3: bool) -> usize {
    let (dev, x_acked) = cut_group(format_3);
    let modes = [
        CrashMode::DropUnsynced,
        CrashMode::KeepUnsynced,
        CrashMode::LastOnly,
    ]
    .into_iter()
    .chain((1..=96).map(CrashMode::Random));
    let mut alone = 0;
    for mode in modes {
        let what = format!("format 3: {format_3}, {mode:?}");
        let image = dev.crash_image(mode);
        let s = blobcask::blocking::Store::open_with_engine(
            Arc::new(MemDevice::from_image(image)),
            options(format_3),
        )
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        let got = |k: &str| s.get(k).ok().map(|b| b.to_vec());
        assert_eq!(got("f"), Some(pattern(2, F)), "{what}: f");
        let x = got("x");
        assert!(
            x == Some(pattern(3, X)) || (!x_acked && x.is_none()),
            "{what}: x"
        );
        let a = got("a");
        assert!(
            a == Some(pattern(1, A_OLD)) || a == Some(pattern(4, A_NEW)),
            "{what}: a is neither its old nor its new value"
        );
        let c = got("c");
        assert!(
            c.is_none() || c == Some(pattern(5, C)),
            "{what}: c is not whole"
        );
        let present = 2 + u64::from(x.is_some()) + u64::from(c.is_some());
        assert_eq!(s.stats().objects, present, "{what}: objects");
        let r = s.stats().recovery;
        if a == Some(pattern(1, A_OLD)) && c.is_some() && r.rolled_back_objects == 1 {
            alone += 1;
        }
        // The store keeps working and reopens with what it holds.
        s.put("after", pattern(6, 9000))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        s.close().unwrap();
    }
    alone
}

#[test]
fn a_put_rolled_back_alone_never_overfills_its_block_journaled() {
    let alone = reopen_every_landing(false);
    assert!(alone > 0, "no image rolled `a` back alone beside `c`");
}

#[test]
fn a_put_rolled_back_alone_never_overfills_its_block_format_3() {
    let alone = reopen_every_landing(true);
    assert!(alone > 0, "no image rolled `a` back alone beside `c`");
}

/// The open that rolls `a` back alone rewrites `a`'s block: cut at each of
/// its writes, with random landings, the next open still finds `a` at a
/// version it had (its old one: the new one's bytes never landed). A
/// format-3 open used to write that block over the slot holding the state
/// before the cut group, the only copy of `a`'s old version: torn, the
/// next open kept the new version, whose bytes fail ("its commit group had
/// been synced"), and the acknowledged old one was gone.
fn cut_the_open_that_rolls_back_alone(format_3: bool) {
    let (dev, _) = cut_group(format_3);
    let (mut opens, mut alone) = (0, 0);
    for seed in 1..=96u64 {
        let image = dev.crash_image(CrashMode::Random(seed));
        let s = blobcask::blocking::Store::open_with_engine(
            Arc::new(MemDevice::from_image(image.clone())),
            options(format_3),
        )
        .unwrap();
        let r = s.stats().recovery;
        let rolled_alone = r.rolled_back_objects == 1 && r.rolled_back_groups == 0;
        drop(s);
        if !rolled_alone {
            continue;
        }
        alone += 1;
        for cut in 1..=6u64 {
            let d = Arc::new(MemDevice::from_image(image.clone()));
            d.crash_after_writes(cut);
            if blobcask::blocking::Store::open_with_engine(d.clone(), options(format_3)).is_ok() {
                continue;
            }
            for land in 0..8u64 {
                let what = format!(
                    "format 3: {format_3}, seed {seed}, open cut at write {cut}, landing {land}"
                );
                let again = d.crash_image(CrashMode::Random(land * 7 + cut));
                let s = blobcask::blocking::Store::open_with_engine(
                    Arc::new(MemDevice::from_image(again)),
                    options(format_3),
                )
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
                assert_eq!(
                    s.get("a").ok().map(|b| b.to_vec()),
                    Some(pattern(1, A_OLD)),
                    "{what}: {:?}",
                    s.stats().recovery
                );
                assert_eq!(
                    s.get("f").ok().map(|b| b.to_vec()),
                    Some(pattern(2, F)),
                    "{what}"
                );
                opens += 1;
            }
        }
        if alone == 4 {
            break;
        }
    }
    assert!(
        alone > 0 && opens > 0,
        "no open rolling `a` back alone was cut"
    );
}

#[test]
fn a_cut_in_the_open_that_rolls_a_put_back_alone_keeps_its_old_version_format_3() {
    cut_the_open_that_rolls_back_alone(true);
}

#[test]
fn a_cut_in_the_open_that_rolls_a_put_back_alone_keeps_its_old_version_journaled() {
    cut_the_open_that_rolls_back_alone(false);
}
