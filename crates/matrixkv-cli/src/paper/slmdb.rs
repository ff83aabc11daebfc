//! `matrixkv paper slmdb`: the SLM-DB paper's (FAST 2019) headline comparisons for its design
//! (`matrixkv-slmdb`) against its baseline, LevelDB on the disk: a DRAM memtable with a WAL and
//! leveled SSTables, all on the slow tier, values with their keys. `rocksdb-ssd` is that
//! layout; without the `rocksdb` feature, `matrixkv --l0_layout=tables
//! --enable_blob_files=false` stands in (its L0 tables and WAL on the fast tier favour it).
//!
//! - Fig. 6 and the write-amplification paragraph: db_bench's random writes, random reads,
//!   range queries of 100 keys and a full sequential read, at 1 KiB and 4 KiB values, with the
//!   bytes written to both tiers per user byte from creation to the end (the paper counts what
//!   reads trigger too) and the space on the slow tier;
//! - §6.5 "the live-key ratio": random writes then range queries at live-key ratios 0.6, 0.7
//!   and 0.8 (more garbage collection: more bytes written, a smaller database).

use std::fmt::Write as _;

use anyhow::Result;

use super::{PaperArgs, bench, caption, find, ratio, scaled};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// The LevelDB stand-in without RocksDB: flags of the `matrixkv` engine.
const LEVELDB_TABLES: [&str; 2] = ["--l0_layout=tables", "--enable_blob_files=false"];

/// The baseline engine and its flags, and how the report names it.
pub(super) fn baseline() -> (&'static str, Vec<String>, &'static str) {
    if crate::bench::engine::engine_built_in("rocksdb-ssd") {
        (
            "rocksdb-ssd",
            Vec::new(),
            "RocksDB-SSD (LevelDB's layout on the disk)",
        )
    } else {
        (
            "matrixkv",
            LEVELDB_TABLES.map(str::to_owned).to_vec(),
            "matrixkv with L0 tables (no `rocksdb` feature: L0 and WAL on the fast tier)",
        )
    }
}

/// The benchmarks of Fig. 6, after the load and a wait for compactions.
const READS: [&str; 3] = ["readrandom", "seekrandom", "readseq"];

/// Bytes written to both tiers (WAL included) per user byte over every benchmark of a run,
/// the load's user bytes as the base.
pub(super) fn wa_through(rs: &[BenchResult], engine: &str) -> f64 {
    let user = find(rs, engine, "fillrandom").map_or(0, |r| r.user_bytes);
    let written: u64 = rs
        .iter()
        .filter(|r| r.engine == engine)
        .map(|r| r.slow_tier_bytes + r.fast_tier_bytes + r.wal_bytes)
        .sum();
    if user == 0 {
        f64::NAN
    } else {
        written as f64 / user as f64
    }
}

/// The last space amplification a run reported.
pub(super) fn space(rs: &[BenchResult], engine: &str) -> f64 {
    rs.iter()
        .filter(|r| r.engine == engine)
        .filter_map(BenchResult::space_amplification)
        .next_back()
        .unwrap_or(f64::NAN)
}

/// SLM-DB's figures (see the module doc).
pub(super) fn slmdb(a: &PaperArgs) -> Result<String> {
    let (base_engine, base_flags, base_label) = baseline();
    let mut md = format!(
        "\n## SLM-DB: one level, a persistent B+-tree index and selective compaction, against \
         LevelDB\n\nThe LevelDB column is {base_label}; the paper ran LevelDB without its WAL. \
         WA counts the bytes both tiers took from the load to the end of the reads, per user \
         byte of the load.\n",
    );
    md.push_str(&caption(
        a,
        &[base_engine.to_owned(), "matrixkv-slmdb".to_owned()],
        if base_engine == "matrixkv" {
            " The LevelDB stand-in pins `--enable_blob_files=false` in both settings: LevelDB \
             keeps values with their keys."
        } else {
            ""
        },
    )?);
    let mut groups = Vec::new();
    let mut leveldb_bars = Vec::new();
    let mut slmdb_bars = Vec::new();
    for (value, num) in [(1024u64, 1_000_000.0), (4096, 400_000.0)] {
        let num = scaled(num, a.scale);
        // Range queries read 100 entries each: 50,000 of each read benchmark at scale 1.
        let reads = scaled(50_000.0, a.scale);
        let mut benchmarks = vec!["fillrandom", "waitforcompaction"];
        benchmarks.extend(READS);
        let common = [
            format!("--benchmarks={}", benchmarks.join(",")),
            format!("--num={num}"),
            format!("--value_size={value}"),
            format!("--reads={reads}"),
            "--seek_nexts=100".to_owned(),
        ];
        let mut results = Vec::new();
        let mut cmds = Vec::new();
        for (engine, extra) in [
            (base_engine, base_flags.clone()),
            ("matrixkv-slmdb", Vec::new()),
        ] {
            let mut flags = common.to_vec();
            flags.extend(extra);
            let (rs, cmd) = bench(
                a,
                &[engine.to_owned()],
                &format!("slmdb-{value}-{engine}"),
                &flags,
            )?;
            cmds.push(cmd);
            results.push((engine, rs));
        }
        let _ = write!(
            md,
            "\n### Fig. 6: {num} × {value} B random writes, then reads\n\n"
        );
        for c in &cmds {
            let _ = writeln!(md, "`{c}`\n");
        }
        md.push_str("| measure | LevelDB | SLM-DB | SLM-DB ÷ LevelDB |\n|---|---|---|---|\n");
        let pick = |bench: &str, f: &dyn Fn(&BenchResult) -> f64| -> (f64, f64) {
            let get = |i: usize| {
                results
                    .get(i)
                    .map_or(f64::NAN, |(e, rs)| find(rs, e, bench).map_or(f64::NAN, f))
            };
            (get(0), get(1))
        };
        for bench in std::iter::once("fillrandom").chain(READS) {
            let (l, s) = pick(bench, &BenchResult::ops_per_sec);
            let _ = writeln!(md, "| {bench} ops/s | {l:.0} | {s:.0} | {} |", ratio(s, l));
            groups.push(format!("{bench} {value} B"));
            leveldb_bars.push(l / 1000.0);
            slmdb_bars.push(s / 1000.0);
        }
        let (l, s) = pick("readrandom", &|r| r.latency.p99);
        let _ = writeln!(
            md,
            "| readrandom p99 µs | {l:.1} | {s:.1} | {} |",
            ratio(s, l)
        );
        let (l, s) = pick("fillrandom", &|r| r.cpu_us_per_op().unwrap_or(f64::NAN));
        let _ = writeln!(
            md,
            "| fillrandom CPU µs/op | {l:.1} | {s:.1} | {} |",
            ratio(s, l)
        );
        let wa: Vec<f64> = results.iter().map(|(e, rs)| wa_through(rs, e)).collect();
        let (l, s) = (
            wa.first().copied().unwrap_or(f64::NAN),
            wa.get(1).copied().unwrap_or(f64::NAN),
        );
        let _ = writeln!(
            md,
            "| WA, both tiers, load to end | {l:.2} | {s:.2} | {} |",
            ratio(s, l)
        );
        let sp: Vec<f64> = results.iter().map(|(e, rs)| space(rs, e)).collect();
        let (l, s) = (
            sp.first().copied().unwrap_or(f64::NAN),
            sp.get(1).copied().unwrap_or(f64::NAN),
        );
        let _ = writeln!(
            md,
            "| space amplification at the end | {l:.2} | {s:.2} | {} |",
            ratio(s, l)
        );
    }
    plot::bar_chart(
        &a.out,
        "slmdb-fig6",
        &Bars {
            title: "SLM-DB against LevelDB (Fig. 6)",
            y_label: "thousand ops/s",
            groups: &groups,
            series: &[
                ("LevelDB".to_owned(), leveldb_bars),
                ("SLM-DB".to_owned(), slmdb_bars),
            ],
        },
    )?;
    md.push_str("\n![Fig. 6](slmdb-fig6.svg)\n");
    md.push_str(&live_key_ratios(a)?);
    Ok(md)
}

/// §6.5: the live-key ratio's effect on writes, range queries, bytes written and space.
fn live_key_ratios(a: &PaperArgs) -> Result<String> {
    let num = scaled(1_000_000.0, a.scale);
    let seeks = scaled(50_000.0, a.scale);
    let mut md = format!(
        "\n### §6.5: the live-key ratio ({num} × 1 KiB random writes, then range queries of 100 \
         keys; compaction runs from 2 candidates, so that the ratio decides at this size)\n\n"
    );
    let mut rows = Vec::new();
    for (i, ratio_knob) in [0.6, 0.7, 0.8].into_iter().enumerate() {
        let (rs, cmd) = bench(
            a,
            &["matrixkv-slmdb".to_owned()],
            &format!("slmdb-ratio-{i}"),
            &[
                "--benchmarks=fillrandom,waitforcompaction,seekrandom".to_owned(),
                format!("--num={num}"),
                "--value_size=1024".to_owned(),
                format!("--reads={seeks}"),
                "--seek_nexts=100".to_owned(),
                format!("--live_key_ratio={ratio_knob}"),
                "--candidate_trigger=2".to_owned(),
            ],
        )?;
        let _ = writeln!(md, "`{cmd}`\n");
        let e = "matrixkv-slmdb";
        rows.push((
            ratio_knob,
            find(&rs, e, "fillrandom").map_or(f64::NAN, BenchResult::ops_per_sec),
            find(&rs, e, "seekrandom").map_or(f64::NAN, |r| r.latency.mean),
            wa_through(&rs, e),
            space(&rs, e),
        ));
    }
    md.push_str(
        "| live-key ratio | fill ops/s | ÷ 0.6 | range query mean µs | WA load to end | space \
         amplification |\n|---|---|---|---|---|---|\n",
    );
    let base = rows.first().map_or(0.0, |r| r.1);
    for (r, fill, seek, wa, sp) in &rows {
        let _ = writeln!(
            md,
            "| {r} | {fill:.0} | {} | {seek:.1} | {wa:.2} | {sp:.2} |",
            ratio(*fill, base)
        );
    }
    Ok(md)
}
