//! Core-engine benchmark: blobcask next to the raw device, in one run.
//!
//! ```text
//! cargo run --release -p blobcask-bench -- [--dir DIR] [--quick] [--phase P] [--engine E] [--json FILE]
//! ```
//!
//! `--json FILE` appends one JSON record per figure measured to FILE
//! (`blobcask_bench::figures`); the printed tables are the same with or
//! without it. `benches/results.py` makes `benches/RESULTS.md` from the
//! records kept in `benches/results/figures/`.
//!
//! Phases (each reports blobcask and its raw baseline on the same file):
//! * `read`: random 4 KiB range reads, one in flight, through `Store::read`
//!   (awaited in a task, and in `block_on`), `blocking::Store::read` and a
//!   tokio current-thread runtime vs `pread` with `O_DIRECT` of random
//!   written blocks of the same store file; the rows take turns every 50
//!   reads so machine noise hits all of them. On
//!   Linux also `LocalStore::read` on a thread running `tokio_uring::start`
//!   (reads on that runtime's own ring), in the same rounds, next to
//!   tokio-uring's own `read_at` of 4 KiB on the same file (`O_DIRECT`),
//!   which tells the runtime's cost from the store's.
//! * `upload`: 64 MiB objects through `put` vs sequential `O_DIRECT`
//!   `pwrite` of the same bytes (1 MiB requests, 16 in flight) + fdatasync.
//! * `commit`: durable 16 KiB puts (overwrites: each key is put once,
//!   untimed, first) from 1, 16 and 64 concurrent writers vs one writer
//!   doing `O_DIRECT` write + fdatasync of 16 KiB into written space;
//!   with the io_uring engine, then one writer with every row taking turns
//!   (raw, raw io_uring floors of a put's I/O, blocking and async puts).
//! * `warm`: whole 16 KiB gets of 256 objects (5 passes, p50) through
//!   `blocking::Store::get` with the read cache off and with it warm, on
//!   the same store file, in alternating rounds.
//! * `backup` (only when asked for): `Store::backup` of stores holding
//!   512 MiB of 16 KiB, 1 MiB or 32 MiB objects vs a sequential copy of as
//!   many bytes of the store file (4 MiB O_DIRECT reads and writes, 4
//!   threads, destination preallocated, one fdatasync), alternating rounds.
//! * `fs`: random 4 KiB range reads of objects of several sizes through
//!   `blocking::Store::read` vs a file per object (open + pread + close, the
//!   page cache dropped first when running as root), interleaved rounds.

mod bench;

use std::path::PathBuf;
use std::sync::Arc;

use blobcask::IoEngineKind;

use bench::{
    backup_phase, commit_phase, depth_phase, fs_phase, growth_phase, read_phase, space_phase,
    upload_phase, warm_phase, Config,
};
use blobcask_bench::figures::Sink;

fn main() {
    let mut cfg = Config {
        dir: PathBuf::from("target/bench"),
        quick: false,
        phase: None,
        engine: None,
        figures: Arc::new(Sink::none()),
    };
    let mut json = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => cfg.dir = PathBuf::from(args.next().expect("--dir DIR")),
            "--quick" => cfg.quick = true,
            "--phase" => cfg.phase = args.next(),
            "--engine" => cfg.engine = args.next(),
            "--json" => json = Some(PathBuf::from(args.next().expect("--json FILE"))),
            _ => {
                eprintln!(
                    "usage: blobcask-bench [--dir DIR] [--quick] [--phase read|upload|commit|depth|warm|fs|space|backup|growth] [--engine io_uring|portable] [--json FILE]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Some(path) = json {
        cfg.figures =
            Arc::new(Sink::append(&path, cfg.quick).expect("--json FILE: open for append"));
    }
    std::fs::create_dir_all(&cfg.dir).expect("bench dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (name, engine) in [
            ("io_uring", IoEngineKind::IoUring),
            ("portable", IoEngineKind::Portable),
        ] {
            if cfg.engine.as_deref().is_some_and(|e| e != name) {
                continue;
            }
            println!("\n## engine {name}");
            let run = |p: &str| cfg.phase.as_deref().is_none_or(|x| x == p);
            if run("read") {
                // In a task, as applications run: completions reach it
                // through the runtime's reactor on a worker thread.
                let c = cfg.clone();
                tokio::spawn(async move { read_phase(&c, engine).await })
                    .await
                    .unwrap();
            }
            if run("upload") {
                upload_phase(&cfg, engine).await;
            }
            if run("commit") {
                commit_phase(&cfg, engine).await;
            }
            if run("depth") {
                depth_phase(&cfg, engine).await;
            }
            if run("warm") {
                let c = cfg.clone();
                tokio::task::spawn_blocking(move || warm_phase(&c, engine))
                    .await
                    .unwrap();
            }
        }
        if cfg.phase.as_deref() == Some("space") {
            space_phase(&cfg).await;
        }
        if cfg.phase.as_deref() == Some("backup") {
            backup_phase(&cfg).await;
        }
        if cfg.phase.as_deref() == Some("growth") {
            growth_phase(&cfg).await;
        }
        if cfg.phase.as_deref().is_none_or(|p| p == "fs") {
            fs_phase(&cfg).await;
        }
    });
}
