//! `matrixkv paper values` and `matrixkv paper micro`: the MatrixKV paper's db_bench
//! micro-benchmarks. Fig. 10(a): random writes as a function of the value size (the same bytes
//! at each size). Fig. 10(b): sequential writes of the same bytes as the random-write run.
//! Fig. 10(c) and (d): random and sequential reads of a randomly loaded database, started after
//! the tree has settled (`waitforcompaction`), as the paper starts them "after the tree becomes
//! well-balanced".

use std::fmt::Write as _;

use anyhow::Result;

use super::{PaperArgs, base_args, bench, caption, find, num, scaled, size_label, table_section};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// Value sizes of Fig. 10(a).
const VALUE_SIZES: [u64; 4] = [256, 1024, 4096, 16384];

/// Fig. 10(a): random writes at each value size, the same bytes each time.
pub(super) fn values(a: &PaperArgs, engines: &[String]) -> Result<String> {
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
        &caption(
            a,
            engines,
            &format!(
                " With separation on, the values below --min_blob_size ({} B) stay with their \
                 keys.",
                base_args(a)?.min_blob_size
            ),
        )?,
        "fig10a-value-sizes",
        "MB/s",
        &cmds,
        &groups,
        &series,
    ))
}

/// The benchmarks of Fig. 10(b–d), the run each comes from and its label.
const MICRO: [(&str, &str); 3] = [
    ("fillseq", "Fig. 10(b) sequential writes"),
    ("readrandom", "Fig. 10(c) random reads"),
    ("readseq", "Fig. 10(d) sequential reads"),
];

/// Fig. 10(b–d): a sequential load on one database; a random load, a wait for compactions,
/// random then sequential reads on another.
pub(super) fn micro(a: &PaperArgs, engines: &[String]) -> Result<String> {
    let n = scaled(2_000_000.0, a.scale);
    let reads = scaled(1_000_000.0, a.scale);
    let common = [format!("--num={n}"), "--value_size=4096".to_owned()];
    let mut flags = vec!["--benchmarks=fillseq".to_owned()];
    flags.extend(common.iter().cloned());
    let (seq, seq_cmd) = bench(a, engines, "fig10b-fillseq", &flags)?;
    let mut flags = vec![
        "--benchmarks=fillrandom,waitforcompaction,readrandom,readseq".to_owned(),
        format!("--reads={reads}"),
    ];
    flags.extend(common.iter().cloned());
    let (rd, rd_cmd) = bench(a, engines, "fig10cd-reads", &flags)?;
    let get = |e: &str, b: &str| {
        let rs = if b == "fillseq" { &seq } else { &rd };
        find(rs, e, b)
    };
    let groups: Vec<String> = MICRO.iter().map(|(_, l)| (*l).to_owned()).collect();
    let series: Vec<(String, Vec<f64>)> = engines
        .iter()
        .map(|e| {
            let v = MICRO
                .iter()
                .map(|(b, _)| get(e, b).map_or(f64::NAN, BenchResult::mb_per_sec))
                .collect();
            (e.clone(), v)
        })
        .collect();
    plot::bar_chart(
        &a.out,
        "fig10bcd-micro",
        &Bars {
            title: "Fig. 10(b-d): sequential writes, random and sequential reads (4 KiB)",
            y_label: "MB/s",
            groups: &groups,
            series: &series,
        },
    )?;
    let mut md = table_section(
        &format!(
            "Fig. 10(b–d): {n} × 4 KiB sequential writes; {reads} random and sequential reads \
             after {n} random writes and a wait for compactions"
        ),
        &caption(a, engines, "")?,
        "fig10bcd-micro",
        "MB/s",
        &[seq_cmd, rd_cmd],
        &groups,
        &series,
    );
    md.push_str(
        "\n| engine | fillseq ops/s | readrandom ops/s | readrandom p99 µs | found | readseq \
         ops/s |\n|---|---|---|---|---|---|\n",
    );
    for e in engines {
        let ops = |b: &str| get(e, b).map_or(f64::NAN, BenchResult::ops_per_sec);
        let rr = get(e, "readrandom");
        let _ = writeln!(
            md,
            "| {e} | {} | {} | {} | {} | {} |",
            num(ops("fillseq"), 0),
            num(ops("readrandom"), 0),
            num(rr.map_or(f64::NAN, |r| r.latency.p99), 1),
            rr.and_then(|r| r.found)
                .map_or("-".to_owned(), |f| f.to_string()),
            num(ops("readseq"), 0)
        );
    }
    Ok(md)
}
