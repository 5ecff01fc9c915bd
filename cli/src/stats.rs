//! `stats [--json]`: the store's figures as a table, or every figure of
//! the engine's report as one JSON object.

use std::path::PathBuf;

use blobcask::report::Report;

use crate::open::open_read_only;
use crate::text::human;

/// `stats [--json]`.
pub fn stats(store_path: &dyn Fn() -> Result<PathBuf, String>, json: &bool) -> Result<(), String> {
    let path = store_path()?;
    let s = open_read_only(&path, None)?;
    let st = s.stats();
    if *json {
        println!("{}", report_json(&st.record()));
        return s.close().map_err(|e| e.to_string());
    }
    println!("objects              {}", st.objects);
    println!(
        "capacity             {} ({})",
        st.capacity,
        human(st.capacity)
    );
    println!(
        "logical bytes        {} ({})",
        st.logical_bytes,
        human(st.logical_bytes)
    );
    println!(
        "heap bytes           {} ({})",
        st.allocated_bytes,
        human(st.allocated_bytes)
    );
    println!(
        "metadata bytes       {} ({})",
        st.metadata_bytes,
        human(st.metadata_bytes)
    );
    println!(
        "free bytes           {} ({}) of {}",
        st.free_bytes,
        human(st.free_bytes),
        human(st.capacity)
    );
    match st.space_amplification() {
        Some(a) => println!("space amplification  {a:.3}"),
        None => println!("space amplification  - (empty)"),
    }
    println!("largest free piece   {}", human(st.largest_free_piece));
    println!(
        "fragmentation        {:.1}% (free space not in the largest free piece)",
        if st.free_bytes > 0 {
            100.0 * (1.0 - st.largest_free_piece as f64 / st.free_bytes as f64)
        } else {
            0.0
        }
    );
    println!(
        "io engine            {} (direct I/O: {})",
        st.io_engine, st.direct_io
    );
    println!("index                {}", st.index.name());
    let r = &st.recovery;
    if r.is_empty() {
        println!(
            "recovery at open     nothing to do ({})",
            if r.clean {
                "closed cleanly"
            } else {
                "not closed cleanly; newest group intact"
            }
        );
    } else {
        println!(
                    "recovery at open     rolled back {} group(s), {} object version(s); repaired {}; skipped {} damaged tuple block(s)",
                    r.rolled_back_groups,
                    r.rolled_back_objects,
                    r.repaired.len(),
                    r.skipped.len()
                );
        for line in r.skipped.iter().chain(&r.repaired).chain(&r.details) {
            println!("  {line}");
        }
    }
    s.close().map_err(|e| e.to_string())
}

/// A report of the engine (`blobcask::report`) as a JSON object, every
/// figure under its own name: times as Unix seconds, durations as seconds,
/// a key as its bytes in hex, an absent figure as `null`.
fn report_json(r: &blobcask::report::Record) -> serde_json::Value {
    use blobcask::report::Figure;
    use serde_json::Value;
    let figures = r.figures.iter().map(|(name, figure)| {
        let value = match figure {
            Figure::Count(n) => Value::from(*n),
            Figure::Real(x) => Value::from(*x),
            Figure::Flag(b) => Value::from(*b),
            Figure::Text(t) => Value::from(t.as_str()),
            Figure::Key(k) => Value::from(k.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            Figure::Path(p) => Value::from(p.to_string_lossy().into_owned()),
            Figure::Lines(l) => Value::from(l.clone()),
            Figure::Time(t) => Value::from(blobcask::report::unix_seconds(*t)),
            Figure::Span(d) => Value::from(d.as_secs_f64()),
            Figure::Record(inner) => report_json(inner),
            _ => Value::Null,
        };
        ((*name).to_owned(), value)
    });
    Value::Object(figures.collect())
}
