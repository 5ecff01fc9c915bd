//! PNG charts of a [`Report`]: one figure per measure, object size on the
//! x axis, one line per engine, both axes logarithmic.

use std::path::{Path, PathBuf};

use super::Report;

/// The charts `draw` writes: file name, phase, measure, axis label.
pub const CHARTS: &[(&str, &str, Measure, &str)] = &[
    (
        "read4k-p50.png",
        "read 4K",
        Measure::P50,
        "random 4 KiB read, p50 µs",
    ),
    (
        "read4k-p99.png",
        "read 4K",
        Measure::P99,
        "random 4 KiB read, p99 µs",
    ),
    (
        "get-throughput.png",
        "get",
        Measure::MbPerSec,
        "whole-object get, MB/s",
    ),
    (
        "put-throughput.png",
        "put",
        Measure::MbPerSec,
        "durable put, MB/s",
    ),
    (
        "warm-get-p50.png",
        "warm get",
        Measure::P50,
        "warm whole-object get (Zipf, hot set ≤ 48 MiB), p50 µs",
    ),
    ("put-p50.png", "put", Measure::P50, "durable put, p50 µs"),
    (
        "mixed-read-p50.png",
        "mixed read",
        Measure::P50,
        "4 KiB read beside a writer, p50 µs",
    ),
];

#[derive(Clone, Copy, Debug)]
pub enum Measure {
    P50,
    P99,
    MbPerSec,
}

/// Fonts tried for labels (plotters draws text with ab_glyph, which needs
/// the font's bytes).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

#[cfg(feature = "charts")]
fn register_font() -> Result<(), String> {
    use std::sync::OnceLock;
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = FONTS
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| format!("no font found (tried {})", FONTS.join(", ")))?;
        plotters::style::register_font(
            "sans-serif",
            plotters::style::FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        )
        .map_err(|_| "font could not be parsed".to_string())
    })
    .clone()
}

/// Draws every chart of [`CHARTS`] into `dir`; returns the files written.
#[cfg(feature = "charts")]
pub fn draw(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, String> {
    register_font()?;
    let mut out = Vec::new();
    for &(file, phase, measure, label) in CHARTS {
        let path = dir.join(file);
        draw_one(report, &path, phase, measure, label).map_err(|e| format!("{file}: {e}"))?;
        out.push(path);
    }
    Ok(out)
}

#[cfg(not(feature = "charts"))]
pub fn draw(_report: &Report, _dir: &Path) -> Result<Vec<PathBuf>, String> {
    let _ = FONTS;
    Err("built without the `charts` feature".into())
}

#[cfg(feature = "charts")]
fn draw_one(
    report: &Report,
    path: &Path,
    phase: &str,
    measure: Measure,
    label: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let value = |r: &super::PhaseResult| match measure {
        Measure::P50 => r.pct(0.5),
        Measure::P99 => r.pct(0.99),
        Measure::MbPerSec => r.mb_per_sec(),
    };
    let series: Vec<(String, Vec<(f64, f64)>)> = report
        .engines()
        .into_iter()
        .map(|e| {
            let pts = report
                .phases
                .iter()
                .filter(|r| r.engine == e && r.phase == phase)
                .map(|r| (r.size as f64, value(r).max(1e-3)))
                .collect();
            (e, pts)
        })
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let (x0, x1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if x0 > x1 {
        return Err(format!("no results for phase {phase}").into());
    }

    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(label, ("sans-serif", 24))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (x0 * 0.8..x1 * 1.25).log_scale(),
            (y0 * 0.7..y1 * 1.6).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("object size (bytes)")
        .y_desc(label)
        .x_label_formatter(&|x| human_size(*x))
        .y_label_formatter(&|y| {
            if *y >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .draw()?;
    for (i, (engine, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(engine.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(feature = "charts")]
fn human_size(x: f64) -> String {
    if x >= (1 << 20) as f64 {
        format!("{:.0} MiB", x / (1 << 20) as f64)
    } else if x >= 1024.0 {
        format!("{:.0} KiB", x / 1024.0)
    } else {
        format!("{x:.0} B")
    }
}
