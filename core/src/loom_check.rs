//! The one way the loom models explore interleavings (built with
//! `--cfg blobcask_loom`, tests only): `store::loom_models`,
//! `io::uring::loom_model` and `event_loop::loom_model`.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Explores interleavings of `f` with up to 3 preemptions (loom's
/// recommended bound: bugs rarely need more, and the search stays in
/// seconds), printing how many it explored, also when one failed.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    struct Report(std::sync::Arc<AtomicUsize>);
    impl Drop for Report {
        fn drop(&mut self) {
            let n = self.0.load(Ordering::Relaxed);
            if std::thread::panicking() {
                eprintln!("loom explored {n} interleavings (the last one failed)");
            } else {
                eprintln!("loom explored {n} interleavings");
            }
        }
    }
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let report = Report(runs.clone());
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        runs.fetch_add(1, Ordering::Relaxed);
        f();
    });
    drop(report);
}
