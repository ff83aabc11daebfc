//! Charts of a results directory, as SVG and PNG: throughput over time of every engine on one
//! chart, and the latency CDF with a "nines" percentile axis. Text is drawn with the bundled
//! Inconsolata font (SIL OFL 1.0, `assets/Inconsolata-LICENSE.txt`) through plotters' `ab_glyph`
//! feature, so no system font library is needed.
//!
//! Called by `report.rs`. The font is registered once per process (thread-safe `Once`).

use std::path::Path;
use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::metrics::BenchResult;

static FONT: &[u8] = include_bytes!("../../assets/Inconsolata.otf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            if plotters::style::register_font(family, FontStyle::Normal, FONT).is_err() {
                log::warn!("the bundled font could not be loaded; charts will lack text");
            }
        }
    });
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing a chart: {e:?}")
}

const SIZE: (u32, u32) = (1000, 520);

/// Draws `<dir>/<name>.svg` and `.png`: operations per second over time, one line per result.
pub fn throughput_chart(dir: &Path, name: &str, bench: &str, rs: &[&BenchResult]) -> Result<()> {
    register_font();
    let svg = dir.join(format!("{name}.svg"));
    let png = dir.join(format!("{name}.png"));
    draw_throughput(SVGBackend::new(&svg, SIZE).into_drawing_area(), bench, rs)?;
    draw_throughput(
        BitMapBackend::new(&png, SIZE).into_drawing_area(),
        bench,
        rs,
    )
}

/// Draws `<dir>/<name>.svg` and `.png`: latency CDFs, one line per result.
pub fn latency_cdf_chart(dir: &Path, name: &str, bench: &str, rs: &[&BenchResult]) -> Result<()> {
    register_font();
    let svg = dir.join(format!("{name}.svg"));
    let png = dir.join(format!("{name}.png"));
    draw_cdf(SVGBackend::new(&svg, SIZE).into_drawing_area(), bench, rs)?;
    draw_cdf(
        BitMapBackend::new(&png, SIZE).into_drawing_area(),
        bench,
        rs,
    )
}

fn draw_throughput<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    bench: &str,
    rs: &[&BenchResult],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let xmax = rs
        .iter()
        .map(|r| r.per_second.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let ymax = rs
        .iter()
        .flat_map(|r| r.per_second.iter())
        .copied()
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1000.0
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{bench}: throughput per second"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("thousand ops/s")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for (i, r) in rs.iter().enumerate() {
        let c = color(i);
        // Complete windows only: a trailing partial second would look like a collapse.
        let complete = (r.seconds.floor() as usize).clamp(1, r.per_second.len().max(1));
        let pts: Vec<(f64, f64)> = r
            .per_second
            .iter()
            .take(complete)
            .enumerate()
            .map(|(s, &n)| (s as f64 + 1.0, n as f64 / 1000.0))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{} (mean {:.1}K ops/s)",
                r.engine,
                r.ops_per_sec() / 1000.0
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// One bar chart: a group of bars per `groups` entry, one bar per series in each group.
pub struct Bars<'a> {
    /// The chart's title.
    pub title: &'a str,
    /// What the y axis measures.
    pub y_label: &'a str,
    /// The groups along the x axis (value sizes, workloads, ...).
    pub groups: &'a [String],
    /// Each series (an engine) with one value per group (NaN: no bar).
    pub series: &'a [(String, Vec<f64>)],
}

/// Draws `<dir>/<name>.svg` and `.png`: grouped bars (the paper commands' charts).
pub fn bar_chart(dir: &Path, name: &str, bars: &Bars<'_>) -> Result<()> {
    register_font();
    let svg = dir.join(format!("{name}.svg"));
    let png = dir.join(format!("{name}.png"));
    draw_bars(SVGBackend::new(&svg, SIZE).into_drawing_area(), bars)?;
    draw_bars(BitMapBackend::new(&png, SIZE).into_drawing_area(), bars)
}

fn draw_bars<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, bars: &Bars<'_>) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let ymax = bars
        .series
        .iter()
        .flat_map(|(_, v)| v.iter())
        .copied()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.15;
    let groups = bars.groups.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(bars.title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups as f64, 0f64..ymax)
        .map_err(err)?;
    let labels = bars.groups.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups * 2 + 1)
        .x_label_formatter(&|x| {
            // Group i spans [i, i + 1): its label sits at the middle.
            let i = x.floor();
            if (x - i - 0.5).abs() < 1e-6 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(bars.y_label)
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    let n = bars.series.len().max(1) as f64;
    let width = 0.8 / n;
    for (si, (label, values)) in bars.series.iter().enumerate() {
        let c = color(si);
        let rects: Vec<Rectangle<(f64, f64)>> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(g, &v)| {
                let x0 = g as f64 + 0.1 + si as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.95, v)], c.filled())
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// The "nines" of a quantile: 0 for 0%, 1 for 90%, 2 for 99%, 3 for 99.9%, ...
fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-7).log10()
}

/// The quantile at which to draw a CDF point: the maximum (quantile 1) is drawn at the
/// quantile of the last of `count` samples, `1 - 1/count`, not at an infinite number of nines.
fn cdf_quantile(r: &BenchResult, q: f64) -> f64 {
    if q >= 1.0 && r.latency.count > 1 {
        1.0 - 1.0 / r.latency.count as f64
    } else {
        q
    }
}

fn draw_cdf<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    bench: &str,
    rs: &[&BenchResult],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let all = rs.iter().flat_map(|r| r.cdf.iter());
    let xmin = all
        .clone()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let xmax = all.clone().map(|p| p.1).fold(0.0, f64::max);
    let (xmin, xmax) = if xmin.is_finite() && xmax > xmin {
        (xmin * 0.8, xmax * 1.25)
    } else {
        (0.1, 10.0)
    };
    let ymax = rs
        .iter()
        .flat_map(|r| r.cdf.iter().map(|p| nines(cdf_quantile(r, p.0))))
        .fold(1.0, f64::max)
        .ceil()
        .min(7.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{bench}: latency CDF"), ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((xmin..xmax).log_scale(), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .y_desc("percentile")
        .y_labels(ymax as usize + 1)
        .y_label_formatter(&|v| {
            let p = 100.0 * (1.0 - 10f64.powf(-*v));
            let mut s = format!("{p:.5}");
            while s.ends_with('0') {
                s.pop();
            }
            if s.ends_with('.') {
                s.pop();
            }
            format!("{s}%")
        })
        .x_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for (i, r) in rs.iter().enumerate() {
        let c = color(i);
        let pts: Vec<(f64, f64)> = r
            .cdf
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|&(q, v)| (v, nines(cdf_quantile(r, q)).min(ymax)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "{} (p99 {:.0} µs, max {:.0} µs)",
                r.engine, r.latency.p99, r.latency.max
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_axis_maps_percentiles_to_integers() {
        assert!((nines(0.0) - 0.0).abs() < 1e-12);
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert!(nines(1.0) <= 7.0 + 1e-9);
    }

    #[test]
    fn the_bundled_font_renders_text_into_a_png() {
        let tmp = tempfile::tempdir().unwrap();
        let r = BenchResult {
            engine: "matrixkv".into(),
            benchmark: "fillrandom".into(),
            per_second: vec![10, 20, 15],
            cdf: vec![(0.0, 1.0), (0.9, 5.0), (0.99, 50.0), (1.0, 80.0)],
            ops: 45,
            seconds: 3.0,
            ..BenchResult::default()
        };
        throughput_chart(tmp.path(), "t", "fillrandom", &[&r]).unwrap();
        latency_cdf_chart(tmp.path(), "c", "fillrandom", &[&r]).unwrap();
        let svg = std::fs::read_to_string(tmp.path().join("t.svg")).unwrap();
        assert!(svg.contains("matrixkv"));
        let png = std::fs::read(tmp.path().join("c.png")).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }
}
