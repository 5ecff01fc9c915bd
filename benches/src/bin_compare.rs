//! Comparative benchmark program (see `blobcask_bench::compare`).
//!
//! ```text
//! cargo run --release -p blobcask-bench --features sqlite,fjall,lmdb,redb --bin compare -- \
//!     [--dir DIR] [--engines raw,blobcask-uring,...] [--concurrency 16] \
//!     [--sizes 1K,16K,64K,256K,1M,4M,32M] [--budget 128M]
//! # RocksDB too (its C++ build takes ~50 minutes; needs libclang-dev clang):
//! cargo run --release -p blobcask-bench --features sqlite,fjall,rocksdb --bin compare
//! ```
//!
//! Prints the tables (markdown) and writes compare.csv, compare.json and
//! PNG charts into DIR (default target/bench/compare).

use std::path::PathBuf;

use blobcask_bench::compare::{self, chart, engines, Config};

const USAGE: &str = "usage: compare [--dir DIR] [--engines E1,E2,..] [--concurrency N] \
                     [--sizes 1K,16K,..] [--budget 128M]";

fn parse_size(s: &str) -> Result<usize, String> {
    blobcask_bench::parse_size(s).map(|n| n as usize)
}

fn parse_args() -> Result<Config, String> {
    let mut cfg = Config::new("target/bench/compare");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--help" || a == "-h" {
            println!("{USAGE}\nengines: {}", engines::ALL.join(", "));
            println!(
                "built in: {}",
                engines::ALL
                    .iter()
                    .filter(|e| engines::available(e))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            std::process::exit(0);
        }
        let v = args.next().ok_or(format!("{a} needs a value\n{USAGE}"))?;
        match a.as_str() {
            "--dir" => cfg.dir = PathBuf::from(v),
            "--concurrency" => {
                cfg.concurrency = v.parse().map_err(|_| format!("bad concurrency {v:?}"))?
            }
            "--sizes" => cfg.sizes = v.split(',').map(parse_size).collect::<Result<_, _>>()?,
            "--budget" => cfg.budget = parse_size(&v)?,
            "--engines" => {
                cfg.engines = v.split(',').map(str::to_string).collect();
                if let Some(e) = cfg.engines.iter().find(|e| !engines::available(e)) {
                    return Err(format!(
                        "engine {e:?} is unknown or not built in (features sqlite, fjall, rocksdb, lmdb, redb)"
                    ));
                }
            }
            _ => return Err(USAGE.into()),
        }
    }
    Ok(cfg)
}

fn main() {
    let cfg = parse_args().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let _ = std::fs::remove_dir_all(&cfg.dir);
    let report = compare::run(&cfg, |line| eprintln!("{line}"));
    println!("{}", report.phase_table());
    println!("{}", report.run_table());
    println!("{}", report.ratio_table());
    if !report.cache_dropped {
        println!("(page cache could NOT be dropped before read phases: not root)");
    }
    std::fs::write(cfg.dir.join("compare.csv"), report.csv()).unwrap();
    std::fs::write(cfg.dir.join("compare.json"), report.json()).unwrap();
    match chart::draw(&report, &cfg.dir) {
        Ok(files) => eprintln!("charts: {}", files.len()),
        Err(e) => eprintln!("no charts: {e}"),
    }
    eprintln!(
        "wrote {}/compare.{{csv,json}} and charts",
        cfg.dir.display()
    );
}
