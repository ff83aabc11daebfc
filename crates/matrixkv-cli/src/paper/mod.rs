//! `matrixkv paper FIGURE`: the comparison figures of the MatrixKV paper (USENIX ATC 2020),
//! reproduced with the engine's designs (`matrixkv`, `matrixkv-xengine`, ...) and RocksDB as the
//! series, each figure from one invocation of this command.
//!
//! - `writes`: one random-write run (B1: fillrandom, 4 KiB values) gives Fig. 2/12 (throughput
//!   over time), Table 2 (mean, p90, p99, p99.9 latency) and Fig. 13 (write amplification);
//! - `values`: Fig. 10(a), random-write throughput as a function of the value size (the same
//!   number of bytes written at each size);
//! - `ycsb`: Fig. 11, YCSB load and workloads A–F;
//! - `xengine`: the X-Engine paper's own figures for its design (`matrixkv-xengine`): the
//!   semi-persistent memtable against the DRAM memtable with flushes held off (Fig. 16), the ROR
//!   batch-size curve (Fig. 17a) and restart time, serial against parallel (Fig. 20);
//! - `novelsm`: the NoveLSM paper's headline comparisons for its design (`matrixkv-novelsm`):
//!   random writes with persistent memtables of growing size against the DRAM memtable alone
//!   (its "mutable NVM memtable" figure), reads with and without read parallelism, and restart
//!   time with the memtable's data in a WAL (replayed) or in a persistent memtable (remapped);
//! - `slmdb`: the SLM-DB paper's comparisons for its design (`matrixkv-slmdb`) against LevelDB
//!   (`slmdb.rs`): Fig. 6 and its write amplification, and the live-key ratio's effect;
//! - `lightkv`: the LightKV paper's comparisons for its design (`matrixkv-lightkv`) against
//!   LevelDB/RocksDB, NoveLSM, SLM-DB and matrixkv (`lightkv.rs`): write amplification, basic
//!   operations, the read tail under YCSB A, and its compaction-size and partition sweeps;
//! - `all`: the three MatrixKV figures.
//!
//! Every run goes through `matrixkv bench` (`bench::run_benchmarks`): the same harness, metrics
//! and raw results directories. This module only chooses the arguments and draws the charts
//! (`bench::plot`) and the report with ratios to the first engine. Engines not built into the
//! binary (RocksDB needs the `rocksdb` feature) are left out with a note.

use std::fmt::Write as _;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

mod lightkv;
mod slmdb;

use crate::bench::args::BenchArgs;
use crate::bench::engine::{canonical_engine, engine_built_in};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// The figures `matrixkv paper` draws.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// Fig. 2/12 throughput over time, Table 2 latencies, Fig. 13 write amplification.
    Writes,
    /// Fig. 10(a): random-write throughput by value size.
    Values,
    /// Fig. 11: YCSB load and A–F.
    Ycsb,
    /// X-Engine's memtable, ROR batch curve and restart time.
    Xengine,
    /// NoveLSM's persistent memtable sizes, read parallelism and restart time.
    Novelsm,
    /// SLM-DB against LevelDB (Fig. 6, write amplification) and its live-key ratio.
    Slmdb,
    /// LightKV against LevelDB/RocksDB, NoveLSM, SLM-DB and matrixkv (write amplification,
    /// read tail), its compaction size and partition count.
    Lightkv,
    /// The MatrixKV paper's three: `writes`, `values` and `ycsb`, in that order (the seed
    /// papers' figures run on their own).
    All,
}

/// Arguments of `matrixkv paper`.
#[derive(clap::Args, Debug)]
pub struct PaperArgs {
    /// Which figure.
    #[arg(value_enum)]
    pub figure: Figure,
    /// The series, comma-separated (bench engine names); the first is the base of the ratios.
    #[arg(
        long,
        default_value = "matrixkv,matrixkv-xengine,rocksdb-ssd,rocksdb-l0-fast"
    )]
    pub engines: String,
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
    /// More `matrixkv bench` flags, passed as they are (e.g. `--bench-flag=--threads=2`).
    #[arg(long = "bench-flag", allow_hyphen_values = true)]
    pub bench_flags: Vec<String>,
}

/// Value sizes of Fig. 10(a).
const VALUE_SIZES: [u64; 4] = [256, 1024, 4096, 16384];

/// The YCSB benchmarks of Fig. 11, in the paper's order.
const YCSB: [&str; 7] = [
    "ycsb_load",
    "ycsba",
    "ycsbb",
    "ycsbc",
    "ycsbd",
    "ycsbe",
    "ycsbf",
];

/// Runs the figure(s) of `a` and writes `<out>/report.md` with the charts beside it.
pub fn run(a: &PaperArgs) -> Result<()> {
    if !(a.scale > 0.0 && a.scale <= 100.0) {
        bail!("--scale must be in (0, 100]");
    }
    let engines = engines(&a.engines)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut report = format!(
        "# MatrixKV paper figures\n\nCommand: `{}`\n",
        crate::bench::command_line()
    );
    // Only the MatrixKV figures take their series from `--engines`; the seed papers' figures
    // choose their own engines and name them in their sections.
    let uses_engines = matches!(
        a.figure,
        Figure::Writes | Figure::Values | Figure::Ycsb | Figure::All
    );
    if uses_engines {
        let _ = writeln!(
            report,
            "\nSeries: {}. Ratios are each engine's value ÷ {}'s, measured in the same \
             invocation.",
            engines.join(", "),
            engines.first().map_or("-", String::as_str)
        );
    }
    let skipped: Vec<String> = split(&a.engines)
        .into_iter()
        .filter(|e| !engines.contains(e))
        .collect();
    if uses_engines && !skipped.is_empty() {
        let _ = writeln!(
            report,
            "\nLeft out (not built into this binary; build with `--features rocksdb`): {}.",
            skipped.join(", ")
        );
    }
    let figs: &[Figure] = match a.figure {
        Figure::All => &[Figure::Writes, Figure::Values, Figure::Ycsb],
        Figure::Writes => &[Figure::Writes],
        Figure::Values => &[Figure::Values],
        Figure::Ycsb => &[Figure::Ycsb],
        Figure::Xengine => &[Figure::Xengine],
        Figure::Novelsm => &[Figure::Novelsm],
        Figure::Slmdb => &[Figure::Slmdb],
        Figure::Lightkv => &[Figure::Lightkv],
    };
    for fig in figs {
        let section = match fig {
            Figure::Writes => writes(a, &engines)?,
            Figure::Values => values(a, &engines)?,
            Figure::Ycsb => ycsb(a, &engines)?,
            Figure::Xengine => xengine(a)?,
            Figure::Novelsm => novelsm(a)?,
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

/// Runs `matrixkv bench` with `flags` (and the placement and extra flags of `a`) into
/// `<out>/<name>`; returns the results and the bench command it ran.
fn bench(
    a: &PaperArgs,
    engines: &[String],
    name: &str,
    flags: &[String],
) -> Result<(Vec<BenchResult>, String)> {
    let mut words = vec![
        "bench".to_owned(),
        format!("--engines={}", engines.join(",")),
        format!("--db={}", a.db.display()),
        format!("--results_dir={}", a.out.join(name).display()),
        // The paper's MatrixKV keeps values in the container's RowTables (decision 0022);
        // `--bench-flag=--separate_at_flush=true` runs the engine's default instead.
        "--separate_at_flush=false".to_owned(),
    ];
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

/// `x ÷ base` as `1.23×`, or `-`.
fn ratio(x: f64, base: f64) -> String {
    if base > 0.0 && x.is_finite() && base.is_finite() {
        format!("{:.2}×", x / base)
    } else {
        "-".to_owned()
    }
}

fn find<'a>(rs: &'a [BenchResult], engine: &str, bench: &str) -> Option<&'a BenchResult> {
    rs.iter()
        .find(|r| r.engine == engine && r.benchmark == bench)
}

/// Fig. 2/12, Table 2 and Fig. 13 from one random-write run.
fn writes(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let num = scaled(2_000_000.0, a.scale);
    let (rs, cmd) = bench(
        a,
        engines,
        "writes",
        &[
            "--benchmarks=fillrandom".to_owned(),
            format!("--num={num}"),
            "--value_size=4096".to_owned(),
        ],
    )?;
    let runs: Vec<&BenchResult> = engines
        .iter()
        .filter_map(|e| find(&rs, e, "fillrandom"))
        .collect();
    plot::throughput_chart(&a.out, "fig12-throughput", "fillrandom", &runs)?;
    let base = runs.first().copied();
    let mut md = format!(
        "\n## Fig. 2/12, Table 2, Fig. 13: random writes ({num} × 4 KiB)\n\n`{cmd}`\n\n\
         ![throughput over time](fig12-throughput.svg)\n\n\
         | engine | ops/s | ÷ base | windows < 50% of mean | CPU µs/op |\n|---|---|---|---|---|\n"
    );
    for r in &runs {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {} | {} | {} |",
            r.engine,
            r.ops_per_sec(),
            ratio(r.ops_per_sec(), base.map_or(0.0, |b| b.ops_per_sec())),
            r.series.below_50pct,
            r.cpu_us_per_op()
                .map_or("-".to_owned(), |c| format!("{c:.1}"))
        );
    }
    md.push_str(
        "\n### Table 2: latency (µs)\n\n| engine | mean | p90 | p99 | p99.9 | p99.9 ÷ base |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in &runs {
        let l = &r.latency;
        let _ = writeln!(
            md,
            "| {} | {:.1} | {} | {:.1} | {:.1} | {} |",
            r.engine,
            l.mean,
            l.p90.map_or("-".to_owned(), |p| format!("{p:.1}")),
            l.p99,
            l.p999,
            ratio(l.p999, base.map_or(0.0, |b| b.latency.p999))
        );
    }
    let wa_all: Vec<f64> = runs
        .iter()
        .map(|r| r.total_write_amplification().unwrap_or(f64::NAN))
        .collect();
    let wa_slow: Vec<f64> = runs
        .iter()
        .map(|r| r.write_amplification().unwrap_or(f64::NAN))
        .collect();
    let groups: Vec<String> = runs.iter().map(|r| r.engine.clone()).collect();
    plot::bar_chart(
        &a.out,
        "fig13-wa",
        &Bars {
            title: "Fig. 13: write amplification (bytes written ÷ user bytes)",
            y_label: "write amplification",
            groups: &groups,
            series: &[
                ("all tiers, WAL included".to_owned(), wa_all.clone()),
                ("slow tier".to_owned(), wa_slow.clone()),
            ],
        },
    )?;
    md.push_str(
        "\n### Fig. 13: write amplification\n\n![write amplification](fig13-wa.svg)\n\n\
         | engine | all tiers | ÷ base | slow tier | ÷ base |\n|---|---|---|---|---|\n",
    );
    for (i, r) in runs.iter().enumerate() {
        let (all, slow) = (wa_all[i], wa_slow[i]);
        let _ = writeln!(
            md,
            "| {} | {all:.2} | {} | {slow:.2} | {} |",
            r.engine,
            ratio(all, wa_all[0]),
            ratio(slow, wa_slow[0])
        );
    }
    Ok(md)
}

/// Fig. 10(a): random writes at each value size, the same bytes each time.
fn values(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let bytes = 2.0 * (1u64 << 30) as f64 * a.scale;
    let mut series: Vec<(String, Vec<f64>)> =
        engines.iter().map(|e| (e.clone(), Vec::new())).collect();
    let mut cmds = Vec::new();
    for size in VALUE_SIZES {
        let num = scaled(bytes / size as f64, 1.0);
        let (rs, cmd) = bench(
            a,
            engines,
            &format!("values-{size}"),
            &[
                "--benchmarks=fillrandom".to_owned(),
                format!("--num={num}"),
                format!("--value_size={size}"),
            ],
        )?;
        cmds.push(cmd);
        for (e, v) in &mut series {
            v.push(find(&rs, e, "fillrandom").map_or(f64::NAN, |r| r.mb_per_sec()));
        }
    }
    let groups: Vec<String> = VALUE_SIZES.iter().map(|s| size_label(*s)).collect();
    plot::bar_chart(
        &a.out,
        "fig10a-value-sizes",
        &Bars {
            title: "Fig. 10(a): random-write throughput by value size",
            y_label: "MB/s",
            groups: &groups,
            series: &series,
        },
    )?;
    Ok(table_section(
        &format!(
            "Fig. 10(a): random writes by value size ({:.1} GiB each)",
            bytes / (1u64 << 30) as f64
        ),
        "fig10a-value-sizes",
        "MB/s",
        &cmds,
        &groups,
        &series,
    ))
}

/// Fig. 11: YCSB load and workloads A–F, 1 KiB values.
fn ycsb(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let num = scaled(1_000_000.0, a.scale);
    let reads = scaled(300_000.0, a.scale);
    let (rs, cmd) = bench(
        a,
        engines,
        "ycsb",
        &[
            format!("--benchmarks={}", YCSB.join(",")),
            format!("--num={num}"),
            format!("--reads={reads}"),
            "--value_size=1024".to_owned(),
        ],
    )?;
    let series: Vec<(String, Vec<f64>)> = engines
        .iter()
        .map(|e| {
            let v = YCSB
                .iter()
                .map(|b| find(&rs, e, b).map_or(f64::NAN, |r| r.ops_per_sec() / 1000.0))
                .collect();
            (e.clone(), v)
        })
        .collect();
    let groups: Vec<String> = YCSB
        .iter()
        .map(|b| match b.strip_prefix("ycsb") {
            Some("_load") => "load".to_owned(),
            Some(w) => w.to_uppercase(),
            None => (*b).to_owned(),
        })
        .collect();
    plot::bar_chart(
        &a.out,
        "fig11-ycsb",
        &Bars {
            title: "Fig. 11: YCSB (1 KiB values)",
            y_label: "thousand ops/s",
            groups: &groups,
            series: &series,
        },
    )?;
    Ok(table_section(
        &format!("Fig. 11: YCSB, {num} records, {reads} operations per workload"),
        "fig11-ycsb",
        "K ops/s",
        &[cmd],
        &groups,
        &series,
    ))
}

/// ROR batch sizes of the Fig. 17(a) curve.
const ROR_BATCHES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// X-Engine's figures: the memtable designs with flushes held off and restart time (one
/// memtable large enough for the whole load), and the ROR batch-size curve.
fn xengine(a: &PaperArgs) -> Result<String> {
    let mut md = String::from("\n## X-Engine on NVM: its memtable, ROR batching and recovery\n");
    // Fig. 16 / Fig. 20: 480 MiB of 4 KiB values into one 512 MiB memtable, then a restart
    // that rebuilds it from the WAL.
    let num = scaled(120_000.0, a.scale);
    // The memtable holds the whole load (a page-aligned size, at least 4 MiB), the container
    // four of them (its minimum).
    let memtable = (scaled((512u64 << 20) as f64, a.scale).max(4 << 20) + 4095) & !4095;
    let big = [
        "--benchmarks=fillrandom,reopen".to_owned(),
        format!("--num={num}"),
        "--value_size=4096".to_owned(),
        format!("--write_buffer_size={memtable}"),
        format!("--container_bytes={}", 4 * memtable),
    ];
    let mut rows: Vec<(String, f64, f64, f64)> = Vec::new();
    let mut cmds = Vec::new();
    for (label, engine, threads) in [
        ("matrixkv (DRAM memtable, serial replay)", "matrixkv", 1),
        ("matrixkv-xengine, 1 recovery thread", "matrixkv-xengine", 1),
        (
            "matrixkv-xengine, one recovery thread per core",
            "matrixkv-xengine",
            0,
        ),
    ] {
        let mut flags = big.to_vec();
        flags.push(format!("--recovery_threads={threads}"));
        let (rs, cmd) = bench(
            a,
            &[engine.to_owned()],
            &format!("xengine-memtable-{}-{threads}", engine),
            &flags,
        )?;
        cmds.push(cmd);
        let fill = find(&rs, engine, "fillrandom");
        let reopen = find(&rs, engine, "reopen");
        rows.push((
            label.to_owned(),
            fill.map_or(f64::NAN, BenchResult::ops_per_sec),
            fill.and_then(BenchResult::cpu_us_per_op)
                .unwrap_or(f64::NAN),
            reopen.map_or(f64::NAN, |r| r.seconds),
        ));
    }
    let _ = write!(
        md,
        "\n### Fig. 16 and Fig. 20: memtable inserts and restart ({num} × 4 KiB in one {} MiB \
         memtable, no flush)\n\n",
        memtable >> 20
    );
    for c in &cmds {
        let _ = writeln!(md, "`{c}`\n");
    }
    md.push_str(
        "| design | fill ops/s | ÷ DRAM | CPU µs/op | restart s | ÷ DRAM |\n|---|---|---|---|---|---|\n",
    );
    let (base_ops, base_restart) = rows.first().map_or((0.0, 0.0), |r| (r.1, r.3));
    for (label, ops, cpu, restart) in &rows {
        let _ = writeln!(
            md,
            "| {label} | {ops:.0} | {} | {cpu:.1} | {restart:.3} | {} |",
            ratio(*ops, base_ops),
            ratio(*restart, base_restart)
        );
    }
    // Fig. 17(a): 16 writers of 24-byte values with synced writes, by ROR batch size.
    let per_thread = scaled(20_000.0, a.scale);
    let mut curve = Vec::new();
    let mut cmds = Vec::new();
    for batch in ROR_BATCHES {
        let (rs, cmd) = bench(
            a,
            &["matrixkv-xengine".to_owned()],
            &format!("xengine-ror-{batch}"),
            &[
                "--benchmarks=fillrandom".to_owned(),
                format!("--num={per_thread}"),
                "--threads=16".to_owned(),
                "--sync".to_owned(),
                "--value_size=24".to_owned(),
                format!("--ror_batch={batch}"),
                "--ror_wait_us=200".to_owned(),
            ],
        )?;
        cmds.push(cmd);
        let r = find(&rs, "matrixkv-xengine", "fillrandom");
        curve.push((
            batch,
            r.map_or(f64::NAN, BenchResult::ops_per_sec),
            r.map_or(f64::NAN, |r| r.latency.mean),
            r.map_or(f64::NAN, |r| r.latency.p99),
        ));
    }
    let groups: Vec<String> = curve.iter().map(|c| c.0.to_string()).collect();
    plot::bar_chart(
        &a.out,
        "xengine-fig17a-ror",
        &Bars {
            title: "X-Engine Fig. 17(a): synced writes by ROR batch size (16 writers)",
            y_label: "thousand ops/s",
            groups: &groups,
            series: &[(
                "matrixkv-xengine".to_owned(),
                curve.iter().map(|c| c.1 / 1000.0).collect(),
            )],
        },
    )?;
    let _ = write!(
        md,
        "\n### Fig. 17(a): ROR batch size, 16 writers, synced 24-byte values\n\n\
         ![ROR batch size](xengine-fig17a-ror.svg)\n\n"
    );
    for c in &cmds {
        let _ = writeln!(md, "`{c}`\n");
    }
    md.push_str("| ROR batch | ops/s | ÷ batch 1 | mean µs | p99 µs |\n|---|---|---|---|---|\n");
    let base = curve.first().map_or(0.0, |c| c.1);
    for (batch, ops, mean, p99) in &curve {
        let _ = writeln!(
            md,
            "| {batch} | {ops:.0} | {} | {mean:.1} | {p99:.1} |",
            ratio(*ops, base)
        );
    }
    Ok(md)
}

/// Persistent memtable sizes of the NoveLSM write figure, at scale 1.
const NOVELSM_MEMTABLES: [u64; 3] = [64 << 20, 256 << 20, 1 << 30];

/// A byte count scaled by `scale`, page-aligned, at least `min`.
fn scaled_bytes(bytes: u64, scale: f64, min: u64) -> u64 {
    (scaled(bytes as f64, scale).max(min) + 4095) & !4095
}

/// NoveLSM's figures. Its baseline is LevelDB: the DRAM memtable alone, L0 SSTables, values
/// with their keys, which is `matrixkv --l0_layout=tables --enable_blob_files=false` (the
/// layout `matrixkv-novelsm` runs).
fn novelsm(a: &PaperArgs) -> Result<String> {
    let mut md =
        String::from("\n## NoveLSM: persistent mutable memtables, read parallelism and restart\n");
    let baseline = [
        "--l0_layout=tables".to_owned(),
        "--enable_blob_files=false".to_owned(),
    ];
    // Random writes (2 GiB of 4 KiB values at scale 1), then random reads.
    let num = scaled(500_000.0, a.scale);
    let load = [
        "--benchmarks=fillrandom,waitforcompaction,readrandom".to_owned(),
        format!("--num={num}"),
        format!("--reads={}", scaled(200_000.0, a.scale)),
        "--value_size=4096".to_owned(),
    ];
    let mut rows: Vec<(String, f64, f64, f64, f64, f64)> = Vec::new();
    let mut cmds = Vec::new();
    let mut runs: Vec<(String, String, Vec<String>)> = vec![(
        "DRAM memtable only (LevelDB layout)".to_owned(),
        "matrixkv".to_owned(),
        baseline.to_vec(),
    )];
    for bytes in NOVELSM_MEMTABLES {
        let b = scaled_bytes(bytes, a.scale, 1 << 20);
        runs.push((
            format!("NoveLSM, {} persistent memtables", size_label(b)),
            "matrixkv-novelsm".to_owned(),
            vec![format!("--persistent_memtable_bytes={b}")],
        ));
    }
    let middle = scaled_bytes(NOVELSM_MEMTABLES[1], a.scale, 1 << 20);
    runs.push((
        format!(
            "NoveLSM, {} persistent memtables, serial reads",
            size_label(middle)
        ),
        "matrixkv-novelsm".to_owned(),
        vec![
            format!("--persistent_memtable_bytes={middle}"),
            "--parallel_reads=false".to_owned(),
        ],
    ));
    for (i, (label, engine, extra)) in runs.iter().enumerate() {
        let mut flags = load.to_vec();
        flags.extend(extra.iter().cloned());
        let (rs, cmd) = bench(
            a,
            std::slice::from_ref(engine),
            &format!("novelsm-{i}"),
            &flags,
        )?;
        cmds.push(cmd);
        let fill = find(&rs, engine, "fillrandom");
        let read = find(&rs, engine, "readrandom");
        rows.push((
            label.clone(),
            fill.map_or(f64::NAN, BenchResult::ops_per_sec),
            fill.map_or(f64::NAN, |r| r.stall_seconds / r.seconds.max(1e-9)),
            fill.and_then(BenchResult::total_write_amplification)
                .unwrap_or(f64::NAN),
            read.map_or(f64::NAN, BenchResult::ops_per_sec),
            read.map_or(f64::NAN, |r| r.latency.p99),
        ));
    }
    let groups: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    plot::bar_chart(
        &a.out,
        "novelsm-memtables",
        &Bars {
            title: "NoveLSM: random writes and reads by memtable design",
            y_label: "thousand ops/s",
            groups: &groups,
            series: &[
                (
                    "fillrandom".to_owned(),
                    rows.iter().map(|r| r.1 / 1000.0).collect(),
                ),
                (
                    "readrandom".to_owned(),
                    rows.iter().map(|r| r.4 / 1000.0).collect(),
                ),
            ],
        },
    )?;
    let _ = write!(
        md,
        "\n### Mutable persistent memtables and read parallelism ({num} × 4 KiB random \
         writes, then random reads)\n\n![memtables](novelsm-memtables.svg)\n\n"
    );
    for c in &cmds {
        let _ = writeln!(md, "`{c}`\n");
    }
    md.push_str(
        "| design | fill ops/s | ÷ DRAM | stall share | WA all | read ops/s | ÷ DRAM | read p99 µs |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let (base_fill, base_read) = rows.first().map_or((0.0, 0.0), |r| (r.1, r.4));
    for (label, fill, stall, wa, read, p99) in &rows {
        let _ = writeln!(
            md,
            "| {label} | {fill:.0} | {} | {:.0}% | {wa:.2} | {read:.0} | {} | {p99:.1} |",
            ratio(*fill, base_fill),
            stall * 100.0,
            ratio(*read, base_read)
        );
    }
    // Restart: the same load left in a DRAM memtable (its WAL replayed at open) or in a
    // persistent memtable (remapped and checked, no replay).
    let num = scaled(120_000.0, a.scale);
    let memtable = scaled_bytes(512 << 20, a.scale, 4 << 20);
    let restart = [
        "--benchmarks=fillrandom,reopen".to_owned(),
        format!("--num={num}"),
        "--value_size=4096".to_owned(),
    ];
    let mut rrows = Vec::new();
    let mut cmds = Vec::new();
    for (i, (label, engine, extra)) in [
        (
            "DRAM memtable, WAL replayed",
            "matrixkv",
            vec![
                format!("--write_buffer_size={memtable}"),
                format!("--container_bytes={}", 4 * memtable),
            ],
        ),
        (
            "NoveLSM persistent memtable, no replay",
            "matrixkv-novelsm",
            // A small DRAM memtable in front: the load lands in the persistent one.
            vec![
                format!("--persistent_memtable_bytes={memtable}"),
                "--write_buffer_size=4194304".to_owned(),
                format!("--container_bytes={}", 4 * memtable),
            ],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut flags = restart.to_vec();
        flags.extend(baseline.iter().cloned());
        flags.extend(extra);
        let (rs, cmd) = bench(
            a,
            &[engine.to_owned()],
            &format!("novelsm-restart-{i}"),
            &flags,
        )?;
        cmds.push(cmd);
        rrows.push((
            label,
            find(&rs, engine, "fillrandom").map_or(f64::NAN, BenchResult::ops_per_sec),
            find(&rs, engine, "reopen").map_or(f64::NAN, |r| r.seconds),
        ));
    }
    let _ = write!(
        md,
        "\n### Restart with {num} × 4 KiB in the memtables ({} MiB memtable)\n\n",
        memtable >> 20
    );
    for c in &cmds {
        let _ = writeln!(md, "`{c}`\n");
    }
    md.push_str("| memtable | fill ops/s | restart s | ÷ DRAM |\n|---|---|---|---|\n");
    let base = rrows.first().map_or(0.0, |r| r.2);
    for (label, fill, secs) in &rrows {
        let _ = writeln!(
            md,
            "| {label} | {fill:.0} | {secs:.3} | {} |",
            ratio(*secs, base)
        );
    }
    Ok(md)
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

/// A report section: the commands, the chart, and a table of every series by group with its
/// ratio to the first series.
fn table_section(
    title: &str,
    chart: &str,
    unit: &str,
    cmds: &[String],
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let mut md = format!("\n## {title}\n\n");
    for c in cmds {
        let _ = writeln!(md, "`{c}`\n");
    }
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
            let x = v.get(g).copied().unwrap_or(f64::NAN);
            let _ = write!(
                md,
                " {} |",
                if x.is_finite() {
                    format!("{x:.1}")
                } else {
                    "-".into()
                }
            );
        }
        let b = base.get(g).copied().unwrap_or(f64::NAN);
        for (_, v) in series.iter().skip(1) {
            let _ = write!(md, " {} |", ratio(v.get(g).copied().unwrap_or(f64::NAN), b));
        }
        md.push('\n');
    }
    md
}

/// Checks a results directory for the paper's files (used by the tests).
#[cfg(test)]
fn has_chart(dir: &Path, name: &str) -> bool {
    dir.join(format!("{name}.svg")).is_file() && dir.join(format!("{name}.png")).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: &Path, figure: Figure) -> PaperArgs {
        PaperArgs {
            figure,
            engines: "matrixkv,matrixkv-xengine,rocksdb-l0-fast".to_owned(),
            scale: 0.0005,
            out: dir.join("out"),
            db: dir.join("db"),
            fast_dir: Some(dir.join("fast")),
            bench_flags: vec![
                "--container_bytes=16777216".to_owned(),
                "--write_buffer_size=1048576".to_owned(),
                "--progress=never".to_owned(),
                "--no_plots".to_owned(),
            ],
        }
    }

    #[test]
    fn the_writes_figure_draws_throughput_latency_and_wa_with_ratios() {
        let tmp = tempfile::tempdir().unwrap();
        let a = args(tmp.path(), Figure::Writes);
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(md.contains("Table 2"), "{md}");
        assert!(md.contains("| matrixkv-xengine |"), "{md}");
        assert!(
            md.contains("matrixkv bench --engines=matrixkv,matrixkv-xengine"),
            "{md}"
        );
        assert!(has_chart(&a.out, "fig12-throughput"));
        assert!(has_chart(&a.out, "fig13-wa"));
        if !cfg!(feature = "rocksdb") {
            assert!(md.contains("Left out"), "{md}");
        }
    }

    #[test]
    fn the_ycsb_and_value_size_figures_have_a_bar_per_engine_and_group() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Ycsb);
        a.engines = "matrixkv,matrixkv-xengine".to_owned();
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        for w in ["| load |", "| A |", "| E |", "| F |"] {
            assert!(md.contains(w), "{w} missing: {md}");
        }
        assert!(has_chart(&a.out, "fig11-ycsb"));
        a.figure = Figure::Values;
        a.scale = 0.001;
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(md.contains("| 16 KiB |"), "{md}");
        assert!(has_chart(&a.out, "fig10a-value-sizes"));
    }

    #[test]
    fn the_xengine_figures_compare_memtables_restarts_and_ror_batches() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Xengine);
        a.scale = 0.002;
        a.bench_flags.retain(|f| {
            !f.starts_with("--container_bytes") && !f.starts_with("--write_buffer_size")
        });
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(
            md.contains("| matrixkv-xengine, 1 recovery thread |"),
            "{md}"
        );
        assert!(md.contains("| 32 |"), "{md}");
        assert!(!md.contains("| NaN"), "{md}");
        assert!(has_chart(&a.out, "xengine-fig17a-ror"));
    }

    #[test]
    fn the_novelsm_figures_compare_memtable_sizes_read_parallelism_and_restarts() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Novelsm);
        a.scale = 0.002;
        a.bench_flags.retain(|f| {
            !f.starts_with("--container_bytes") && !f.starts_with("--write_buffer_size")
        });
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(
            md.contains("| DRAM memtable only (LevelDB layout) |"),
            "{md}"
        );
        assert!(md.contains("serial reads |"), "{md}");
        assert!(
            md.contains("| NoveLSM persistent memtable, no replay |"),
            "{md}"
        );
        assert!(!md.contains("| NaN"), "{md}");
        assert!(has_chart(&a.out, "novelsm-memtables"));
    }

    #[test]
    fn the_slmdb_figures_compare_with_leveldb_and_sweep_the_live_key_ratio() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Slmdb);
        a.scale = 0.002;
        a.bench_flags.retain(|f| {
            !f.starts_with("--container_bytes") && !f.starts_with("--write_buffer_size")
        });
        a.bench_flags
            .push("--slmdb_memtable_bytes=1048576".to_owned());
        a.bench_flags
            .push("--slmdb_index_bytes=16777216".to_owned());
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(md.contains("| fillrandom ops/s |"), "{md}");
        assert!(md.contains("| seekrandom ops/s |"), "{md}");
        assert!(md.contains("| WA, both tiers, load to end |"), "{md}");
        assert!(md.contains("| 0.8 |"), "{md}");
        assert!(!md.contains("| NaN"), "{md}");
        assert!(has_chart(&a.out, "slmdb-fig6"));
    }

    #[test]
    fn the_lightkv_figures_compare_five_systems_and_sweep_compaction_size_and_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Lightkv);
        a.scale = 0.002;
        a.bench_flags.retain(|f| {
            !f.starts_with("--container_bytes") && !f.starts_with("--write_buffer_size")
        });
        for f in [
            "--slmdb_memtable_bytes=1048576",
            "--slmdb_index_bytes=16777216",
            "--persistent_memtable_bytes=1048576",
            "--lightkv_buffer_bytes=1048576",
            "--lightkv_index_bytes=16777216",
        ] {
            a.bench_flags.push(f.to_owned());
        }
        run(&a).unwrap();
        let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
        assert!(md.contains("| LightKV |"), "{md}");
        assert!(md.contains("| SLM-DB |"), "{md}");
        assert!(md.contains("| NoveLSM |"), "{md}");
        assert!(md.contains("| compaction size |"), "{md}");
        assert!(md.contains("| maximum partitions |"), "{md}");
        assert!(md.contains("| 8 |"), "{md}");
        assert!(!md.contains("| NaN"), "{md}");
        assert!(has_chart(&a.out, "lightkv-wa"));
        // Its series are its own, not `--engines`'.
        assert!(!md.contains("Series:"), "{md}");
        assert!(has_chart(&a.out, "lightkv-read-tail"));
    }

    #[test]
    fn unknown_engines_and_bad_scales_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = args(tmp.path(), Figure::Writes);
        a.engines = "leveldb".to_owned();
        assert!(run(&a).unwrap_err().to_string().contains("unknown engine"));
        a.engines = "matrixkv".to_owned();
        a.scale = 0.0;
        assert!(run(&a).unwrap_err().to_string().contains("--scale"));
    }
}
