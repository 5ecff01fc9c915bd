//! Turns a [`Report`] into a markdown table, ratio tables, CSV and JSON.

use std::fmt::Write as _;

use super::{PhaseResult, Report};

impl Report {
    pub fn find(&self, engine_prefix: &str, size: usize, phase: &str) -> Option<&PhaseResult> {
        self.phases
            .iter()
            .find(|r| r.engine.starts_with(engine_prefix) && r.size == size && r.phase == phase)
    }

    pub fn sizes(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self.phases.iter().map(|r| r.size).collect();
        s.dedup();
        s
    }

    pub fn engines(&self) -> Vec<String> {
        let mut e: Vec<String> = Vec::new();
        for r in &self.phases {
            if !e.contains(&r.engine) {
                e.push(r.engine.clone());
            }
        }
        e
    }

    /// Every phase of every engine and size.
    pub fn phase_table(&self) -> String {
        let mut s = String::from(
            "| engine | object size | phase | ops/s | MB/s | p50 µs | p99 µs | p999 µs |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.phases {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} |",
                r.engine,
                r.size,
                r.phase,
                r.ops_per_sec(),
                r.mb_per_sec(),
                r.pct(0.5),
                r.pct(0.99),
                r.pct(0.999)
            );
        }
        s
    }

    /// Write/space amplification and peak memory per engine and size.
    pub fn run_table(&self) -> String {
        let mut s = String::from(
            "| engine | object size | write amplification | space amplification | peak memory MiB | range reads |\n\
             |---|---|---|---|---|---|\n",
        );
        for r in &self.runs {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:.1} | {} |",
                r.engine,
                r.size,
                r.write_amp,
                r.space_amp,
                r.peak_mem_bytes as f64 / (1 << 20) as f64,
                if r.range_reads {
                    "yes"
                } else {
                    "no (whole value)"
                }
            );
        }
        s
    }

    /// blobcask (io_uring) against every other engine, per object size:
    /// how many times faster blobcask is (> 1: blobcask wins). Latency
    /// ratios are other/blobcask, throughput ratios blobcask/other; against
    /// the raw device the same ratios read as "fraction of the limit".
    pub fn ratio_table(&self) -> String {
        let us = "blobcask (io_uring)";
        let mut s = String::from(
            "| vs engine | object size | read 4K p50 | read 4K p99 | get MB/s | warm get p50 | put MB/s | mixed read p50 | overwrite ops/s | delete ops/s |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for other in self.engines().iter().filter(|e| e.as_str() != us) {
            for size in self.sizes() {
                let lat = |phase: &str, p: f64| match (
                    self.find(us, size, phase),
                    self.find(other, size, phase),
                ) {
                    (Some(a), Some(b)) if a.pct(p) > 0.0 => {
                        format!("{:.2}×", b.pct(p) / a.pct(p))
                    }
                    _ => "–".into(),
                };
                let thr = |phase: &str, bytes: bool| match (
                    self.find(us, size, phase),
                    self.find(other, size, phase),
                ) {
                    (Some(a), Some(b)) => {
                        let (x, y) = if bytes {
                            (a.mb_per_sec(), b.mb_per_sec())
                        } else {
                            (a.ops_per_sec(), b.ops_per_sec())
                        };
                        format!("{:.2}×", x / y)
                    }
                    _ => "–".into(),
                };
                let _ = writeln!(
                    s,
                    "| {other} | {size} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    lat("read 4K", 0.5),
                    lat("read 4K", 0.99),
                    thr("get", true),
                    lat("warm get", 0.5),
                    thr("put", true),
                    lat("mixed read", 0.5),
                    thr("overwrite", false),
                    // The raw device has no metadata: its delete is a no-op.
                    if other.starts_with("raw") {
                        "–".into()
                    } else {
                        thr("delete", false)
                    },
                );
            }
        }
        s
    }

    pub fn csv(&self) -> String {
        let mut s =
            String::from("engine,size,phase,ops,ops_per_sec,mb_per_sec,p50_us,p99_us,p999_us\n");
        for r in &self.phases {
            let _ = writeln!(
                s,
                "\"{}\",{},{},{},{:.1},{:.3},{:.3},{:.3},{:.3}",
                r.engine,
                r.size,
                r.phase,
                r.ops,
                r.ops_per_sec(),
                r.mb_per_sec(),
                r.pct(0.5),
                r.pct(0.99),
                r.pct(0.999)
            );
        }
        s
    }

    pub fn json(&self) -> String {
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|r| {
                format!(
                    "{{\"engine\":\"{}\",\"size\":{},\"phase\":\"{}\",\"ops\":{},\"ops_per_sec\":{:.1},\"mb_per_sec\":{:.3},\"p50_us\":{:.3},\"p99_us\":{:.3},\"p999_us\":{:.3}}}",
                    r.engine, r.size, r.phase, r.ops, r.ops_per_sec(), r.mb_per_sec(),
                    r.pct(0.5), r.pct(0.99), r.pct(0.999)
                )
            })
            .collect();
        let runs: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{{\"engine\":\"{}\",\"size\":{},\"write_amp\":{:.3},\"space_amp\":{:.3},\"peak_mem_bytes\":{},\"range_reads\":{}}}",
                    r.engine, r.size, r.write_amp, r.space_amp, r.peak_mem_bytes, r.range_reads
                )
            })
            .collect();
        format!(
            "{{\"concurrency\":{},\"cache_dropped\":{},\n\"phases\":[\n{}\n],\n\"runs\":[\n{}\n]}}\n",
            self.concurrency,
            self.cache_dropped,
            phases.join(",\n"),
            runs.join(",\n")
        )
    }
}
