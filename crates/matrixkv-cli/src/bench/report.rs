//! The results directory and the side-by-side report.
//!
//! A results directory holds `command.txt`, `config.txt`, `summary.json` (an array of
//! [`BenchResult::to_json`] objects), per result `series-<engine>-<benchmark>.csv` (one row per
//! second) and `latency-<engine>-<benchmark>.csv` (the CDF), per benchmark
//! `throughput-<benchmark>.{svg,png}` and `latency-cdf-<benchmark>.{svg,png}` with every engine
//! on one chart, and `report.md`: per benchmark, the engines side by side and their ratios to
//! the first engine. `bench report DIR...` rebuilds all of it from several directories.
//!
//! Single-threaded file writing; called by `mod.rs` at the end of a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::metrics::BenchResult;
use super::plot;

/// Writes `--json FILE`: an object for one result, an array for several.
pub fn write_json_summary(path: &Path, results: &[BenchResult]) -> Result<()> {
    let v = match results {
        [one] => one.to_json(),
        many => Value::Array(many.iter().map(BenchResult::to_json).collect()),
    };
    write(path, &serde_json::to_string_pretty(&v)?)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A file-name-safe form of `s`.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The per-second CSV of one result: second, ops, MB/s (from the op mix), and the engine
/// samples taken at that second (cumulative stall seconds, slow-tier MiB, fast-tier MiB, L0
/// tables).
pub fn series_csv(r: &BenchResult) -> String {
    let mut s = String::from(
        "second,ops,mb_per_sec,stall_seconds_cum,slow_tier_mib_cum,fast_tier_mib_cum,l0_files\n",
    );
    let bytes_per_op = if r.ops > 0 {
        r.bytes as f64 / r.ops as f64
    } else {
        0.0
    };
    for (i, ops) in r.per_second.iter().enumerate() {
        // The sample taken at the end of second i (samples[0] is at t = 0).
        let smp = r.samples.get(i + 1).or(r.samples.last());
        let f = |k: usize| smp.map_or(String::new(), |x| format!("{:.3}", x[k]));
        let _ = writeln!(
            s,
            "{},{},{:.3},{},{},{},{}",
            i + 1,
            ops,
            *ops as f64 * bytes_per_op / 1_048_576.0,
            f(1),
            f(2),
            f(3),
            smp.map_or(String::new(), |x| format!("{}", x[4]))
        );
    }
    s
}

/// The latency CDF CSV: percentile, latency in microseconds.
pub fn cdf_csv(r: &BenchResult) -> String {
    let mut s = String::from("percentile,latency_us\n");
    for (q, v) in &r.cdf {
        let _ = writeln!(s, "{:.6},{v:.3}", q * 100.0);
    }
    s
}

/// Writes a results directory for `results`; `run` is (command line, configuration text) when
/// the results come from this process; `plots` false skips the charts.
pub fn write_report_dir(
    dir: &Path,
    results: &[BenchResult],
    run: Option<(&str, &str)>,
    plots: bool,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some((command, config)) = run {
        write(&dir.join("command.txt"), &format!("{command}\n"))?;
        write(&dir.join("config.txt"), config)?;
    }
    let summary = Value::Array(results.iter().map(BenchResult::to_json).collect());
    write(
        &dir.join("summary.json"),
        &serde_json::to_string_pretty(&summary)?,
    )?;
    for r in results {
        let mut tag = format!("{}-{}", slug(&r.engine), slug(&r.benchmark));
        if r.repeat > 0 {
            tag.push_str(&format!("-run{}", r.repeat + 1));
        }
        write(&dir.join(format!("series-{tag}.csv")), &series_csv(r))?;
        write(&dir.join(format!("latency-{tag}.csv")), &cdf_csv(r))?;
        if r.service.is_some() {
            let mut csv = String::from("start_seconds,service_us\n");
            for (t, us) in &r.slow_service {
                let _ = writeln!(csv, "{t:.6},{us:.1}");
            }
            write(&dir.join(format!("slow-{tag}.csv")), &csv)?;
        }
    }
    let mut charts = BTreeMap::new();
    // Charts show the first run of a --repeat: one line per engine.
    let first_run: Vec<BenchResult> = results.iter().filter(|r| r.repeat == 0).cloned().collect();
    for (bench, rs) in by_benchmark(&first_run).into_iter().filter(|_| plots) {
        let b = slug(&bench);
        let mut files = Vec::new();
        if rs.iter().any(|r| !r.per_second.is_empty()) {
            let name = format!("throughput-{b}");
            plot::throughput_chart(dir, &name, &bench, &rs)?;
            files.push(name);
        }
        if rs.iter().any(|r| !r.cdf.is_empty()) {
            let name = format!("latency-cdf-{b}");
            plot::latency_cdf_chart(dir, &name, &bench, &rs)?;
            files.push(name);
        }
        charts.insert(bench, files);
    }
    write(
        &dir.join("report.md"),
        &markdown(results, &charts, run.map(|r| r.0)),
    )
}

/// Groups results by benchmark, keeping the order of first appearance.
fn by_benchmark(results: &[BenchResult]) -> Vec<(String, Vec<&BenchResult>)> {
    let mut out: Vec<(String, Vec<&BenchResult>)> = Vec::new();
    for r in results {
        match out.iter_mut().find(|(b, _)| *b == r.benchmark) {
            Some((_, v)) => v.push(r),
            None => out.push((r.benchmark.clone(), vec![r])),
        }
    }
    out
}

fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn ratio(x: f64, base: f64) -> String {
    if base > 0.0 && x.is_finite() {
        format!("{:.2}×", x / base)
    } else {
        "–".to_owned()
    }
}

/// The markdown report: for each benchmark a table of engines × metrics and, when several
/// engines ran, a table of ratios to the first engine.
pub fn markdown(
    results: &[BenchResult],
    plots: &BTreeMap<String, Vec<String>>,
    command: Option<&str>,
) -> String {
    let mut s = String::from("# Benchmark report\n\n");
    if let Some(c) = command {
        let _ = writeln!(s, "Command:\n\n```sh\n{c}\n```\n");
    }
    let _ = writeln!(
        s,
        "Definitions (docs/benchmarks.md): ops/s = operations ÷ wall-clock seconds; latency from an \
         HDR histogram (µs); stall = time writers waited for background work, from each \
         engine's own statistics; windows < 10% / < 50% = complete one-second windows whose \
         throughput is below that fraction of the run's mean (total operations ÷ total \
         seconds); CV = coefficient of variation of the per-second series; CPU µs/op = user + \
         system CPU time ÷ operations (`getrusage`): of the benchmark process, every thread \
         and the engine's background work included, from the start to the last operation, or \
         of the db_bench process over its whole run; WA all = bytes written to \
         both tiers (tables, blob files, manifest, fast-tier tables, WAL) ÷ user bytes (key + \
         value), the headline; WA slow = slow-tier bytes (tables, blob files, manifest) ÷ user \
         bytes, WAL excluded; kernel WA = \
         `/proc/<pid>/io` write_bytes ÷ user bytes (tmpfs is not counted, so this is the slow \
         tier including a WAL placed there).\n"
    );
    let engines: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for r in results {
            if !v.contains(&r.engine.as_str()) {
                v.push(&r.engine);
            }
        }
        v
    };
    let _ = writeln!(s, "Engines: {}.\n", engines.join(", "));
    for (bench, rs) in by_benchmark(results) {
        let _ = writeln!(s, "## {bench}\n");
        let repeated = rs.iter().any(|r| r.repeat > 0);
        let _ = writeln!(
            s,
            "| engine | ops/s | MB/s | CPU µs/op | p50 µs | p99 µs | p99.9 µs | p99.99 µs | max µs \
             | stall s (%) | windows | < 10% | < 50% | CV | WA all | WA slow | kernel WA | fast \
             tier MiB | WAL MiB | compactions |"
        );
        let _ = writeln!(s, "|{}", "---|".repeat(20));
        for r in &rs {
            let l = &r.latency;
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {:.2} ({:.0}%) | {} | {} | {} \
                 | {:.3} | {} | {} | {} | {:.0} | {:.0} | {} |",
                run_label(r, repeated),
                fmt_num(r.ops_per_sec()),
                r.mb_per_sec(),
                r.cpu_us_per_op().map_or("–".to_owned(), fmt_num),
                fmt_num(l.p50),
                fmt_num(l.p99),
                fmt_num(l.p999),
                fmt_num(l.p9999),
                fmt_num(l.max),
                r.stall_seconds,
                100.0 * r.stall_fraction(),
                r.series.windows,
                r.series.below_10pct,
                r.series.below_50pct,
                r.series.cv,
                r.total_write_amplification()
                    .map_or("–".to_owned(), |w| format!("{w:.2}")),
                r.write_amplification()
                    .map_or("–".to_owned(), |w| format!("{w:.2}")),
                r.proc_write_amplification()
                    .map_or("–".to_owned(), |w| format!("{w:.2}")),
                r.fast_tier_bytes as f64 / 1_048_576.0,
                r.wal_bytes as f64 / 1_048_576.0,
                r.compactions,
            );
        }
        let _ = writeln!(s);
        if rs
            .iter()
            .any(|r| r.live_user_bytes.is_some() || r.slow_dir_bytes.is_some())
        {
            let _ = writeln!(
                s,
                "Space at the end of the benchmark and bytes written per user byte on each tier \
                 (space amp = slow-tier bytes on disk ÷ live user bytes; fast W/B = fast-tier \
                 tables + a WAL there; slow W/B = slow-tier tables, blob files, manifest + a WAL \
                 there):\n\n| engine | live user MiB | slow tier on disk MiB | fast tier on disk \
                 MiB | space amp | fast W/B | slow W/B |\n|---|---|---|---|---|---|---|"
            );
            let mib = |b: Option<u64>| {
                b.map_or("–".to_owned(), |b| {
                    format!("{:.1}", b as f64 / 1_048_576.0)
                })
            };
            for r in &rs {
                let tiers = r.tier_write_amplification();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    run_label(r, repeated),
                    mib(r.live_user_bytes),
                    mib(r.slow_dir_bytes),
                    mib(r.fast_dir_bytes),
                    r.space_amplification()
                        .map_or("–".to_owned(), |x| format!("{x:.3}")),
                    tiers.map_or("–".to_owned(), |w| format!("{:.2}", w.0)),
                    tiers.map_or("–".to_owned(), |w| format!("{:.2}", w.1)),
                );
            }
            let _ = writeln!(s);
        }
        s.push_str(&open_loop_markdown(&rs, repeated));
        if repeated {
            s.push_str(&median_ratio_markdown(&rs));
        } else if let Some((base, others)) = rs.split_first().filter(|(_, o)| !o.is_empty()) {
            let _ = writeln!(
                s,
                "Ratios to {} (engine ÷ {}; above 1× means more throughput, or more CPU per \
                 operation, latency, stall or WA):\n",
                base.engine, base.engine
            );
            let _ = writeln!(
                s,
                "| engine | ops/s | CPU/op | p50 | p99 | p99.9 | p99.99 | max | stall s | WA all \
                 | WA slow |\n|---|---|---|---|---|---|---|---|---|---|---|"
            );
            for r in others {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.engine,
                    ratio(r.ops_per_sec(), base.ops_per_sec()),
                    match (r.cpu_us_per_op(), base.cpu_us_per_op()) {
                        (Some(x), Some(b)) => ratio(x, b),
                        _ => "–".to_owned(),
                    },
                    ratio(r.latency.p50, base.latency.p50),
                    ratio(r.latency.p99, base.latency.p99),
                    ratio(r.latency.p999, base.latency.p999),
                    ratio(r.latency.p9999, base.latency.p9999),
                    ratio(r.latency.max, base.latency.max),
                    ratio(r.stall_seconds, base.stall_seconds),
                    match (
                        r.total_write_amplification(),
                        base.total_write_amplification(),
                    ) {
                        (Some(x), Some(b)) => ratio(x, b),
                        _ => "–".to_owned(),
                    },
                    match (r.write_amplification(), base.write_amplification()) {
                        (Some(x), Some(b)) => ratio(x, b),
                        _ => "–".to_owned(),
                    },
                );
            }
            let _ = writeln!(s);
        }
        if rs.iter().any(|r| r.latency_by_op.len() > 1) {
            let _ = writeln!(
                s,
                "Latency per operation type (µs):\n\n| engine | op | count | p50 | p99 | p99.9 | \
                 max |\n|---|---|---|---|---|---|---|"
            );
            for r in &rs {
                for (op, l) in &r.latency_by_op {
                    let _ = writeln!(
                        s,
                        "| {} | {op} | {} | {} | {} | {} | {} |",
                        r.engine,
                        l.count,
                        fmt_num(l.p50),
                        fmt_num(l.p99),
                        fmt_num(l.p999),
                        fmt_num(l.max)
                    );
                }
            }
            let _ = writeln!(s);
        }
        for r in &rs {
            let layout: Vec<String> = r
                .levels
                .iter()
                .enumerate()
                .filter(|(_, (n, _))| *n > 0)
                .map(|(i, (n, b))| format!("L{i} {n} tables {:.1} MiB", *b as f64 / 1_048_576.0))
                .collect();
            if !layout.is_empty() {
                let _ = writeln!(
                    s,
                    "- {} level layout at the end: {}",
                    r.engine,
                    layout.join(", ")
                );
            }
            for n in &r.notes {
                let _ = writeln!(s, "- {}: {n}", r.engine);
            }
        }
        if let Some(files) = plots.get(&bench) {
            let _ = writeln!(s);
            for f in files {
                let _ = writeln!(s, "![{f}]({f}.svg)\n");
            }
        }
    }
    s
}

/// "engine" or, when the benchmark ran several times, "engine (run k)".
fn run_label(r: &BenchResult, repeated: bool) -> String {
    if repeated {
        format!("{} (run {})", r.engine, r.repeat + 1)
    } else {
        r.engine.clone()
    }
}

/// A metric compared between engines, and how to read it from a result.
type RatioMetric = (&'static str, fn(&BenchResult) -> Option<f64>);

/// The metrics of the ratio tables, in column order.
const RATIO_METRICS: &[RatioMetric] = &[
    ("ops/s", |r| Some(r.ops_per_sec())),
    ("CPU/op", |r| r.cpu_us_per_op()),
    ("p50", |r| Some(r.latency.p50)),
    ("p99", |r| Some(r.latency.p99)),
    ("p99.9", |r| Some(r.latency.p999)),
    ("p99.99", |r| Some(r.latency.p9999)),
    ("max", |r| Some(r.latency.max)),
    ("stall s", |r| Some(r.stall_seconds)),
    ("WA all", |r| r.total_write_amplification()),
    ("WA slow", |r| r.write_amplification()),
];

/// Median, minimum and maximum of `xs` (None when empty); the median of an even count is the
/// mean of the middle two.
pub fn median_range(xs: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = |i: usize| v.get(i).copied().unwrap_or(f64::NAN);
    let median = if n % 2 == 1 {
        mid(n / 2)
    } else {
        (mid(n / 2 - 1) + mid(n / 2)) / 2.0
    };
    Some((median, mid(0), mid(n - 1)))
}

/// For one benchmark's results over several runs: per engine other than the base (the engine of
/// the first result, i.e. the first of --engines), per metric, the ratios engine ÷ base paired
/// run by run. Rows: (engine, runs paired, per metric (median, min, max)).
type MedianRow = (String, usize, Vec<Option<(f64, f64, f64)>>);

fn median_ratios(rs: &[&BenchResult]) -> Option<(String, Vec<MedianRow>)> {
    let base = rs.first()?.engine.clone();
    let mut engines: Vec<&str> = Vec::new();
    for r in rs {
        if r.engine != base && !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    let rows = engines
        .into_iter()
        .map(|e| {
            let pairs: Vec<(&BenchResult, &BenchResult)> = rs
                .iter()
                .filter(|r| r.engine == e)
                .filter_map(|r| {
                    rs.iter()
                        .find(|b| b.engine == base && b.repeat == r.repeat)
                        .map(|b| (*r, *b))
                })
                .collect();
            let cells = RATIO_METRICS
                .iter()
                .map(|(_, get)| {
                    let ratios: Vec<f64> = pairs
                        .iter()
                        .filter_map(|(r, b)| match (get(r), get(b)) {
                            (Some(x), Some(y)) if y > 0.0 => Some(x / y),
                            _ => None,
                        })
                        .collect();
                    median_range(&ratios)
                })
                .collect();
            (e.to_owned(), pairs.len(), cells)
        })
        .collect();
    Some((base, rows))
}

fn fmt_median(c: Option<(f64, f64, f64)>) -> String {
    match c {
        Some((m, lo, hi)) => format!("{m:.2}× ({lo:.2}–{hi:.2})"),
        None => "–".to_owned(),
    }
}

/// The markdown table of median ratios (with their ranges) over the runs of a --repeat.
fn median_ratio_markdown(rs: &[&BenchResult]) -> String {
    let mut s = String::new();
    let Some((base, rows)) = median_ratios(rs) else {
        return s;
    };
    if rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "Ratios to {base} over the runs (engine ÷ {base}, paired run by run; median and, in \
         brackets, the lowest and highest):\n"
    );
    let names: Vec<&str> = RATIO_METRICS.iter().map(|(n, _)| *n).collect();
    let _ = writeln!(s, "| engine | runs | {} |", names.join(" | "));
    let _ = writeln!(s, "|---|---|{}", "---|".repeat(names.len()));
    for (e, n, cells) in rows {
        let cells: Vec<String> = cells.into_iter().map(fmt_median).collect();
        let _ = writeln!(s, "| {e} | {n} | {} |", cells.join(" | "));
    }
    let _ = writeln!(s);
    s
}

/// The end-of-run summary of a --repeat on stdout: per benchmark, the median ratios (and their
/// ranges) of throughput, CPU per operation, p99, p99.9 and WA to the first engine.
pub fn repeat_summary(results: &[BenchResult]) -> String {
    let mut s = String::new();
    for (bench, rs) in by_benchmark(results) {
        let Some((base, rows)) = median_ratios(&rs) else {
            continue;
        };
        for (e, n, cells) in rows {
            let pick = |name: &str| {
                RATIO_METRICS
                    .iter()
                    .position(|(m, _)| *m == name)
                    .and_then(|i| cells.get(i).copied().flatten())
            };
            let _ = writeln!(
                s,
                "{bench}: {e} / {base} over {n} runs, median (range): ops/s {}, CPU/op {}, p99 \
                 {}, p99.9 {}, WA all {}",
                fmt_median(pick("ops/s")),
                fmt_median(pick("CPU/op")),
                fmt_median(pick("p99")),
                fmt_median(pick("p99.9")),
                fmt_median(pick("WA all")),
            );
        }
    }
    s
}

/// Loads the results of several results directories (their `summary.json`). When the same
/// (engine, benchmark) appears in several directories, each engine name is suffixed with its
/// directory's name so the report and the plots tell them apart.
pub fn load_dirs(dirs: &[PathBuf]) -> Result<Vec<BenchResult>> {
    let mut out: Vec<(String, BenchResult)> = Vec::new();
    for d in dirs {
        let tag = d.file_name().map_or_else(
            || d.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let p = d.join("summary.json");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        match v {
            Value::Array(items) => out.extend(
                items
                    .iter()
                    .map(|i| (tag.clone(), BenchResult::from_json(i))),
            ),
            one => out.push((tag.clone(), BenchResult::from_json(&one))),
        }
    }
    let dup = |r: &BenchResult| {
        out.iter()
            .filter(|(_, o)| o.engine == r.engine && o.benchmark == r.benchmark)
            .count()
            > 1
    };
    let dups: Vec<bool> = out.iter().map(|(_, r)| dup(r)).collect();
    Ok(out
        .into_iter()
        .zip(dups)
        .map(|((tag, mut r), d)| {
            if d {
                r.engine = format!("{} [{tag}]", r.engine);
            }
            r
        })
        .collect())
}

/// Open-loop runs only: each call's service time (from its actual start, after the pacer
/// released it) beside its latency from the intended start. A tail in the latency that the
/// service time does not have is time the caller spent before its call began: behind earlier
/// slow calls, or waiting for a CPU.
fn open_loop_markdown(rs: &[&BenchResult], repeated: bool) -> String {
    let mut s = String::new();
    if rs.iter().all(|r| r.service.is_none()) {
        return s;
    }
    s.push_str(
        "Open loop: latency from each call's intended start against its service time (from its \
         actual start to its end); calls served in ≥ 1 ms are listed in \
         `slow-<engine>-<benchmark>.csv`:\n\n| engine | target ops/s | latency p99 µs | latency \
         p99.9 µs | latency max µs | service p50 µs | service p99 µs | service p99.9 µs | \
         service max µs | calls served ≥ 1 ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rs {
        let Some(sv) = &r.service else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run_label(r, repeated),
            r.target_rate.map_or("–".to_owned(), fmt_num),
            fmt_num(r.latency.p99),
            fmt_num(r.latency.p999),
            fmt_num(r.latency.max),
            fmt_num(sv.p50),
            fmt_num(sv.p99),
            fmt_num(sv.p999),
            fmt_num(sv.max),
            r.slow_service.len(),
        );
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::metrics::{CpuTime, Latency, series_stats};

    fn result(engine: &str, ops_per_sec: u64) -> BenchResult {
        let per_second = vec![ops_per_sec; 5];
        BenchResult {
            engine: engine.into(),
            benchmark: "fillrandom".into(),
            threads: 1,
            ops: ops_per_sec * 5,
            bytes: ops_per_sec * 5 * 1040,
            seconds: 5.0,
            thread_seconds: 5.0,
            latency: Latency {
                count: ops_per_sec * 5,
                p50: 10.0,
                p99: 100.0,
                max: 1000.0,
                ..Latency::default()
            },
            cdf: vec![(0.0, 1.0), (0.5, 10.0), (0.99, 100.0), (1.0, 1000.0)],
            series: series_stats(&per_second, ops_per_sec * 5, 5.0),
            per_second,
            samples: vec![[0.0; 5], [1.0, 0.1, 2.0, 3.0, 1.0]],
            user_bytes: 1000,
            slow_tier_bytes: 3000,
            levels: vec![(2, 1 << 20)],
            ..BenchResult::default()
        }
    }

    #[test]
    fn markdown_puts_engines_side_by_side_with_ratios() {
        let rs = vec![result("matrixkv", 1000), result("rocksdb-ssd", 500)];
        let md = markdown(&rs, &BTreeMap::new(), Some("matrixkv bench"));
        assert!(md.contains("## fillrandom"));
        assert!(md.contains("| matrixkv | 1000 |"));
        assert!(md.contains("| rocksdb-ssd | 500 |"));
        assert!(md.contains("Ratios to matrixkv"));
        assert!(md.contains("| rocksdb-ssd | 0.50× |"), "{md}");
        assert!(md.contains("L0 2 tables 1.0 MiB"));
    }

    #[test]
    fn median_range_takes_the_middle_and_the_extremes() {
        assert_eq!(median_range(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(median_range(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(median_range(&[f64::NAN]), None);
        assert_eq!(median_range(&[]), None);
    }

    #[test]
    fn repeated_runs_report_median_ratios_paired_run_by_run() {
        // Three runs, engines rotated as --repeat runs them; the ratio of each run is
        // rocksdb ÷ matrixkv of that run: 0.5, 0.25, 1.0 -> median 0.5, range 0.25-1.0.
        let mut rs = Vec::new();
        for (run, (m, r)) in [(1000, 500), (2000, 500), (400, 400)]
            .into_iter()
            .enumerate()
        {
            let mut a = result("matrixkv", m);
            let mut b = result("rocksdb-ssd", r);
            a.repeat = run as u32;
            b.repeat = run as u32;
            if run == 1 {
                rs.extend([b, a]);
            } else {
                rs.extend([a, b]);
            }
        }
        let md = markdown(&rs, &BTreeMap::new(), None);
        assert!(md.contains("| matrixkv (run 2) | 2000 |"), "{md}");
        assert!(md.contains("Ratios to matrixkv over the runs"), "{md}");
        assert!(
            md.contains("| rocksdb-ssd | 3 | 0.50× (0.25–1.00) |"),
            "{md}"
        );
        let text = repeat_summary(&rs);
        assert!(
            text.contains("fillrandom: rocksdb-ssd / matrixkv over 3 runs, median (range): ops/s 0.50× (0.25–1.00)"),
            "{text}"
        );
    }

    #[test]
    fn open_loop_runs_show_service_time_beside_latency_from_the_intended_start() {
        let closed = result("matrixkv", 1000);
        let md = markdown(std::slice::from_ref(&closed), &BTreeMap::new(), None);
        assert!(!md.contains("Open loop:"), "{md}");

        let mut open = closed;
        open.target_rate = Some(30000.0);
        open.latency.p999 = 2500.0;
        open.service = Some(Latency {
            p50: 2.0,
            p99: 6.0,
            p999: 30.0,
            max: 1500.0,
            ..Latency::default()
        });
        open.slow_service = vec![(1.5, 1200.0), (3.0, 1500.0)];
        let md = markdown(&[open], &BTreeMap::new(), None);
        assert!(md.contains("Open loop:"), "{md}");
        // Target rate, latency p99 / p99.9 / max, service p50 / p99 / p99.9 / max, slow calls.
        assert!(
            md.contains("| matrixkv | 30000 | 100 | 2500 | 1000 | 2.00 | 6.00 | 30.0 | 1500 | 2 |"),
            "{md}"
        );
    }

    #[test]
    fn markdown_shows_cpu_per_operation_and_its_ratio() {
        let mut mkv = result("matrixkv", 1000);
        // 5000 operations on 0.1 s of CPU: 20 µs each, 15 user and 5 system.
        mkv.cpu = Some(CpuTime {
            user_us: 75_000,
            sys_us: 25_000,
        });
        let mut rocks = result("rocksdb-ssd", 1000);
        rocks.cpu = Some(CpuTime {
            user_us: 150_000,
            sys_us: 50_000,
        });
        let unmeasured = result("db_bench", 1000);
        let md = markdown(&[mkv, rocks, unmeasured], &BTreeMap::new(), None);
        assert!(
            md.contains("| engine | ops/s | MB/s | CPU µs/op | p50 µs |"),
            "{md}"
        );
        assert!(
            md.contains("| matrixkv | 1000 | 1.0 | 20.0 | 10.0 |"),
            "{md}"
        );
        assert!(md.contains("| db_bench | 1000 | 1.0 | – | 10.0 |"), "{md}");
        assert!(md.contains("| engine | ops/s | CPU/op | p50 |"), "{md}");
        assert!(md.contains("| rocksdb-ssd | 1.00× | 2.00× |"), "{md}");
        assert!(md.contains("| db_bench | 1.00× | – |"), "{md}");
        // Every row has as many cells as the header.
        let cells = |l: &str| l.matches('|').count();
        let table: Vec<&str> = md
            .lines()
            .skip_while(|l| !l.starts_with("| engine | ops/s | MB/s"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(table.len(), 5);
        assert!(table.iter().all(|l| cells(l) == 21), "{table:#?}");
        assert!(md.contains("| WA all | WA slow |"), "{md}");
        let ratios: Vec<&str> = md
            .lines()
            .skip_while(|l| !l.starts_with("| engine | ops/s | CPU/op"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert!(ratios.iter().all(|l| cells(l) == 12), "{ratios:#?}");
    }

    #[test]
    fn csv_series_have_one_row_per_second() {
        let r = result("matrixkv", 100);
        let csv = series_csv(&r);
        assert_eq!(csv.lines().count(), 1 + 5);
        assert!(csv.lines().nth(1).unwrap().starts_with("1,100,"));
        let cdf = cdf_csv(&r);
        assert!(cdf.contains("100.000000,1000.000"));
    }

    #[test]
    fn results_directories_merge_into_one_report() {
        let tmp = tempfile::tempdir().unwrap();
        let (d1, d2, out) = (
            tmp.path().join("a"),
            tmp.path().join("b"),
            tmp.path().join("merged"),
        );
        write_report_dir(
            &d1,
            &[result("matrixkv", 1000)],
            Some(("cmd", "cfg")),
            false,
        )
        .unwrap();
        write_report_dir(&d2, &[result("rocksdb-ssd", 400)], None, false).unwrap();
        let all = load_dirs(&[d1.clone(), d2]).unwrap();
        assert_eq!(all.len(), 2);
        write_report_dir(&out, &all, None, true).unwrap();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("| rocksdb-ssd | 0.40× |"), "{md}");
        for f in [
            "summary.json",
            "series-matrixkv-fillrandom.csv",
            "latency-rocksdb-ssd-fillrandom.csv",
            "throughput-fillrandom.svg",
            "throughput-fillrandom.png",
            "latency-cdf-fillrandom.svg",
            "latency-cdf-fillrandom.png",
        ] {
            assert!(out.join(f).is_file(), "{f} missing");
        }
        assert_eq!(
            std::fs::read_to_string(d1.join("command.txt")).unwrap(),
            "cmd\n"
        );
        // The same engine and benchmark in two directories are told apart by directory.
        let again = load_dirs(&[d1.clone(), d1.clone()]).unwrap();
        assert_eq!(again[0].engine, "matrixkv [a]");
        let one = tmp.path().join("one.json");
        write_json_summary(&one, &all[..1]).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
        assert_eq!(v["engine"], "matrixkv");
    }
}
