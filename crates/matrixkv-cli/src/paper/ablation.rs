//! `matrixkv paper depth` and `matrixkv paper hints`: two of the MatrixKV paper's ablations
//! (§5.3.2).
//!
//! - Fig. 16, reducing the LSM-tree's depth: random writes with L1 of 256 MiB (RocksDB's
//!   default) and with L1 as large as the matrix container (the paper's 8 GB = its L0), for
//!   MatrixKV and the RocksDB series, with each level's data after the tree settled;
//! - the cross-row hint search: a random load held entirely in L0 (the container four tenths
//!   full, below the receiver's switch, and the L0 compaction triggers of the table layouts
//!   out of reach), then uniform random reads, with hints on, hints off, and L0 as SSTables
//!   (RocksDB-L0-NVM's layout: `matrixkv --l0_layout=tables`, and `rocksdb-l0-fast` when
//!   built). The paper's 9 MB/s against 157.9 MB/s is RocksDB-L0-NVM against MatrixKV.

use std::fmt::Write as _;

use anyhow::Result;

use super::{
    PaperArgs, base_args, bench, caption, caption_for, commands, find, num, ratio, scaled,
    scaled_bytes, size_label,
};
use crate::bench::engine::engine_built_in;
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// RocksDB's default L1 size, the paper's first configuration of Fig. 16.
const L1_DEFAULT: u64 = 256 << 20;

/// Fig. 16: random writes at two L1 sizes, and the data of each level after settling.
pub(super) fn depth(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let series: Vec<String> = engines
        .iter()
        .filter(|e| *e == "matrixkv" || e.starts_with("rocksdb"))
        .cloned()
        .collect();
    let mut md = String::from("\n## Fig. 16: reducing the LSM-tree's depth\n");
    if series.is_empty() {
        md.push_str(
            "\nNot run: the paper's Fig. 16 compares matrixkv and RocksDB, and --engines names \
             neither.\n",
        );
        return Ok(md);
    }
    let container = base_args(a)?.container_bytes;
    let n = scaled(2_000_000.0, a.scale);
    let reads = scaled(20_000.0, a.scale);
    let configs = [
        (format!("L1 = {}", size_label(L1_DEFAULT)), L1_DEFAULT),
        (
            format!("L1 = the container, {}", size_label(container)),
            container,
        ),
    ];
    let mut cmds = Vec::new();
    let mut runs = Vec::new();
    for (i, (_, l1)) in configs.iter().enumerate() {
        let (rs, cmd) = bench(
            a,
            &series,
            &format!("fig16-depth-{i}"),
            &[
                "--benchmarks=fillrandom,waitforcompaction,readrandom".to_owned(),
                format!("--num={n}"),
                format!("--reads={reads}"),
                "--value_size=4096".to_owned(),
                format!("--max_bytes_for_level_base={l1}"),
            ],
        )?;
        cmds.push(cmd);
        runs.push(rs);
    }
    let groups: Vec<String> = configs.iter().map(|c| c.0.clone()).collect();
    let bars: Vec<(String, Vec<f64>)> = series
        .iter()
        .map(|e| {
            let v = runs
                .iter()
                .map(|rs| find(rs, e, "fillrandom").map_or(f64::NAN, |r| r.ops_per_sec() / 1e3))
                .collect();
            (e.clone(), v)
        })
        .collect();
    plot::bar_chart(
        &a.out,
        "fig16-depth",
        &Bars {
            title: "Fig. 16: random writes by L1 size",
            y_label: "thousand ops/s",
            groups: &groups,
            series: &bars,
        },
    )?;
    let _ = write!(
        md,
        "{}\n{n} × 4 KiB random writes at each L1 size (the levels below grow by \
         --max_bytes_for_level_multiplier), then a wait for compactions and {reads} random \
         reads, whose end gives the data of each level.\n\n{}![Fig. 16](fig16-depth.svg)\n\n\
         | engine | {} | {} | ÷ |\n|---|---|---|---|\n",
        caption(a, &series, "")?,
        commands(&cmds),
        groups[0],
        groups[1]
    );
    for (e, v) in &bars {
        let (x, y) = (v[0], v[1]);
        let _ = writeln!(
            md,
            "| {e} | {} | {} | {} |",
            num(x * 1e3, 0),
            num(y * 1e3, 0),
            ratio(y, x)
        );
    }
    md.push_str(&levels_table(&series, &groups, &runs));
    Ok(md)
}

/// The data distribution among levels (GiB per level) after each run settled.
fn levels_table(series: &[String], groups: &[String], runs: &[Vec<BenchResult>]) -> String {
    let depth = runs
        .iter()
        .flatten()
        .map(|r| r.levels.len())
        .max()
        .unwrap_or(0);
    let mut md = String::from("\nData per level (GiB) after the tree settled:\n\n| engine | L1 |");
    for l in 0..depth {
        let _ = write!(md, " L{l} |");
    }
    md.push_str("\n|---|---|");
    md.push_str(&"---|".repeat(depth));
    md.push('\n');
    for e in series {
        for (g, rs) in groups.iter().zip(runs) {
            let _ = write!(md, "| {e} | {g} |");
            let levels = find(rs, e, "readrandom").map_or(&[][..], |r| r.levels.as_slice());
            for l in 0..depth {
                let gib = levels
                    .get(l)
                    .map_or(f64::NAN, |x| x.1 as f64 / f64::from(1u32 << 30));
                let _ = write!(md, " {} |", num(gib, 2));
            }
            md.push('\n');
        }
    }
    md
}

/// L0 compaction triggers out of reach, so that the table layouts keep the load in L0.
const L0_HOLDS_ALL: [&str; 3] = [
    "--level0_file_num_compaction_trigger=100000",
    "--level0_slowdown_writes_trigger=100000",
    "--level0_stop_writes_trigger=100001",
];

/// The cross-row hint experiment: random reads of a dataset held in L0.
pub(super) fn hints(a: &PaperArgs) -> Result<String> {
    let n = scaled(200_000.0, a.scale);
    let reads = scaled(1_000_000.0, a.scale);
    let data = n * 4096;
    // Four tenths of the container: below the receiver's switch (0.6), so no column compaction.
    let container = scaled_bytes(data as f64 as u64 * 5 / 2, 1.0, 16 << 20);
    let mut layouts: Vec<(String, &str, Vec<String>)> = vec![
        (
            "matrixkv, cross-row hints".to_owned(),
            "matrixkv",
            vec!["--hints=true".to_owned()],
        ),
        (
            "matrixkv, hints off".to_owned(),
            "matrixkv",
            vec!["--hints=false".to_owned()],
        ),
        (
            "matrixkv, L0 as SSTables (RocksDB-L0-NVM's layout)".to_owned(),
            "matrixkv",
            vec!["--l0_layout=tables".to_owned()],
        ),
    ];
    if engine_built_in("rocksdb-l0-fast") {
        layouts.push((
            "rocksdb-l0-fast (RocksDB-L0-NVM)".to_owned(),
            "rocksdb-l0-fast",
            vec![format!("--rocksdb_fast_path_bytes={container}")],
        ));
    }
    let mut rows = Vec::new();
    let mut cmds = Vec::new();
    for (i, (label, engine, extra)) in layouts.iter().enumerate() {
        let mut flags = vec![
            "--benchmarks=fillrandom,flush,readrandom".to_owned(),
            format!("--num={n}"),
            format!("--reads={reads}"),
            "--value_size=4096".to_owned(),
            "--unique".to_owned(),
            format!("--container_bytes={container}"),
        ];
        flags.extend(L0_HOLDS_ALL.map(str::to_owned));
        flags.extend(extra.iter().cloned());
        let (rs, cmd) = bench(a, &[(*engine).to_owned()], &format!("hints-{i}"), &flags)?;
        cmds.push(cmd);
        rows.push((label.clone(), find(&rs, engine, "readrandom").cloned()));
    }
    let groups: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let mbs: Vec<f64> = rows
        .iter()
        .map(|r| r.1.as_ref().map_or(f64::NAN, BenchResult::mb_per_sec))
        .collect();
    plot::bar_chart(
        &a.out,
        "hints-l0-reads",
        &Bars {
            title: "Cross-row hints: random reads of a dataset held in L0",
            y_label: "MB/s",
            groups: &groups,
            series: &[("readrandom".to_owned(), mbs.clone())],
        },
    )?;
    let mut series = vec!["matrixkv".to_owned()];
    if engine_built_in("rocksdb-l0-fast") {
        series.push("rocksdb-l0-fast".to_owned());
    }
    let mut md = format!(
        "\n## Cross-row hint search: {reads} random reads of {n} × 4 KiB held in L0\n{}\n{}\
         ![hints](hints-l0-reads.svg)\n\n| layout | readrandom MB/s | ops/s | ÷ hints off | p99 \
         µs | found | share of the data in L0 |\n|---|---|---|---|---|---|---|\n",
        caption_for(
            a,
            &series,
            " The load fills four tenths of the container; the last column shows it stayed in \
             L0. Separation at flush is the matrix layout's: with separation on, the L0-as-\
             SSTables row keeps its values in its L0 tables (nothing leaves L0 here).",
            &[format!("--container_bytes={container}")],
        )?,
        commands(&cmds)
    );
    let off = mbs.get(1).copied().unwrap_or(f64::NAN);
    for ((label, r), mb) in rows.iter().zip(&mbs) {
        let l0_share = r.as_ref().map_or(f64::NAN, |r| {
            let total: u64 = r.levels.iter().map(|l| l.1).sum();
            let l0 = r.levels.first().map_or(0, |l| l.1);
            if total == 0 {
                f64::NAN
            } else {
                l0 as f64 / total as f64
            }
        });
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            num(*mb, 1),
            num(r.as_ref().map_or(f64::NAN, BenchResult::ops_per_sec), 0),
            ratio(*mb, off),
            num(r.as_ref().map_or(f64::NAN, |r| r.latency.p99), 1),
            r.as_ref()
                .and_then(|r| r.found)
                .map_or("-".to_owned(), |f| f.to_string()),
            if l0_share.is_finite() {
                format!("{:.0}%", l0_share * 100.0)
            } else {
                "-".to_owned()
            }
        );
    }
    Ok(md)
}
