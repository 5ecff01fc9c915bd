//! The phases of `blobcask-bench`, a module each (`main.rs` runs the ones
//! asked for), and what they share: the run's [`Config`], a fresh store
//! file, percentiles, medians and the process's CPU time.

mod backup;
mod commit;
mod depth;
mod fs;
mod growth;
mod read;
mod space;
mod upload;
mod warm;

pub(crate) use backup::backup_phase;
pub(crate) use commit::commit_phase;
pub(crate) use depth::depth_phase;
pub(crate) use fs::fs_phase;
pub(crate) use growth::growth_phase;
pub(crate) use read::read_phase;
pub(crate) use space::space_phase;
pub(crate) use upload::upload_phase;
pub(crate) use warm::warm_phase;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use blobcask::{IoEngineKind, Options, Store};

use blobcask_bench::figures::Sink;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// CPU time (user + system) this process has used so far, every thread.
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) dir: PathBuf,
    pub(crate) quick: bool,
    pub(crate) phase: Option<String>,
    pub(crate) engine: Option<String>,
    /// Where each figure is recorded (`--json FILE`), besides the tables.
    pub(crate) figures: Arc<Sink>,
}

/// The engine's name as `--engine` takes it (records name the engine).
fn engine_name(engine: IoEngineKind) -> &'static str {
    match engine {
        IoEngineKind::IoUring => "io_uring",
        IoEngineKind::Portable => "portable",
        _ => "auto",
    }
}
async fn fresh(cfg: &Config, engine: IoEngineKind, capacity: u64) -> (Store, PathBuf) {
    let path = cfg.dir.join("bench.blobcask");
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path, Options::new().capacity(capacity).io_engine(engine))
        .await
        .expect("open");
    (store, path)
}
/// The median of rates or ratios (the upper one of an even count); NaN
/// for none.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
