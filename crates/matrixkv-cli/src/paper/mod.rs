//! `matrixkv paper FIGURE`: the comparison figures of the MatrixKV paper (USENIX ATC 2020),
//! reproduced with the engine's designs (`matrixkv`, `matrixkv-novelsm`, ...) and RocksDB as
//! the series, each figure from one invocation of this command.
//!
//! The MatrixKV paper's figures take their series from `--engines` (by default MatrixKV, its
//! main baseline NoveLSM, X-Engine's design, RocksDB-SSD and RocksDB-L0-NVM):
//!
//! - `writes` (`writes.rs`): one random-write run (B1: fillrandom, 4 KiB values) gives Fig. 2/12
//!   (throughput over time), Fig. 13 (write amplification), Fig. 14 (L0→L1 compactions) and
//!   Fig. 15 (all compactions);
//! - `values`, `micro` (`micro.rs`): Fig. 10(a), random writes by value size; Fig. 10(b–d),
//!   sequential writes, and random and sequential reads of a randomly loaded, settled tree;
//! - `ycsb`, `latency`, `nvm` (`ycsb.rs`): Fig. 11, YCSB load and A–F; Table 2, YCSB-A at a
//!   fixed request rate (`--rate`) with latency percentiles; Fig. 17 and Table 3, the same
//!   random writes and YCSB-A (at 3× the rate) with the slow tier on the fast tier's device
//!   (the paper's DRAM-NVM hierarchy);
//! - `depth`, `hints` (`ablation.rs`): Fig. 16, L1 of 256 MiB against L1 as large as the
//!   container; the cross-row hint experiment, reads of a dataset held entirely in L0 with
//!   hints on and off and with RocksDB-L0-NVM's layout.
//!
//! The seed papers' figures choose their own series: `xengine` (`xengine.rs`), `novelsm`
//! (`novelsm.rs`), `slmdb` (`slmdb.rs`) and `lightkv` (`lightkv.rs`). `all` runs every figure
//! above in this order.
//!
//! Every figure runs each series in the same value placement (`placement.rs`): separation off
//! for all by default (the papers' setting), on for all that can with `--separation on`; every
//! caption says which, and what each series keeps on the fast tier.
//!
//! Every run goes through `matrixkv bench` (`bench::run_benchmarks`): the same harness, metrics
//! and raw results directories. This module only chooses the arguments and draws the charts
//! (`bench::plot`) and the report with ratios to the first engine. Engines not built into the
//! binary (RocksDB needs the `rocksdb` feature) are left out with a note. What the bench
//! cannot measure (per-compaction durations, PebblesDB and SILK) is said in the report, never
//! filled in.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

mod ablation;
mod lightkv;
mod micro;
mod novelsm;
mod placement;
mod slmdb;
#[cfg(test)]
mod tests;
mod writes;
mod xengine;
mod ycsb;

pub use placement::Separation;

use crate::bench::args::BenchArgs;
use crate::bench::engine::{canonical_engine, engine_built_in};
use crate::bench::metrics::BenchResult;

/// The figures `matrixkv paper` draws.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// Fig. 2/12 throughput over time, Fig. 13 write amplification, Fig. 14/15 compactions.
    Writes,
    /// Fig. 10(a): random-write throughput by value size.
    Values,
    /// Fig. 10(b–d): sequential writes; random and sequential reads after a random load.
    Micro,
    /// Fig. 11: YCSB load and A–F.
    Ycsb,
    /// Table 2: YCSB-A at a fixed request rate (`--rate`), latency percentiles per series.
    Latency,
    /// Fig. 16: L1 of 256 MiB against L1 as large as the container (flattening the tree).
    Depth,
    /// The cross-row hint experiment: reads of a dataset held in L0, hints on and off.
    Hints,
    /// Fig. 17 and Table 3: random writes and YCSB-A with the slow tier on the fast tier.
    Nvm,
    /// X-Engine's memtable, ROR batch curve and restart time.
    Xengine,
    /// NoveLSM's persistent memtable sizes, read parallelism and restart time.
    Novelsm,
    /// SLM-DB against LevelDB (Fig. 6, write amplification) and its live-key ratio.
    Slmdb,
    /// LightKV against LevelDB/RocksDB, NoveLSM, SLM-DB and matrixkv (write amplification,
    /// read tail), its compaction size and partition count.
    Lightkv,
    /// Every figure above, in this order.
    All,
}

/// Arguments of `matrixkv paper`.
#[derive(clap::Args, Debug)]
pub struct PaperArgs {
    /// Which figure.
    #[arg(value_enum)]
    pub figure: Figure,
    /// The series of the MatrixKV paper's figures, comma-separated (bench engine names); the
    /// first is the base of the ratios. NoveLSM is the paper's main baseline.
    #[arg(
        long,
        default_value = "matrixkv,matrixkv-novelsm,matrixkv-xengine,rocksdb-ssd,rocksdb-l0-fast"
    )]
    pub engines: String,
    /// Key-value separation for every series of every figure: `off` (the papers' setting) or
    /// `on` (every series that can separates values of at least `--min_blob_size`).
    #[arg(long, value_enum, default_value_t = Separation::Off)]
    pub separation: Separation,
    /// Table 2's request rate (YCSB-A, requests per second over all threads; the paper's
    /// 20K). Fig. 17's Table 3 runs at three times this rate, as the paper's 60K.
    #[arg(long, default_value_t = 20_000.0)]
    pub rate: f64,
    /// Scale of the runs: 1.0 writes B1's 2M × 4 KiB (8 GiB) in `writes`, 2 GiB per value size
    /// in `values` and loads 1M × 1 KiB records with 300K operations per workload in `ycsb`.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Output directory (charts, report.md, the bench results directories).
    #[arg(long, default_value = "paper-results")]
    pub out: PathBuf,
    /// Base directory of the slow tier (as `bench --db`).
    #[arg(long, default_value = "bench-data")]
    pub db: PathBuf,
    /// Base directory of the fast tier (as `bench --fast_dir`).
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// More `matrixkv bench` flags, passed as they are (e.g. `--bench-flag=--threads=2`); not
    /// the separation flags, which `--separation` sets.
    #[arg(long = "bench-flag", allow_hyphen_values = true)]
    pub bench_flags: Vec<String>,
}

/// The figures `figure` runs, in order.
pub fn figures(figure: Figure) -> Vec<Figure> {
    use clap::ValueEnum as _;
    match figure {
        Figure::All => Figure::value_variants()
            .iter()
            .copied()
            .filter(|f| *f != Figure::All)
            .collect(),
        f => vec![f],
    }
}

/// Whether `figure` takes its series from `--engines`.
fn uses_engines(figure: Figure) -> bool {
    matches!(
        figure,
        Figure::Writes
            | Figure::Values
            | Figure::Micro
            | Figure::Ycsb
            | Figure::Latency
            | Figure::Depth
            | Figure::Nvm
            | Figure::All
    )
}

/// Runs the figure(s) of `a` and writes `<out>/report.md` with the charts beside it.
pub fn run(a: &PaperArgs) -> Result<()> {
    if !(a.scale > 0.0 && a.scale <= 100.0) {
        bail!("--scale must be in (0, 100]");
    }
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        bail!("--rate must be a positive request rate");
    }
    placement::check_bench_flags(&a.bench_flags)?;
    let built = engines(&a.engines)?;
    let (engines, notes) = placement::like_for_like(&built, a.separation)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut report = format!(
        "# MatrixKV paper figures\n\nCommand: `{}`\n\nValue placement: separation {} for every \
         series (`--separation`).\n",
        crate::bench::command_line(),
        a.separation.name()
    );
    if uses_engines(a.figure) {
        report.push_str(&series_header(a, &engines, &notes));
    }
    for fig in figures(a.figure) {
        let section = match fig {
            Figure::Writes => writes::writes(a, &engines)?,
            Figure::Values => micro::values(a, &engines)?,
            Figure::Micro => micro::micro(a, &engines)?,
            Figure::Ycsb => ycsb::ycsb(a, &engines)?,
            Figure::Latency => ycsb::latency(a, &engines)?,
            Figure::Depth => ablation::depth(a, &engines)?,
            Figure::Hints => ablation::hints(a)?,
            Figure::Nvm => ycsb::nvm(a, &engines)?,
            Figure::Xengine => xengine::xengine(a)?,
            Figure::Novelsm => novelsm::novelsm(a)?,
            Figure::Slmdb => slmdb::slmdb(a)?,
            Figure::Lightkv => lightkv::lightkv(a)?,
            Figure::All => String::new(),
        };
        report.push_str(&section);
        // Written after every figure, so a long `all` leaves the finished ones behind.
        std::fs::write(a.out.join("report.md"), &report)?;
    }
    println!("paper report: {}", a.out.join("report.md").display());
    Ok(())
}

/// The report's list of series, those left out and why.
fn series_header(a: &PaperArgs, engines: &[String], notes: &[String]) -> String {
    let mut md = format!(
        "\nSeries: {}. Ratios are each engine's value ÷ {}'s, measured in the same \
         invocation.\n",
        engines.join(", "),
        engines.first().map_or("-", String::as_str)
    );
    let skipped: Vec<String> = split(&a.engines)
        .into_iter()
        .filter(|e| canonical_engine(e).is_ok_and(|c| !engine_built_in(c)))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(
            md,
            "\nLeft out (not built into this binary; build with `--features rocksdb`): {}.",
            skipped.join(", ")
        );
    }
    for n in notes {
        let _ = writeln!(md, "\n{n}.");
    }
    md
}

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The canonical names of the engines built into this binary, in order.
fn engines(list: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for e in split(list) {
        let c = canonical_engine(&e)?;
        if c == "db_bench" {
            bail!("db_bench is not a series of the paper figures");
        }
        if engine_built_in(c) && !out.iter().any(|o| o == c) {
            out.push(c.to_owned());
        } else if !engine_built_in(c) {
            eprintln!("paper: leaving out {c} (not built into this binary)");
        }
    }
    if out.is_empty() {
        bail!("no engine of --engines is built into this binary");
    }
    Ok(out)
}

/// The bench arguments every run starts from: the defaults changed by `--bench-flag`s (for
/// the captions: container size, blob threshold, ...).
fn base_args(a: &PaperArgs) -> Result<BenchArgs> {
    args_with(a, &[])
}

/// The bench arguments of a run with the figure's `flags`, in the order [`bench`] gives them.
fn args_with(a: &PaperArgs, flags: &[String]) -> Result<BenchArgs> {
    let words = std::iter::once("bench".to_owned())
        .chain(flags.iter().cloned())
        .chain(a.bench_flags.iter().cloned());
    BenchArgs::parse_words(words)
}

/// A figure's caption: the value-placement setting and each series' use of the fast tier.
fn caption(a: &PaperArgs, engines: &[String], extra: &str) -> Result<String> {
    caption_for(a, engines, extra, &[])
}

/// [`caption`] for runs with the figure's `flags` (a container size of its own, ...).
fn caption_for(a: &PaperArgs, engines: &[String], extra: &str, flags: &[String]) -> Result<String> {
    Ok(placement::caption(
        engines,
        a.separation,
        &args_with(a, flags)?,
        extra,
    ))
}

/// Runs `matrixkv bench` with `flags` (and the placement and extra flags of `a`) into
/// `<out>/<name>`; returns the results and the bench command it ran.
fn bench(
    a: &PaperArgs,
    engines: &[String],
    name: &str,
    flags: &[String],
) -> Result<(Vec<BenchResult>, String)> {
    bench_at(a, &a.db, engines, name, flags)
}

/// [`bench`] with the slow tier's base directory at `db`.
fn bench_at(
    a: &PaperArgs,
    db: &Path,
    engines: &[String],
    name: &str,
    flags: &[String],
) -> Result<(Vec<BenchResult>, String)> {
    let mut words = vec![
        "bench".to_owned(),
        format!("--engines={}", engines.join(",")),
        format!("--db={}", db.display()),
        format!("--results_dir={}", a.out.join(name).display()),
    ];
    // The same value placement for every series (placement.rs); a figure's flags may pin a
    // baseline's own (a LevelDB stand-in never separates), and say so in its caption.
    words.extend(a.separation.flags());
    if let Some(f) = &a.fast_dir {
        words.push(format!("--fast_dir={}", f.display()));
    }
    words.extend(flags.iter().cloned());
    words.extend(a.bench_flags.iter().cloned());
    let shown = format!("matrixkv {}", words.join(" "));
    println!("paper: {shown}");
    let args = BenchArgs::parse_words(&words)?;
    let (results, _) = crate::bench::run_benchmarks(&args)?;
    Ok((results, shown))
}

fn scaled(n: f64, scale: f64) -> u64 {
    ((n * scale).round() as u64).max(1)
}

/// A byte count scaled by `scale`, page-aligned, at least `min`.
fn scaled_bytes(bytes: u64, scale: f64, min: u64) -> u64 {
    (scaled(bytes as f64, scale).max(min) + 4095) & !4095
}

/// `x ÷ base` as `1.23×`, or `-`.
fn ratio(x: f64, base: f64) -> String {
    if base > 0.0 && x.is_finite() && base.is_finite() {
        format!("{:.2}×", x / base)
    } else {
        "-".to_owned()
    }
}

/// `x` with `digits` decimals, or `-` when not a number.
fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".to_owned()
    }
}

fn find<'a>(rs: &'a [BenchResult], engine: &str, bench: &str) -> Option<&'a BenchResult> {
    rs.iter()
        .find(|r| r.engine == engine && r.benchmark == bench)
}

fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// The commands of a section, one paragraph each.
fn commands(cmds: &[String]) -> String {
    cmds.iter().map(|c| format!("`{c}`\n\n")).collect()
}

/// A report section: the commands, the chart, and a table of every series by group with its
/// ratio to the first series.
fn table_section(
    title: &str,
    caption: &str,
    chart: &str,
    unit: &str,
    cmds: &[String],
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let mut md = format!("\n## {title}\n{caption}\n{}", commands(cmds));
    let _ = write!(md, "![{title}]({chart}.svg)\n\n| {unit} |");
    for (e, _) in series {
        let _ = write!(md, " {e} |");
    }
    for (e, _) in series.iter().skip(1) {
        let _ = write!(md, " {e} ÷ base |");
    }
    md.push_str("\n|---|");
    for _ in 0..(2 * series.len()).saturating_sub(1) {
        md.push_str("---|");
    }
    md.push('\n');
    let base = series.first().map(|(_, v)| v.as_slice()).unwrap_or(&[]);
    for (g, label) in groups.iter().enumerate() {
        let _ = write!(md, "| {label} |");
        for (_, v) in series {
            let _ = write!(md, " {} |", num(v.get(g).copied().unwrap_or(f64::NAN), 1));
        }
        let b = base.get(g).copied().unwrap_or(f64::NAN);
        for (_, v) in series.iter().skip(1) {
            let _ = write!(md, " {} |", ratio(v.get(g).copied().unwrap_or(f64::NAN), b));
        }
        md.push('\n');
    }
    md
}
