//! `matrixkv paper writes`: the MatrixKV paper's random-write experiment (80 GB of 4 KiB
//! values there, B1's 2M × 4 KiB here at scale 1) and the figures it gives: Fig. 2/12
//! (throughput over time), Fig. 13 (write amplification), Fig. 14 (the L0→L1 compactions) and
//! Fig. 15 (every compaction).
//!
//! The bench counts compactions and their bytes over the run, not each compaction's own size
//! and duration: Fig. 14 and 15 give counts and means per compaction, and the report says that
//! the per-compaction scatter and durations of the paper's figures are not measured. The
//! RocksDB and fjall adapters do not tell L0→L1 compactions apart (their Fig. 14 cells say so).

use std::fmt::Write as _;

use anyhow::Result;

use super::{PaperArgs, bench, caption, find, num, ratio, scaled};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// Fig. 2/12, 13, 14 and 15 from one random-write run.
pub(super) fn writes(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let n = scaled(2_000_000.0, a.scale);
    let (rs, cmd) = bench(
        a,
        engines,
        "writes",
        &[
            "--benchmarks=fillrandom".to_owned(),
            format!("--num={n}"),
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
        "\n## Fig. 2/12, Fig. 13, Fig. 14, Fig. 15: random writes ({n} × 4 KiB)\n{}\n`{cmd}`\n\n\
         ![throughput over time](fig12-throughput.svg)\n\n\
         | engine | ops/s | ÷ base | windows < 50% of mean | stall share | CPU µs/op |\n\
         |---|---|---|---|---|---|\n",
        caption(a, engines, "")?
    );
    for r in &runs {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {} | {} | {:.0}% | {} |",
            r.engine,
            r.ops_per_sec(),
            ratio(r.ops_per_sec(), base.map_or(0.0, |b| b.ops_per_sec())),
            r.series.below_50pct,
            r.stall_fraction() * 100.0,
            r.cpu_us_per_op().map_or("-".to_owned(), |c| num(c, 1))
        );
    }
    md.push_str(&wa_section(a, &runs)?);
    md.push_str(&compactions_section(&runs));
    md.push_str(
        "\nTable 2 is `matrixkv paper latency` (YCSB-A at a fixed request rate, as the paper \
         measures it).\n",
    );
    Ok(md)
}

/// Fig. 13: bytes written per user byte, both tiers and the slow tier alone.
fn wa_section(a: &PaperArgs, runs: &[&BenchResult]) -> Result<String> {
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
    let mut md = String::from(
        "\n### Fig. 13: write amplification\n\nThe paper's WA is the slow tier's (bytes written \
         to the SSD ÷ user bytes).\n\n![write amplification](fig13-wa.svg)\n\n\
         | engine | slow tier | ÷ base | all tiers | ÷ base |\n|---|---|---|---|---|\n",
    );
    let (base_all, base_slow) = (
        wa_all.first().copied().unwrap_or(f64::NAN),
        wa_slow.first().copied().unwrap_or(f64::NAN),
    );
    for ((r, all), slow) in runs.iter().zip(&wa_all).zip(&wa_slow) {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            r.engine,
            num(*slow, 2),
            ratio(*slow, base_slow),
            num(*all, 2),
            ratio(*all, base_all)
        );
    }
    Ok(md)
}

/// Whether the bench's adapter of `engine` counts L0→L1 compactions apart from the others.
fn reports_l0_compactions(engine: &str) -> bool {
    engine.starts_with("matrixkv")
}

/// MiB per compaction, `-` without compactions.
fn mib_per(bytes: u64, count: u64) -> String {
    if count == 0 {
        "-".to_owned()
    } else {
        num(bytes as f64 / count as f64 / 1_048_576.0, 1)
    }
}

/// Fig. 14 and Fig. 15: the compactions of the run, counted and averaged.
fn compactions_section(runs: &[&BenchResult]) -> String {
    let mut md = String::from(
        "\n### Fig. 14: L0→L1 compactions\n\nThe paper plots every L0→L1 compaction's data and \
         duration; the bench counts them and their L0 input over the run, so this gives their \
         number and mean size. Per-compaction durations are not measured: the bench records \
         no compaction's own duration, so that half of the figure is not drawn.\n\n\
         | engine | L0→L1 compactions | L0 MiB per compaction | L0 GiB compacted |\n\
         |---|---|---|---|\n",
    );
    for r in runs {
        if reports_l0_compactions(&r.engine) {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                r.engine,
                r.l0_compactions,
                mib_per(r.l0_compaction_input_bytes, r.l0_compactions),
                num(
                    r.l0_compaction_input_bytes as f64 / f64::from(1u32 << 30),
                    2
                )
            );
        } else {
            let _ = writeln!(
                md,
                "| {} | not reported by the bench's adapter | - | - |",
                r.engine
            );
        }
    }
    md.push_str(
        "\n### Fig. 15: every compaction\n\nThe paper plots each compaction's data; the bench \
         has the count and the bytes over the run, so this gives the number and the mean \
         (the per-compaction distribution is not measured).\n\n\
         | engine | compactions | MiB read per compaction | GiB read | GiB written |\n\
         |---|---|---|---|---|\n",
    );
    for r in runs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            r.engine,
            r.compactions,
            mib_per(r.compaction_input_bytes, r.compactions),
            num(r.compaction_input_bytes as f64 / f64::from(1u32 << 30), 2),
            num(r.compaction_output_bytes as f64 / f64::from(1u32 << 30), 2)
        );
    }
    md
}
