//! `matrixkv paper xengine`: the X-Engine article's own figures for its design
//! (`matrixkv-xengine`): the semi-persistent memtable against the DRAM memtable with flushes
//! held off (Fig. 16), the ROR batch-size curve (Fig. 17a) and restart time, serial against
//! parallel (Fig. 20).

use std::fmt::Write as _;

use anyhow::Result;

use super::{PaperArgs, bench, caption, find, ratio, scaled};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// ROR batch sizes of the Fig. 17(a) curve.
const ROR_BATCHES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// X-Engine's figures: the memtable designs with flushes held off and restart time (one
/// memtable large enough for the whole load), and the ROR batch-size curve.
pub(super) fn xengine(a: &PaperArgs) -> Result<String> {
    let mut md = String::from("\n## X-Engine on NVM: its memtable, ROR batching and recovery\n");
    md.push_str(&caption(
        a,
        &["matrixkv".to_owned(), "matrixkv-xengine".to_owned()],
        " The memtable and restart runs give one memtable room for the whole load, so nothing \
         is flushed and the placement touches only the WAL's records.",
    )?);
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
