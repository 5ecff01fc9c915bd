//! `bench`: a quick run of the comparative benchmark next to the store.

use std::path::Path;

use blobcask_bench::parse_size;

/// The comparison of `blobcask-bench` (raw device, blobcask on io_uring,
/// file per object) at a few sizes, in a scratch directory that is removed
/// afterwards. Engine failures (e.g. a full disk) become one error line.
pub fn bench(
    next_to: Option<&Path>,
    sizes: &str,
    budget: &str,
    concurrency: usize,
) -> Result<(), String> {
    use blobcask_bench::compare;

    let parent = next_to
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let mut cfg =
        compare::Config::new(parent.join(format!("blobcask-cli-bench-{}", std::process::id())));
    cfg.engines = ["raw", "blobcask-uring", "files"]
        .map(String::from)
        .to_vec();
    cfg.sizes = sizes
        .split(',')
        .map(|s| parse_size(s).map(|v| v as usize))
        .collect::<Result<_, _>>()?;
    cfg.budget = parse_size(budget)? as usize;
    if cfg.sizes.contains(&0) || cfg.budget == 0 || concurrency == 0 {
        return Err("sizes, budget and concurrency must be positive".into());
    }
    cfg.concurrency = concurrency;
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(|| compare::run(&cfg, |line| eprintln!("{line}")));
    let _ = std::panic::take_hook();
    let _ = std::fs::remove_dir_all(&cfg.dir);
    let report = outcome.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown failure".into());
        format!("benchmark failed: {}", msg.lines().next().unwrap_or(""))
    })?;
    println!("{}", report.phase_table());
    println!("{}", report.run_table());
    println!("blobcask (io_uring) is N× faster than each engine (> 1: blobcask wins):\n");
    println!("{}", report.ratio_table());
    if !report.cache_dropped {
        println!("(page cache not dropped before reads: not running as root)");
    }
    println!("full comparison: cargo run --release -p blobcask-bench --features sqlite,fjall --bin compare");
    Ok(())
}
