//! `matrixkv paper ycsb`, `latency` and `nvm`: the MatrixKV paper's YCSB figures.
//!
//! - Fig. 11: YCSB load and workloads A–F (closed loop);
//! - Table 2: the tail latency of YCSB-A with requests arriving at a fixed rate (the paper's
//!   20K requests/s, SILK's method): the bench's open loop (`--rate`), whose latency counts from
//!   each request's intended start, so queueing behind a stall counts;
//! - Fig. 17 and Table 3: the random writes and the fixed-rate YCSB-A (at three times the rate,
//!   the paper's 60K) on the DRAM-NVM hierarchy, every component but the DRAM memtables on the
//!   fast tier: the slow tier's directory is put on the fast tier's device. PebblesDB and SILK,
//!   also in the paper's Fig. 17 and Table 3, are not engines of the bench.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;

use super::{PaperArgs, bench, bench_at, caption, find, num, ratio, scaled, table_section};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

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
/// Fig. 11: YCSB load and workloads A–F, 1 KiB values.
pub(super) fn ycsb(a: &PaperArgs, engines: &[String]) -> Result<String> {
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
        &caption(a, engines, "")?,
        "fig11-ycsb",
        "K ops/s",
        &[cmd],
        &groups,
        &series,
    ))
}

/// The flags of a fixed-rate YCSB-A run: `records` × 4 KiB loaded, then `requests` requests
/// at `rate` per second (the load is paced at the same rate: `--rate` paces every benchmark
/// of an invocation).
fn ycsba_at(records: u64, requests: u64, rate: f64) -> Vec<String> {
    vec![
        "--benchmarks=ycsb_load,ycsba".to_owned(),
        format!("--num={records}"),
        format!("--reads={requests}"),
        "--value_size=4096".to_owned(),
        format!("--rate={rate}"),
    ]
}

/// The latency table of a fixed-rate YCSB-A run: a row per series with its percentiles.
fn rate_table(rs: &[BenchResult], engines: &[String]) -> String {
    let mut md = String::from(
        "| engine | target req/s | achieved req/s | mean µs | p90 µs | p99 µs | p99.9 µs | p99 ÷ \
         base | p99.9 ÷ base | service p99 µs |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let base = engines.first().and_then(|e| find(rs, e, "ycsba"));
    for e in engines {
        let Some(r) = find(rs, e, "ycsba") else {
            let _ = writeln!(md, "| {e} | - | no result | - | - | - | - | - | - | - |");
            continue;
        };
        let l = &r.latency;
        let _ = writeln!(
            md,
            "| {e} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target_rate.map_or("-".to_owned(), |t| num(t, 0)),
            num(r.ops_per_sec(), 0),
            num(l.mean, 1),
            l.p90.map_or("-".to_owned(), |p| num(p, 1)),
            num(l.p99, 1),
            num(l.p999, 1),
            ratio(l.p99, base.map_or(0.0, |b| b.latency.p99)),
            ratio(l.p999, base.map_or(0.0, |b| b.latency.p999)),
            r.service.as_ref().map_or("-".to_owned(), |s| num(s.p99, 1))
        );
    }
    md
}

/// Table 2: YCSB-A at `--rate` requests per second, latency percentiles per series.
pub(super) fn latency(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let records = scaled(250_000.0, a.scale);
    let requests = scaled(200_000.0, a.scale);
    let (rs, cmd) = bench(
        a,
        engines,
        "table2-ycsba",
        &ycsba_at(records, requests, a.rate),
    )?;
    let runs: Vec<&BenchResult> = engines
        .iter()
        .filter_map(|e| find(&rs, e, "ycsba"))
        .collect();
    plot::latency_cdf_chart(&a.out, "table2-ycsba-cdf", "ycsba", &runs)?;
    let mut md = format!(
        "\n## Table 2: YCSB-A at {} requests/s ({records} records × 4 KiB, {requests} \
         requests)\n{}\n`{cmd}`\n\n![latency CDF](table2-ycsba-cdf.svg)\n\n",
        num(a.rate, 0),
        caption(
            a,
            engines,
            " Latency counts from each request's intended start (open loop, no coordinated \
             omission); the load before it is paced at the same rate.",
        )?
    );
    md.push_str(&rate_table(&rs, engines));
    Ok(md)
}

/// Removes the slow-tier directory the DRAM-NVM runs put on the fast tier, however they end.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fig. 17 and Table 3: random writes and fixed-rate YCSB-A with the slow tier on the fast
/// tier's device (DRAM holds the memtables, the fast tier everything else).
pub(super) fn nvm(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let fast = a
        .fast_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
    let slow = RemoveOnDrop(fast.join(format!("matrixkv-paper-slow-{}", std::process::id())));
    let n = scaled(500_000.0, a.scale);
    let (rs, cmd) = bench_at(
        a,
        &slow.0,
        engines,
        "fig17-dram-nvm",
        &[
            "--benchmarks=fillrandom".to_owned(),
            format!("--num={n}"),
            "--value_size=4096".to_owned(),
        ],
    )?;
    let rate = 3.0 * a.rate;
    let records = scaled(250_000.0, a.scale);
    let requests = scaled(200_000.0, a.scale);
    let (ys, ycmd) = bench_at(
        a,
        &slow.0,
        engines,
        "table3-dram-nvm-ycsba",
        &ycsba_at(records, requests, rate),
    )?;
    let ops: Vec<f64> = engines
        .iter()
        .map(|e| find(&rs, e, "fillrandom").map_or(f64::NAN, |r| r.ops_per_sec() / 1000.0))
        .collect();
    plot::bar_chart(
        &a.out,
        "fig17-dram-nvm",
        &Bars {
            title: "Fig. 17: random writes on the DRAM-NVM hierarchy",
            y_label: "thousand ops/s",
            groups: &["fillrandom".to_owned()],
            series: &engines
                .iter()
                .zip(&ops)
                .map(|(e, o)| (e.clone(), vec![*o]))
                .collect::<Vec<_>>(),
        },
    )?;
    let mut md = table_section(
        &format!("Fig. 17: {n} × 4 KiB random writes on the DRAM-NVM hierarchy"),
        &caption(
            a,
            engines,
            " Here the slow tier's directory is on the fast tier's device as well (`--db` \
             below): every component but the DRAM memtables is on the fast tier, as in the \
             paper's DRAM-NVM runs; the lists say what each series keeps on the fast tier when \
             the tiers differ. PebblesDB and SILK, in the paper's figure, are not engines of \
             the bench and are not measured.",
        )?,
        "fig17-dram-nvm",
        "K ops/s",
        &[cmd],
        &["fillrandom".to_owned()],
        &engines
            .iter()
            .zip(&ops)
            .map(|(e, o)| (e.clone(), vec![*o]))
            .collect::<Vec<_>>(),
    );
    let _ = write!(
        md,
        "\n### Table 3: YCSB-A at {} requests/s on the DRAM-NVM hierarchy ({records} records \
         × 4 KiB, {requests} requests)\n\n`{ycmd}`\n\n",
        num(rate, 0)
    );
    md.push_str(&rate_table(&ys, engines));
    Ok(md)
}
