//! `matrixkv paper novelsm`: the NoveLSM paper's headline comparisons for its design
//! (`matrixkv-novelsm`): random writes with persistent memtables of growing size against the
//! DRAM memtable alone (its "mutable NVM memtable" figure), reads with and without read
//! parallelism, and restart time with the memtable's data in a WAL (replayed) or in a
//! persistent memtable (remapped).

use std::fmt::Write as _;

use anyhow::Result;

use super::{PaperArgs, bench, caption, find, ratio, scaled, scaled_bytes, size_label};
use crate::bench::metrics::BenchResult;
use crate::bench::plot::{self, Bars};

/// Persistent memtable sizes of the NoveLSM write figure, at scale 1.
const NOVELSM_MEMTABLES: [u64; 3] = [64 << 20, 256 << 20, 1 << 30];

/// NoveLSM's figures. Its baseline is LevelDB: the DRAM memtable alone, L0 SSTables, values
/// with their keys, which is `matrixkv --l0_layout=tables --enable_blob_files=false` (the
/// layout `matrixkv-novelsm` runs).
pub(super) fn novelsm(a: &PaperArgs) -> Result<String> {
    let mut md =
        String::from("\n## NoveLSM: persistent mutable memtables, read parallelism and restart\n");
    md.push_str(&caption(
        a,
        &["matrixkv".to_owned(), "matrixkv-novelsm".to_owned()],
        " The DRAM baseline is `matrixkv --l0_layout=tables --enable_blob_files=false` in \
         both settings: LevelDB's layout (L0 SSTables, here on the fast tier as NoveLSM's), \
         values with their keys, as NoveLSM's paper compares.",
    )?);
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
