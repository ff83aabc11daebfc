//! `matrixkv paper lightkv`: the LightKV paper's (MSST 2020) headline comparisons for its
//! design (`matrixkv-lightkv`) against the systems it was measured with: LevelDB/RocksDB on
//! the disk (`rocksdb-ssd`, or without the `rocksdb` feature `matrixkv` with L0 tables as in
//! `slmdb.rs`), NoveLSM (`matrixkv-novelsm`) and SLM-DB (`matrixkv-slmdb`), plus matrixkv.
//!
//! - "Reducing write amplification" and "Basic operations" (slides 22–24): random writes,
//!   random reads and short range queries (10 keys) at 1 KiB values, with the bytes both tiers
//!   took per user byte from the load to the end;
//! - "Tail latency under read-write workload" (slide 25): read p99 and p99.9 of YCSB A (50%
//!   reads, 50% updates) after its load;
//! - the sensitivity slides (30–31): the compaction size (2, 4, 8) and the maximum number of
//!   partitions (1, 4, 16, with partitions of 1/16 of the data so that they split).

use std::fmt::Write as _;

use anyhow::Result;

use super::slmdb::{baseline, space, wa_through};
use super::{PaperArgs, bench, caption, find, ratio, scaled};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// The basic-operations run: the load, a wait for compactions, point reads, short scans.
const BASIC: &str = "fillrandom,waitforcompaction,readrandom,seekrandom";

/// The flags of one run of `benchmarks` at `num` 1 KiB records and `reads` reads (scans of
/// 10 keys), then `extra`.
fn run_flags(benchmarks: &str, num: u64, reads: u64, extra: &[String]) -> Vec<String> {
    let mut flags = vec![
        format!("--benchmarks={benchmarks}"),
        format!("--num={num}"),
        "--value_size=1024".to_owned(),
        format!("--reads={reads}"),
        "--seek_nexts=10".to_owned(),
    ];
    flags.extend(extra.iter().cloned());
    flags
}

/// LightKV's figures (see the module doc).
pub(super) fn lightkv(a: &PaperArgs) -> Result<String> {
    let (base_engine, base_flags, base_label) = baseline();
    let num = scaled(1_000_000.0, a.scale);
    let reads = scaled(100_000.0, a.scale);
    let mut md = format!(
        "\n## LightKV: partitions, the RH-tree index and partition compaction, against the \
         systems of its paper\n\nThe LevelDB/RocksDB column is {base_label}. {num} × 1 KiB \
         random writes, a wait for compactions, {reads} random reads and {reads} range queries \
         of 10 keys; then YCSB A on a fresh database ({num} records, {reads} operations). WA \
         counts the bytes both tiers took from the load to the end of the reads, per user byte \
         of the load.\n"
    );
    let engines: Vec<(&str, Vec<String>, &str)> = vec![
        (base_engine, base_flags, "LevelDB/RocksDB"),
        ("matrixkv-novelsm", Vec::new(), "NoveLSM"),
        ("matrixkv-slmdb", Vec::new(), "SLM-DB"),
        ("matrixkv", Vec::new(), "MatrixKV"),
        ("matrixkv-lightkv", Vec::new(), "LightKV"),
    ];
    let series: Vec<String> = engines.iter().map(|e| e.0.to_owned()).collect();
    md.push_str(&caption(
        a,
        &series,
        if base_engine == "matrixkv" {
            " The LevelDB stand-in (the first `matrixkv`) pins `--enable_blob_files=false` in \
             both settings: LevelDB keeps values with their keys."
        } else {
            ""
        },
    )?);
    struct Row {
        label: &'static str,
        fill: f64,
        read: f64,
        seek: f64,
        wa: f64,
        space: f64,
        read_p99: f64,
        read_p999: f64,
    }
    let mut rows = Vec::new();
    let mut cmds = Vec::new();
    for (engine, extra, label) in &engines {
        let flags = run_flags(BASIC, num, reads, extra);
        let (rs, cmd) = bench(
            a,
            &[(*engine).to_owned()],
            &format!("lightkv-basic-{engine}"),
            &flags,
        )?;
        cmds.push(cmd);
        let yflags = run_flags("ycsb_load,ycsba", num, reads, extra);
        let (ys, ycmd) = bench(
            a,
            &[(*engine).to_owned()],
            &format!("lightkv-ycsba-{engine}"),
            &yflags,
        )?;
        cmds.push(ycmd);
        let read_lat = find(&ys, engine, "ycsba").and_then(|r| {
            r.latency_by_op
                .iter()
                .find(|(op, _)| op == "read")
                .map(|(_, l)| (l.p99, l.p999))
        });
        let ops = |bench: &str| find(&rs, engine, bench).map_or(f64::NAN, BenchResult::ops_per_sec);
        rows.push(Row {
            label,
            fill: ops("fillrandom"),
            read: ops("readrandom"),
            seek: ops("seekrandom"),
            wa: wa_through(&rs, engine),
            space: space(&rs, engine),
            read_p99: read_lat.map_or(f64::NAN, |l| l.0),
            read_p999: read_lat.map_or(f64::NAN, |l| l.1),
        });
    }
    for c in &cmds {
        let _ = writeln!(md, "\n`{c}`");
    }
    let Some(light) = rows.last() else {
        return Ok(md);
    };
    md.push_str(
        "\n| system | fill ops/s | readrandom ops/s | range query ops/s | WA load to end | LightKV \
         WA ÷ it | space amp. | YCSB A read p99 µs | p99.9 µs | LightKV p99.9 ÷ it |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {} | {:.2} | {:.1} | {:.1} | {} |",
            r.label,
            r.fill,
            r.read,
            r.seek,
            r.wa,
            ratio(light.wa, r.wa),
            r.space,
            r.read_p99,
            r.read_p999,
            ratio(light.read_p999, r.read_p999)
        );
    }
    let groups: Vec<String> = rows.iter().map(|r| r.label.to_owned()).collect();
    plot::bar_chart(
        &a.out,
        "lightkv-wa",
        &Bars {
            title: "LightKV: write amplification, load to end (1 KiB values)",
            y_label: "bytes written per user byte",
            groups: &groups,
            series: &[("WA".to_owned(), rows.iter().map(|r| r.wa).collect())],
        },
    )?;
    plot::bar_chart(
        &a.out,
        "lightkv-read-tail",
        &Bars {
            title: "LightKV: YCSB A read tail latency",
            y_label: "µs",
            groups: &groups,
            series: &[
                ("p99".to_owned(), rows.iter().map(|r| r.read_p99).collect()),
                (
                    "p99.9".to_owned(),
                    rows.iter().map(|r| r.read_p999).collect(),
                ),
            ],
        },
    )?;
    md.push_str("\n![WA](lightkv-wa.svg)\n\n![read tail](lightkv-read-tail.svg)\n");
    md.push_str(&sweep(
        a,
        "compaction size",
        "compaction_size",
        &[2, 4, 8],
        &[],
    )?);
    let partition = (num * 1024 / 16).max(1 << 20);
    md.push_str(&sweep(
        a,
        "maximum partitions",
        "max_partitions",
        &[1, 4, 16],
        &[format!("--partition_bytes={partition}")],
    )?);
    Ok(md)
}

/// One sensitivity slide: `knob` at each of `values`, the rest as `extra`.
fn sweep(
    a: &PaperArgs,
    title: &str,
    knob: &str,
    values: &[u32],
    extra: &[String],
) -> Result<String> {
    let num = scaled(1_000_000.0, a.scale);
    let reads = scaled(100_000.0, a.scale);
    let mut md = format!(
        "\n### Sensitivity: the {title} ({num} × 1 KiB random writes, a wait for compactions, \
         {reads} random reads and range queries of 10 keys)\n\n"
    );
    let e = "matrixkv-lightkv";
    let mut rows = Vec::new();
    for v in values {
        let mut knobs = vec![format!("--{knob}={v}")];
        knobs.extend(extra.iter().cloned());
        let flags = run_flags(BASIC, num, reads, &knobs);
        let (rs, cmd) = bench(a, &[e.to_owned()], &format!("lightkv-{knob}-{v}"), &flags)?;
        let _ = writeln!(md, "`{cmd}`\n");
        let ops = |b: &str| find(&rs, e, b).map_or(f64::NAN, BenchResult::ops_per_sec);
        rows.push((
            *v,
            ops("fillrandom"),
            ops("readrandom"),
            ops("seekrandom"),
            wa_through(&rs, e),
        ));
    }
    let _ = writeln!(
        md,
        "| {title} | fill ops/s | ÷ first | readrandom ops/s | range query ops/s | WA load to end |\n\
         |---|---|---|---|---|---|"
    );
    let base = rows.first().map_or(f64::NAN, |r| r.1);
    for (v, fill, read, seek, wa) in &rows {
        let _ = writeln!(
            md,
            "| {v} | {fill:.0} | {} | {read:.0} | {seek:.0} | {wa:.2} |",
            ratio(*fill, base)
        );
    }
    Ok(md)
}
